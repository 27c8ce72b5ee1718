#!/usr/bin/env bash
# How long `iosim report` takes, how much memory it needs and how large a page it writes for
# sweeps of about 10^5 and 10^6 points (the page draws at most iosim.report.Budget().rows rows
# and says what it left out). Writes reports/data/report_scale.txt; run from the repository root:
#     bash benchmarks/report_scale.sh
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=reports/data/report_scale.txt
common="--head-dim 64,128,256 --causal both --direction both --schedule all --hw h100-sxm5-80gb,a100-sxm4-80gb --no-progress"
{
  echo "# made by: bash benchmarks/report_scale.sh on $(date -u +%F), $(nproc) CPUs, $(python --version)"
  for case in "1e5|--seqlen 256..65536:320 --batch 1,4,16 --heads 16,32" \
              "1e6|--seqlen 64..65536:64 --batch 1,2,4,8,16,32 --heads 8,32"; do
    name=${case%%|*}
    grid=${case#*|}
    echo "## $name: iosim sweep $grid $common -o sweep.csv; iosim report sweep.csv -o report.html"
    /usr/bin/time -f "sweep_wall_s %e  sweep_peak_rss_kb %M" iosim sweep $grid $common -o "$tmp/sweep.csv" 2>&1 \
      | grep -E "^[0-9]+ rows|sweep_wall_s"
    /usr/bin/time -f "report_wall_s %e  report_peak_rss_kb %M" iosim report "$tmp/sweep.csv" -o "$tmp/report.html" 2>&1 \
      | grep -E "report_wall_s"
    echo "page_bytes $(stat -c %s "$tmp/report.html")"
    grep -o "it draws [0-9,]* of [0-9,]* predicted rows" "$tmp/report.html"
  done
} > "$out"
cat "$out"
