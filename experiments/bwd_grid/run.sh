#!/usr/bin/env bash
# The backward kernels on the GPU machine, from the repo root, with the wheels in .whl/:
#   bash experiments/bwd_grid/run.sh   (RESUME=1 continues the committed measured_bwd.csv)
# 1. GPU tests of the backward kernels (tests/test_gpu_backward.py), 2. compute-sanitizer
# racecheck on small ragged shapes (fa2 d=64 causal, fa2 d=256 GQA, naive d=128 GQA, fa2 d=128
# bottom-right, fa1 d=72 GQA bottom-right; each runs its forward, then the backward kernels),
# 3. the bench grid (SKIP_GRID=1: none), --direction bwd beside torch's SDPA backward.
# Logs and the CSV go to $DIR (experiments/gpu_env.sh). The whole script stays under LIMIT seconds.
set -o pipefail
start=$(date +%s)
. experiments/gpu_env.sh bwd_grid
if [ -n "$RESUME" ] && [ -f experiments/bwd_grid/$GPU/measured_bwd.csv ]; then cp experiments/bwd_grid/$GPU/measured_bwd.csv "$DIR/"; fi
if [ -z "$SKIP_TESTS" ]; then
  python3 -m pytest -q -m gpu tests/test_gpu_backward.py 2>&1 | tail -15 | tee "$DIR/gpu_tests.log"
fi
if [ -z "$SKIP_SANITIZER" ]; then
  for pt in \
    "{\"schedule\":\"fa2\",\"hw\":\"$HW\",\"seed\":1,\"batch\":1,\"heads\":2,\"seqlen_q\":300,\"head_dim\":64,\"causal\":true,\"direction\":\"bwd\"}" \
    "{\"schedule\":\"fa2\",\"hw\":\"$HW\",\"seed\":2,\"batch\":1,\"heads\":4,\"kv_heads\":2,\"seqlen_q\":200,\"seqlen_k\":333,\"head_dim\":256,\"causal\":false,\"direction\":\"bwd\"}" \
    "{\"schedule\":\"naive\",\"hw\":\"$HW\",\"seed\":3,\"batch\":1,\"heads\":4,\"kv_heads\":1,\"seqlen_q\":250,\"head_dim\":128,\"causal\":true,\"direction\":\"bwd\"}" \
    "{\"schedule\":\"fa2\",\"hw\":\"$HW\",\"seed\":5,\"batch\":1,\"heads\":2,\"seqlen_q\":333,\"seqlen_k\":200,\"head_dim\":128,\"causal\":true,\"causal_align\":\"bottom-right\",\"direction\":\"bwd\"}" \
    "{\"schedule\":\"fa1\",\"hw\":\"$HW\",\"seed\":4,\"batch\":1,\"heads\":4,\"kv_heads\":2,\"seqlen_q\":300,\"seqlen_k\":200,\"head_dim\":72,\"causal\":true,\"causal_align\":\"bottom-right\",\"direction\":\"bwd\"}"; do
    echo "== racecheck $pt"
    compute-sanitizer --tool racecheck python3 -m iosim.gpu.once "$pt" 2>&1 | tail -3
  done | tee "$DIR/racecheck.log"
fi
[ -n "$SKIP_GRID" ] && { echo "elapsed $(( $(date +%s) - start )) s"; exit 0; }
left=$(( ${LIMIT:-585} - ($(date +%s) - start) ))
# batch = 16384/N, heads = 2048/d (bench's defaults)
timeout "$left" iosim bench --direction bwd --schedule naive,fa1,fa2 --seqlen 512..16384 \
  --head-dim 64,128,256 --causal both --dtype bf16 --peers torch -o "$DIR/measured_bwd.csv" \
  --resume 2>&1 | tr '\r' '\n' | tail -4
echo "elapsed $(( $(date +%s) - start )) s"
