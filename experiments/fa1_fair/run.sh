#!/usr/bin/env bash
# fa1 with its splits (issue 22, "a fair FA1") on the GPU machine, from the repo root, with the
# wheels in .whl/. Forward: query-row splits (kernels/fa1.cu SPLIT_ROWS); backward: key-block
# splits with dQ by fp32 atomics (SPLIT_COLS, DQ_ATOMIC); the Plan picks both to fill the GPU.
#   bash experiments/fa1_fair/run.sh            the forward step (RESUME=1 continues the
#                                               committed measured_fa1.csv)
#   STEP=bwd bash experiments/fa1_fair/run.sh   the backward step (RESUME=1: measured_fa1_bwd.csv)
# Forward step: 1. the fa1 GPU tests, forward (tests/test_gpu_kernels.py, with FA1_SPLIT_CASES:
#    few heads at long N, ragged N, both causal diagonals, GQA/MQA) and backward, on fresh
#    NaN-poisoned data; 2. the forward bench of fa1 and fa2 beside torch's SDPA backends at the
#    bench's default shapes (batch = 16384/N, heads = 2048/d: at N = 16384 one or two
#    batch·heads per SM, where fa1 without splits ran one CTA per head).
# Backward step: 1. the fa1 backward GPU tests (tests/test_gpu_backward.py -k fa1, with
#    FA1_SPLIT_CASES: few heads at long N, ragged N, both causal diagonals, GQA/MQA, Nq != Nk,
#    and an unsplit case); 2. the backward bench of fa1 and fa2 beside torch's SDPA backward at
#    the same shapes.
# Logs and the CSVs go to $DIR (experiments/gpu_env.sh). The whole script stays under LIMIT seconds.
set -o pipefail
start=$(date +%s)
. experiments/gpu_env.sh fa1_fair
if [ "${STEP:-fwd}" = bwd ]; then
  csv=measured_fa1_bwd.csv log=gpu_tests_bwd.log tests="tests/test_gpu_backward.py"
else
  csv=measured_fa1.csv log=gpu_tests.log tests="tests/test_gpu_kernels.py tests/test_gpu_backward.py"
fi
if [ -n "$RESUME" ] && [ -f experiments/fa1_fair/$GPU/$csv ]; then cp experiments/fa1_fair/$GPU/$csv "$DIR/"; fi
if [ -z "$SKIP_TESTS" ]; then
  # shellcheck disable=SC2086
  timeout "${TEST_LIMIT:-270}" python3 -m pytest -q -m gpu $tests -k fa1 2>&1 | tail -15 \
    | tee "$DIR/$log"
fi
left=$(( ${LIMIT:-530} - ($(date +%s) - start) ))
timeout "$left" iosim bench --direction "${STEP:-fwd}" --schedule fa1,fa2 --seqlen 1024..16384 \
  --head-dim 64,128 --causal both --dtype bf16 --peers torch -o "$DIR/$csv" --resume 2>&1 \
  | tr '\r' '\n' | tail -4
echo "elapsed $(( $(date +%s) - start )) s" | tee -a "$DIR/$log"
