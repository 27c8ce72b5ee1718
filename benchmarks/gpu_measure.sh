#!/usr/bin/env bash
# The committed H100 measurements: GPU tests, then the full bench grid beside torch's SDPA.
# On the GPU machine, from the repo root, with the wheels in .whl/ (see README):
#   bash benchmarks/gpu_measure.sh            (RESUME=1 continues reports/data/<gpu>/measured.csv)
set -o pipefail
. benchmarks/gpu_env.sh
out=${OUT:-/tmp/out}; mkdir -p "$out"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -qi h200 && echo h200 || echo h100)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm --format=csv | tee "$out/gpu.txt"
if [ -n "$RESUME" ] && [ -f reports/data/$gpu/measured.csv ]; then cp reports/data/$gpu/measured.csv "$out/"; fi
if [ -z "$SKIP_TESTS" ]; then
  python3 -m pytest -q -m gpu tests/test_gpu_kernels.py 2>&1 | tail -15 | tee "$out/gpu_tests.log"
fi
timeout "${BENCH_LIMIT:-540}" python3 -c "from iosim.cli import main; main()" bench \
  --schedule naive,fa1,fa2 --seqlen 512..16384 --head-dim 64,128,256 --causal both \
  --dtype bf16 --peers torch -o "$out/measured.csv" --resume 2>&1 | tr '\r' '\n' | tail -4
