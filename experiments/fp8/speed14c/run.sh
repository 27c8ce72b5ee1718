#!/usr/bin/env bash
# fa3's fp8 forward with the P V wait at the next trip's top (fa3.cu PV_WAIT_TOP=1; issue 24,
# session 14, third engineer) beside main's kernel (PV_WAIT_TOP=0). On the GPU machine, from
# the repo root, wheels in .whl/ (one call):
#   OUT=$OUT STEPS=tests,variants,grid END=<start + 280> bash experiments/fp8/speed14c/run.sh
# Steps, in the order given, each under its own timeout (results in $OUT/<gpu>/, committed in
# experiments/fp8/<gpu>/speed14c/<call>/):
#   tests:    the fp8 GPU tests (tests/test_gpu_fp8.py: fresh NaN-poisoned data; the Plan of
#             the tree: call c1 ran at commit 6bdc4dd (92b385a before the rebase onto 0181f63), whose Plan took PV_WAIT_TOP=1 at every d;
#             since, at d = 128 only) -> gpu_tests.log; if they fail nothing is timed
#   variants: speed14c/variants.py --set c1 (base, top at d = 128, 64, 256, N = 4096, 8192,
#             16384; each checked first on fresh NaN-poisoned data, then ROUNDS interleaved
#             rounds) -> variants.csv, variants.log
#   (call c2, STEPS=tests,grid, at the merge of fa3bwd14 into main, 26d5a44: the Plan with
#   PV_WAIT_TOP=1 at d = 128 only, so every grid row runs its own Plan's kernel)
#   grid:     `iosim bench --schedule fa3 --dtype fp8_e4m3` (the Plan; c1: PV_WAIT_TOP=1) at
#             d = 64, 128, 256, N = 4096..16384, non-causal, then `iosim validate --by
#             dtype,head_dim` -> measured_fp8.csv, validate.log
# END (epoch seconds): no step runs past it.
set -o pipefail
. experiments/gpu_env.sh fp8/speed14c
D=$DIR
ok=1
lim() {  # a step's limit: $1, or less where END leaves less
  local left=$(( ${END:-9999999999} - $(date +%s) ))
  echo $(( left < $1 ? (left > 1 ? left : 1) : $1 ))
}
for step in ${STEPS//,/ }; do
  case $step in
  tests) timeout "$(lim ${TLIMIT:-70})" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fp8.py 2>&1 | tail -15 | tee "$D/gpu_tests.log"
         rc=${PIPESTATUS[0]}
         [ "$rc" = 124 ] && { echo "GPU tests timed out (a hang?): nothing else runs"; exit 1; }
         [ "$rc" = 0 ] || { ok=0; echo "GPU tests failed (rc $rc): nothing is timed"; } ;;
  variants) [ $ok = 1 ] || continue
            timeout "$(lim ${VLIMIT:-150})" python3 experiments/fp8/speed14c/variants.py "$D/variants.csv" \
              --set c1 --rounds "${ROUNDS:-5}" $VARIANTS 2>&1 | grep -v Warning | tee "$D/variants.log" ;;
  grid) [ $ok = 1 ] || continue
        timeout "$(lim ${BENCH_LIMIT:-90})" iosim bench --schedule fa3 --dtype fp8_e4m3 --seqlen 4096..16384 \
          --head-dim 128,256,64 --causal false -o "$D/measured_fp8.csv" --resume 2>&1 | tr '\r' '\n' | tail -2
        timeout "$(lim 40)" iosim validate "$D/measured_fp8.csv" --by dtype,head_dim 2>&1 | tee "$D/validate.log" ;;
  esac
done
