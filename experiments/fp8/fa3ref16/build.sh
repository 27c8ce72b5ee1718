#!/usr/bin/env bash
# Builds FlashAttention-3's Hopper FP8 forward (one instantiation per head dim and causality) into
# one shared library with fa3ref_host.cu's C entries, OUTSIDE the repository's tracked tree:
#   FA=<dir> CUTLASS=<dir> [PTXAS=<ptxas 12.8>] bash experiments/fp8/fa3ref16/build.sh [d128c0 d128c1 d256c0 d128c0v1 ...]
# (an instantiation: d<head dim>c<causal 0|1>, v1: V column-major, FA3's V_colmajor)
# Sources (nothing of them is committed to iosim; README.md beside this file):
#   Dao-AILab/flash-attention 0251105a2fb19d2957484b7f023cd8c115286ced, its folder hopper/ under $FA
#   NVIDIA/cutlass 7127592069c2fe01b041e174ba4345ef9b279671 (flash-attention's csrc/cutlass
#   submodule pin at that commit), include/ and tools/util/include/ under $CUTLASS
# e.g. git -C <flash-attention clone> archive 0251105a hopper | tar -x -C $FA
#      git -C <cutlass clone> archive 7127592 include tools/util/include | tar -x -C $CUTLASS
# Toolchain: this machine's nvcc 13.0 (build/nvcc13/); with PTXAS set (ptxas 12.8.93 from the
# PyPI wheel nvidia-cuda-nvcc-cu12==12.8.93, nvidia/cuda_nvcc/bin/ptxas), nvcc 13.0's front end
# with that ptxas (build/ptxas128/): FA3's release build pairs nvcc 12.6 with ptxas 12.8 ("ptxas
# 12.8 gives the best perf", hopper/setup.py). nvcc 13 writes PTX ISA 9.0, which ptxas 12.8 does
# not read: a wrapper relabels it 8.7 (the kernel uses nothing newer: ptxas accepts it).
# Output (git-ignored; carried to the GPU machine): build/<toolchain>/<inst>.o, libfa3ref.so,
# build.log (ptxas's resource usage), symbols.txt.
# Flags: torch's CUDAExtension defaults (--expt-relaxed-constexpr, the __CUDA_NO_HALF* defines),
# hopper/setup.py's nvcc_flags and its sm_90a gencode, one nvcc thread (2 cores here).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
: "${FA:?set FA to a flash-attention checkout (its hopper/ folder is used)}"
: "${CUTLASS:?set CUTLASS to a cutlass checkout}"
NVCC=nvcc
B=$HERE/build/nvcc13
if [ -n "${PTXAS:-}" ]; then
  B=$HERE/build/ptxas128
  TK=$HERE/build/toolkit128  # CUDA 13.0 as symlinks, with its own nvcc and a ptxas wrapper
  if [ ! -x "$TK/bin/ptxas" ]; then
    cuda=$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")  # the toolkit's own folder (bin/, nvvm/, include/)
    cp -as "$cuda" "$TK"
    rm "$TK/bin/nvcc" "$TK/bin/nvcc.profile" "$TK/bin/ptxas"
    cp "$cuda/bin/nvcc" "$cuda/bin/nvcc.profile" "$TK/bin/"  # nvcc finds ptxas beside itself
    cat > "$TK/bin/ptxas" <<WRAP
#!/usr/bin/env bash
args=()
for a in "\$@"; do
  if [[ "\$a" == *.ptx && -f "\$a" ]]; then
    t=\$(mktemp --suffix=.ptx); sed 's/^\\.version 9\\.[0-9]*/.version 8.7/' "\$a" > "\$t"; args+=("\$t")
  else args+=("\$a"); fi
done
echo "ptxas wrapper: $PTXAS" >&2
exec "$PTXAS" "\${args[@]}"
WRAP
    chmod +x "$TK/bin/ptxas"
  fi
  NVCC=$TK/bin/nvcc
fi
mkdir -p "$B"
insts=${*:-d128c0}
flags=(-O3 -std=c++17 --use_fast_math -lineinfo --resource-usage -Xcompiler -fPIC
       -gencode=arch=compute_90a,code=sm_90a
       -DCUTE_SM90_EXTENDED_MMA_SHAPES_ENABLED -DCUTLASS_ENABLE_GDC_FOR_SM90
       -DCUTLASS_DEBUG_TRACE_LEVEL=0 -DNDEBUG
       --expt-relaxed-constexpr -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__
       -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__
       -I"$FA/hopper" -I"$CUTLASS/include" -I"$CUTLASS/tools/util/include" --threads 1)
for inst in $insts; do
  [[ $inst =~ ^d([0-9]+)c([01])(v1)?$ ]] || { echo "error: $inst: want d<HDIM>c<0|1>[v1]" >&2; exit 2; }
  d=${BASH_REMATCH[1]}; c=${BASH_REMATCH[2]}; vcol=$([ -n "${BASH_REMATCH[3]}" ] && echo 1 || echo 0)
  [ -f "$B/$inst.o" ] && [ "$B/$inst.o" -nt "$HERE/fa3ref_host.cu" ] && continue
  echo "== $inst: $NVCC $(date -u +%T)" | tee -a "$B/build.log"
  /usr/bin/time -v "$NVCC" "${flags[@]}" -DHDIM="$d" -DCAUSAL="$c" -DVCOL="$vcol" -c "$HERE/fa3ref_host.cu" \
    -o "$B/$inst.o" 2>&1 | grep -v '^\s*$' | tee -a "$B/build.log" \
    | grep -E 'error|Elapsed|Maximum resident|registers|spill|wrapper' || true
  [ -f "$B/$inst.o" ] || { echo "error: $inst did not build ($B/build.log)" >&2; exit 1; }
done
# every instantiation built so far; the library holds one C entry each
"$NVCC" -shared -o "$B/libfa3ref.so" "$B"/d*c*.o
nm -D "$B/libfa3ref.so" | grep ' T fa3ref_' | tee "$B/symbols.txt"
