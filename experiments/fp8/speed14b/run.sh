#!/usr/bin/env bash
# fa3's fp8 forward at d = 128 (issue 24, session 14, second engineer): the clocks it runs at, where
# its warps stall per instruction, and one kernel change from that. On the GPU machine, from the
# repo root, wheels in .whl/:
#   OUT=$OUT STEPS=clocks,ncusrc[,tests,variants] bash experiments/fp8/speed14b/run.sh
# Steps, in the order given, each under its own timeout (results in $OUT/<gpu>/, committed in
# experiments/fp8/<gpu>/speed14b/<call>/):
#   clocks:  experiments/fp8/speed14b/clocks.py: fp8 d = 128, 256 and bf16 d = 128 timed (rounds,
#            then sustained) while NVML samples the SM clock, power and clock event reasons ->
#            clocks.csv, clocks.samples.csv, clocks.log; nvidia-smi -lms 100 beside it -> smi.csv
#   ncusrc:  Nsight Compute with source-level warp sampling (SourceCounters, WarpStateStats, the
#            pc-sampling stall reasons) on the d = 128 attention kernel at N = 8192, one-tile grid
#            (speed14/variants.py `base_d128_8k`, launched and checked by speed14/ncu14.py --point)
#            -> src.ncu-rep, src_sass.csv (the source page per SASS instruction), ncusrc.log
#   tests:   the fp8 GPU tests (tests/test_gpu_fp8.py) -> gpu_tests.log (a failure stops variants)
#   variants: experiments/fp8/speed14b/variants.py --set SET (ROUNDS interleaved rounds, each
#            variant checked first on fresh NaN-poisoned data) -> variants.csv, variants.log
# END (epoch seconds): no step runs past it.
set -o pipefail
. experiments/gpu_env.sh fp8/speed14b
D=$DIR
ok=1
lim() {
  local left=$(( ${END:-9999999999} - $(date +%s) ))
  echo $(( left < $1 ? (left > 1 ? left : 1) : $1 ))
}
for step in ${STEPS//,/ }; do
  case $step in
  clocks)
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active \
      --format=csv -lms 100 > "$D/smi.csv" 2>&1 &
    smi=$!
    timeout "$(lim ${CLIMIT:-120})" python3 experiments/fp8/speed14b/clocks.py "$D/clocks.csv" \
      --rounds "${CROUNDS:-3}" --sustain "${SUSTAIN:-1.5}" 2>&1 | grep -v Warning | tee "$D/clocks.log"
    kill $smi ;;
  ncusrc)
    arg='{"name": "base_d128_8k", "hw": "'$HW'", "seed": 1451}'
    timeout "$(lim ${NLIMIT:-150})" ncu -o "$D/src" -f --clock-control none --import-source no \
      --section SourceCounters --section WarpStateStats --section SchedulerStats \
      --metrics group:smsp__pcsamp_warp_stall_reasons,group:smsp__pcsamp_warp_stall_reasons_not_issued \
      --kernel-name regex:^fa3_fwd_fp8$ --launch-count 1 \
      python3 experiments/fp8/speed14/ncu14.py --point "$arg" 2>&1 | grep -v Warning | tail -20 | tee "$D/ncusrc.log"
    if [ ! -f "$D/src.ncu-rep" ]; then  # without the metric groups
      timeout "$(lim 120)" ncu -o "$D/src" -f --clock-control none --import-source no \
        --section SourceCounters --section WarpStateStats --kernel-name regex:^fa3_fwd_fp8$ --launch-count 1 \
        python3 experiments/fp8/speed14/ncu14.py --point "$arg" 2>&1 | tail -20 | tee -a "$D/ncusrc.log"
    fi
    ncu -i "$D/src.ncu-rep" --page source --csv --print-source sass > "$D/src_sass.csv" 2>>"$D/ncusrc.log"
    head -c 1500 "$D/src_sass.csv"; echo; wc -l "$D/src_sass.csv" ;;
  tests) timeout "$(lim ${TLIMIT:-75})" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fp8.py 2>&1 | tail -15 | tee "$D/gpu_tests.log"
         rc=${PIPESTATUS[0]}
         [ "$rc" = 124 ] && { echo "GPU tests timed out (a hang?): nothing else runs"; exit 1; }
         [ "$rc" = 0 ] || { ok=0; echo "GPU tests failed (rc $rc): nothing is timed"; } ;;
  variants) [ $ok = 1 ] || continue
            timeout "$(lim ${VLIMIT:-150})" python3 experiments/fp8/speed14b/variants.py "$D/variants.csv" \
              --set "${SET:-r1}" --rounds "${ROUNDS:-4}" $VARIANTS 2>&1 | grep -v Warning | tee "$D/variants.log" ;;
  esac
done
