#!/usr/bin/env bash
# naive's forward kernels timed in their sequence (prefix.py) and queued launches of empty
# kernels (gap.py), into $DIR. On the GPU machine, from the repo root (<= 60 s with the install):
#   OUT=$OUT bash experiments/naive_fwd18/run.sh
set -o pipefail
. experiments/gpu_env.sh naive_fwd18
timeout 400 python3 experiments/naive_fwd18/prefix.py "$DIR/prefix.csv"
timeout 120 python3 experiments/naive_fwd18/gap.py "$DIR/gap.json"
