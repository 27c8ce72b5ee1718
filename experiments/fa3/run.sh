#!/usr/bin/env bash
# kernels/fa3.cu on a Hopper GPU in one call: SASS counts and correctness (experiments/fa3/check.py,
# then the GPU tests' fa3 cases; TILES=1 also times tile variants), and only if both pass the
# bench grid of fa2 and fa3 beside torch's SDPA backends. On the GPU machine, from the repo root,
# with the wheels in .whl/:
#   bash experiments/fa3/run.sh          (RESUME=1 continues the committed measured_fa3.csv)
set -o pipefail
. experiments/gpu_env.sh fa3
if [ -n "$RESUME" ] && [ -f experiments/fa3/$GPU/measured_fa3.csv ]; then cp experiments/fa3/$GPU/measured_fa3.csv "$DIR/"; fi
python3 experiments/fa3/check.py --sass ${TILES:+--tiles} 2>&1 | tee "$DIR/check.log" || { echo "fa3 check failed: not timed"; exit 1; }
python3 -m pytest -q -m gpu tests/test_gpu_kernels.py -k "fa3" 2>&1 | tail -8 | tee "$DIR/gpu_tests.log" \
  || { echo "GPU tests failed: not timed"; exit 1; }
timeout "${BENCH_LIMIT:-420}" iosim bench \
  --schedule fa2,fa3 --seqlen "${SEQLEN:-512..16384}" --head-dim 64,128,256 --causal both \
  --dtype bf16 --peers torch -o "$DIR/measured_fa3.csv" --resume 2>&1 | tr '\r' '\n' | tail -3
python3 tools/fa3_ratios.py "$DIR/measured_fa3.csv"
