#!/usr/bin/env bash
# fa1 with query-row splits (issue 22, "a fair FA1": kernels/fa1.cu SPLIT_ROWS, chosen by the
# Plan to fill the GPU) on the GPU machine, from the repo root, with the wheels in .whl/:
#   bash experiments/fa1_fair/run.sh     (RESUME=1 continues the committed measured_fa1.csv)
# 1. the fa1 GPU tests: forward (tests/test_gpu_kernels.py, with FA1_SPLIT_CASES: few heads at
#    long N, ragged N, both causal diagonals, GQA/MQA) and backward (unchanged kernel: one CTA
#    per head) on fresh NaN-poisoned data;
# 2. the forward bench of fa1 and fa2 beside torch's SDPA backends at the bench's default shapes
#    (batch = 16384/N, heads = 2048/d: at N = 16384 one or two batch·heads per SM, where fa1
#    without splits ran one CTA per head). The backward kernel did not change: not re-measured.
# Logs and the CSV go to $DIR (experiments/gpu_env.sh). The whole script stays under LIMIT seconds.
set -o pipefail
start=$(date +%s)
. experiments/gpu_env.sh fa1_fair
if [ -n "$RESUME" ] && [ -f experiments/fa1_fair/$GPU/measured_fa1.csv ]; then cp experiments/fa1_fair/$GPU/measured_fa1.csv "$DIR/"; fi
if [ -z "$SKIP_TESTS" ]; then
  timeout "${TEST_LIMIT:-270}" python3 -m pytest -q -m gpu tests/test_gpu_kernels.py \
    tests/test_gpu_backward.py -k fa1 2>&1 | tail -15 | tee "$DIR/gpu_tests.log"
fi
left=$(( ${LIMIT:-530} - ($(date +%s) - start) ))
timeout "$left" iosim bench --schedule fa1,fa2 --seqlen 1024..16384 --head-dim 64,128 \
  --causal both --dtype bf16 --peers torch -o "$DIR/measured_fa1.csv" --resume 2>&1 \
  | tr '\r' '\n' | tail -4
echo "elapsed $(( $(date +%s) - start )) s" | tee -a "$DIR/gpu_tests.log"
