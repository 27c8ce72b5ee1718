#!/usr/bin/env bash
# The A/B of fa3_bwd.cu's LSE/D prefetch (commit "fa3_bwd.cu: each consumer loads LSE_i and D_i a
# step ahead"), as it ran on the GPU machine: two checkouts carried beside each other, .gpu_fa3pf
# (that commit, with the wheels in .whl/) and .gpu_base (its parent), run from their parent folder
# with OUT set: the fa3 backward GPU tests of the new kernel, then both benched alternately twice
# (round 1 with --peers torch). ab.py reads the four CSVs.
set -o pipefail
cd .gpu_fa3pf && . experiments/gpu_env.sh fa3_bwd && cd ..
nvidia-smi --query-gpu=name --format=csv,noheader > $OUT/gpu.txt
(cd .gpu_fa3pf && timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_backward.py -k fa3 -x 2>&1 | tail -4) | tee $OUT/gpu_tests.log
grep -q failed $OUT/gpu_tests.log && { echo "tests failed: not timed"; exit 1; }
for round in 1 2; do for t in fa3pf base; do
  (cd .gpu_$t && PYTHONPATH=/tmp/site:$PWD timeout 100 python3 -c "from iosim.cli import main; main()" bench --direction bwd --schedule fa3 --seqlen 4096,8192,16384 --head-dim 64,128 --causal both $([ $round = 1 ] && echo --peers torch) -o $OUT/${t}_r$round.csv 2>&1 | tr '\r' '\n' | tail -1)
done; done
