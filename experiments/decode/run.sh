#!/usr/bin/env bash
# Inference attention on the GPU in one call: the sliding-window GPU tests (fa2, fa3) and the
# decode kernel's (kernels/decode.cu), then, only if they pass, the decode timing grid beside
# torch's SDPA backends and the HBM floor ([decode_bench.py](decode_bench.py)). On the GPU
# machine, from the repository root, with the wheels in .whl/:
#   bash experiments/decode/run.sh
set -o pipefail
. experiments/gpu_env.sh decode
timeout "${TEST_LIMIT:-150}" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_decode.py \
  "tests/test_gpu_kernels.py::test_sliding_window_matches_reference" 2>&1 | tail -15 | tee "$DIR/gpu_tests.log" \
  || { echo "GPU tests failed: not timed"; exit 1; }
timeout "${BENCH_LIMIT:-130}" python3 experiments/decode/decode_bench.py "$DIR/decode.csv" 2>&1 | tee "$DIR/bench.log"
