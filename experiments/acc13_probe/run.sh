#!/usr/bin/env bash
# acc13's one H100 call (issue 23; experiments/acc13_probe/probe.py says what each step is):
#   OUT=... bash experiments/acc13_probe/run.sh
set -o pipefail
. experiments/gpu_env.sh acc13_probe
timeout 100 python3 experiments/acc13_probe/probe.py time "$DIR/fa2_d128_rounds.csv" 2>&1 | tee "$DIR/time.log"
timeout 170 python3 experiments/acc13_probe/probe.py ncu "$DIR/ncu.csv" 2>&1 | tee "$DIR/ncu.log"
