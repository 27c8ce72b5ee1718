#!/usr/bin/env bash
# Registers and local memory (spills) of every sm_90a kernel the Plans launch, as the run-time
# NVRTC build makes them. On the GPU machine, from the repo root, with the wheels in .whl/:
#   bash experiments/nvrtc_resources/run.sh [REGEX]     (REGEX filters on the entry name)
set -o pipefail
. experiments/gpu_env.sh nvrtc_resources
python3 experiments/nvrtc_resources/nvrtc_resources.py "$DIR/nvrtc_resources.csv" ${1:+"$1"}
