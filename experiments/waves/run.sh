#!/usr/bin/env bash
# Wave quantisation and small problems (issue 23), forward and backward, no peers.
# On the GPU machine, from the repo root, with the wheels in .whl/:   bash experiments/waves/run.sh
# 1. waves: one head, batch 16..67 at N = 512, 1024, so that the CTA count (batch x heads x
#    ceil(N / block_m)) sits just below, at and just above 132 x CTAs-per-SM and twice that
#    (fa2 forward: 2 CTAs per SM, 264 slots; fa3 forward and fa2 backward: 1, 132 slots):
#    e.g. fa2 d = 128, N = 1024: 8 CTAs a head, batch 16, 17, 33, 34, 66, 67 -> 128, 136, 264,
#    272, 528, 536 CTAs; N = 512, batch 33 vs 66: exactly one CTA per SM vs two;
# 2. small problems: batch 1, 1-16 heads, N = 256..1024, every kernel schedule.
# Each `iosim bench` checks its kernel on fresh NaN-poisoned data before timing it; rows are
# appended as they finish, each step under what is left of LIMIT seconds.
set -o pipefail
start=$(date +%s)
. experiments/gpu_env.sh waves
# FLUSH=read: the L2 flushed by a read, not the default zero-fill (iosim bench --flush);
# QUEUED=1: every row also timed with its launches queued ahead (--queued, time_queued_ms);
# TAG: the file's suffix (measured_waves_TAG.csv; default: the flush, none for write)
FLUSH=${FLUSH:-write}
TAG=${TAG-$([ "$FLUSH" = write ] || echo "$FLUSH")}
f="$DIR/measured_waves${TAG:+_$TAG}.csv"
[ "${QUEUED:-0}" = 1 ] && Q=--queued || Q=
b() {
  left=$(( ${LIMIT:-270} - ($(date +%s) - start) ))
  [ "$left" -gt 5 ] || { echo "skipped (no time left): $*"; return; }
  timeout "$left" iosim bench -o "$f" --resume --flush "$FLUSH" $Q --peers none "$@" 2>&1 | tr '\r' '\n' | tail -1
}
b --schedule fa2,fa3 --seqlen 512,1024 --head-dim 64,128 --causal both --heads 1 --batch 16,17,32,33,34,66,67
b --direction bwd --schedule fa2 --seqlen 1024 --head-dim 64,128 --causal both --heads 1 --batch 16,17,33,34
b --schedule naive,fa1,fa2,fa3 --seqlen 256,512,1024 --head-dim 64,128 --causal both --batch 1 --heads 1,4,16
b --direction bwd --schedule naive,fa1,fa2 --seqlen 256,512,1024 --head-dim 64,128 --causal false --batch 1 --heads 1,4,16
echo "elapsed $(( $(date +%s) - start )) s"
