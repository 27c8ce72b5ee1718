#!/usr/bin/env bash
# Nsight Compute DRAM bytes for a subset of the forward grid that includes N >= 8192.
# On the GPU machine, from the repo root, with the wheels in .whl/:
#   bash experiments/fwd_ncu/run.sh      (RESUME=1 continues the committed measured_ncu.csv)
set -o pipefail
. experiments/gpu_env.sh fwd_ncu
if [ -n "$RESUME" ] && [ -f experiments/fwd_ncu/$GPU/measured_ncu.csv ]; then cp experiments/fwd_ncu/$GPU/measured_ncu.csv "$DIR/"; fi
timeout "${BENCH_LIMIT:-540}" iosim bench \
  --schedule naive,fa1,fa2 --seqlen 2048,8192 --head-dim 64,128 --causal both \
  --dtype bf16 --ncu -o "$DIR/measured_ncu.csv" --resume 2>&1 | tr '\r' '\n' | tail -3
