#!/usr/bin/env bash
# fa3's fp8 forward speed (issue 24, session 13: the persistent grid). On the GPU machine, from
# the repo root, wheels in .whl/:   OUT=$OUT STEPS=tests,variants[,grid] bash experiments/fp8/speed13/run.sh
# Steps (each under its own timeout; results in $OUT/<gpu>/, committed in experiments/fp8/<gpu>/speed13/):
#   tests:    the fp8 GPU tests (tests/test_gpu_fp8.py: every scaling, ragged N, GQA, causal,
#             d = 64, outlier inputs, the persistent grid with several tiles a CTA) ->
#             gpu_tests.log; a timeout (rc 124) reads as a hang and stops the run; a failure
#             stops the variants and the grid (a failing kernel is never timed)
#   variants: experiments/fp8/speed13/variants.py (the Plan's persistent kernel beside the
#             session-12 kernel, fa3_s12.cu copied into kernels/, and this tree's kernel on the
#             one-tile grid, at N = 4096, 8192, 16384, each checked on fresh NaN-poisoned data,
#             then timed in ROUNDS interleaved rounds; SET, VARIANTS) -> variants.csv, variants.log
#   grid:     `iosim bench --schedule fa3 --dtype fp8_e4m3,bf16 --peers torch` over N = 4096..16384,
#             GRID_D (default 256,128,64), non-causal (the bf16 fa3 and torch's best bf16 backend
#             as peers in the same run), then `iosim validate --by dtype` -> measured_fp8.csv,
#             validate.log
set -o pipefail
. experiments/gpu_env.sh fp8/speed13
D=$DIR
ok=1
for step in ${STEPS//,/ }; do
  case $step in
  tests) timeout "${TLIMIT:-75}" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fp8.py 2>&1 | tail -15 | tee "$D/gpu_tests.log"
         rc=${PIPESTATUS[0]}
         [ "$rc" = 124 ] && { echo "GPU tests timed out (a hang?): nothing else runs"; exit 1; }
         [ "$rc" = 0 ] || { ok=0; echo "GPU tests failed (rc $rc): nothing is timed"; } ;;
  variants) [ $ok = 1 ] || continue
            [ -f experiments/fp8/speed13/fa3_s12.cu ] || { echo "error: experiments/fp8/speed13/fa3_s12.cu is missing: before the call, git show 2bbaea6:kernels/fa3.cu > experiments/fp8/speed13/fa3_s12.cu, and carry it (the GPU machine has no git history)" >&2; exit 2; }
            cp experiments/fp8/speed13/fa3_s12.cu kernels/fa3_s12.cu
            timeout "${VLIMIT:-200}" python3 experiments/fp8/speed13/variants.py "$D/variants.csv" \
              --set "${SET:-round2}" --rounds "${ROUNDS:-6}" $VARIANTS 2>&1 | grep -v Warning | tee "$D/variants.log"
            rm -f kernels/fa3_s12.cu ;;
  grid) [ $ok = 1 ] || continue
        OUT=$OUT STEPS=grid GRID_DTYPE=fp8_e4m3,bf16 GRID_D="${GRID_D:-256,128,64}" GRID_CAUSAL=false \
          PEERS="--peers torch" BENCH_LIMIT="${BENCH_LIMIT:-240}" bash experiments/fp8/speed10/run.sh
        # speed10's run.sh writes under $OUT/<gpu>/ as this one does (its DIR)
        ;;
  esac
done
