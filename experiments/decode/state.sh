#!/usr/bin/env bash
# Decode: the paged cache's bench-vs-probe gap and batch 32 beside cuDNN, on the GPU in one
# call, every step under `timeout` (SECONDS counts the whole script), into $DIR/$SUB/
# (experiments/decode/GPU/SUB; SUB defaults to state11); the SM clock, power and clock-event
# reasons every 100 ms all along (smi.csv: nvidia-smi -lms 100):
#  1. tests: tests/test_gpu_decode.py (fresh, NaN-poisoned data);
#  2. pages: experiments/decode/state_probe.py pages (pages_state.csv): the contiguous and
#     paged caches at batch 1 and 8 issued and queued, cold, hot and steady, with the clocks;
#  3. b32: experiments/decode/state_probe.py b32 (b32_ab.csv): batch 32 at 4k, 32k, 128k, the
#     Plan's kernel, its variants, cuDNN and flash in three interleaved rounds;
#  4. seq: `iosim bench` at batch 1, KV 128k, pages none, 16, 64, 256 alone (seq_alone.csv),
#     then each after a batch-32 point as the grid orders them (seq_after32.csv, --peers torch);
#  5. grid (not default): the decode grid of run.sh (batch 1, 8, 32, KV 4k, 32k, 128k) with
#     pages none, 16, 64, 256, --queued, --flush read, beside torch (bench_read.csv);
# 11. gridab (not default, instead of grid): the grid with --settle 0, then --settle SETTLE
#     (default 2), each in its own process (bench_settleZ.csv, summary_settleZ.txt).
# 10. settles (not default): the seq after32 run with --settle 0, 1 and 3 seconds
#     (seq_after32_settleZ.csv). SETTLE (default 0) is every other step's --settle, GRID_CAP
#     the grid step's time limit (default 175 s).
#  9. after32ab (not default): state_probe.py after32_ab (after32_ab.csv): the AB variants at
#     batch 1, contiguous and paged, timed fresh, then after a batch-32 paged point.
#  8. allocab (not default): state_probe.py alloc_ab (alloc_ab.csv): the same step's kernel with
#     more splits or stages beside the Plan's, on the contiguous cache, pages of its own and
#     pages spread over a 16 GiB pool.
#  7. alloc (not default): experiments/decode/state_probe.py alloc (alloc.csv): batch 1 paged at
#     128k on a cache of its own, inside larger allocations, spread over a 16 GiB pool, and
#     before/after a batch-32 paged point (its docstring).
#  6. confirm (not default): experiments/decode/state_probe.py confirm (confirm_ab.csv): the
#     Plan's kernel with its L2 hints beside the plain one and torch at batch 1 and 32.
# Steps run in the order settles, after32ab, allocab, alloc, grid, confirm, then the others above.
# On the GPU machine, from the repository root, with the wheels in .whl/:
#   SUB=NAME STEPS=tests,pages,b32,seq LIMIT=260 bash experiments/decode/state.sh
set -o pipefail
. experiments/gpu_env.sh decode
STEPS=${STEPS:-tests,pages,b32,seq}
LIMIT=${LIMIT:-260}
F="$DIR/${SUB:-state11}"
mkdir -p "$F"
left() { echo $(( LIMIT - SECONDS > 1 ? LIMIT - SECONDS : 1 )); }
cap() { echo $(( $(left) < $1 ? $(left) : $1 )); }
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,temperature.memory,clocks_event_reasons.active \
  --format=csv -lms 100 > "$F/smi.csv" 2>&1 &
SMI=$!
trap 'kill $SMI 2>/dev/null' EXIT
BASE=(--schedule decode --seqlen 1 --heads 32 --kv-heads 8 --head-dim 128 --causal false
      --dtype bf16 --hw "$GPU" --no-progress --resume --flush read --settle "${SETTLE:-0}")
stamp() { echo "== $(date -u +%T) $*"; }
if [[ $STEPS == *tests* ]]; then
  stamp tests
  timeout "$(cap 70)" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_decode.py 2>&1 \
    | tail -15 | tee "$F/gpu_tests.log" || { echo "GPU tests failed: not timed"; exit 1; }
fi
if [[ $STEPS == *settles* ]]; then
  for z in 0 1 3; do
    stamp "seq after32, --settle $z"
    timeout "$(cap 70)" iosim bench "${BASE[@]}" --settle $z --seqlen-k 131072 --batch 32,1 \
      --page-size none,16,64 -o "$F/seq_after32_settle$z.csv" 2>&1 | tail -1
  done
fi
if [[ $STEPS == *after32ab* ]]; then
  stamp after32ab
  timeout "$(cap 150)" python3 experiments/decode/state_probe.py after32_ab "$F/after32_ab.csv" 2>&1 \
    | tee "$F/after32_ab.log" | tail -40
fi
if [[ $STEPS == *allocab* ]]; then
  stamp allocab
  timeout "$(cap 150)" python3 experiments/decode/state_probe.py alloc_ab "$F/alloc_ab.csv" 2>&1 \
    | tee "$F/alloc_ab.log" | tail -60
fi
if [[ $STEPS == *alloc,* || $STEPS == *alloc ]]; then
  stamp alloc
  timeout "$(cap 150)" python3 experiments/decode/state_probe.py alloc "$F/alloc.csv" 2>&1 \
    | tee "$F/alloc.log" | tail -60
  # Nsight Compute on the same step on a cache of its own, at the start of a 16 GiB allocation
  # and spread over it (each checked, launched once after its check's launch): ncu_alloc.txt
  timeout "$(cap 120)" ncu --clock-control none --cache-control all --set detailed \
    --kernel-name regex:decode_paged_fwd --launch-skip 0 --launch-count 6 \
    python3 experiments/decode/state_probe.py alloc_ncu - > "$F/ncu_alloc.txt" 2>&1
  tail -5 "$F/ncu_alloc.txt"
fi
if [[ $STEPS == *gridab* ]]; then  # the grid with no idle, then with SETTLE s before each problem
  for z in 0 "${SETTLE:-2}"; do
    stamp "grid, --settle $z"
    timeout "$(cap "${GRID_CAP:-175}")" iosim bench "${BASE[@]}" --settle "$z" --seqlen-k 4096,32768,131072 \
      --batch 1,8,32 --page-size none,16,64,256 --queued --peers torch -o "$F/bench_settle$z.csv" 2>&1 | tail -2
    python3 tools/decode_summary.py "$F/bench_settle$z.csv" > "$F/summary_settle$z.txt" 2>&1
    tail -n 32 "$F/summary_settle$z.txt"
  done
elif [[ $STEPS == *grid* ]]; then
  stamp grid
  timeout "$(cap "${GRID_CAP:-175}")" iosim bench "${BASE[@]}" --seqlen-k 4096,32768,131072 --batch 1,8,32 \
    --page-size none,16,64,256 --queued --peers torch -o "$F/bench_read.csv" 2>&1 | tail -2
  python3 tools/decode_summary.py "$F/bench_read.csv" > "$F/summary_bench_read.txt" 2>&1
  tail -n 60 "$F/summary_bench_read.txt"
fi
if [[ $STEPS == *confirm* ]]; then
  stamp confirm
  timeout "$(cap 45)" python3 experiments/decode/state_probe.py confirm "$F/confirm_ab.csv" 2>&1 \
    | tee "$F/confirm_ab.log" | tail -40
fi
if [[ $STEPS == *pages* ]]; then
  stamp pages
  timeout "$(cap 70)" python3 experiments/decode/state_probe.py pages "$F/pages_state.csv" 2>&1 \
    | tee "$F/pages_state.log" | tail -80
fi
if [[ $STEPS == *b32* ]]; then
  stamp b32
  timeout "$(cap 70)" python3 experiments/decode/state_probe.py b32 "$F/b32_ab.csv" 2>&1 \
    | tee "$F/b32_ab.log" | tail -60
fi
if [[ $STEPS == *seq* ]]; then
  stamp seq alone
  timeout "$(cap 30)" iosim bench "${BASE[@]}" --seqlen-k 131072 --batch 1 --page-size none,16,64,256 \
    --peers none -o "$F/seq_alone.csv" 2>&1 | tail -1
  stamp seq after32
  timeout "$(cap 70)" iosim bench "${BASE[@]}" --seqlen-k 131072 --batch 32,1 --page-size none,16,64 \
    --peers torch -o "$F/seq_after32.csv" 2>&1 | tail -1
fi
stamp done
tar czf "$DIR/${SUB:-state11}.tgz" -C "$DIR" "${SUB:-state11}"
