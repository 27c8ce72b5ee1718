#!/bin/bash
# Per (hw, schedule, direction) MAPE / mean / worst of the small block (validate-small-queued's
# files) and of the validate summary's nine files (experiments/small_fwd16/rows.py), at BASE
# (default main's f6296c8, the session's start) and at this tree, each with its own profiles:
#   bash experiments/mid_fwd17/groups.sh [BASE] > experiments/mid_fwd17/groups.txt
set -euo pipefail
base=${1:-f6296c8}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git archive "$base" | tar -x -C "$tmp"
for tree in "$tmp" "$PWD"; do
  if [ "$tree" = "$tmp" ]; then echo "== $base"; else echo "== this tree ($(git rev-parse --short HEAD)$(git diff --quiet HEAD -- iosim hwprofiles || echo ', modified'))"; fi
  for set in small main; do
    echo "-- $set"
    (cd "$tree" && PYTHONPATH="$tree" python "$PWD/experiments/small_fwd16/rows.py" "$set")
  done
done
