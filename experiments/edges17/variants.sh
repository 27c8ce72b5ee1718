#!/usr/bin/env bash
# The kernel's edges (issue 23, session 17 model17a): each variant (a patch in this folder;
# "base": this branch as committed; "main": the tree before it, main f6296c8) applied to a
# throwaway worktree, the H100 profile refitted with the docs' calibrate command (and the
# H200 transfer), then the fitted parameters and per schedule/direction MAPE / mean / worst of
# the small block (validate-small-queued's files) and of the validate summary's nine files
# (experiments/small_fwd16/rows.py); "holdout": base fitted with the wave grid's one-batch
# 16-head rows held out too (what the launch overhead is without them). From the repo root,
# no GPU:  bash experiments/edges17/variants.sh > experiments/edges17/variants.txt
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(git rev-parse --show-toplevel)
CAL="experiments/fwd_grid/h100/measured.csv experiments/bwd_grid/h100/measured_bwd.csv
  experiments/waves/h100/flush10/measured_waves_rq.csv experiments/fa3_bwd/h100/dqwarp/measured_bwd.csv
  experiments/fa3_bwd/h100/dq256/run2/measured_det.csv experiments/fa3/h100/measured_fa3.csv"
for v in ${VARIANTS:-main base first_load_rt l2_drain aux_passes holdout}; do
  wt=$(mktemp -d)/wt
  git -C "$root" worktree add -q --detach "$wt" "$([ "$v" = main ] && echo f6296c8 || echo HEAD)"
  ( cd "$wt"
    [ -f "$here/$v.patch" ] && git apply "$here/$v.patch"
    export PYTHONPATH=$wt
    echo "== $v"
    hold='seqlen_q>=8192 or heads<=4'
    [ "$v" = holdout ] && hold="$hold or (heads==16 and batch==1)"
    # shellcheck disable=SC2086
    iosim calibrate $CAL --hw h100-sxm5-80gb -o hwprofiles/h100-sxm5-80gb.calibrated.toml \
      --holdout-where "$hold" --ncu experiments/ncu_mechanism/h100/ncu_mechanism.csv --force \
      --transfer-to h200-sxm-141gb 2>&1 | grep '^fitted' || true
    if [ "$v" != holdout ]; then
      echo "-- small block (validate-small-queued files)"
      python "$here/../small_fwd16/rows.py" small /dev/null
      echo "-- validate summary files"
      python "$here/../small_fwd16/rows.py" main /dev/null
    fi )
  git -C "$root" worktree remove --force "$wt"
done
