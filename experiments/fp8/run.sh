#!/usr/bin/env bash
# fa3's fp8_e4m3 path on a Hopper GPU in one call (issue 24): the GPU tests (every scaling,
# ragged N, GQA, causal; block + Hadamard against per-tensor on outlier inputs), then the
# accuracy table (experiments/fp8/accuracy.py), then, only if the tests pass, the speed grid
# (batch = 16384/N, heads = 2048/d): fp8 per-tile beside bf16 fa3 and torch's SDPA backends on
# bf16, then the other scalings at N = 8192, the model's error on the fp8 rows, and the
# attention kernel alone with two and three K/V stages (stages2.csv, stages3.csv).
# On the GPU machine, from the repo root, with the wheels in .whl/:
#   bash experiments/fp8/run.sh          (RESUME=1 continues the committed measured_fp8.csv;
#   SKIP_STAGES=1 leaves out the stage comparison; BENCH_LIMIT=S bounds each bench call)
set -o pipefail
. experiments/gpu_env.sh fp8
if [ -n "$RESUME" ] && [ -f experiments/fp8/$GPU/measured_fp8.csv ]; then cp experiments/fp8/$GPU/measured_fp8.csv "$DIR/"; fi
if [ -z "$SKIP_TESTS" ]; then
  python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fp8.py -x 2>&1 | tail -15 | tee "$DIR/gpu_tests.log"
  [ "${PIPESTATUS[0]}" = 0 ] || { echo "GPU tests failed: not timed"; exit 1; }
  python3 experiments/fp8/accuracy.py --out "$DIR/accuracy.csv" 2>&1 | tee "$DIR/accuracy.log"
fi
timeout "${BENCH_LIMIT:-240}" iosim bench --schedule fa3 --dtype fp8_e4m3,bf16 --seqlen "${SEQLEN:-4096..16384}" \
  --head-dim 64,128,256 --causal both --peers torch -o "$DIR/measured_fp8.csv" --resume 2>&1 | tr '\r' '\n' | tail -2
for q in "--fp8-scaling tensor,given" "--fp8-scaling block,tensor --hadamard true"; do
  timeout "${BENCH_LIMIT:-240}" iosim bench --schedule fa3 --dtype fp8_e4m3 $q --seqlen 8192 \
    --head-dim 64,128,256 --causal both -o "$DIR/measured_fp8.csv" --resume 2>&1 | tr '\r' '\n' | tail -2
done
iosim validate "$DIR/measured_fp8.csv" --by dtype 2>&1 | tee "$DIR/validate.log"
# the attention kernel alone (given: e4m3 inputs) at the Plan's two K/V stages and with three
[ -n "$SKIP_STAGES" ] || for st in 2 3; do
  timeout "${BENCH_LIMIT:-240}" iosim bench --schedule fa3 --dtype fp8_e4m3 --fp8-scaling given \
    --seqlen 8192,16384 --head-dim 128,256 --causal both --stages $st -o "$DIR/stages$st.csv" --resume \
    2>&1 | tr '\r' '\n' | tail -1
done
