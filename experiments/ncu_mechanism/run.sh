#!/usr/bin/env bash
# What binds the kernels: Nsight Compute's speed-of-light, pipe, issue and stall sections for the
# forward points, then the backward ones (experiments/ncu_mechanism/ncu_mechanism.py).
# On the GPU machine, from the repo root, with the wheels in .whl/:
#   bash experiments/ncu_mechanism/run.sh [fwd|bwd]     (both when not given)
set -o pipefail
. experiments/gpu_env.sh ncu_mechanism
for dir in ${1:-fwd bwd}; do
  f=$DIR/ncu_mechanism$([ "$dir" = bwd ] && echo _bwd).csv
  python3 experiments/ncu_mechanism/ncu_mechanism.py "$f" "$dir"
  python3 tools/ncu_summary.py "$f" --hw "$GPU"
done
