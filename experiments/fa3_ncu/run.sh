#!/usr/bin/env bash
# FlashAttention-3's forward under `ncu --clock-control none`, point by point, each launch
# checked on NaN-poisoned fresh data (experiments/fa3_ncu/fa3_ncu.py); then the report.
# On the GPU machine, from the repo root, with the wheels in .whl/:
#   bash experiments/fa3_ncu/run.sh
set -o pipefail
. experiments/gpu_env.sh fa3_ncu
timeout ${NLIMIT:-270} python3 experiments/fa3_ncu/fa3_ncu.py "$DIR/fa3_ncu.csv"
