#!/usr/bin/env bash
# FA3's backward on shapes no grid measured (issue 21: the model held to ragged N, GQA, Nq != Nk
# and other batch/head splits): `iosim bench --direction bwd --schedule fa3 --queued`, every row
# checked (NaN-poisoned outputs, fresh random data) before it is timed. On the GPU machine, from
# the repo root, with the wheels in .whl/:
#   LIMIT=200 bash experiments/fa3_bwd/new_shapes.sh      (writes $DIR/new_shapes/measured_new.csv)
set -o pipefail
start=$(date +%s)
. experiments/gpu_env.sh fa3_bwd
DIR=$DIR/new_shapes
mkdir -p "$DIR"
f="$DIR/measured_new.csv"
left() { echo $(( ${LIMIT:-200} - ($(date +%s) - start) )); }
b() { [ "$(left)" -gt 10 ] || return 0
  timeout "$(left)" iosim bench --direction bwd --schedule fa3 --queued -o "$f" --resume "$@" 2>&1 \
    | tr '\r' '\n' | tail -2 | tee -a "$DIR/run.log"; }
b --seqlen 3000,6000 --head-dim 64,128 --causal both --dtype bf16 --batch 2 --heads 16    # ragged N
b --seqlen 4096 --head-dim 128 --causal both --dtype fp16 --batch 2 --heads 32 --kv-heads 8  # GQA, fp16
b --seqlen 2048 --seqlen-k 6000 --head-dim 128 --causal both --causal-align bottom-right \
  --dtype bf16 --batch 2 --heads 16                                                    # Nq != Nk
b --seqlen 16384 --head-dim 128 --causal false --dtype bf16 --batch 1 --heads 12      # few CTAs
b --seqlen 1000 --head-dim 256 --causal both --dtype bf16 --batch 8 --heads 6         # ragged, d=256
b --seqlen 5000 --head-dim 256 --causal false --dtype fp16 --batch 1 --heads 10      # fp16, d=256
