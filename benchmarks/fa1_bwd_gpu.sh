#!/usr/bin/env bash
# The FA1 backward (kernels/fa1.cu, Algorithm 4) on the GPU machine, from the repo root, with the
# wheels in .whl/:   bash benchmarks/fa1_bwd_gpu.sh
# 1. its GPU tests (tests/test_gpu_backward.py -k fa1), 2. compute-sanitizer racecheck on small
# ragged causal shapes (d=64 bottom-right Nq > Nk with GQA; d=256, Bc = 32, top-left Nq < Nk),
# each running the fa1 forward, then the backward's kernels, 3. a few timings
# (bf16, batch = 16384/N, heads = 2048/d, d = 64, 128, N = 1024, 4096, not causal and causal).
# Logs and the CSV go to $OUT (fa1_bwd_*.log, fa1_bwd_timing.csv).
set -o pipefail
start=$(date +%s)
. benchmarks/gpu_env.sh
out=${OUT:-/tmp/out}; mkdir -p "$out"
prof=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | grep -qi h200 && echo h200-sxm-141gb || echo h100-sxm5-80gb)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm --format=csv > "$out/fa1_bwd_gpu.log"
timeout 180 python3 -m pytest -q -m gpu tests/test_gpu_backward.py -k fa1 2>&1 | tail -25 > "$out/fa1_bwd_tests.log"
echo "tests: $(tail -1 "$out/fa1_bwd_tests.log") ($(( $(date +%s) - start )) s)"
for pt in \
  "{\"schedule\":\"fa1\",\"hw\":\"$prof\",\"seed\":1,\"batch\":1,\"heads\":4,\"kv_heads\":2,\"seqlen_q\":300,\"seqlen_k\":200,\"head_dim\":64,\"causal\":true,\"causal_align\":\"bottom-right\",\"direction\":\"bwd\"}" \
  "{\"schedule\":\"fa1\",\"hw\":\"$prof\",\"seed\":2,\"batch\":1,\"heads\":2,\"seqlen_q\":150,\"seqlen_k\":333,\"head_dim\":256,\"causal\":true,\"direction\":\"bwd\"}"; do
  echo "== racecheck $pt"
  timeout 100 compute-sanitizer --tool racecheck python3 -m iosim.gpu.once "$pt" 2>&1 | tail -3
done > "$out/fa1_bwd_racecheck.log" 2>&1
echo "racecheck done ($(( $(date +%s) - start )) s)"
timeout 110 python3 - "$out/fa1_bwd_timing.csv" > "$out/fa1_bwd_timing.log" 2>&1 <<'PY'
import sys
from pathlib import Path

from iosim.analysis import bench
from iosim.core.problem import Problem

problems = [Problem(batch=16384 // n, heads=2048 // d, seqlen_q=n, head_dim=d, dtype="bf16",
                    causal=c, direction="bwd")
            for d in (64, 128) for n in (1024, 4096) for c in (False, True)]
df = bench.run(problems, ["fa1"], False, Path(sys.argv[1]), None, False, False, progress=False)
cols = ["schedule", "head_dim", "seqlen_q", "causal", "status", "max_rel_err", "time_ms", "tflops",
        "time_pred_ms", "floor_ratio"]
print(df[[c for c in cols if c in df]].to_string())
PY
echo "elapsed $(( $(date +%s) - start )) s"
