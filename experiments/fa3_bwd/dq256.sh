#!/usr/bin/env bash
# FA3's backward at head_dim 256 with the dQ warp (kernels/fa3_bwd.cu SPLIT_D, DQ_BULK=2: each
# consumer stages its two dQ units in its panels of the step's Q/dO ring slot, the dQ warp adds
# them with TMA reduce-adds and frees the slot) on the GPU machine, from the repo root, wheels
# in .whl/:   STEPS=tests,sanitize,ab,ncu,sanitizedq bash experiments/fa3_bwd/dq256.sh (the first
# run), STEPS=tests,sanitize,grid,ncu,grid64,sanitizedq,det NCU_DQ=2 (the second); the steps
# after `ab` run in the order STEPS names them, each followed by a tarball of every file so far
# ($OUT/all.tgz: more files than the GPU machine returns one by one)
# tests: tests/test_gpu_backward.py's fa3 cases (NaN-poisoned outputs, fresh random data, bf16
#   and fp16; d = 64, 128, 256; ragged N, Nq != Nk, both diagonals, GQA), the deterministic
#   mode's same-bits test and the dQ variants that are not the Plan's (d = 256 atomics among
#   them); a failure stops the run before any timing;
# sanitize: compute-sanitizer racecheck and synccheck on one ragged causal GQA shape at d = 256
#   (bottom-right), the Plan's kernel;
# ab: variants.py d256: DQ_BULK 0 (the consumers' atomics) and 2 (the dQ warp), alternately
#   twice, N = 4096, 8192, 16384, causal both, beside torch's cuDNN and flash backward;
# ncu: Nsight Compute (clocks not locked) of each (NCU_DQ) at N = 8192, batch 2, 8 heads, not
#   causal: speed of light, memory workload, stall reasons per issued instruction, pipes, L2
#   reductions;
# sanitizedq: racecheck and synccheck of DQ_BULK=3 at d = 64 on the ragged causal GQA shape (the
#   first hazards' lines in racecheck_dq3_head.log);
# grid, grid64: `iosim bench --direction bwd --schedule fa3 --peers torch --queued` at d = 256,
#   at d = 64 and 128 (N = 4096, 8192, 16384; batch = 16384/N, heads = 2048/d; causal both; bf16);
# det: the deterministic mode beside it at d = 128 (`--deterministic true`, no peers).
# Everything goes to $DIR (experiments/gpu_env.sh; OUT=... puts it in $OUT/GPU); each step under
# `timeout`, the whole under LIMIT seconds.
set -o pipefail
start=$(date +%s)
. experiments/gpu_env.sh fa3_bwd
STEPS=${STEPS:-tests,sanitize,ab,ncu,sanitizedq}
has() { [[ ,$STEPS, == *,$1,* ]]; }
left() { echo $(( ${LIMIT:-320} - ($(date +%s) - start) )); }
pt() {  # a point for iosim.gpu.once: seed batch heads kv_heads nq nk d causal align [dq_bulk]
  echo "{\"schedule\":\"fa3\",\"hw\":\"$HW\",\"seed\":$1,\"batch\":$2,\"heads\":$3,\"kv_heads\":$4,\"seqlen_q\":$5,\"seqlen_k\":$6,\"head_dim\":$7,\"causal\":$8,\"causal_align\":\"$9\",\"direction\":\"bwd\"${10:+,\"dq_bulk\":${10}}}"
}
if has tests; then
  timeout 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_backward.py -k fa3 2>&1 \
    | tail -15 | tee "$DIR/gpu_tests.log"
  grep -qE "[0-9]+ passed" "$DIR/gpu_tests.log" && ! grep -qE " failed| error" "$DIR/gpu_tests.log" \
    || { echo "tests failed: no timing"; exit 1; }
fi
sanitize() {  # tool, point -> the summary line
  echo "== $1 $2"
  timeout 90 compute-sanitizer --tool $1 --kernel-name kns=fa3_bwd python3 -m iosim.gpu.once "$2" 2>&1 \
    | tee -a "$DIR/sanitize_full.log" | grep -E "SUMMARY|Error|error" | tail -2
}
if has sanitize; then
  for tool in racecheck synccheck; do sanitize $tool "$(pt 1 1 4 2 300 333 256 true bottom-right)"; done \
    | tee "$DIR/sanitize.log"
fi
if has ab; then
  timeout 150 python3 experiments/fa3_bwd/variants.py "$DIR/variants_d256.csv" d256 > "$DIR/ab.log" 2>&1
  python3 - "$DIR/variants_d256.csv" <<'PY' | tee -a "$DIR/ab.log"
import sys, pandas as pd
d = pd.read_csv(sys.argv[1])
t = d.groupby(["head_dim", "seqlen_q", "causal", "variant"]).time_ms.min().unstack()
for v in [c for c in t.columns if not c.startswith("torch")]:
    t[v + "/cudnn"] = t["torch_cudnn"] / t[v]
print(t.round(3).to_string())
PY
fi
ncu_of() {  # DQ_BULK -> Nsight Compute (clocks not locked) of the main kernel at N = 8192, not causal
  timeout 70 ncu --kernel-name fa3_bwd --launch-count 1 --clock-control none \
    --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_op_red.sum,lts__t_requests_op_red.sum,lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed,lts__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum.per_second,smsp__inst_executed.sum,gpu__time_duration.sum" \
    python3 -m iosim.gpu.once "$(pt 1 2 8 8 8192 8192 256 false top-left $1)" > "$DIR/ncu_d256_dq$1.txt" 2>&1
  echo "== DQ_BULK=$1"; grep -E "gpu__time|hmma|lts__|Throughput|ERROR" "$DIR/ncu_d256_dq$1.txt" | head -14
  grep -E "stalled" "$DIR/ncu_d256_dq$1.txt" | sort -k3 -g -r | head -8
}
bench() {  # head dims -> `iosim bench` of fa3's backward beside torch, into measured_bwd.csv
  timeout $(( $(left) - ${2:-0} )) iosim bench --direction bwd --schedule fa3 --seqlen 4096,8192,16384 \
    --head-dim $1 --causal both --dtype bf16 --peers torch --queued -o "$DIR/measured_bwd.csv" \
    --resume --no-progress 2>&1 | tail -3
}
snap() { tar czf "$OUT/all.tgz" -C "$DIR/.." "$(basename "$DIR")" 2>/dev/null; }  # every file
for step in ${STEPS//,/ }; do
  case $step in
    ncu) for dq in ${NCU_DQ:-2 0}; do ncu_of $dq; done;;
    sanitizedq)
      for tool in racecheck synccheck; do sanitize $tool "$(pt 1 1 4 2 300 333 64 true bottom-right 3)"; done \
        | tee "$DIR/sanitize_dq3_d64.log"
      grep -m 40 -E "Race|Write|Read|at |by thread" "$DIR/sanitize_full.log" > "$DIR/racecheck_dq3_head.log";;
    grid) bench 256 60;;  # d = 256 first, then d = 64, 128 beside it
    grid64) bench 64,128 20;;
    det)
      timeout $(( $(left) - 5 )) iosim bench --direction bwd --schedule fa3 --deterministic true \
        --seqlen 4096,8192,16384 --head-dim 128 --causal both --dtype bf16 --queued \
        -o "$DIR/measured_det.csv" --no-progress 2>&1 | tail -3;;
  esac
  snap
done
echo "elapsed $(( $(date +%s) - start )) s"
