#!/usr/bin/env bash
# fa3's fp8 forward speed (issue 24, session 10), one GPU call. On the GPU machine, from the repo
# root, wheels in .whl/:   OUT=$OUT STEPS=variants,ncu bash experiments/fp8/speed10/run.sh
#   variants: experiments/fp8/speed10/variants.py (each variant checked, then timed) -> variants.csv
#   ncu:      Nsight Compute on the attention kernel (and the quantisation kernel) of the variants
#             in NCU (default: the old Plan's d = 128 tiles and the 224-key lazy one), d = 128,
#             N = 8192, not causal: speed of light, pipes, issue stalls, shared-memory bank
#             conflicts (ncu_raw_<variant>.csv, summarised by ncu_brief.py into ncu_brief_<variant>.txt),
#             per-instruction stall samples (ncu_src_<variant>.csv, tools/ncu_stall_sites.py)
#   tests:    the fp8 GPU tests (tests/test_gpu_fp8.py) -> gpu_tests.log
#   grid:     the fp8 bench grid as experiments/fp8/run.sh runs it -> measured_fp8.csv, validate.log
set -o pipefail
. experiments/gpu_env.sh fp8
D=${OUT:-experiments/fp8}/$GPU
for step in ${STEPS//,/ }; do
  case $step in
  variants) timeout "${VLIMIT:-200}" python3 experiments/fp8/speed10/variants.py "$D/variants.csv" $VARIANTS 2>&1 \
              | grep -v Warning | tee "$D/variants.log" ;;
  ncu) for v in ${NCU:-d128_bn128 d128_bn224_lazy}; do
         for sec in "--section MemoryWorkloadAnalysis_Tables" ""; do  # the second: if that section is unknown
           timeout "${NLIMIT:-90}" ncu --csv --page raw --print-units base --kernel-name regex:'^(fa3_fwd_fp8|fp8_quant)$' \
             --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
             --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats $sec \
             --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,gpu__time_duration.sum" \
             python3 experiments/fp8/speed10/variants.py --once $v > "$D/ncu_raw_$v.csv" 2> "$D/ncu_raw_$v.err"
           grep -q '^"ID"' "$D/ncu_raw_$v.csv" && break
         done
         echo "== ncu $v"; python3 experiments/fp8/speed10/ncu_brief.py "$D/ncu_raw_$v.csv" 2>&1 | tee "$D/ncu_brief_$v.txt" | head -70
         timeout "${NLIMIT:-90}" ncu --kernel-name fa3_fwd_fp8 --launch-count 1 --clock-control none --section SourceCounters \
           --section WarpStateStats --page source --print-source sass --csv \
           python3 experiments/fp8/speed10/variants.py --once $v > "$D/ncu_src_$v.csv" 2> "$D/ncu_src_$v.err"
         python3 tools/ncu_stall_sites.py "$D/ncu_src_$v.csv" 14 2>&1 | head -24
       done ;;
  tests) timeout "${TLIMIT:-150}" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fp8.py -x 2>&1 | tail -15 | tee "$D/gpu_tests.log"
         [ "${PIPESTATUS[0]}" = 0 ] || { echo "GPU tests failed: not timed"; exit 1; } ;;
  grid) timeout "${BENCH_LIMIT:-120}" iosim bench --schedule fa3 --dtype fp8_e4m3,bf16 --seqlen "${SEQLEN:-8192,16384}" \
          --head-dim "${DIMS:-64,128,256}" --causal both -o "$D/measured_fp8.csv" --resume 2>&1 | tr '\r' '\n' | tail -2
        iosim validate "$D/measured_fp8.csv" --by dtype 2>&1 | tee "$D/validate.log" ;;
  esac
done
