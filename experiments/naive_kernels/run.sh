#!/usr/bin/env bash
# Standard attention kernel by kernel at the GPU's own clocks (experiments/naive_kernels/naive_kernels.py),
# then the same points timed by the bench (queued) for the whole-plan time beside them.
# On the GPU machine, from the repo root, with the wheels in .whl/:
#   bash experiments/naive_kernels/run.sh
set -o pipefail
. experiments/gpu_env.sh naive_kernels
timeout ${NLIMIT:-300} python3 experiments/naive_kernels/naive_kernels.py "$DIR/naive_kernels.csv"
