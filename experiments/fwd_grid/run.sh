#!/usr/bin/env bash
# The forward grid: the GPU tests, then naive, fa1 and fa2 beside torch's SDPA backends.
# On the GPU machine, from the repo root, with the wheels in .whl/:
#   bash experiments/fwd_grid/run.sh     (RESUME=1 continues the committed measured.csv)
set -o pipefail
. experiments/gpu_env.sh fwd_grid
if [ -n "$RESUME" ] && [ -f experiments/fwd_grid/$GPU/measured.csv ]; then cp experiments/fwd_grid/$GPU/measured.csv "$DIR/"; fi
if [ -z "$SKIP_TESTS" ]; then
  python3 -m pytest -q -m gpu tests/test_gpu_kernels.py 2>&1 | tail -15 | tee "$DIR/gpu_tests.log"
fi
timeout "${BENCH_LIMIT:-540}" iosim bench \
  --schedule naive,fa1,fa2 --seqlen 512..16384 --head-dim 64,128,256 --causal both \
  --dtype bf16 --peers torch -o "$DIR/measured.csv" --resume 2>&1 | tr '\r' '\n' | tail -4
