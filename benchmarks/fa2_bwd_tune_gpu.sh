#!/usr/bin/env bash
# The fa2 backward sweep on the GPU machine, from the repo root, with the wheels in .whl/:
#   bash benchmarks/fa2_bwd_tune_gpu.sh SET      (SET of benchmarks/fa2_bwd_tune.py)
# 1. the sweep (CSV and log to $OUT), 2. with TESTS=1: the fa2 backward GPU tests
# (tests/test_gpu_backward.py -k fa2) and compute-sanitizer racecheck of the two fa2 lines of
# benchmarks/bwd_gpu.sh (d=64 causal ragged; d=256 GQA ragged Nq != Nk).
set -o pipefail
. benchmarks/gpu_env.sh
out=${OUT:-/tmp/out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu_$1.txt"
python3 benchmarks/fa2_bwd_tune.py "$1" "$out/tune_$1.csv" 2>&1 | tee "$out/tune_$1.log"
if [ -n "$TESTS" ]; then
  python3 -m pytest -q -m gpu tests/test_gpu_backward.py -k fa2 2>&1 | tail -15 | tee "$out/gpu_tests_bwd_fa2.log"
  prof=h100-sxm5-80gb
  for pt in \
    "{\"schedule\":\"fa2\",\"hw\":\"$prof\",\"seed\":1,\"batch\":1,\"heads\":2,\"seqlen_q\":300,\"head_dim\":64,\"causal\":true,\"direction\":\"bwd\"}" \
    "{\"schedule\":\"fa2\",\"hw\":\"$prof\",\"seed\":2,\"batch\":1,\"heads\":4,\"kv_heads\":2,\"seqlen_q\":200,\"seqlen_k\":333,\"head_dim\":256,\"causal\":false,\"direction\":\"bwd\"}" \
    "{\"schedule\":\"fa2\",\"hw\":\"$prof\",\"seed\":3,\"batch\":1,\"heads\":2,\"seqlen_q\":333,\"seqlen_k\":200,\"head_dim\":128,\"causal\":true,\"direction\":\"bwd\"}"; do
    echo "== racecheck $pt"
    compute-sanitizer --tool racecheck python3 -m iosim.gpu.once "$pt" 2>&1 | tail -3
  done | tee "$out/racecheck_bwd_fa2.log"
fi
