#!/usr/bin/env bash
# Nsight Compute DRAM bytes for a subset that includes N >= 8192 (the committed ncu data):
#   bash benchmarks/gpu_ncu.sh
set -o pipefail
. benchmarks/gpu_env.sh
out=${OUT:-/tmp/out}; mkdir -p "$out"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -qi h200 && echo h200 || echo h100)
if [ -n "$RESUME" ] && [ -f reports/data/$gpu/measured_ncu.csv ]; then cp reports/data/$gpu/measured_ncu.csv "$out/"; fi
timeout "${BENCH_LIMIT:-540}" python3 -c "from iosim.cli import main; main()" bench \
  --schedule naive,fa1,fa2 --seqlen 2048,8192 --head-dim 64,128 --causal both \
  --dtype bf16 --ncu -o "$out/measured_ncu.csv" --resume 2>&1 | tr '\r' '\n' | tail -3
