#!/usr/bin/env bash
# fa1's backward under Nsight Compute: instruction classes (per opcode) and DRAM/L2 bytes at two
# one-wave points and a multi-wave one (sass13.py), into $DIR/sass13/.
# On the GPU machine, from the repo root, with the wheels in .whl/:
#   bash experiments/ncu_mechanism/sass13.sh
set -o pipefail
. experiments/gpu_env.sh ncu_mechanism
mkdir -p "$DIR/sass13"
cp "$DIR/gpu.txt" "$DIR/sass13/gpu.txt"
timeout 200 python3 experiments/ncu_mechanism/sass13.py "$DIR/sass13"
