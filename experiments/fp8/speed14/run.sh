#!/usr/bin/env bash
# fa3's fp8 forward speed (issue 24, session 14: what binds at d = 128, and kernel variants). Call
# r1 ran at commit bebbcd1, r2 at b753c47 (commands: experiments/README.md); their kernel switches
# are gone from kernels/fa3.cu since (variants.py says which). On the GPU machine, from the repo
# root, wheels in .whl/:
#   OUT=$OUT STEPS=ncu,variants[,tests,grid] SET=r1 bash experiments/fp8/speed14/run.sh
# Steps, in the order given, each under its own timeout (results in $OUT/<gpu>/, committed in
# experiments/fp8/<gpu>/speed14/<call>/):
#   ncu:      experiments/fp8/speed14/ncu14.py over NCU_VARIANTS (default: the d = 128 kernel at
#             N = 8192 on the one-tile grid and on the persistent grid) ->
#             ncu14.csv, ncu14.log (its --summary)
#   tests:    the fp8 GPU tests (tests/test_gpu_fp8.py) -> gpu_tests.log; a timeout (rc 124) reads
#             as a hang and stops the run; a failure stops the variants and the grid
#   variants: experiments/fp8/speed14/variants.py --set SET (fa3_s13.cu, session 13's kernel:
#             `git show 8eded77:kernels/fa3.cu > experiments/fp8/speed14/fa3_s13.cu` before the
#             call, not committed (git-ignored; the call's carry), copied into kernels/ for the
#             `old` variants; each variant checked on fresh
#             NaN-poisoned data, then ROUNDS interleaved rounds) -> variants.csv, variants.log
#   grid:     `iosim bench --schedule fa3 --dtype fp8_e4m3,bf16 --peers torch` over N = 4096..16384,
#             GRID_D, non-causal (experiments/fp8/speed10/run.sh), then `iosim validate --by
#             dtype` -> measured_fp8.csv, validate.log
# END (epoch seconds): no step runs past it (each step's limit is cut to what is left).
set -o pipefail
. experiments/gpu_env.sh fp8/speed14
D=$DIR
ok=1
lim() {  # a step's limit: $1, or less where END leaves less
  local left=$(( ${END:-9999999999} - $(date +%s) ))
  echo $(( left < $1 ? (left > 1 ? left : 1) : $1 ))
}
for step in ${STEPS//,/ }; do
  case $step in
  ncu) timeout "$(lim ${NLIMIT:-170})" python3 experiments/fp8/speed14/ncu14.py "$D/ncu14.csv" \
         ${NCU_VARIANTS:-base_d128_8k pers_d128_8k} 2>&1 | tee "$D/ncu14.log" ;;
  tests) timeout "$(lim ${TLIMIT:-75})" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fp8.py 2>&1 | tail -15 | tee "$D/gpu_tests.log"
         rc=${PIPESTATUS[0]}
         [ "$rc" = 124 ] && { echo "GPU tests timed out (a hang?): nothing else runs"; exit 1; }
         [ "$rc" = 0 ] || { ok=0; echo "GPU tests failed (rc $rc): nothing is timed"; } ;;
  variants) [ $ok = 1 ] || continue
            [ -f experiments/fp8/speed14/fa3_s13.cu ] || { echo "error: experiments/fp8/speed14/fa3_s13.cu is missing: before the call, git show 8eded77:kernels/fa3.cu > experiments/fp8/speed14/fa3_s13.cu, and carry it (the GPU machine has no git history)" >&2; exit 2; }
            cp experiments/fp8/speed14/fa3_s13.cu kernels/fa3_s13.cu  # the `old` variants' source
            timeout "$(lim ${VLIMIT:-150})" python3 experiments/fp8/speed14/variants.py "$D/variants.csv" \
              --set "${SET:-r1}" --rounds "${ROUNDS:-4}" $VARIANTS 2>&1 | grep -v Warning | tee "$D/variants.log"
            rm -f kernels/fa3_s13.cu ;;
  grid) [ $ok = 1 ] || continue
        OUT=$OUT STEPS=grid GRID_DTYPE=fp8_e4m3,bf16 GRID_D="${GRID_D:-256,128,64}" GRID_CAUSAL=false \
          PEERS="--peers torch" BENCH_LIMIT="${BENCH_LIMIT:-200}" END="$END" bash experiments/fp8/speed10/run.sh ;;
  esac
done
