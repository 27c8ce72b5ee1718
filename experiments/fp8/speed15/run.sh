#!/usr/bin/env bash
# fa3's fp8 forward with two of FA3's orders (fa3.cu's RESCALE_TOP, KV_WAIT_FIRST at 4b5851f; issue
# 24, session 15) beside the Plan's kernel, then the bench grid with its peers. The switches are
# no longer in kernels/fa3.cu (measured slower, taken out): the variants and tiles steps run
# fa3.cu at 4b5851f, the file both calls ran, as fa3_s15.cu: before the call
#   git show 4b5851f:kernels/fa3.cu > experiments/fp8/speed15/fa3_s15.cu
# (git-ignored; carry it: the GPU machine has no git history); run.sh copies it into kernels/.
# The tests, grid and causal steps run this tree's Plan and kernels/fa3.cu (the Plan's builds:
# the same SASS as 4b5851f's, sass_clean15.log). On the GPU machine, from the repo root, wheels
# in .whl/ (one call a set of steps):
#   OUT=$OUT STEPS=variants END=<start + 330> bash experiments/fp8/speed15/run.sh      (call c1)
#   OUT=$OUT STEPS=tests,grid,causal,tiles END=<start + 390> bash experiments/fp8/speed15/run.sh (call c2)
# Steps, in the order given, each under its own timeout (results in $OUT/<gpu>/, committed in
# experiments/fp8/<gpu>/speed15/<call>/):
#   tests:    the fp8 GPU tests (tests/test_gpu_fp8.py: fresh NaN-poisoned data, this tree's
#             Plan) -> gpu_tests.log; if they fail nothing is timed
#   variants: speed15/variants.py --set c1 (fa3_s15.cu; each variant checked first on fresh NaN-poisoned
#             data, then ROUNDS interleaved rounds) -> variants.csv, variants.log
#   grid:     `iosim bench --schedule fa3 --dtype fp8_e4m3,bf16 --peers torch` at d = 128, 256,
#             64, N = 4096..16384, non-causal, then `iosim validate --by dtype,head_dim`
#             -> measured.csv, validate.log
#   causal:   the same at d = 128, causal, appended to measured.csv (validated again)
#   tiles:    speed15/variants.py --set c2 (fa3_s15.cu, d = 128, key tiles of 192 and 224) -> tiles.csv, tiles.log
# END (epoch seconds): no step runs past it.
set -o pipefail
. experiments/gpu_env.sh fp8/speed15
D=$DIR
ok=1
lim() {  # a step's limit: $1, or less where END leaves less
  local left=$(( ${END:-9999999999} - $(date +%s) ))
  echo $(( left < $1 ? (left > 1 ? left : 1) : $1 ))
}
old_kernel() {  # 4b5851f's fa3.cu into kernels/, where the variants' Plans name it
  [ -f experiments/fp8/speed15/fa3_s15.cu ] || { echo "error: experiments/fp8/speed15/fa3_s15.cu is missing: before the call, git show 4b5851f:kernels/fa3.cu > experiments/fp8/speed15/fa3_s15.cu, and carry it (the GPU machine has no git history)" >&2; exit 2; }
  cp experiments/fp8/speed15/fa3_s15.cu kernels/fa3_s15.cu
}
grid() {  # extra bench options
  timeout "$(lim ${BENCH_LIMIT:-200})" iosim bench --schedule fa3 --dtype fp8_e4m3,bf16 --peers torch \
    --seqlen 4096..16384 -o "$D/measured.csv" --resume "$@" 2>&1 | tr '\r' '\n' | tail -2
  timeout "$(lim 40)" iosim validate "$D/measured.csv" --by dtype,head_dim 2>&1 | tee "$D/validate.log"
}
for step in ${STEPS//,/ }; do
  case $step in
  tests) timeout "$(lim ${TLIMIT:-70})" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fp8.py 2>&1 | tail -15 | tee "$D/gpu_tests.log"
         rc=${PIPESTATUS[0]}
         [ "$rc" = 124 ] && { echo "GPU tests timed out (a hang?): nothing else runs"; exit 1; }
         [ "$rc" = 0 ] || { ok=0; echo "GPU tests failed (rc $rc): nothing is timed"; } ;;
  variants) [ $ok = 1 ] || continue
            old_kernel
            timeout "$(lim ${VLIMIT:-200})" python3 experiments/fp8/speed15/variants.py "$D/variants.csv" \
              --set c1 --rounds "${ROUNDS:-5}" $VARIANTS 2>&1 | grep -v Warning | tee "$D/variants.log" ;;
  grid) [ $ok = 1 ] || continue
        grid --head-dim 128,256,64 --causal false ;;
  tiles) [ $ok = 1 ] || continue
         old_kernel
         timeout "$(lim ${TILES_LIMIT:-120})" python3 experiments/fp8/speed15/variants.py "$D/tiles.csv" \
           --set c2 --rounds "${ROUNDS:-5}" 2>&1 | grep -v Warning | tee "$D/tiles.log" ;;
  causal) [ $ok = 1 ] || continue
          BENCH_LIMIT=${CAUSAL_LIMIT:-90} grid --head-dim 128 --causal true ;;
  esac
done
