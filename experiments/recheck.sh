#!/usr/bin/env bash
# One GPU call re-measuring session 8's merged kernels (the GPU machine, repo root, wheels in
# .whl/, OUT set): fa3's backward after the LSE/D prefetch and the deterministic mode's merge
# (smoke, GPU tests, the bwd grid beside fa2 and torch; the deterministic kernel at N = 4096,
# 16384), fa3's fp8 path with the bank-conflict-free quantisation kernel (the bench grid; its
# GPU tests ran on the same code on an H200), and decode's forced split counts at batch 8
# (2, 3, 4) and 1 (16, 31, 32, 33), 32k and 128k keys.
#   bash experiments/recheck.sh
O=$OUT; set -o pipefail
(OUT=$O/fa3b LIMIT=330 STEPS=smoke,tests,grid bash experiments/fa3_bwd/run.sh 2>&1 | tail -12)
(. experiments/gpu_env.sh fa3_bwd >/dev/null; timeout 45 iosim bench --direction bwd --schedule fa3 --deterministic true --seqlen 4096,16384 --head-dim 64,128 --causal both -o $O/fa3b/$GPU/measured_det.csv --no-progress 2>&1 | tail -1)
mkdir -p $O/dec; (OUT=$O/fp8 BENCH_LIMIT=50 SKIP_TESTS=1 SKIP_STAGES=1 timeout 130 bash experiments/fp8/run.sh 2>&1 | tail -4)
(. experiments/gpu_env.sh decode >/dev/null; for b in "8 2,3,4" "1 16,31,32,33"; do set -- $b; timeout 30 iosim bench --schedule decode --seqlen 1 --seqlen-k 32768,131072 --kv-heads 8 --heads 32 --head-dim 128 --batch $1 --kv-splits $2 --peers none -o $O/dec/splits_b$1.csv --no-progress 2>&1 | tail -1; done)
