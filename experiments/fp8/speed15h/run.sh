#!/usr/bin/env bash
# The exponential off the MUFU in fa3's fp8 forward (fa3.cu's EXP2_H2 at 40e79ec; issue 24, session
# 15): a microbenchmark of the exponential's forms, then the variants beside the Plan's kernel,
# their accuracy; then (a second call) the fp8 GPU tests and the bench grid with its peers.
# EXP2_H2 is no longer in kernels/fa3.cu (measured slower, taken out): the variants and accuracy
# steps run fa3.cu at 40e79ec, the file call c1 ran, as fa3_s15h.cu: before the call
#   git show 40e79ec:kernels/fa3.cu > experiments/fp8/speed15h/fa3_s15h.cu
# (git-ignored; carry it: the GPU machine has no git history); run.sh copies it into kernels/.
# On the GPU machine, from the repo root, wheels in .whl/ (one call a set of steps):
#   OUT=$OUT STEPS=mufu,variants,accuracy END=<start + 345> bash experiments/fp8/speed15h/run.sh   (call c1)
#   OUT=$OUT STEPS=tests,grid END=<start + 345> bash experiments/fp8/speed15h/run.sh               (call c2)
# Steps, in the order given, each under its own timeout (results in $OUT/<gpu>/, committed in
# experiments/fp8/<gpu>/speed15h/<call>/):
#   mufu:     mufu_rate.py: results per clock per SM of ex2.approx.ftz.f32, .f16x2, .bf16x2,
#             .f16, the conversions around P and the f16x2 polynomial -> mufu.csv, mufu.log
#   variants: variants.py --set c1 (c1m, with the ex2.approx.f16x2 variant, where mufu.csv has
#             ex2.approx.f16x2 over 1.25x ex2.approx.ftz.f32's results per clock); each checked
#             first on fresh NaN-poisoned data, then ROUNDS interleaved rounds -> variants.csv, .log
#   accuracy: accuracy_h2.py (RMSE on outlier inputs beside the Plan's kernel; the fp8 GPU
#             tests' check per case) -> accuracy.csv, accuracy.log
#   tests:    the fp8 GPU tests (tests/test_gpu_fp8.py) -> gpu_tests.log; if they fail nothing
#             else runs
#   grid:     `iosim bench --schedule fa3 --dtype fp8_e4m3,bf16 --peers torch` at d = 128, 256,
#             64, N = 4096..16384, non-causal, then `iosim validate --by dtype,head_dim`
#             -> measured.csv, validate.log
# END (epoch seconds): no step runs past it.
set -o pipefail
. experiments/gpu_env.sh fp8/speed15h
D=$DIR
H=experiments/fp8/speed15h
ok=1
old_kernel() {  # 40e79ec's fa3.cu into kernels/, where the variants' Plans name it
  [ -f $H/fa3_s15h.cu ] || { echo "error: $H/fa3_s15h.cu is missing: before the call, git show 40e79ec:kernels/fa3.cu > $H/fa3_s15h.cu, and carry it (the GPU machine has no git history)" >&2; exit 2; }
  cp $H/fa3_s15h.cu kernels/fa3_s15h.cu
}
lim() {  # a step's limit: $1, or less where END leaves less
  local left=$(( ${END:-9999999999} - $(date +%s) ))
  echo $(( left < $1 ? (left > 1 ? left : 1) : $1 ))
}
for step in ${STEPS//,/ }; do
  echo "== $step $(date -u +%T)"
  case $step in
  mufu) timeout "$(lim ${MLIMIT:-60})" python3 $H/mufu_rate.py "$D/mufu.csv" 2>&1 | tee "$D/mufu.log" ;;
  variants) old_kernel
            set_=c1
            python3 - "$D/mufu.csv" <<'PY' && set_=c1m
import csv, sys
try:
    r = {int(x["form"]): float(x["results_per_clk_sm"]) for x in csv.DictReader(open(sys.argv[1]))}
except OSError:
    sys.exit(1)
sys.exit(0 if r.get(1, 0) > 1.25 * r.get(0, 1e9) else 1)
PY
            echo "variant set $set_"
            timeout "$(lim ${VLIMIT:-220})" python3 $H/variants.py "$D/variants.csv" --set $set_ \
              --rounds "${ROUNDS:-5}" 2>&1 | grep -v Warning | tee "$D/variants.log" ;;
  accuracy) old_kernel
            timeout "$(lim ${ALIMIT:-90})" python3 $H/accuracy_h2.py "$D/accuracy.csv" base h1 h2 h1o 2>&1 \
              | grep -v Warning | tee "$D/accuracy.log" ;;
  tests) timeout "$(lim ${TLIMIT:-70})" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fp8.py 2>&1 | tail -15 | tee "$D/gpu_tests.log"
         rc=${PIPESTATUS[0]}
         [ "$rc" = 124 ] && { echo "GPU tests timed out (a hang?): nothing else runs"; exit 1; }
         [ "$rc" = 0 ] || { ok=0; echo "GPU tests failed (rc $rc): nothing is timed"; } ;;
  grid) [ $ok = 1 ] || continue
        timeout "$(lim ${BENCH_LIMIT:-230})" iosim bench --schedule fa3 --dtype fp8_e4m3,bf16 --peers torch \
          --seqlen 4096..16384 --head-dim 128,256,64 --causal false -o "$D/measured.csv" --resume 2>&1 | tr '\r' '\n' | tail -2
        timeout "$(lim 40)" iosim validate "$D/measured.csv" --by dtype,head_dim 2>&1 | tee "$D/validate.log" ;;
  esac
done
echo "== end $(date -u +%T)"
