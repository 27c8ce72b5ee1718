#!/usr/bin/env bash
# fa3's fp8 forward at d = 128 (issue 24, session 14, second engineer): the clocks it runs at, where
# its warps stall per instruction, and the softmax turns (fa3.cu SOFTMAX_TURN) beside the Plan's
# kernel. On the GPU machine, from the repo root, wheels in .whl/:
#   call c1: OUT=$OUT STEPS=clocks,ncusrc END=<start + 335> bash experiments/fp8/speed14b/run.sh
#   call c2: OUT=$OUT STEPS=ncusrc,variants,flip,tests,grid NCU_VARIANTS="base_d128_8k smx_d128_8k" \
#              END=<start + 340> bash experiments/fp8/speed14b/run.sh
# Steps, in the order given, each under its own timeout (results in $OUT/<gpu>/, committed in
# experiments/fp8/<gpu>/speed14b/<call>/; at most 8 files come back, so the bulky ones are tarred):
#   clocks:   experiments/fp8/speed14b/clocks.py: fp8 d = 128, 256 and bf16 d = 128 timed (rounds,
#             then sustained) while NVML samples the SM clock, power and clock event reasons ->
#             clocks.csv, clocks.samples.csv, clocks.log; nvidia-smi -lms 100 beside it -> smi.csv
#   ncusrc:   Nsight Compute with source-level warp sampling (SourceCounters, WarpStateStats, the
#             pc-sampling stall reasons) on the attention kernel of each NCU_VARIANTS name
#             (speed14b/variants.py; default base_d128_8k: d = 128, N = 8192, one-tile grid),
#             launched and checked by speed14b/ncu_point.py -> ncu.tgz (src_NAME.ncu-rep,
#             src_NAME.csv: the source page per SASS instruction, ncusrc.log) and stalls.txt
#             (speed14b/src_stalls.py of each)
#   variants: speed14b/variants.py --set SET (ROUNDS interleaved rounds, each variant checked
#             first on fresh NaN-poisoned data) -> variants.csv, variants.log
#   flip:     if `smx` was faster than `base` in every round at every N at d = 128, the Plan
#             takes it there (iosim/schedules/fa3.py FP8_SOFTMAX_TURN at commit d6741b5 (96bfce3 before the rebase onto 78778b5), edited in
#             place: commit the same edit) and the steps after run on it; else they are skipped
#             (c2: not faster; SOFTMAX_TURN and FP8_SOFTMAX_TURN are gone since: run c2 at d6741b5)
#   tests:    the fp8 GPU tests (tests/test_gpu_fp8.py) -> gpu_tests.log
#   grid:     `iosim bench --schedule fa3 --dtype fp8_e4m3,bf16 --head-dim 128 --peers torch` over
#             N = 4096..16384, non-causal, then `iosim validate --by dtype,head_dim` -> grid.tgz
#             (measured_fp8.csv, validate.log, summary.txt)
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
    mkdir -p /tmp/ncu && : > "$D/stalls.txt"
    for v in ${NCU_VARIANTS:-base_d128_8k}; do
      timeout "$(lim ${NLIMIT:-75})" ncu -o "/tmp/ncu/src_$v" -f --clock-control none --import-source no \
        --section SourceCounters --section WarpStateStats --section SchedulerStats \
        --metrics group:smsp__pcsamp_warp_stall_reasons,group:smsp__pcsamp_warp_stall_reasons_not_issued \
        --kernel-name regex:^fa3_fwd_fp8$ --launch-count 1 \
        python3 experiments/fp8/speed14b/ncu_point.py "$v" 1451 2>&1 | grep -v Warning | tail -8 | tee -a /tmp/ncu/ncusrc.log
      ncu -i "/tmp/ncu/src_$v.ncu-rep" --page source --csv --print-source sass > "/tmp/ncu/src_$v.csv" 2>>/tmp/ncu/ncusrc.log
      { echo "== $v"; python3 experiments/fp8/speed14b/src_stalls.py "/tmp/ncu/src_$v.csv" --top 30; } 2>&1 | tee -a "$D/stalls.txt"
      tar czf "$D/ncu.tgz" -C /tmp/ncu .
    done ;;
  flip)
    won=$(python3 - "$D/variants.csv" <<'PY'
import sys, pandas as pd
df = pd.read_csv(sys.argv[1]); ok = df[(df.status == "ok") & (df.head_dim == 128)]
t = ok.pivot_table(index=["seqlen", "round"], columns="kind", values="attn_tflops")
print(int("smx" in t and "base" in t and len(t) >= 9 and bool((t.smx > t.base).all())))
PY
)
    echo "smx faster than base in every round at every N (d = 128): $won"
    if [ "$won" = 1 ]; then
      sed -i 's/^FP8_SOFTMAX_TURN = {64: 0, 128: 0, 256: 0}$/FP8_SOFTMAX_TURN = {64: 0, 128: 1, 256: 0}/' iosim/schedules/fa3.py
      grep -n '^FP8_SOFTMAX_TURN' iosim/schedules/fa3.py
    else ok=0; fi ;;
  grid) [ $ok = 1 ] || continue
    mkdir -p /tmp/grid
    timeout "$(lim ${BENCH_LIMIT:-110})" iosim bench --schedule fa3 --dtype fp8_e4m3,bf16 --seqlen 4096..16384 \
      --head-dim 128 --causal false --peers torch -o /tmp/grid/measured_fp8.csv --resume 2>&1 | tr '\r' '\n' | tail -2
    timeout "$(lim 60)" iosim validate /tmp/grid/measured_fp8.csv --by dtype,head_dim 2>&1 | tee /tmp/grid/validate.log
    python3 tools/fp8_summary.py /tmp/grid/measured_fp8.csv 2>&1 | tee /tmp/grid/summary.txt
    tar czf "$D/grid.tgz" -C /tmp/grid . ;;
  tests) [ $ok = 1 ] || continue
         timeout "$(lim ${TLIMIT:-75})" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fp8.py 2>&1 | tail -15 | tee "$D/gpu_tests.log"
         rc=${PIPESTATUS[0]}
         [ "$rc" = 124 ] && { echo "GPU tests timed out (a hang?): nothing else runs"; exit 1; }
         [ "$rc" = 0 ] || { ok=0; echo "GPU tests failed (rc $rc): nothing is timed"; } ;;
  variants) [ $ok = 1 ] || continue
            timeout "$(lim ${VLIMIT:-130})" python3 experiments/fp8/speed14b/variants.py "$D/variants.csv" \
              --set "${SET:-r1}" --rounds "${ROUNDS:-4}" $VARIANTS 2>&1 | grep -v Warning | tee "$D/variants.log" ;;
  esac
done
