#!/usr/bin/env bash
# kernels/fa3.cu on a Hopper GPU in one call: SASS counts, correctness (benchmarks/fa3_check.py, then the
# GPU tests' fa3 cases; TILES=1 also times tile variants), and only if both pass the bench grid of
# fa2 and fa3 beside torch's SDPA backends. On the GPU machine, from the repo root, with the wheels in .whl/ (see README):
#   bash benchmarks/fa3_gpu.sh       (logs and measured_fa3.csv under $OUT; RESUME=1 continues
#                                     reports/data/<gpu>/measured_fa3.csv)
set -o pipefail
. benchmarks/gpu_env.sh
out=${OUT:-/tmp/out}; mkdir -p "$out"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -qi h200 && echo h200 || echo h100)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm --format=csv | tee "$out/gpu.txt"
if [ -n "$RESUME" ] && [ -f reports/data/$gpu/measured_fa3.csv ]; then cp reports/data/$gpu/measured_fa3.csv "$out/"; fi
python3 benchmarks/fa3_check.py --sass ${TILES:+--tiles} 2>&1 | tee "$out/fa3_check.log" || { echo "fa3_check failed: not timed"; exit 1; }
python3 -m pytest -q -m gpu tests/test_gpu_kernels.py -k "fa3" 2>&1 | tail -8 | tee "$out/gpu_tests.log" \
  || { echo "GPU tests failed: not timed"; exit 1; }
timeout "${BENCH_LIMIT:-420}" python3 -c "from iosim.cli import main; main()" bench \
  --schedule fa2,fa3 --seqlen "${SEQLEN:-512..16384}" --head-dim 64,128,256 --causal both \
  --dtype bf16 --peers torch -o "$out/measured_fa3.csv" --resume 2>&1 | tr '\r' '\n' | tail -3
python3 tools/fa3_ratios.py "$out/measured_fa3.csv" 2>&1 | tee "$out/fa3_ratios.txt"
