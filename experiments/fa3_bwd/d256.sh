#!/usr/bin/env bash
# FA3's backward at head_dim 256 (kernels/fa3_bwd.cu's SPLIT_D: two consumer warpgroups splitting
# head_dim of one 64-key block) on the GPU machine, from the repo root, wheels in .whl/:
#   STEPS=smoke,tests,sanitize,grid,ncu bash experiments/fa3_bwd/d256.sh
# smoke: one ragged causal point run once, plain and deterministic (a hang stops here);
# tests: tests/test_gpu_backward.py's fa3 cases at d = 256 (NaN-poisoned, fresh random data,
#   bf16 and fp16: ragged N, Nq != Nk both ways, both causal diagonals, GQA) and the deterministic
#   mode's same-bits test at d = 256;
# sanitize: compute-sanitizer racecheck (then synccheck) on one ragged causal GQA shape,
#   bottom-right, plain and deterministic;
# grid: `iosim bench --direction bwd --schedule fa3 --peers torch` at d = 256, N = GRID_N
#   (default 4096..16384), batch = 16384/N, heads = 2048/256 = 8, causal both, bf16;
# ncu (run before the grid, at most 120 s): Nsight Compute's speed of light, memory workload
#   (L2 throughput, the L2 atomic unit's busy share), tensor pipe and warp stalls of the main
#   kernel at N = 8192, batch 2, 8 heads, not causal.
# Logs and CSVs go to $DIR/d256 (experiments/gpu_env.sh); the script stays under LIMIT seconds.
set -o pipefail
start=$(date +%s)
. experiments/gpu_env.sh fa3_bwd
DIR=$DIR/d256
mkdir -p "$DIR"
STEPS=${STEPS:-smoke,tests,sanitize,grid,ncu}
has() { [[ ,$STEPS, == *,$1,* ]]; }
left() { echo $(( ${LIMIT:-520} - ($(date +%s) - start) )); }
pt() {  # a point for iosim.gpu.once: seed batch heads kv_heads nq nk causal align det
  echo "{\"schedule\":\"fa3\",\"hw\":\"$HW\",\"seed\":$1,\"batch\":$2,\"heads\":$3,\"kv_heads\":$4,\"seqlen_q\":$5,\"seqlen_k\":$6,\"head_dim\":256,\"causal\":$7,\"causal_align\":\"$8\",\"direction\":\"bwd\",\"deterministic\":$9}"
}
if has smoke; then
  for det in false true; do
    timeout 90 python3 -m iosim.gpu.once "$(pt 1 1 4 2 1000 1100 true bottom-right $det)" \
      && echo "smoke deterministic=$det ok" || { echo "smoke deterministic=$det FAILED ($?)"; exit 1; }
  done 2>&1 | tee "$DIR/smoke.log" || exit 1
fi
if has tests; then
  # the fa3 cases with head_dim 256 (their ids are indices: picked by the case tuples)
  ids=$(python3 - <<'EOF'
import sys
sys.path.insert(0, "tests")
from test_gpu_backward import DET_CASES, FA3_CASES, CASES, FA1_CASES, FA1_SPLIT_CASES, FA2_CASES
first = 3 * len(CASES) + len(FA1_CASES) + len(FA1_SPLIT_CASES) + len(FA2_CASES)
ids = [f"tests/test_gpu_backward.py::test_backward_matches_reference[{dt}-fa3-case{first + i}]"
       for i, c in enumerate(FA3_CASES) if c[5] == 256 for dt in ("bf16", "fp16")]
ids += [f"tests/test_gpu_backward.py::test_fa3_deterministic_gives_the_same_bits_every_run[case{i}]"
        for i, c in enumerate(DET_CASES) if c[5] == 256]
print(" ".join(ids))
EOF
)
  timeout $(( $(left) / 2 )) python3 -m pytest -q -m gpu -p no:cacheprovider $ids -v 2>&1 \
    | grep -E "PASS|FAIL|ERROR|Error|assert|passed|failed" | tail -30 | tee "$DIR/gpu_tests.log"
  grep -q " failed\| error" "$DIR/gpu_tests.log" && { echo "tests failed: no timing"; exit 1; }
fi
if has sanitize; then
  for tool in racecheck synccheck; do
    for p in "$(pt 1 1 4 2 300 333 true bottom-right false)" "$(pt 2 1 4 2 300 333 true bottom-right true)"; do
      echo "== $tool $p"
      timeout 120 compute-sanitizer --tool $tool python3 -m iosim.gpu.once "$p" 2>&1 | tail -2
    done
  done | tee "$DIR/sanitize.log"
fi
if has ncu; then
  timeout $(( $(left) > 400 ? 120 : $(left) / 4 )) ncu --kernel-name fa3_bwd --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
    --metrics lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_op_red.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum \
    python3 -m iosim.gpu.once "$(pt 1 2 8 8 8192 8192 false top-left false)" > "$DIR/ncu_n8192.txt" 2>&1
  grep -E "Duration|Throughput|lts__|sm__pipe|Stall|Warp Cycles" "$DIR/ncu_n8192.txt" | head -24
fi
if has grid; then
  timeout $(( $(left) - 10 )) iosim bench --direction bwd --schedule fa3 --seqlen ${GRID_N:-4096..16384} \
    --head-dim 256 --causal both --dtype bf16 --peers torch -o "$DIR/measured_bwd.csv" \
    --resume --no-progress 2>&1 | tail -4
fi
echo "elapsed $(( $(date +%s) - start )) s"
