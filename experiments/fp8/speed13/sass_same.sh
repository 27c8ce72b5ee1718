#!/usr/bin/env bash
# Which kernels the speed13 timings stand for: this tree's kernels/fa3.cu at PERSISTENT=0 beside
# the session-12 kernel (fa3_s12.cu, main's at 2bbaea6: the `s12` variants) and at PERSISTENT=1
# beside f6e1806's fa3.cu (e58de19 before the rebase onto f80ab87; kernels/ unchanged by it) (round2's `base` at d = 256 and `pers`), each pair built with nvcc at
# the Plan's fp8 tiles (and bf16, causal fp8 for PERSISTENT=0), their SASS compared (cuobjdump,
# instruction words stripped). Runs here, no GPU:
#   CUOBJDUMP=/path/to/cuobjdump bash experiments/fp8/speed13/sass_same.sh | tee experiments/fp8/speed13/sass_same.log
set -eo pipefail
CUOBJDUMP=${CUOBJDUMP:-cuobjdump}
T=$(mktemp -d)
git show f6e1806:kernels/fa3.cu > "$T/fa3_f6e1806.cu"
git show 2bbaea6:kernels/fa3.cu > "$T/fa3_s12.cu"  # the session-12 kernel
build() {  # SRC D BN LAZY PERSIST CAUSAL FP8 OUT
  local bm=128 w=8 pp=1
  [ "$2" = 64 ] && { bm=192; w=12; pp=0; }
  nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Ikernels -DELEM_BF16=1 -DHEAD_DIM=$2 \
    -DBLOCK_M=$bm -DBLOCK_N=$3 -DNUM_WARPS=$w -DSTAGES=2 -DIS_CAUSAL=$6 -DCAUSAL_BOTTOM_RIGHT=0 \
    -DPINGPONG=$pp -DFP8_E4M3=$7 -DWINDOW=-1 -DLAZY_RESCALE=$4 -DPERSISTENT=$5 "$1" -o "$8" 2>/dev/null
}
sass() { "$CUOBJDUMP" -sass "$1" | grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed -E 's/\/\* 0x[0-9a-f]+ \*\///'; }
compare() {  # NAME REF D BN LAZY PERSIST CAUSAL FP8
  build kernels/fa3.cu "$3" "$4" "$5" "$6" "$7" "$8" "$T/a.cubin"
  build "$2" "$3" "$4" "$5" "$6" "$7" "$8" "$T/b.cubin"
  echo "$1: $(diff <(sass "$T/a.cubin") <(sass "$T/b.cubin") | grep -c '^[<>]' || true) differing of $(sass "$T/a.cubin" | wc -l) instructions"
}
# (d, key tile, lazy): the Plan's fp8 forward tiles
for cfg in "256 128 1" "128 192 0" "64 128 0"; do
  set -- $cfg
  compare "fp8 d=$1 PERSISTENT=0 vs fa3_s12.cu" "$T/fa3_s12.cu" "$1" "$2" "$3" 0 0 1
  compare "fp8 d=$1 PERSISTENT=1 vs f6e1806" "$T/fa3_f6e1806.cu" "$1" "$2" "$3" 1 0 1
  compare "fp8 causal d=$1 vs fa3_s12.cu" "$T/fa3_s12.cu" "$1" 128 "$3" 0 1 1
done
compare "bf16 d=128 vs fa3_s12.cu" "$T/fa3_s12.cu" 128 128 0 0 0 0
compare "bf16 d=256 vs fa3_s12.cu" "$T/fa3_s12.cu" 256 80 0 0 0 0
rm -rf "$T"
