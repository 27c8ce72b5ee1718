#!/usr/bin/env bash
# Shapes the model was never fitted to (ragged N, GQA in fp16, other batch/head splits, fp16),
# measured like the committed grid; reports/data/<gpu>/measured_new.csv:
#   bash benchmarks/gpu_newshapes.sh        (RESUME=1 continues the committed file)
set -o pipefail
. benchmarks/gpu_env.sh
out=${OUT:-/tmp/out}; mkdir -p "$out"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -qi h200 && echo h200 || echo h100)
f="$out/measured_new.csv"
if [ -n "$RESUME" ] && [ -f reports/data/$gpu/measured_new.csv ]; then cp reports/data/$gpu/measured_new.csv "$f"; fi
b() { timeout "${BENCH_LIMIT:-560}" python3 -c "from iosim.cli import main; main()" bench \
  --schedule naive,fa1,fa2 -o "$f" --resume "$@" 2>&1 | tr '\r' '\n' | tail -1; }
b --seqlen 1000,3000,6000 --head-dim 64,128 --causal both --dtype bf16          # ragged N
b --seqlen 2048,8192 --head-dim 128 --causal both --dtype fp16 --batch 2 --heads 32 --kv-heads 8  # GQA
b --seqlen 16384 --head-dim 128 --causal both --dtype bf16 --batch 1 --heads 16  # few CTAs
b --seqlen 1024 --head-dim 64 --causal false --dtype bf16 --batch 64 --heads 4  # many small
b --seqlen 4096 --head-dim 256 --causal both --dtype fp16 --batch 2 --heads 8   # fp16, d=256
b --seqlen 1536,2560 --head-dim 128 --causal false --dtype bf16 --batch 8 --heads 12
