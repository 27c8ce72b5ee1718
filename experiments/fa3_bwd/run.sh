#!/usr/bin/env bash
# FA3's backward (kernels/fa3_bwd.cu) on the GPU machine, from the repo root, wheels in .whl/:
#   bash experiments/fa3_bwd/run.sh    (STEPS picks steps: smoke,tests,sanitize,variants,grid,ncu)
# smoke: one fa3 backward point run once (a hang stops here, not in the tests);
# tests: tests/test_gpu_backward.py's fa3 cases and fa3's bottom-right forward (its LSE);
# sanitize: compute-sanitizer racecheck and synccheck on ragged shapes (GQA, both diagonals);
# variants: the main kernel with and without the consumers' ping-pong, beside cuDNN (variants.py);
# grid: `iosim bench --direction bwd` of fa3 and fa2 beside torch's SDPA backward on the issue's
#   grid (batch = 16384/N, heads = 2048/d; d = 64, 128; N 1024..16384; causal both), then
#   `--direction both` of fa3 at d = 128;
# ncu: Nsight Compute's picture of the main kernel (d = 64, 128, N = 8192, not causal).
# Logs and CSVs go to $DIR (experiments/gpu_env.sh); the script stays under LIMIT seconds.
set -o pipefail
start=$(date +%s)
. experiments/gpu_env.sh fa3_bwd
STEPS=${STEPS:-smoke,tests,sanitize,variants,grid,ncu}
left() { echo $(( ${LIMIT:-580} - ($(date +%s) - start) )); }
pt() {  # a point for iosim.gpu.once: schedule seed batch heads kv_heads nq nk d causal align
  echo "{\"schedule\":\"$1\",\"hw\":\"$HW\",\"seed\":$2,\"batch\":$3,\"heads\":$4,\"kv_heads\":$5,\"seqlen_q\":$6,\"seqlen_k\":$7,\"head_dim\":$8,\"causal\":$9,\"causal_align\":\"${10}\",\"direction\":\"bwd\"}"
}
if [[ $STEPS == *smoke* ]]; then
  for d in 64 128; do
    timeout 60 python3 -m iosim.gpu.once "$(pt fa3 1 1 4 4 1000 1000 $d true top-left)" \
      && echo "smoke d=$d ok" || { echo "smoke d=$d FAILED ($?)"; exit 1; }
  done 2>&1 | tee "$DIR/smoke.log" || exit 1
fi
if [[ $STEPS == *tests* ]]; then
  timeout $(( $(left) / 2 )) python3 -m pytest -q -m gpu tests/test_gpu_backward.py tests/test_gpu_kernels.py \
    -k "fa3" 2>&1 | tail -15 | tee "$DIR/gpu_tests.log"
fi
if [[ $STEPS == *sanitize* ]]; then
  for tool in racecheck synccheck; do
    for p in "$(pt fa3 1 1 4 2 300 333 64 true bottom-right)" "$(pt fa3 2 1 2 2 333 200 128 true bottom-right)" \
             "$(pt fa3 3 1 4 1 250 250 128 false top-left)"; do
      echo "== $tool $p"
      timeout 120 compute-sanitizer --tool $tool python3 -m iosim.gpu.once "$p" 2>&1 | tail -2
    done
  done | tee "$DIR/sanitize.log"
fi
if [[ $STEPS == *variants* ]]; then
  timeout 120 python3 experiments/fa3_bwd/variants.py "$DIR/variants.csv" 2>&1 | tail -3
fi
if [[ $STEPS == *grid* ]]; then
  timeout $(( $(left) - 60 )) iosim bench --direction bwd --schedule fa3,fa2 --seqlen 1024..16384 \
    --head-dim 64,128 --causal both --dtype bf16 --peers torch -o "$DIR/measured_bwd.csv" \
    --resume --no-progress 2>&1 | tail -4
  timeout 50 iosim bench --direction both --schedule fa3 --seqlen 4096,16384 --head-dim 128 \
    --causal both --dtype bf16 --peers torch -o "$DIR/measured_both.csv" --resume --no-progress 2>&1 | tail -3
fi
if [[ $STEPS == *ncu* ]]; then
  for d in 64 128; do
    timeout 120 ncu --kernel-name fa3_bwd --launch-count 1 --section SpeedOfLight \
      --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
      python3 -m iosim.gpu.once "$(pt fa3 1 2 16 16 8192 8192 $d false top-left)" > "$DIR/ncu_d$d.txt" 2>&1
    grep -E "Duration|Throughput|Issue Slots|Warp Cycles|Stall|L2|DRAM" "$DIR/ncu_d$d.txt" | head -20
  done
fi
echo "elapsed $(( $(date +%s) - start )) s"
