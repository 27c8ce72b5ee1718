#!/usr/bin/env bash
# Small fa1/fa2 forward, fa2 backward (causal and not) and fa3 backward d = 256 points under
# Nsight Compute: per-SM cycle spread, waves, stalls, DRAM bytes (small15b.py), into
# $DIR/small15b/. On the GPU machine, from the repo root, with the wheels in .whl/:
#   bash experiments/ncu_mechanism/small15b.sh
set -o pipefail
. experiments/gpu_env.sh ncu_mechanism
mkdir -p "$DIR/small15b"
cp "$DIR/gpu.txt" "$DIR/small15b/gpu.txt"
timeout ${LIMIT:-330} python3 experiments/ncu_mechanism/small15b.py "$DIR/small15b"
