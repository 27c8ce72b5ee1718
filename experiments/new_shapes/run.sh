#!/usr/bin/env bash
# Shapes the model was never fitted to (ragged N, GQA in fp16, other batch/head splits, fp16),
# measured like the forward grid. On the GPU machine, from the repo root, with the wheels in .whl/:
#   bash experiments/new_shapes/run.sh   (RESUME=1 continues the committed measured_new.csv)
set -o pipefail
. experiments/gpu_env.sh new_shapes
f="$DIR/measured_new.csv"
if [ -n "$RESUME" ] && [ -f experiments/new_shapes/$GPU/measured_new.csv ]; then cp experiments/new_shapes/$GPU/measured_new.csv "$f"; fi
b() { timeout "${BENCH_LIMIT:-560}" iosim bench \
  --schedule naive,fa1,fa2 -o "$f" --resume "$@" 2>&1 | tr '\r' '\n' | tail -1; }
b --seqlen 1000,3000,6000 --head-dim 64,128 --causal both --dtype bf16          # ragged N
b --seqlen 2048,8192 --head-dim 128 --causal both --dtype fp16 --batch 2 --heads 32 --kv-heads 8  # GQA
b --seqlen 16384 --head-dim 128 --causal both --dtype bf16 --batch 1 --heads 16  # few CTAs
b --seqlen 1024 --head-dim 64 --causal false --dtype bf16 --batch 64 --heads 4  # many small
b --seqlen 4096 --head-dim 256 --causal both --dtype fp16 --batch 2 --heads 8   # fp16, d=256
b --seqlen 1536,2560 --head-dim 128 --causal false --dtype bf16 --batch 8 --heads 12
