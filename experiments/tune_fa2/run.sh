#!/usr/bin/env bash
# `iosim tune --verify` for fa2: for each (d, N) the model's top 5 tile configurations and the
# schedule's own, checked on fresh NaN-poisoned data, then timed; the tiles file holds the
# measured best per head_dim. On an H100, from the repo root, with the wheels in .whl/:
#   bash experiments/tune_fa2/run.sh
set -o pipefail
. experiments/gpu_env.sh tune_fa2
iosim tune --schedule fa2 --seqlen 1024..16384 --head-dim 64,128,256 --top 5 --verify \
  --hw "$GPU" -o "$DIR/tune_fa2.csv" --write "$DIR/tiles_$GPU.json" 2>&1 | tee "$DIR/tune_fa2.txt"
