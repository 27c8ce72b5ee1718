#!/usr/bin/env bash
# Nsight Compute DRAM bytes for a subset including N >= 8192 (the committed ncu data).
set -o pipefail
. benchmarks/gpu_env.sh
out=${OUT:-/tmp/out}; mkdir -p "$out"
iosim bench --schedule naive,fa1,fa2 --seqlen 2048,8192 --head-dim 64,128 --causal both \
  --dtype bf16 --ncu -o "$out/measured_ncu.csv" 2>&1 | tail -5
