#!/usr/bin/env bash
# fa3_bwd's SASS with Nsight Compute's per-instruction stall samples (issue 21: which instruction
# the warps wait at), d = 128 (B = 2, H = 16, N = 8192, not causal). On the GPU machine, from the
# repo root, wheels in .whl/:   bash experiments/fa3_bwd/ncu_source.sh   ($DIR/ncu_source_d128.csv)
set -o pipefail
. experiments/gpu_env.sh fa3_bwd
d=${D:-128}
p="{\"schedule\":\"fa3\",\"hw\":\"$HW\",\"seed\":1,\"batch\":2,\"heads\":16,\"kv_heads\":16,\"seqlen_q\":8192,\"seqlen_k\":8192,\"head_dim\":$d,\"causal\":false,\"causal_align\":\"top-left\",\"direction\":\"bwd\"}"
timeout 200 ncu --kernel-name fa3_bwd --launch-count 1 --clock-control none --section SourceCounters \
  --section WarpStateStats --page source --print-source sass --csv \
  python3 -m iosim.gpu.once "$p" > "$DIR/ncu_source_d$d.csv" 2> "$DIR/ncu_source_d$d.err"
wc -l "$DIR/ncu_source_d$d.csv"; head -c 600 "$DIR/ncu_source_d$d.csv"
