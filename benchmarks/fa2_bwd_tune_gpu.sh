#!/usr/bin/env bash
# The fa2 backward sweep on the GPU machine, from the repo root, with the wheels in .whl/:
#   bash benchmarks/fa2_bwd_tune_gpu.sh SET      (SET of benchmarks/fa2_bwd_tune.py)
# 1. the sweep (CSV and log to $OUT), 2. with TESTS=1: `SKIP_GRID=1 bash benchmarks/bwd_gpu.sh`
# (every backward GPU test and racecheck shape; the dev/fa2_bwd logs of commits up to 2cecb82
# came from this script's own fa2-only list: `git show 2cecb82:benchmarks/fa2_bwd_tune_gpu.sh`).
set -o pipefail
. benchmarks/gpu_env.sh
out=${OUT:-/tmp/out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu_$1.txt"
python3 benchmarks/fa2_bwd_tune.py "$1" "$out/tune_$1.csv" 2>&1 | tee "$out/tune_$1.log"
# every backward GPU test and racecheck shape: benchmarks/bwd_gpu.sh's, not a copy of them
if [ -n "$TESTS" ]; then OUT="$out" SKIP_GRID=1 bash benchmarks/bwd_gpu.sh; fi
