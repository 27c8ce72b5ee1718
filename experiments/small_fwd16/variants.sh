#!/usr/bin/env bash
# Each variant (a patch in this folder; "base": none) applied to a throwaway worktree, the
# H100 profile refitted with the docs' calibrate command (and the H200 transfer), then per
# schedule/direction MAPE / mean / worst of the small block and of the validate summary's files
# (rows.py). From the repo root, no GPU:  bash experiments/small_fwd16/variants.sh > experiments/small_fwd16/variants.txt
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(git rev-parse --show-toplevel)
for v in ${VARIANTS:-base fa1_qb1_none kernel_head_async kernel_head_drain oacc_lines oacc_lines_qb1 ring_at_residency}; do
  wt=$(mktemp -d)/wt
  git -C "$root" worktree add -q --detach "$wt" HEAD
  ( cd "$wt"
    [ "$v" = base ] || git apply "$here/$v.patch"
    export PYTHONPATH=$wt
    echo "== $v"
    if [ "$v" != base ]; then
      iosim calibrate experiments/fwd_grid/h100/measured.csv experiments/bwd_grid/h100/measured_bwd.csv \
        experiments/waves/h100/flush10/measured_waves_rq.csv experiments/fa3_bwd/h100/dqwarp/measured_bwd.csv \
        experiments/fa3_bwd/h100/dq256/run2/measured_det.csv experiments/fa3/h100/measured_fa3.csv \
        --hw h100-sxm5-80gb -o hwprofiles/h100-sxm5-80gb.calibrated.toml --holdout-where 'seqlen_q>=8192 or heads<=4' \
        --ncu experiments/ncu_mechanism/h100/ncu_mechanism.csv --force --transfer-to h200-sxm-141gb 2>&1 | grep '^fitted'
    fi
    echo "-- small block (validate-small-queued files)"
    python "$here/rows.py" small /dev/null
    echo "-- validate summary files"
    python "$here/rows.py" main /dev/null )
  git -C "$root" worktree remove --force "$wt"
done
