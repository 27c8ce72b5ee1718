#!/usr/bin/env bash
# Tiny kernels under Nsight Compute: what each kernel lasts beyond its busiest SM's active time
# and what its warps wait on at their start and end (ncu16.py), into $DIR/ncu16/. On the GPU
# machine, from the repo root, with the wheels in .whl/ (<= 200 s with the wheels' install):
#   OUT=$OUT LIMIT=180 bash experiments/small_fwd16/ncu.sh
set -o pipefail
. experiments/gpu_env.sh small_fwd16
mkdir -p "$DIR/ncu16"
cp "$DIR/gpu.txt" "$DIR/ncu16/gpu.txt"
timeout ${LIMIT:-180} python3 experiments/small_fwd16/ncu16.py "$DIR/ncu16" 2>&1 | tee "$DIR/ncu16/run.log"
python3 experiments/small_fwd16/ncu16.py --summary "$DIR/ncu16/ncu16.csv" > "$DIR/ncu16/summary.txt" 2>&1 || true
