#!/usr/bin/env bash
# Whether fa3.cu at 4b5851f (the kernel calls c1 and c2 ran, from git: RESCALE_TOP and
# KV_WAIT_FIRST are no longer in kernels/fa3.cu) with RESCALE_TOP=0 and KV_WAIT_FIRST=0 (the
# defines' defaults) compiles to main's fa3.cu at bc80697 (before them), instruction for instruction:
# the fp8 forward at the Plan's tiles and switches (d = 128: PV_WAIT_TOP=1; d = 256: lazy
# rescale; one-tile and persistent grids, causal) and bf16 at d = 64, 128, 256; each pair built
# with nvcc, SASS compared (cuobjdump, instruction words stripped). Then the variants of
# experiments/fp8/speed15/variants.py (ptxas's spill line, speed14c/depbar_check.py's counts,
# speed15/turn_check.py's: what lies inside a warpgroup's turn).
# Runs here, no GPU:
#   PATH=/path/to/nvdisasm/dir:$PATH CUOBJDUMP=/path/to/cuobjdump bash experiments/fp8/speed15/sass_same.sh | tee experiments/fp8/speed15/sass_same.log
set -eo pipefail
CUOBJDUMP=${CUOBJDUMP:-cuobjdump}
T=$(mktemp -d)
git show bc80697:kernels/fa3.cu > "$T/fa3_bc80697.cu"
A="$T/fa3_4b5851f.cu"
git show 4b5851f:kernels/fa3.cu > "$A"
build() {  # SRC D BN LAZY PERSIST CAUSAL FP8 OUT [extra]
  local bm=128 w=8 pp=1
  [ "$2" = 64 ] && { bm=192; w=12; pp=0; }
  nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v -Ikernels -DELEM_BF16=1 -DHEAD_DIM=$2 \
    -DBLOCK_M=$bm -DBLOCK_N=$3 -DNUM_WARPS=$w -DSTAGES=2 -DIS_CAUSAL=$6 -DCAUSAL_BOTTOM_RIGHT=0 \
    -DPINGPONG=$pp -DFP8_E4M3=$7 -DWINDOW=-1 -DLAZY_RESCALE=$4 -DPERSISTENT=$5 ${9:-} "$1" -o "$8" 2>&1 \
    | grep -o '[0-9]* bytes spill stores' || true
}
sass() { "$CUOBJDUMP" -sass "$1" | grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed -E 's/\/\* 0x[0-9a-f]+ \*\///'; }
compare() {  # NAME D BN LAZY PERSIST CAUSAL FP8 [extra]
  build "$A" "$2" "$3" "$4" "$5" "$6" "$7" "$T/a.cubin" "${8:-}" > /dev/null
  build "$T/fa3_bc80697.cu" "$2" "$3" "$4" "$5" "$6" "$7" "$T/b.cubin" "${8:-}" > /dev/null
  echo "$1: $(diff <(sass "$T/a.cubin") <(sass "$T/b.cubin") | grep -c '^[<>]' || true) differing of $(sass "$T/a.cubin" | wc -l) instructions"
}
variant() {  # NAME D BN LAZY PERSIST CAUSAL EXTRA
  local sp; sp=$(build "$A" "$2" "$3" "$4" "$5" "$6" 1 "$T/c.cubin" "$7")
  echo "$1 ($sp): $(python3 experiments/fp8/speed14c/depbar_check.py "$T/c.cubin")"
  echo "  $(python3 experiments/fp8/speed15/turn_check.py "$T/c.cubin")"
}
compare "fp8 d=128 PV_WAIT_TOP=1" 128 192 0 0 0 1 -DPV_WAIT_TOP=1
compare "fp8 d=128 PV_WAIT_TOP=0" 128 192 0 0 0 1
compare "fp8 causal d=128 PV_WAIT_TOP=1" 128 128 0 0 1 1 -DPV_WAIT_TOP=1
compare "fp8 d=256 PERSISTENT=1" 256 128 1 1 0 1
compare "fp8 d=256 PERSISTENT=0" 256 128 1 0 0 1
compare "fp8 d=64" 64 128 0 0 0 1
compare "bf16 d=64" 64 128 0 0 0 0
compare "bf16 d=128" 128 128 0 0 0 0
compare "bf16 d=256" 256 80 0 0 0 0
variant "d=128 base (PV_WAIT_TOP=1)" 128 192 0 0 0 "-DPV_WAIT_TOP=1"
variant "d=128 rtop" 128 192 0 0 0 "-DPV_WAIT_TOP=1 -DRESCALE_TOP=1"
variant "d=128 w0" 128 192 0 0 0 "-DPV_WAIT_TOP=1 -DKV_WAIT_FIRST=1"
variant "d=128 rtop_w0" 128 192 0 0 0 "-DPV_WAIT_TOP=1 -DRESCALE_TOP=1 -DKV_WAIT_FIRST=1"
variant "d=128 causal rtop_w0" 128 128 0 0 1 "-DPV_WAIT_TOP=1 -DRESCALE_TOP=1 -DKV_WAIT_FIRST=1"
variant "d=256 base (PERSISTENT, lazy)" 256 128 1 1 0 ""
variant "d=256 top_rtop" 256 128 1 1 0 "-DPV_WAIT_TOP=1 -DRESCALE_TOP=1"
variant "d=256 w0" 256 128 1 1 0 "-DKV_WAIT_FIRST=1"
variant "d=256 top_rtop_w0" 256 128 1 1 0 "-DPV_WAIT_TOP=1 -DRESCALE_TOP=1 -DKV_WAIT_FIRST=1"
rm -rf "$T"
