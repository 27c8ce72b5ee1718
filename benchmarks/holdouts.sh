#!/usr/bin/env bash
# Held-out accuracy of the calibration, by shape: fit on the rest, report the held-out rows;
# then the shipped calibrated profiles on data no fit saw. Writes reports/data/h100/holdouts.txt:
#   bash benchmarks/holdouts.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
{
  for h in 'seqlen_q>=8192' 'head_dim==256' 'head_dim==128' 'head_dim==64'; do
    echo "== iosim calibrate reports/data/h100/measured.csv --hw h100-sxm5-80gb --ncu reports/data/h100/ncu_mechanism.csv --holdout-where '$h'"
    iosim calibrate reports/data/h100/measured.csv --hw h100-sxm5-80gb --ncu reports/data/h100/ncu_mechanism.csv \
      --holdout-where "$h" -o "$tmp/x.toml" | grep -v '^wrote'
    echo
  done
  echo "== iosim validate reports/data/h100/measured_new.csv   (shapes no fit saw, shipped calibrated H100)"
  iosim validate reports/data/h100/measured_new.csv | sed -n '1,6p'
  echo
  echo "== iosim validate reports/data/h200/measured.csv   (the H100 fit on the H200 datasheet)"
  iosim validate reports/data/h200/measured.csv | sed -n '1,6p'
} > reports/data/h100/holdouts.txt
rm -rf "$tmp"
