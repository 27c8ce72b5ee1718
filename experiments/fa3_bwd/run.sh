#!/usr/bin/env bash
# FA3's backward (kernels/fa3_bwd.cu) on the GPU machine, from the repo root, wheels in .whl/:
#   bash experiments/fa3_bwd/run.sh    (STEPS picks steps: smoke,tests,sanitize,sanitizedq,
#   variants,dqwarp,dqwarp3,peers,dqreduce,grid,det,ncu,ncudq)
# smoke: one fa3 backward point run once, plain and deterministic (a hang stops here, not in
#   the tests);
# tests: tests/test_gpu_backward.py's fa3 cases (with the deterministic mode's same-bits test)
#   and fa3's bottom-right forward (its LSE);
# sanitize: compute-sanitizer racecheck and synccheck on ragged shapes (GQA, both diagonals),
#   plain and deterministic (sanitizedet: the deterministic ones only; full output in
#   sanitize_full.log);
# sanitizedq: the same tools on the GPU tests of the dQ variants that are not the Plan's (DQ_BULK 0
#   at d = 128, 3 at d = 64; tests/test_gpu_backward.py -k dq_variants), fa3_bwd kernels only;
# variants: the main kernel with and without the consumers' ping-pong, beside cuDNN (variants.py);
# dqwarp: d = 128, dQ by the consumers' atomics (DQ_BULK=0), by the dQ warp's TMA reduce-adds
#   (DQ_BULK=2, the Plan's) and that without ping-pong, alternately twice, N = 4096..16384,
#   beside torch's cuDNN and flash backward (variants.py dq);
# dqwarp3: d = 128 DQ_BULK=2 and 3 (one staging buffer, the consumers in turn), d = 64 DQ_BULK=0
#   and 3, the same way (variants.py dq3);
# peers: `iosim bench --direction bwd` of fa3 beside torch's SDPA backward, d = 64, 128,
#   N = 4096..16384 (batch = 16384/N), causal both;
# dqreduce: dQ by vector atomics, by bulk reduce-add (d = 128) and deterministic, checked, timed
#   and run again for their bits, beside cuDNN (dq_reduce.py);
# grid: `iosim bench --direction bwd` of fa3 and fa2 beside torch's SDPA backward on the issue's
#   grid (batch = 16384/N, heads = 2048/d; d = 64, 128; N 1024..16384; causal both), then
#   `--direction both` of fa3 at d = 128;
# det: the same grid of fa3's deterministic mode (`--deterministic true`, no peers);
# ncu: Nsight Compute's picture of the main kernel (d = 64, 128, N = 8192, not causal);
# ncudq: the dQ reduction's L2 load (reduction sectors and requests, the L2 atomic unit's busy
#   share, L2 and DRAM throughput, warp stalls) for each dQ variant (dq_reduce.py --once).
# Logs and CSVs go to $DIR (experiments/gpu_env.sh); the script stays under LIMIT seconds.
set -o pipefail
start=$(date +%s)
. experiments/gpu_env.sh fa3_bwd
STEPS=${STEPS:-smoke,tests,sanitize,variants,dqreduce,grid,det,ncu,ncudq}
has() { [[ ,$STEPS, == *,$1,* ]]; }  # a step named in STEPS
left() { echo $(( ${LIMIT:-580} - ($(date +%s) - start) )); }
pt() {  # a point for iosim.gpu.once: schedule seed batch heads kv_heads nq nk d causal align [det]
  echo "{\"schedule\":\"$1\",\"hw\":\"$HW\",\"seed\":$2,\"batch\":$3,\"heads\":$4,\"kv_heads\":$5,\"seqlen_q\":$6,\"seqlen_k\":$7,\"head_dim\":$8,\"causal\":$9,\"causal_align\":\"${10}\",\"direction\":\"bwd\",\"deterministic\":${11:-false}}"
}
if has smoke; then
  for det in false true; do
    for d in 64 128; do
      timeout 60 python3 -m iosim.gpu.once "$(pt fa3 1 1 4 4 1000 1000 $d true top-left $det)" \
        && echo "smoke d=$d deterministic=$det ok" || { echo "smoke d=$d deterministic=$det FAILED ($?)"; exit 1; }
    done
  done 2>&1 | tee "$DIR/smoke.log" || exit 1
fi
if has tests; then
  timeout $(( $(left) / 2 )) python3 -m pytest -q -m gpu tests/test_gpu_backward.py tests/test_gpu_kernels.py \
    -k "fa3" 2>&1 | tail -15 | tee "$DIR/gpu_tests.log"
fi
if has sanitize || has sanitizedet; then  # sanitizedet: the deterministic kernel's points only
  plain=("$(pt fa3 1 1 4 2 300 333 64 true bottom-right)" "$(pt fa3 2 1 2 2 333 200 128 true bottom-right)"
         "$(pt fa3 3 1 4 1 250 250 128 false top-left)")
  det=("$(pt fa3 4 1 4 2 300 333 64 true bottom-right true)" "$(pt fa3 5 1 2 2 333 200 128 true bottom-right true)"
       "$(pt fa3 6 1 4 1 250 250 128 false top-left true)")
  has sanitize || plain=()
  for tool in racecheck synccheck; do
    for p in "${plain[@]}" "${det[@]}"; do
      echo "== $tool $p"
      timeout 120 compute-sanitizer --tool $tool python3 -m iosim.gpu.once "$p" 2>&1 \
        | tee -a "$DIR/sanitize_full.log" | tail -2
    done
  done | tee "$DIR/sanitize.log"
fi
if has sanitizedq; then  # the dQ variants that are not the Plan's (DQ_BULK 0 at d = 128, 3 at 64)
  for tool in racecheck synccheck; do
    echo "== $tool: tests/test_gpu_backward.py -k dq_variants, fa3_bwd kernels only"
    timeout 240 compute-sanitizer --tool $tool --kernel-name kns=fa3_bwd python3 -m pytest -q -m gpu \
      -p no:cacheprovider tests/test_gpu_backward.py -k dq_variants 2>&1 \
      | tee -a "$DIR/sanitize_dq_full.log" | grep -E "SUMMARY|passed|failed" | tail -4
  done | tee "$DIR/sanitize_dq.log"
fi
if has variants; then
  timeout 120 python3 experiments/fa3_bwd/variants.py "$DIR/variants.csv" 2>&1 | tail -3
fi
for mode in dq dq3; do
  if has ${mode/dq/dqwarp}; then
    timeout 200 python3 experiments/fa3_bwd/variants.py "$DIR/variants_$mode.csv" $mode 2>&1 | tail -3
    python3 - "$DIR/variants_$mode.csv" <<'PY'
import sys, pandas as pd
d = pd.read_csv(sys.argv[1])
t = d.groupby(["head_dim", "seqlen_q", "causal", "variant"]).time_ms.min().unstack()
for v in [c for c in t.columns if not c.startswith("torch")]:
    t[v + "/cudnn"] = t["torch_cudnn"] / t[v]
print(t.filter(like="/cudnn").round(3).to_string())
PY
  fi
done
if has peers; then
  timeout $(( $(left) - 20 )) iosim bench --direction bwd --schedule fa3 --seqlen 4096,8192,16384 \
    --head-dim 64,128 --causal both --dtype bf16 --peers torch -o "$DIR/measured_bwd.csv" \
    --no-progress 2>&1 | tail -3
fi
if has dqreduce; then
  timeout 150 python3 experiments/fa3_bwd/dq_reduce.py "$DIR/dq_reduce.csv" 2>&1 | tail -3
fi
if has grid; then
  timeout $(( $(left) - 60 )) iosim bench --direction bwd --schedule fa3,fa2 --seqlen 1024..16384 \
    --head-dim 64,128 --causal both --dtype bf16 --peers torch -o "$DIR/measured_bwd.csv" \
    --resume --no-progress 2>&1 | tail -4
  timeout 50 iosim bench --direction both --schedule fa3 --seqlen 4096,16384 --head-dim 128 \
    --causal both --dtype bf16 --peers torch -o "$DIR/measured_both.csv" --resume --no-progress 2>&1 | tail -3
fi
if has det; then
  timeout $(( $(left) - 30 )) iosim bench --direction bwd --schedule fa3 --deterministic true \
    --seqlen 1024..16384 --head-dim 64,128 --causal both --dtype bf16 -o "$DIR/measured_det.csv" \
    --resume --no-progress 2>&1 | tail -3
fi
if has ncudq; then
  for vd in atomic:64 atomic:128 bulk:128 deterministic:128; do
    timeout 90 ncu --kernel-name regex:fa3_bwd --launch-count 1 --section SpeedOfLight \
      --section WarpStateStats --section MemoryWorkloadAnalysis \
      --metrics lts__t_sectors_op_red.sum,lts__t_requests_op_red.sum,lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum \
      python3 experiments/fa3_bwd/dq_reduce.py --once ${vd%:*} ${vd#*:} > "$DIR/ncu_dq_${vd%:*}_d${vd#*:}.txt" 2>&1
    echo "== ${vd}"; grep -E "Duration|lts__|dram__|Stall LG|L2 Cache Throughput" "$DIR/ncu_dq_${vd%:*}_d${vd#*:}.txt" | head -12
  done
fi
if has ncu; then
  for d in 64 128; do
    timeout 120 ncu --kernel-name fa3_bwd --launch-count 1 --section SpeedOfLight \
      --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
      python3 -m iosim.gpu.once "$(pt fa3 1 2 16 16 8192 8192 $d false top-left)" > "$DIR/ncu_d$d.txt" 2>&1
    grep -E "Duration|Throughput|Issue Slots|Warp Cycles|Stall|L2|DRAM" "$DIR/ncu_d$d.txt" | head -20
  done
fi
echo "elapsed $(( $(date +%s) - start )) s"
