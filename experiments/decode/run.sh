#!/usr/bin/env bash
# Decode on the GPU in one call, every step under `timeout` (SECONDS counts the whole script):
#  1. tests: tests/test_gpu_decode.py (kernels/decode.cu on fresh, NaN-poisoned data);
#  2. grid: `iosim bench --schedule decode` at Nq = 1, GQA 32/8, d = 128, bf16, batch 1, 8, 32,
#     KV 4k, 32k, 128k, contiguous and paged (64-token pages in a random order), beside torch's
#     SDPA backends; every row carries the HBM floor (KV bytes at the copy bandwidth measured in
#     the same run); into bench.csv (--resume: a cut-short call keeps what it measured);
#  3. sanitize: compute-sanitizer racecheck and synccheck of decode_fwd, decode_paged_fwd and
#     decode_combine on small ragged cases (sanitize_TOOL.log);
#  4. splits: the split count forced (--kv-splits) at batch 1 and 8, KV 32k and 128k, beside
#     the Plan's own choice in the grid rows;
#  5. flex: compiled FlexAttention as a peer of the same grid (its paged rows through its
#     block mask), the rows added to bench.csv;
#  6. variants: batch 1, KV 32k and 128k with other tiles (deeper cp.async rings, 128-key
#     tiles, 8 warps) beside the default ones, each with the Plan's split count and 16 and 32
#     forced, into variants.csv (a `variant` column): what moves batch 1's bandwidth.
# On the GPU machine, from the repository root, with the wheels in .whl/:
#   bash experiments/decode/run.sh        (STEPS=tests,grid,... picks steps; LIMIT: seconds in all)
set -o pipefail
. experiments/gpu_env.sh decode
STEPS=${STEPS:-tests,grid,sanitize,splits,flex,variants}
LIMIT=${LIMIT:-285}
left() { echo $(( LIMIT - SECONDS > 1 ? LIMIT - SECONDS : 1 )); }
GRID=(--schedule decode --seqlen 1 --seqlen-k 4096,32768,131072 --batch 1,8,32 --heads 32
      --kv-heads 8 --head-dim 128 --causal false --dtype bf16 --page-size none,64 --hw "$GPU"
      --no-progress --resume -o "$DIR/bench.csv")
if [[ $STEPS == *tests* ]]; then
  timeout 55 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu_decode.py 2>&1 \
    | tail -15 | tee "$DIR/gpu_tests.log" || { echo "GPU tests failed: not timed"; exit 1; }
fi
if [[ $STEPS == *grid* ]]; then
  timeout $(( $(left) < 80 ? $(left) : 80 )) iosim bench "${GRID[@]}" --peers torch 2>&1 | tail -3
fi
if [[ $STEPS == *sanitize* ]]; then
  # small ragged cases: GQA split into many splits + combine (1000 keys: a ragged last tile),
  # the same paged (a ragged last 64-token page), 4 rows x 8 heads causal with a window over
  # 32-token pages at d = 64, and one split (decode_fwd writes O itself)
  points=(
    '{"schedule":"decode","hw":"'"$HW"'","seed":1,"batch":2,"heads":8,"kv_heads":2,"seqlen_q":1,"seqlen_k":1000,"head_dim":128}'
    '{"schedule":"decode","hw":"'"$HW"'","seed":2,"batch":2,"heads":8,"kv_heads":2,"seqlen_q":1,"seqlen_k":1000,"head_dim":128,"page_size":64}'
    '{"schedule":"decode","hw":"'"$HW"'","seed":3,"batch":1,"heads":16,"kv_heads":2,"seqlen_q":4,"seqlen_k":777,"head_dim":64,"causal":true,"causal_align":"bottom-right","window":300,"page_size":32}'
    '{"schedule":"decode","hw":"'"$HW"'","seed":4,"batch":40,"heads":8,"kv_heads":8,"seqlen_q":1,"seqlen_k":200,"head_dim":128}'
  )
  for tool in racecheck synccheck; do
    # --report-api-errors no: host-side driver probes by cuda-bindings (experiments/fa3_sanitize)
    timeout $(( $(left) < 40 ? $(left) : 40 )) compute-sanitizer --tool "$tool" --report-api-errors no \
      --kernel-name kns=decode --error-exitcode 3 \
      python3 -c 'import sys; from iosim.gpu.once import main; [main(a) for a in sys.argv[1:]]' \
      "${points[@]}" > "$DIR/sanitize_$tool.log" 2>&1
    echo "$tool exit: $?" | tee -a "$DIR/sanitize_$tool.log"
    tail -2 "$DIR/sanitize_$tool.log"
  done
fi
if [[ $STEPS == *splits* ]]; then
  timeout $(( $(left) < 30 ? $(left) : 30 )) iosim bench --schedule decode --seqlen 1 \
    --seqlen-k 32768,131072 --batch 1,8 --heads 32 --kv-heads 8 --head-dim 128 --causal false \
    --kv-splits 1,4,8,12,16,20,24,32,40,64,128 --hw "$GPU" --no-progress --resume \
    -o "$DIR/bench.csv" 2>&1 | tail -3
fi
if [[ $STEPS == *flex* ]]; then  # leaves the variants 30 s
  timeout $(( $(left) > 60 ? $(left) - 30 : 30 )) iosim bench "${GRID[@]}" --peers torch,flex 2>&1 | tail -3
fi
if [[ $STEPS == *variants* ]]; then  # one file back (variants.csv), a `variant` column
  vdir=$(mktemp -d)
  for v in "base:" "stages4:--stages 4" "stages6:--stages 6" "bn128:--block-n 128 --stages 2" \
           "bn128w8:--block-n 128 --warps 8 --stages 2"; do
    for sp in "" "--kv-splits 16,32"; do
      # shellcheck disable=SC2086
      timeout $(( $(left) < 12 ? $(left) : 12 )) iosim bench --schedule decode --seqlen 1 \
        --seqlen-k 32768,131072 --batch 1 --heads 32 --kv-heads 8 --head-dim 128 --causal false \
        ${v#*:} $sp --hw "$GPU" --no-progress -o "$vdir/${v%%:*}${sp:+_forced}.csv" 2>&1 | tail -1
    done
  done
  python3 - "$vdir" "$DIR/variants.csv" <<'PY'
import glob, os, sys
import pandas as pd
parts = [pd.read_csv(f).assign(variant=os.path.basename(f)[:-4].removesuffix("_forced"))
         for f in sorted(glob.glob(f"{sys.argv[1]}/*.csv"))]
pd.concat(parts, ignore_index=True).to_csv(sys.argv[2], index=False)
PY
fi
[ -f "$DIR/bench.csv" ] && python3 tools/decode_summary.py "$DIR/bench.csv" 2>&1 | tee "$DIR/summary.txt"
