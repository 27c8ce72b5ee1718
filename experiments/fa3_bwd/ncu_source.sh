#!/usr/bin/env bash
# fa3_bwd's SASS with Nsight Compute's per-instruction stall samples (issue 21: which instruction
# the warps wait at), d = 128 (B = 2, H = 16, N = 8192, not causal). On the GPU machine, from the
# repo root, wheels in .whl/:   bash experiments/fa3_bwd/ncu_source.sh   ($DIR/ncu_source_d128.csv)
# Other shapes: D, B, H, N, CAUSAL (session 16: D=256 B=8 H=6 N=1000 CAUSAL=true, where the
# epilogue's dK/dV stores are a larger share: $DIR/ncu_source_d256_b8_h6_n1000_true.csv)
set -o pipefail
. experiments/gpu_env.sh fa3_bwd
d=${D:-128} b=${B:-2} h=${H:-16} n=${N:-8192} c=${CAUSAL:-false}
p="{\"schedule\":\"fa3\",\"hw\":\"$HW\",\"seed\":1,\"batch\":$b,\"heads\":$h,\"kv_heads\":$h,\"seqlen_q\":$n,\"seqlen_k\":$n,\"head_dim\":$d,\"causal\":$c,\"causal_align\":\"top-left\",\"direction\":\"bwd\"}"
tag=d$d; [ -n "$N$B$H$CAUSAL" ] && tag=d${d}_b${b}_h${h}_n${n}_$c
timeout 200 ncu --kernel-name fa3_bwd --launch-count 1 --clock-control none --section SourceCounters \
  --section WarpStateStats --page source --print-source sass --csv \
  python3 -m iosim.gpu.once "$p" > "$DIR/ncu_source_$tag.csv" 2> "$DIR/ncu_source_$tag.err"
wc -l "$DIR/ncu_source_$tag.csv"; head -c 600 "$DIR/ncu_source_$tag.csv"
