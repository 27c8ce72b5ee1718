#!/usr/bin/env bash
# Mid-size naive and fa1 forward kernels under Nsight Compute (ncu17.py), into $DIR/ncu17/. On
# the GPU machine, from the repo root, with the wheels in .whl/ (<= 240 s with the install):
#   OUT=$OUT LIMIT=200 bash experiments/mid_fwd17/ncu.sh
set -o pipefail
. experiments/gpu_env.sh mid_fwd17
mkdir -p "$DIR/ncu17"
cp "$DIR/gpu.txt" "$DIR/ncu17/gpu.txt"
timeout ${LIMIT:-200} python3 experiments/mid_fwd17/ncu17.py "$DIR/ncu17" 2>&1 | tee "$DIR/ncu17/run.log"
python3 experiments/mid_fwd17/ncu17.py --summary "$DIR/ncu17/ncu17.csv" > "$DIR/ncu17/summary.txt" 2>&1 || true
