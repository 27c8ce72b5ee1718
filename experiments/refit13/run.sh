#!/bin/bash
# What a refit of the calibrated profile would give on today's model (issue 23; CPU only, no GPU).
# Three fits beside the shipped profile, each written to a temp folder (the shipped
# hwprofiles/*.calibrated.toml are left as they are), each held to the H100 rows with --hw:
#   issued: the docs' calibrate command (waves: experiments/waves/h100/measured_waves.csv, issued times)
#   queued: the same with experiments/waves/h100/flush10/measured_waves_rq.csv (queued times)
#   fa3bwd: queued, plus FA3's backward rows (experiments/fa3_bwd/h100/measured_bwd.csv)
#   bash experiments/refit13/run.sh   (writes experiments/refit13/summary.txt)
set -eu
cd "$(dirname "$0")/../.."
T=$(mktemp -d); S=experiments/refit13/summary.txt
base="experiments/fwd_grid/h100/measured.csv experiments/bwd_grid/h100/measured_bwd.csv"
fit() { iosim calibrate $base "$@" --hw h100-sxm5-80gb --ncu experiments/ncu_mechanism/h100/ncu_mechanism.csv \
          --holdout-where 'seqlen_q>=8192 or heads<=4' -o "$T/$name.toml" --force | grep -E '^(fitted|measured)'; }
summary="experiments/fwd_grid/h100/measured.csv experiments/new_shapes/h100/measured_new.csv experiments/fwd_ncu/h100/measured_ncu.csv experiments/fa3/h100/measured_fa3.csv experiments/bwd_grid/h100/measured_bwd.csv"
small="experiments/small_new/h100/flush10/measured_small_rq1.csv experiments/waves/h100/flush10/measured_waves_rq.csv"
{
  echo "# $(git rev-parse --short HEAD), $(date -u +%F); MAPE / worst percent per schedule and direction (iosim validate --hw PROFILE)"
  for name in issued queued fa3bwd; do
    echo "## fit $name"
    case $name in
      issued) fit experiments/waves/h100/measured_waves.csv ;;
      queued) fit experiments/waves/h100/flush10/measured_waves_rq.csv ;;
      fa3bwd) fit experiments/waves/h100/flush10/measured_waves_rq.csv experiments/fa3_bwd/h100/measured_bwd.csv ;;
    esac
  done
  for name in shipped issued queued fa3bwd; do
    hw=$T/$name.toml; [ $name = shipped ] && hw=hwprofiles/h100-sxm5-80gb.calibrated.toml
    for set in summary small fa3_bwd; do
      case $set in summary) files=$summary ;; small) files=$small ;; fa3_bwd) files=experiments/fa3_bwd/h100/measured_bwd.csv ;; esac
      echo "## profile $name, rows $set"
      iosim validate $files --hw "$hw" | sed -n '/mape_pct/,/^$/p' | awk '{print $2, $3, $6, $8}'
    done
  done
} > "$S"
rm -rf "$T"
cat "$S"
