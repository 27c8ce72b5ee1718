#!/usr/bin/env bash
# Where fa3_bwd's warps wait (issue 21): Nsight Compute on the main kernel at d = 64 and 128
# (B = 2, H = 16, N = 8192, not causal; clocks not locked), with the stall reasons per issued
# instruction, the pipes (ComputeWorkloadAnalysis), the LSU pipe, L2 reduction sectors and the
# top stall locations (SourceCounters). On the GPU machine, from the repo root, wheels in .whl/:
#   bash experiments/fa3_bwd/ncu_stalls.sh      (writes $DIR/ncu_stalls_d{64,128}.txt)
set -o pipefail
. experiments/gpu_env.sh fa3_bwd
for d in ${DIMS:-128 64}; do
  p="{\"schedule\":\"fa3\",\"hw\":\"$HW\",\"seed\":1,\"batch\":2,\"heads\":16,\"kv_heads\":16,\"seqlen_q\":8192,\"seqlen_k\":8192,\"head_dim\":$d,\"causal\":false,\"causal_align\":\"top-left\",\"direction\":\"bwd\"}"
  timeout 150 ncu --kernel-name fa3_bwd --launch-count 1 --clock-control none \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active,lts__t_sectors_op_red.sum,lts__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,gpu__time_duration.sum" \
    python3 -m iosim.gpu.once "$p" > "$DIR/ncu_stalls_d$d.txt" 2>&1
  echo "== d=$d"; grep -E "stalled|gmma|duration|lsu|red.sum|Duration" "$DIR/ncu_stalls_d$d.txt" | sort -k3 -n -r | head -40
done
