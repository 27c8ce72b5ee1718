#!/usr/bin/env bash
# small13's one H100 call (issue 23, point 5): Nsight Compute's per-kernel duration and SM busy
# time at more small committed points (experiments/acc13_probe/probe.py ncu_small):
#   OUT=... bash experiments/acc13_probe/run_small13.sh   (results: experiments/acc13_probe/h100/small13/)
set -o pipefail
. experiments/gpu_env.sh acc13_probe
timeout 200 python3 experiments/acc13_probe/probe.py ncu_small "$DIR/ncu_small.csv" 2>&1 | tee "$DIR/ncu_small.log"
