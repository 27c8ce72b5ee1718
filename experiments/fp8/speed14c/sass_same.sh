#!/usr/bin/env bash
# Whether this tree's kernels/fa3.cu with PV_WAIT_TOP=0 (the define's default) compiles to main's
# fa3.cu at 0bd94f1 (before PV_WAIT_TOP), instruction for instruction: the fp8 forward at the
# Plan's tiles (one-tile and persistent grids, causal) and bf16 at d = 64, 128, 256; each pair
# built with nvcc, SASS compared (cuobjdump, instruction words stripped). Then, for the fp8
# builds with PV_WAIT_TOP=1, depbar_check.py (the exponentials between the P V issue and its
# wait) and the ptxas spill line. Runs here, no GPU:
#   CUOBJDUMP=/path/to/cuobjdump bash experiments/fp8/speed14c/sass_same.sh | tee experiments/fp8/speed14c/sass_same.log
set -eo pipefail
CUOBJDUMP=${CUOBJDUMP:-cuobjdump}
T=$(mktemp -d)
git show 0bd94f1:kernels/fa3.cu > "$T/fa3_0bd94f1.cu"
build() {  # SRC D BN LAZY PERSIST CAUSAL FP8 OUT [extra]
  local bm=128 w=8 pp=1
  [ "$2" = 64 ] && { bm=192; w=12; pp=0; }
  nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v -Ikernels -DELEM_BF16=1 -DHEAD_DIM=$2 \
    -DBLOCK_M=$bm -DBLOCK_N=$3 -DNUM_WARPS=$w -DSTAGES=2 -DIS_CAUSAL=$6 -DCAUSAL_BOTTOM_RIGHT=0 \
    -DPINGPONG=$pp -DFP8_E4M3=$7 -DWINDOW=-1 -DLAZY_RESCALE=$4 -DPERSISTENT=$5 ${9:-} "$1" -o "$8" 2>&1 \
    | grep -o '[0-9]* bytes spill stores' || true
}
sass() { "$CUOBJDUMP" -sass "$1" | grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed -E 's/\/\* 0x[0-9a-f]+ \*\///'; }
compare() {  # NAME D BN LAZY PERSIST CAUSAL FP8
  build kernels/fa3.cu "$2" "$3" "$4" "$5" "$6" "$7" "$T/a.cubin" > /dev/null
  build "$T/fa3_0bd94f1.cu" "$2" "$3" "$4" "$5" "$6" "$7" "$T/b.cubin" > /dev/null
  echo "$1: $(diff <(sass "$T/a.cubin") <(sass "$T/b.cubin") | grep -c '^[<>]' || true) differing of $(sass "$T/a.cubin" | wc -l) instructions"
  if [ "$7" = 1 ]; then
    echo "  0bd94f1: $(python3 experiments/fp8/speed14c/depbar_check.py "$T/b.cubin")"
    local sp; sp=$(build kernels/fa3.cu "$2" "$3" "$4" "$5" "$6" "$7" "$T/c.cubin" -DPV_WAIT_TOP=1)
    echo "  PV_WAIT_TOP=1 ($sp): $(python3 experiments/fp8/speed14c/depbar_check.py "$T/c.cubin")"
  fi
}
for cfg in "256 128 1" "128 192 0" "64 128 0"; do
  set -- $cfg
  compare "fp8 d=$1 PERSISTENT=0" "$1" "$2" "$3" 0 0 1
  compare "fp8 d=$1 PERSISTENT=1" "$1" "$2" "$3" 1 0 1
  compare "fp8 causal d=$1" "$1" 128 "$3" 0 1 1
done
compare "bf16 d=64" 64 128 0 0 0 0
compare "bf16 d=128" 128 128 0 0 0 0
compare "bf16 d=256" 256 80 0 0 0 0
rm -rf "$T"
