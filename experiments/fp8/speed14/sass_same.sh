#!/usr/bin/env bash
# Whether this tree's kernels/fa3.cu compiles to main's fa3.cu at 8eded77 (before session 14),
# instruction for instruction. sass_same.log is its run at commit b753c47 (round r2's `base`
# kernel: bf16 unchanged, fp8 changed); after r2 kernels/fa3.cu went back to 8eded77's file byte
# for byte (`git show 8eded77:kernels/fa3.cu | cmp - <(git show 0f3957d:kernels/fa3.cu)`: fp8d14's merge, before fp8f14's PV_WAIT_TOP). Builds: the fp8 forward at the Plan's tiles
# of session 13 (one-tile and persistent grids, causal) and bf16 at d = 64, 128, 256; each pair
# built with nvcc, SASS compared (cuobjdump, instruction words stripped). Runs here, no GPU:
#   CUOBJDUMP=/path/to/cuobjdump bash experiments/fp8/speed14/sass_same.sh | tee experiments/fp8/speed14/sass_same.log
set -eo pipefail
CUOBJDUMP=${CUOBJDUMP:-cuobjdump}
T=$(mktemp -d)
git show 8eded77:kernels/fa3.cu > "$T/fa3_8eded77.cu"
build() {  # SRC D BN LAZY PERSIST CAUSAL FP8 OUT
  local bm=128 w=8 pp=1
  [ "$2" = 64 ] && { bm=192; w=12; pp=0; }
  nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Ikernels -DELEM_BF16=1 -DHEAD_DIM=$2 \
    -DBLOCK_M=$bm -DBLOCK_N=$3 -DNUM_WARPS=$w -DSTAGES=2 -DIS_CAUSAL=$6 -DCAUSAL_BOTTOM_RIGHT=0 \
    -DPINGPONG=$pp -DFP8_E4M3=$7 -DWINDOW=-1 -DLAZY_RESCALE=$4 -DPERSISTENT=$5 "$1" -o "$8" 2>/dev/null
}
sass() { "$CUOBJDUMP" -sass "$1" | grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed -E 's/\/\* 0x[0-9a-f]+ \*\///'; }
compare() {  # NAME D BN LAZY PERSIST CAUSAL FP8
  build kernels/fa3.cu "$2" "$3" "$4" "$5" "$6" "$7" "$T/a.cubin"
  build "$T/fa3_8eded77.cu" "$2" "$3" "$4" "$5" "$6" "$7" "$T/b.cubin"
  echo "$1: $(diff <(sass "$T/a.cubin") <(sass "$T/b.cubin") | grep -c '^[<>]' || true) differing of $(sass "$T/a.cubin" | wc -l) instructions"
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
