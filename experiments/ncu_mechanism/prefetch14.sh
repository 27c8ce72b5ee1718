#!/usr/bin/env bash
# fa1's backward under Nsight Compute: DRAM and L2 bytes at the prefetch-eviction points of
# prefetch14.py, into $DIR/prefetch14/. On the GPU machine, from the repo root, wheels in .whl/:
#   bash experiments/ncu_mechanism/prefetch14.sh
set -o pipefail
. experiments/gpu_env.sh ncu_mechanism
mkdir -p "$DIR/prefetch14"
cp "$DIR/gpu.txt" "$DIR/prefetch14/gpu.txt"
timeout 240 python3 experiments/ncu_mechanism/prefetch14.py "$DIR/prefetch14"
