#!/bin/bash
# The refit of session 14 (issue 23; CPU only, no GPU): the shipped H100 profile and the fits
# beside it, each written to a temp folder with its H200 transfer, each held to the H100 rows
# and (through the transfer) the H200 rows with --hw:
#   before:  the profile shipped before the refit (git show 0181f63:hwprofiles/..., main at fa1b14's merge), today's model
#   shipped: hwprofiles/h100-sxm5-80gb.calibrated.toml (the docs' calibrate command: queued waves,
#            FA3 backward rows of the Plan's kernels, dqwarp/ and the deterministic mode) and its
#            H200 transfer
#   queued:  the same data without FA3 backward rows (pipeline.wgmma_wait_cycles not fitted: the
#            turn waits fall back to load_latency_cycles)
#   issued:  the docs' data with experiments/waves/h100/measured_waves.csv (issued times)
#   fa3old:  queued waves plus experiments/fa3_bwd/h100/measured_bwd.csv (session 13's FA3 rows:
#            the kernel before the LSE/D prefetch, 4-9% slower than recheck/ at the same shapes)
#   bash experiments/refit14/run.sh   (writes experiments/refit14/summary.txt)
set -eu
cd "$(dirname "$0")/../.."
T=$(mktemp -d); S=experiments/refit14/summary.txt
base="experiments/fwd_grid/h100/measured.csv experiments/bwd_grid/h100/measured_bwd.csv"
fa3="experiments/fa3_bwd/h100/dqwarp/measured_bwd.csv experiments/fa3_bwd/h100/dq256/run2/measured_det.csv"
queued=experiments/waves/h100/flush10/measured_waves_rq.csv
fit() { mkdir -p "$T/$name"
        iosim calibrate $base "$@" --hw h100-sxm5-80gb --ncu experiments/ncu_mechanism/h100/ncu_mechanism.csv \
          --holdout-where 'seqlen_q>=8192 or heads<=4' --transfer-to h200-sxm-141gb \
          -o "$T/$name/h100-sxm5-80gb.calibrated.toml" --force | grep -E '^(fitted|measured)'; }
summary="experiments/fwd_grid/h100/measured.csv experiments/new_shapes/h100/measured_new.csv experiments/fwd_ncu/h100/measured_ncu.csv experiments/fa3/h100/measured_fa3.csv experiments/bwd_grid/h100/measured_bwd.csv"
h200="experiments/fwd_grid/h200/measured.csv experiments/fwd_ncu/h200/measured_ncu.csv experiments/fa3/h200/measured_fa3.csv experiments/bwd_grid/h200/measured_bwd.csv"
small="experiments/small_new/h100/flush10/measured_small_rq1.csv $queued"
fa3all="experiments/fa3_bwd/h100/recheck/measured_bwd.csv $fa3 experiments/fa3_bwd/h100/d256/measured_bwd.csv experiments/fa3_bwd/h100/dq256/run2/measured_bwd.csv"
mkdir -p "$T/before"
for g in h100-sxm5-80gb h200-sxm-141gb; do
  git show "0181f63:hwprofiles/$g.calibrated.toml" > "$T/before/$g.calibrated.toml"
done
{
  echo "# $(git rev-parse --short HEAD), $(date -u +%F); MAPE / worst percent per schedule and direction (iosim validate --hw PROFILE)"
  for name in queued issued fa3old; do
    echo "## fit $name"
    case $name in
      queued) fit $queued ;;
      issued) fit experiments/waves/h100/measured_waves.csv $fa3 ;;
      fa3old) fit $queued experiments/fa3_bwd/h100/measured_bwd.csv ;;
    esac
  done
  for name in before shipped queued issued fa3old; do
    dir=$T/$name; [ $name = shipped ] && dir=hwprofiles
    for set in summary h200 small fa3_bwd fa3_old; do
      hw=$dir/h100-sxm5-80gb.calibrated.toml
      case $set in
        summary) files=$summary ;; small) files=$small ;; fa3_bwd) files=$fa3all ;;
        fa3_old) files=experiments/fa3_bwd/h100/measured_bwd.csv ;;
        h200) files=$h200; hw=$dir/h200-sxm-141gb.calibrated.toml ;;
      esac
      echo "## profile $name, rows $set"
      iosim validate $files --hw "$hw" | sed -n '/mape_pct/,/^$/p' | awk '{print $2, $3, $6, $8}'
    done
  done
  echo "## FA3 backward: ncu tensor pipe busy against the FLOPs at the peak rate (python experiments/refit14/tensor_busy.py)"
  python experiments/refit14/tensor_busy.py
} > "$S"
rm -rf "$T"
cat "$S"
