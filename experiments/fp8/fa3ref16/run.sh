#!/usr/bin/env bash
# FlashAttention-3's FP8 forward beside kernels/fa3.cu's on one H100, in one process (issue 24,
# session 16; README.md beside this file). Before the call, here: build.sh (both toolchains), so
# that build/nvcc13/libfa3ref.so and build/ptxas128/libfa3ref.so exist; then, on the GPU machine
# from the repo root, wheels in .whl/, carrying .whl and experiments/fp8/fa3ref16/build:
#   OUT=$OUT END=<start + 285> bash experiments/fp8/fa3ref16/run.sh                      (call c1)
#   OUT=$OUT END=<start + 285> SHAPES=d128c0,d64c0 NCU_POINTS=ours:4096:0,fa3:4096:0,ours:4096:1,fa3:4096:1 \
#     bash experiments/fp8/fa3ref16/run.sh                                            (call c2)
# (c1 ran fa3ref.py and fa3ref_host.cu at 0d914fd, whose C entries had no _v0 suffix and whose
# --ncu took no --points: d = 128, N = 8192, non-causal, every kernel)
# Steps (results in $OUT/<gpu>/, committed in experiments/fp8/fa3ref16/<gpu>/):
#   nvidia-smi every 100 ms in the background (smi.csv: SM and memory clock, power, temperature,
#   clock-event reasons) for the whole call; the power limits in gpu.txt
#   fa3ref.py: small-N errors (small.csv), each shape checked, ROUNDS interleaved rounds
#   (rounds.csv), 1 s of back-to-back launches a kernel (sustained.csv); SHAPES (d128c0,d128c1,d256c0)
#   fa3ref.py --ncu: NCU_POINTS (kernel:N:causal) at d = 128 under ncu (ncu.csv); the log of
#   both in fa3ref.log (8 files come back: gpu.txt smi.csv small.csv rounds.csv sustained.csv ncu.csv
#   fa3ref.log summary.txt)
#   fa3ref.py --summary -> summary.txt
# END (epoch seconds): no step runs past it.
set -o pipefail
. experiments/gpu_env.sh fp8/fa3ref16
D=$DIR
B=experiments/fp8/fa3ref16/build
lim() {  # a step's limit: $1, or less where END leaves less
  local left=$(( ${END:-9999999999} - $(date +%s) ))
  echo $(( left < $1 ? (left > 1 ? left : 1) : $1 ))
}
sha256sum kernels/fa3.cu kernels/fp8_quant.cu $B/*/libfa3ref.so 2>/dev/null | tee -a "$D/gpu.txt"
nvidia-smi --query-gpu=power.limit,enforced.power.limit,power.max_limit,clocks.max.sm,clocks.max.mem \
  --format=csv | tee -a "$D/gpu.txt"
q=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active
nvidia-smi --query-gpu=$q --format=csv,nounits >/dev/null 2>&1 || q=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu
nvidia-smi --query-gpu=$q --format=csv,nounits -lms 100 > "$D/smi.csv" &
SMI=$!
libs=fa3=$B/nvcc13/libfa3ref.so
[ -f $B/ptxas128/libfa3ref.so ] && libs=$libs,fa3p128=$B/ptxas128/libfa3ref.so
for l in ${libs//,/ }; do [ -f "${l#*=}" ] || { echo "error: ${l#*=} is missing: run build.sh first and carry $B" >&2; kill $SMI; exit 2; }; done
timeout "$(lim ${MAIN_LIMIT:-200})" python3 experiments/fp8/fa3ref16/fa3ref.py "$D" --libs "$libs" \
  --shapes "${SHAPES:-d128c0,d128c1,d256c0}" --rounds "${ROUNDS:-5}" 2>&1 | grep -v Warning | tee "$D/fa3ref.log"
if [ "${NCU:-1}" = 1 ]; then
  timeout "$(lim ${NCU_LIMIT:-120})" python3 experiments/fp8/fa3ref16/fa3ref.py --ncu "$D" --libs "$libs" \
    --points "${NCU_POINTS:-ours:8192:0,fa3:8192:0,fa3p128:8192:0}" 2>&1 \
    | tee -a "$D/fa3ref.log"
fi
kill $SMI
python3 experiments/fp8/fa3ref16/fa3ref.py --summary "$D" > "$D/summary.txt" 2>&1
cat "$D/summary.txt"
