#!/bin/bash
# The whole mutation check on the GPU machine's 16 cores (its CPU only; gpu tests deselected):
# 15 mutations at a time, each run stopped at its first failing test (--first: `by` names one
# killer per mutation), inside the 10-minute limit of one call. From the repo root:
#   OUT=$OUT bash experiments/mutation_check/device.sh   (writes $OUT/h100/mutation_check.{json,log})
set -o pipefail
. experiments/gpu_env.sh mutation_check
nproc > "$DIR/nproc.txt"
timeout 570 python3 experiments/mutation_check/mutation_check.py --first --jobs "$(( $(nproc) - 1 ))" \
  --out "$DIR/mutation_check.json" 2>&1 | tee "$DIR/mutation_check.log"
