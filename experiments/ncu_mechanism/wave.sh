#!/usr/bin/env bash
# fa1's backward at about one wave of CTAs under Nsight Compute (ncu_mechanism.py bwd_wave), and
# DRAM bandwidth by read/write mix (dram_mix.py), into $DIR/wave12/.
# On the GPU machine, from the repo root, with the wheels in .whl/:
#   bash experiments/ncu_mechanism/wave.sh
set -o pipefail
. experiments/gpu_env.sh ncu_mechanism
mkdir -p "$DIR/wave12"
timeout 100 python3 experiments/ncu_mechanism/dram_mix.py "$DIR/wave12/dram_mix.csv"
timeout 300 python3 experiments/ncu_mechanism/ncu_mechanism.py "$DIR/wave12/ncu_fa1_bwd_wave.csv" bwd_wave
python3 tools/ncu_summary.py "$DIR/wave12/ncu_fa1_bwd_wave.csv" --hw "$GPU" | tee "$DIR/wave12/summary.txt"
