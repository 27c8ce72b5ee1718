#!/usr/bin/env bash
# Decode with the combine fused into the last CTA (kernels/decode.cu combine_last), on the GPU
# in one call, every step under `timeout` (SECONDS counts the whole script); into
# $DIR/fused/ (experiments/decode/GPU/fused; SUB=NAME: $DIR/NAME/ instead):
#  1. tests: tests/test_gpu_decode.py (fresh, NaN-poisoned data; the fused combine's counters
#     left zero over repeated launches);
#  2. sanitize: compute-sanitizer racecheck and synccheck of decode_fwd and decode_paged_fwd on
#     small ragged cases (split + fused combine over 1000 keys, the same paged, causal with a
#     window over 32-token pages, one split);
#  3. flush: the grid (Nq = 1, GQA 32/8, d = 128, bf16, batch 1, 8, 32, KV 4k, 32k, 128k)
#     beside torch's SDPA backends, timed twice: the L2 flushed by a read (`--flush read`,
#     no dirty line left: bench_read.csv, with paged caches of 16, 64 and 256 tokens) and by
#     the zero-fill every earlier run used (`--flush write`: bench_write.csv, contiguous);
#  4. window: a sliding window of 4096 keys (causal, bottom-right) in decode at KV 32k and
#     128k, batch 1 and 8, and fa2, fa3 forwards at N = 16384 with windows 1024, 4096 and
#     causal only, beside torch (window.csv, --flush read);
#  5. splits: the split count forced at batch 1, KV 32k and 128k (bench_read.csv, --resume);
#  6. probe: a copy and read-only reductions (16 MiB to 1 GiB) after either flush
#     (experiments/decode/flush_probe.py: flush_probe.csv);
#  7. stages (not in the default STEPS): deeper cp.async rings (--stages 5, 6: one CTA an SM)
#     at batch 1 and 8, KV 32k and 128k, contiguous and paged (16, 64, 256), beside the same
#     points at the default 3 stages (stages.csv, a `stages_run` column; --flush read);
#  8. mha (not default): 32 heads over 32 K/V heads at batch 1 and 8, KV 32k and 128k, beside
#     torch (mha.csv, --flush read);
#  9. repeat (not default): batch 1 and 8, KV 32k and 128k, contiguous, once more after each
#     flush (repeat_read.csv, repeat_write.csv): the run-to-run spread and the write flush's
#     cost to our kernel within one call.
# 10. pages (not default): experiments/decode/pages_probe.py (the paged kernel's table read ahead
#     or per row, pages in a random order or in order, one or two CTAs an SM, beside the
#     contiguous cache: pages_probe.csv), then Nsight Compute on its NCU_CASES at batch 8, 32k
#     (pages_ncu.txt: speed of light, warp states, scheduler, memory tables);
# 11. b32 (not default): batch 32 at KV 4k and 128k beside torch, three runs (b32_1..3.csv:
#     the spread where both stream at the HBM rate).
# WRITE_FLUSH=0 leaves out flush's write-flushed grid, WINDOW_FA=0 window's fa2, fa3 forwards,
# NCU=0 pages' Nsight Compute step.
# Every file of $F also goes into one archive, $DIR/fused.tgz (SUB: $DIR/$SUB.tgz).
# On the GPU machine, from the repository root, with the wheels in .whl/:
#   bash experiments/decode/fused.sh        (STEPS picks steps; LIMIT: seconds in all)
set -o pipefail
. experiments/gpu_env.sh decode
STEPS=${STEPS:-tests,sanitize,probe,flush,window,splits}
LIMIT=${LIMIT:-430}
F="$DIR/${SUB:-fused}"  # SUB: another folder (a later run beside the committed one)
mkdir -p "$F"
left() { echo $(( LIMIT - SECONDS > 1 ? LIMIT - SECONDS : 1 )); }
cap() { echo $(( $(left) < $1 ? $(left) : $1 )); }
BASE=(--schedule decode --seqlen 1 --heads 32 --kv-heads 8 --head-dim 128 --causal false
      --dtype bf16 --hw "$GPU" --no-progress --resume)
if [[ $STEPS == *tests* ]]; then
  timeout 80 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_decode.py 2>&1 \
    | tail -15 | tee "$F/gpu_tests.log" || { echo "GPU tests failed: not timed"; exit 1; }
fi
if [[ $STEPS == *sanitize* ]]; then
  points=(
    '{"schedule":"decode","hw":"'"$HW"'","seed":1,"batch":2,"heads":8,"kv_heads":2,"seqlen_q":1,"seqlen_k":1000,"head_dim":128}'
    '{"schedule":"decode","hw":"'"$HW"'","seed":2,"batch":2,"heads":8,"kv_heads":2,"seqlen_q":1,"seqlen_k":1000,"head_dim":128,"page_size":64}'
    '{"schedule":"decode","hw":"'"$HW"'","seed":3,"batch":1,"heads":16,"kv_heads":2,"seqlen_q":4,"seqlen_k":777,"head_dim":64,"causal":true,"causal_align":"bottom-right","window":300,"page_size":32}'
    '{"schedule":"decode","hw":"'"$HW"'","seed":4,"batch":40,"heads":8,"kv_heads":8,"seqlen_q":1,"seqlen_k":200,"head_dim":128}'
  )
  for tool in racecheck synccheck; do
    timeout "$(cap 45)" compute-sanitizer --tool "$tool" --report-api-errors no \
      --kernel-name kns=decode --error-exitcode 3 \
      python3 -c 'import sys; from iosim.gpu.once import main; [main(a) for a in sys.argv[1:]]' \
      "${points[@]}" > "$F/sanitize_$tool.log" 2>&1
    echo "$tool exit: $?" | tee -a "$F/sanitize_$tool.log"
    tail -2 "$F/sanitize_$tool.log"
  done
fi
if [[ $STEPS == *probe* ]]; then
  timeout "$(cap 40)" python3 experiments/decode/flush_probe.py "$F/flush_probe.csv" 2>&1 | tail -12
fi
if [[ $STEPS == *flush* ]]; then
  timeout "$(cap 160)" iosim bench "${BASE[@]}" --seqlen-k 4096,32768,131072 --batch 1,8,32 \
    --page-size none,16,64,256 --peers torch --flush read -o "$F/bench_read.csv" 2>&1 | tail -2
  if [[ ${WRITE_FLUSH:-1} == 1 ]]; then
    timeout "$(cap 90)" iosim bench "${BASE[@]}" --seqlen-k 4096,32768,131072 --batch 1,8,32 \
      --peers torch --flush write -o "$F/bench_write.csv" 2>&1 | tail -2
  fi
fi
if [[ $STEPS == *window* ]]; then
  timeout "$(cap 60)" iosim bench --schedule decode --seqlen 1 --seqlen-k 32768,131072 \
    --batch 1,8 --heads 32 --kv-heads 8 --head-dim 128 --causal true --causal-align bottom-right \
    --window 4096 --peers torch --flush read --hw "$GPU" --no-progress --resume \
    -o "$F/window.csv" 2>&1 | tail -2
  if [[ ${WINDOW_FA:-1} == 1 ]]; then
    timeout "$(cap 60)" iosim bench --schedule fa2,fa3 --seqlen 16384 --batch 2 --heads 16 \
      --head-dim 128 --causal true --window 1024,4096,none --peers torch --flush read \
      --hw "$GPU" --no-progress --resume -o "$F/window.csv" 2>&1 | tail -2
  fi
fi
if [[ $STEPS == *splits* ]]; then
  timeout "$(cap 45)" iosim bench "${BASE[@]}" --seqlen-k 32768,131072 --batch 1 \
    --kv-splits 8,12,24,32 --flush read -o "$F/bench_read.csv" 2>&1 | tail -2
fi
if [[ $STEPS == *stages* ]]; then  # one file back: the runs concatenated with their stages
  sdir=$(mktemp -d)
  for st in 3 5 6; do
    timeout "$(cap 50)" iosim bench "${BASE[@]}" --seqlen-k 32768,131072 --batch 1,8 \
      --page-size none,16,64,256 --stages $st --flush read -o "$sdir/s$st.csv" 2>&1 | tail -1
  done
  python3 - "$sdir" "$F/stages.csv" <<'PY'
import glob, os, sys
import pandas as pd
parts = [pd.read_csv(f).assign(stages_run=int(os.path.basename(f)[1:-4]))
         for f in sorted(glob.glob(f"{sys.argv[1]}/s*.csv"))]
pd.concat(parts, ignore_index=True).to_csv(sys.argv[2], index=False)
PY
fi
if [[ $STEPS == *mha* ]]; then
  timeout "$(cap 60)" iosim bench --schedule decode --seqlen 1 --seqlen-k 32768,131072 \
    --batch 1,8 --heads 32 --kv-heads 32 --head-dim 128 --causal false --peers torch \
    --flush read --hw "$GPU" --no-progress --resume -o "$F/mha.csv" 2>&1 | tail -2
fi
if [[ $STEPS == *repeat* ]]; then
  for fl in read write; do
    timeout "$(cap 30)" iosim bench "${BASE[@]}" --seqlen-k 32768,131072 --batch 1,8 \
      --flush $fl -o "$F/repeat_$fl.csv" 2>&1 | tail -1
  done
fi
if [[ $STEPS == *b32* ]]; then  # batch 32 beside torch, three times over (b32_1..3.csv)
  for i in 1 2 3; do
    timeout "$(cap 40)" iosim bench "${BASE[@]}" --seqlen-k 4096,131072 --batch 32 \
      --peers torch --flush read -o "$F/b32_$i.csv" 2>&1 | tail -1
  done
fi
if [[ $STEPS == *pages* ]]; then
  timeout "$(cap 150)" python3 experiments/decode/pages_probe.py "$F/pages_probe.csv" 2>&1 \
    | tail -62
  if [[ ${NCU:-1} == 1 ]] && command -v ncu > /dev/null; then
    timeout "$(cap 120)" ncu --kernel-name regex:decode --section SpeedOfLight \
      --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
      --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed \
      python3 experiments/decode/pages_probe.py --ncu > "$F/pages_ncu.txt" 2>&1
    grep -E "ncu case|Duration|DRAM Throughput|Stall Long|Warp Cycles Per Issued|L1/TEX Hit" \
      "$F/pages_ncu.txt" | head -60
  fi
fi
for f in bench_read bench_write window mha; do
  [ -f "$F/$f.csv" ] && python3 tools/decode_summary.py "$F/$f.csv" > "$F/summary_$f.txt" 2>&1
done
tail -n +1 "$F"/summary_*.txt
tar czf "$DIR/${SUB:-fused}.tgz" -C "$DIR" "${SUB:-fused}"
