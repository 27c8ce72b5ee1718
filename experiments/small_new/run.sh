#!/usr/bin/env bash
# Small problems no calibration saw (issue 23: held out from the fit that used experiments/waves):
# N = 384, 768 (and 1536 for a few heads), 2 and 8 heads, batch 1 and 3, d = 64, 128, 256,
# forward and backward, every kernel schedule. On the GPU machine, from the repo root, with the
# wheels in .whl/:   bash experiments/small_new/run.sh
# Each `iosim bench` checks its kernel on fresh NaN-poisoned data before timing it.
set -o pipefail
start=$(date +%s)
. experiments/gpu_env.sh small_new
# FLUSH=read: the L2 flushed by a read, not the default zero-fill (iosim bench --flush);
# QUEUED=1: every row also timed with its launches queued ahead (--queued, time_queued_ms);
# TAG: the file's suffix (measured_small_TAG.csv; default: the flush, none for write)
FLUSH=${FLUSH:-write}
TAG=${TAG-$([ "$FLUSH" = write ] || echo "$FLUSH")}
f="$DIR/measured_small${TAG:+_$TAG}.csv"
[ "${QUEUED:-0}" = 1 ] && Q=--queued || Q=
b() {
  left=$(( ${LIMIT:-270} - ($(date +%s) - start) ))
  [ "$left" -gt 5 ] || { echo "skipped (no time left): $*"; return; }
  timeout "$left" iosim bench -o "$f" --resume --flush "$FLUSH" $Q --peers none "$@" 2>&1 | tr '\r' '\n' | tail -1
}
b --schedule naive,fa1,fa2,fa3 --seqlen 384,768 --head-dim 64,128,256 --causal both --batch 1,3 --heads 2,8
b --direction bwd --schedule naive,fa1,fa2 --seqlen 384,768 --head-dim 64,128 --causal both --batch 1,3 --heads 2,8
b --schedule fa2,fa3 --seqlen 1536 --head-dim 128 --causal false --batch 1 --heads 2,8,11
echo "elapsed $(( $(date +%s) - start )) s"
