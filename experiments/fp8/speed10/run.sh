#!/usr/bin/env bash
# fa3's fp8 forward speed (issue 24, session 10). On the GPU machine, from the repo root, wheels
# in .whl/, a copy of main's kernels/ in main_kernels/ (for the `main` variants):
#   OUT=$OUT STEPS=tests,grid,variants bash experiments/fp8/speed10/run.sh
# Steps (each under its own timeout; results in $OUT/<gpu>/ or experiments/fp8/<gpu>/speed10):
#   tests:    the fp8 GPU tests (tests/test_gpu_fp8.py: every scaling, ragged N, GQA, causal,
#             outlier inputs) -> gpu_tests.log; a failure skips the grid
#             (a timeout, rc 124, reads as a hang: nothing else runs)
#   grid:     `iosim bench --schedule fa3 --dtype fp8_e4m3,bf16 --seqlen 4096..16384 --head-dim
#             64,128,256 --causal both --peers torch` -> measured_fp8.csv, then `iosim validate
#             --by dtype` on it -> validate.log (GRID_DTYPE, GRID_D, GRID_CAUSAL, PEERS="" trim it;
#             END, epoch seconds, bounds it)
#   variants: experiments/fp8/speed10/variants.py (main's kernel beside this tree's at each d,
#             tile and EXP_EMU variants; each checked, then timed in interleaved rounds) ->
#             variants.csv, variants.log
#   ncu:      Nsight Compute on the attention and quantisation kernels of the variants in NCU:
#             speed of light, pipes, issue stalls, shared-memory bank conflicts (ncu_raw_<v>.csv,
#             summarised by tools/ncu_brief.py into ncu_brief_<v>.txt), per-instruction stall samples
#             (ncu_src_<v>.csv, tools/ncu_stall_sites.py; NCU_SRC=0: not), all in ncu.tgz
set -o pipefail
. experiments/gpu_env.sh fp8
D=$DIR
MAIN=${MAIN_KERNELS:-main_kernels}
tests_ok=1
for step in ${STEPS//,/ }; do
  case $step in
  tests) timeout "${TLIMIT:-90}" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_fp8.py 2>&1 | tail -15 | tee "$D/gpu_tests.log"
         rc=${PIPESTATUS[0]}
         [ "$rc" = 124 ] && { echo "GPU tests timed out (a hang?): nothing else runs"; exit 1; }
         [ "$rc" = 0 ] || { tests_ok=0; echo "GPU tests failed: the grid is not timed"; } ;;
  grid) lim=${BENCH_LIMIT:-150}  # END (epoch seconds): the grid stops by then
        [ -n "$END" ] && lim=$(( END - $(date +%s) < lim ? END - $(date +%s) : lim ))
        [ "$lim" -gt 10 ] || { echo "no time left for the grid"; tests_ok=0; }
        if [ $tests_ok = 1 ]; then
          timeout "$lim" iosim bench --schedule fa3 --dtype "${GRID_DTYPE:-fp8_e4m3,bf16}" --seqlen "${SEQLEN:-4096..16384}" \
            --head-dim "${GRID_D:-64,128,256}" --causal "${GRID_CAUSAL:-both}" ${PEERS---peers torch} \
            -o "$D/measured_fp8.csv" --resume 2>&1 | tr '\r' '\n' | tail -2
          timeout 60 iosim validate "$D/measured_fp8.csv" --by dtype 2>&1 | tee "$D/validate.log"
          python3 tools/fp8_summary.py "$D/measured_fp8.csv"
        fi ;;
  variants) timeout "${VLIMIT:-150}" python3 experiments/fp8/speed10/variants.py "$D/variants.csv" --main-kernels "$MAIN" \
              --rounds "${ROUNDS:-3}" $VARIANTS 2>&1 | grep -v Warning | tee "$D/variants.log" ;;
  ncu) mkdir -p "$D/ncu"
       for v in ${NCU:-main_d128 new_d128}; do
         for sec in "--section MemoryWorkloadAnalysis_Tables" ""; do  # the second: if that section is unknown
           timeout "${NLIMIT:-90}" ncu --csv --page raw --print-units base --kernel-name regex:'^(fa3_fwd_fp8|fp8_quant)$' \
             --clock-control none --section SpeedOfLight --section ComputeWorkloadAnalysis --section InstructionStats \
             --section SchedulerStats --section WarpStateStats --section Occupancy --section LaunchStats $sec \
             --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,gpu__time_duration.sum" \
             python3 experiments/fp8/speed10/variants.py --once $v --main-kernels "$MAIN" > "$D/ncu/ncu_raw_$v.csv" 2> "$D/ncu/ncu_raw_$v.err"
           grep -q '^"ID"' "$D/ncu/ncu_raw_$v.csv" && break
         done
         echo "== ncu $v"; python3 tools/ncu_brief.py "$D/ncu/ncu_raw_$v.csv" 2>&1 | tee "$D/ncu/ncu_brief_$v.txt" | head -70
         [ "${NCU_SRC:-1}" = 1 ] || continue
         timeout "${NLIMIT:-90}" ncu --kernel-name fa3_fwd_fp8 --launch-count 1 --clock-control none --section SourceCounters \
           --section WarpStateStats --page source --print-source sass --csv \
           python3 experiments/fp8/speed10/variants.py --once $v --main-kernels "$MAIN" > "$D/ncu/ncu_src_$v.csv" 2> "$D/ncu/ncu_src_$v.err"
         python3 tools/ncu_stall_sites.py "$D/ncu/ncu_src_$v.csv" 14 2>&1 | head -24
       done
       tar czf "$D/ncu.tgz" -C "$D" ncu && rm -rf "$D/ncu" ;;  # one file back (the device returns 8)
  esac
done
