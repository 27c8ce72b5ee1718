#!/usr/bin/env bash
# The committed H100 measurements: GPU tests, then the full bench grid beside torch's SDPA.
# Run on the GPU machine from the repo root with the wheels in .whl/ (see README).
set -o pipefail
. benchmarks/gpu_env.sh
out=${OUT:-/tmp/out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm --format=csv | tee "$out/gpu.txt"
python3 -m pytest -q -m gpu tests/test_gpu_kernels.py 2>&1 | tail -15 | tee "$out/gpu_tests.log"
iosim bench --schedule naive,fa1,fa2 --seqlen 512..16384 --head-dim 64,128,256 --causal both \
  --dtype bf16 --peers torch -o "$out/measured.csv" ${RESUME:+--resume} 2>&1 | tail -5
