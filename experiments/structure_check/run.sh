#!/usr/bin/env bash
# The real kernels after the layer/KernelSpec restructure (issue 20) and the bench split
# (analysis/bench over gpu/bench): on the GPU machine, from the repo root, with the wheels in .whl/:
#   bash experiments/structure_check/run.sh
# 1. every GPU test (forward, backward, hardening: NaN-poisoned outputs checked against the
#    float32 reference on fresh random inputs); 2. a small `iosim bench` grid, forward and
#    backward, beside torch's SDPA backends, through the CLI; 3. `iosim validate` of those rows.
# Results go to $DIR (experiments/gpu_env.sh). The script stays under LIMIT seconds.
set -o pipefail
start=$(date +%s)
. experiments/gpu_env.sh structure_check
python3 -m pytest -q -p no:cacheprovider -m gpu tests/test_gpu_kernels.py tests/test_gpu_backward.py \
  tests/test_gpu_hardening.py 2>&1 | tail -25 | tee "$DIR/gpu_tests.log"
left=$(( ${LIMIT:-570} - ($(date +%s) - start) ))
timeout $(( left / 2 )) iosim bench --schedule naive,fa1,fa2,fa3 --seqlen 2048,8192 --head-dim 64,128 \
  --causal both --peers torch -o "$DIR/fwd.csv" 2>&1 | tr '\r' '\n' | tail -3
left=$(( ${LIMIT:-570} - ($(date +%s) - start) ))
timeout "$left" iosim bench --direction bwd --schedule naive,fa1,fa2 --seqlen 2048,8192 --head-dim 128 \
  --causal both --peers torch -o "$DIR/bwd.csv" 2>&1 | tr '\r' '\n' | tail -3
iosim validate "$DIR/fwd.csv" "$DIR/bwd.csv" -o "$DIR/validate.txt"
echo "elapsed $(( $(date +%s) - start )) s"
