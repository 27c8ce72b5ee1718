#!/usr/bin/env bash
# fa3's fp8 forward speed (issue 24, session 12). On the GPU machine, from the repo root, wheels
# in .whl/:   OUT=$OUT STEPS=tests,variants[,grid] bash experiments/fp8/speed12/run.sh
# Steps (each under its own timeout; results in $OUT/<gpu>/, committed in experiments/fp8/<gpu>/speed12/):
#   tests:    the fp8 GPU tests (tests/test_gpu_fp8.py: every scaling, ragged N, GQA, causal,
#             d = 64, outlier inputs) -> gpu_tests.log; a timeout (rc 124) reads as a hang and
#             stops the run
#   variants: experiments/fp8/speed12/variants.py (the Plan's attention kernel beside its speed
#             variants at N = 4096, 8192, 16384, each checked on fresh NaN-poisoned data, then
#             timed in ROUNDS interleaved rounds; SET picks variants.py's table, VARIANTS names
#             a subset) -> variants.csv,
#             variants.log
#   grid:     experiments/fp8/speed10/run.sh's grid step: `iosim bench --schedule fa3 --dtype
#             fp8_e4m3` over N = 4096..16384, GRID_D (default 256,128,64), non-causal, no peers,
#             and `iosim validate --by dtype` -> measured_fp8.csv, validate.log
set -o pipefail
. experiments/gpu_env.sh fp8/speed12
D=$DIR
for step in ${STEPS//,/ }; do
  case $step in
  tests) timeout "${TLIMIT:-75}" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fp8.py 2>&1 | tail -15 | tee "$D/gpu_tests.log"
         rc=${PIPESTATUS[0]}
         [ "$rc" = 124 ] && { echo "GPU tests timed out (a hang?): nothing else runs"; exit 1; }
         [ "$rc" = 0 ] || echo "GPU tests failed (rc $rc): the Plan's kernel is not timed in a grid" ;;
  variants) timeout "${VLIMIT:-170}" python3 experiments/fp8/speed12/variants.py "$D/variants.csv" \
              --set "${SET:-round2}" --rounds "${ROUNDS:-6}" $VARIANTS 2>&1 | grep -v Warning | tee "$D/variants.log" ;;
  grid) grep -q passed "$D/gpu_tests.log" && ! grep -q failed "$D/gpu_tests.log" || { echo "no grid: the GPU tests did not pass"; continue; }
        OUT=$OUT STEPS=grid GRID_DTYPE=fp8_e4m3 GRID_D="${GRID_D:-256,128,64}" GRID_CAUSAL=false PEERS= \
          BENCH_LIMIT="${BENCH_LIMIT:-100}" bash experiments/fp8/speed10/run.sh ;;
  esac
done
