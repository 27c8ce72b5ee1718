#!/usr/bin/env bash
# Whether fa3.cu at 40e79ec (the kernel call c1 ran, from git: EXP2_H2 is no longer in
# kernels/fa3.cu) with EXP2_H2=0 (the default) compiles to main's fa3.cu at
# 734a4eb (before it), instruction for instruction, at the Plan's configurations (fp8 d = 128
# PV_WAIT_TOP, causal; d = 256 lazy rescale, persistent and one-tile; d = 64; bf16 d = 64, 128,
# 256); then each EXP2_H2 variant of variants.py / accuracy_h2.py: ptxas's spill line, whether it
# warns C7511 (wgmmas serialised), and the SASS count of the exponential's opcodes.
# Runs here, no GPU:
#   PATH=/path/to/nvdisasm/dir:$PATH CUOBJDUMP=/path/to/cuobjdump bash experiments/fp8/speed15h/sass_same.sh | tee experiments/fp8/speed15h/sass_same.log
set -eo pipefail
CUOBJDUMP=${CUOBJDUMP:-cuobjdump}
T=$(mktemp -d)
git show 734a4eb:kernels/fa3.cu > "$T/fa3_734a4eb.cu"
A="$T/fa3_40e79ec.cu"
git show 40e79ec:kernels/fa3.cu > "$A"
build() {  # SRC D BN LAZY PERSIST CAUSAL FP8 OUT [extra]
  local bm=128 w=8 pp=1
  [ "$2" = 64 ] && { bm=192; w=12; pp=0; }
  nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -cubin -Xptxas -v -Ikernels -DELEM_BF16=1 -DHEAD_DIM=$2 \
    -DBLOCK_M=$bm -DBLOCK_N=$3 -DNUM_WARPS=$w -DSTAGES=2 -DIS_CAUSAL=$6 -DCAUSAL_BOTTOM_RIGHT=0 \
    -DPINGPONG=$pp -DFP8_E4M3=$7 -DWINDOW=-1 -DLAZY_RESCALE=$4 -DPERSISTENT=$5 ${9:-} "$1" -o "$8" 2>&1 \
    | grep -oE '[0-9]* bytes spill stores|C7511' | sort -u | paste -sd, || true
}
sass() { "$CUOBJDUMP" -sass "$1" | grep -E '^\s+/\*[0-9a-f]{4}\*/' | sed -E 's/\/\* 0x[0-9a-f]+ \*\///'; }
compare() {  # NAME D BN LAZY PERSIST CAUSAL FP8 [extra]
  build "$A" "$2" "$3" "$4" "$5" "$6" "$7" "$T/a.cubin" "${8:-}" > /dev/null
  build "$T/fa3_734a4eb.cu" "$2" "$3" "$4" "$5" "$6" "$7" "$T/b.cubin" "${8:-}" > /dev/null
  echo "$1: $(diff <(sass "$T/a.cubin") <(sass "$T/b.cubin") | grep -c '^[<>]' || true) differing of $(sass "$T/a.cubin" | wc -l) instructions"
}
variant() {  # NAME D BN LAZY PERSIST CAUSAL EXTRA
  local sp; sp=$(build "$A" "$2" "$3" "$4" "$5" "$6" 1 "$T/c.cubin" "$7")
  echo "$1 ($sp): $(sass "$T/c.cubin" | wc -l) instructions; $(sass "$T/c.cubin" | awk '{print $2}' \
    | grep -E '^(MUFU.EX2|HFMA2|HADD2|HMUL2|HMNMX2|F2FP)' | sort | uniq -c | awk '{printf "%s %s, ", $2, $1}')"
}
compare "fp8 d=128 PV_WAIT_TOP=1" 128 192 0 0 0 1 -DPV_WAIT_TOP=1
compare "fp8 causal d=128 PV_WAIT_TOP=1" 128 128 0 0 1 1 -DPV_WAIT_TOP=1
compare "fp8 d=256 PERSISTENT=1" 256 128 1 1 0 1
compare "fp8 d=256 PERSISTENT=0" 256 128 1 0 0 1
compare "fp8 causal d=256" 256 128 1 0 1 1
compare "fp8 d=64" 64 128 0 0 0 1
compare "fp8 causal d=64" 64 128 0 0 1 1
compare "bf16 d=64" 64 128 0 0 0 0
compare "bf16 d=128" 128 128 0 0 0 0
compare "bf16 d=256" 256 80 0 0 0 0
variant "d=128 base" 128 192 0 0 0 "-DPV_WAIT_TOP=1"
for k in "1" "2" "2 -DEXP2_H2_F32SUM=1" "2 -DEXP2_H2_MUFU=1" "4 -DEXP2_H2_MUFU=1"; do
  variant "d=128 EXP2_H2=$k" 128 192 0 0 0 "-DPV_WAIT_TOP=1 -DEXP2_H2=$k"
done
for k in 1 2; do variant "d=128 causal EXP2_H2=$k" 128 128 0 0 1 "-DPV_WAIT_TOP=1 -DEXP2_H2=$k"; done
variant "d=64 base" 64 128 0 0 0 ""
for k in "1" "2" "2 -DEXP2_H2_F32SUM=1"; do variant "d=64 EXP2_H2=$k" 64 128 0 0 0 "-DEXP2_H2=$k"; done
for k in 1 2; do variant "d=64 causal EXP2_H2=$k" 64 128 0 0 1 "-DEXP2_H2=$k"; done
variant "d=256 base (PERSISTENT, lazy)" 256 128 1 1 0 ""
for k in 1 2; do variant "d=256 PERSISTENT=1 EXP2_H2=$k" 256 128 1 1 0 "-DEXP2_H2=$k"; done
for k in 1 2; do variant "d=256 PERSISTENT=0 EXP2_H2=$k" 256 128 1 0 0 "-DEXP2_H2=$k"; done
variant "d=256 causal EXP2_H2=1" 256 128 1 0 1 "-DEXP2_H2=1"
rm -rf "$T"
