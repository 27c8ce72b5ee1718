#!/usr/bin/env bash
# How long `iosim report` takes, how much memory it needs and how large a page it writes for
# sweeps of about 10^5 and 10^6 points (the page draws at most iosim.report_data.Budget().rows
# rows and says what it left out). Writes experiments/report_scale/report_scale.txt; run from the repository
# root:
#     bash experiments/report_scale/run.sh [DIR]
# DIR keeps the sweeps (DIR/sweep_1e5.csv, DIR/sweep_1e6.csv) and reuses them when present: the
# 10^6-point sweep takes several minutes of 2 CPUs, and it is the report being measured.
set -euo pipefail
dir=${1:-$(mktemp -d)}
mkdir -p "$dir"
out=experiments/report_scale/report_scale.txt
common="--head-dim 64,128,256 --causal both --direction both --schedule all --hw h100-sxm5-80gb,a100-sxm4-80gb --no-progress"
{
  echo "# made by: bash experiments/report_scale/run.sh on $(date -u +%F), $(nproc) CPUs, $(python --version), load average $(cut -d' ' -f1-3 /proc/loadavg)"
  for case in "1e5|--seqlen 256..65536:320 --batch 1,4,16 --heads 16,32" \
              "1e6|--seqlen 64..65536:64 --batch 1,2,4,8,16,32 --heads 8,32"; do
    name=${case%%|*}
    grid=${case#*|}
    sweep="$dir/sweep_$name.csv"
    echo "## $name: iosim sweep $grid $common -o sweep.csv; iosim report sweep.csv -o report.html"
    if [ -s "$sweep" ]; then
      echo "sweep reused from $sweep (made by the command above)"
    else
      /usr/bin/time -f "sweep_wall_s %e  sweep_peak_rss_kb %M" iosim sweep $grid $common -o "$sweep" 2>&1 \
        | grep -E "^[0-9]+ rows|sweep_wall_s|rror" || true
    fi
    echo "rows $(($(wc -l < "$sweep") - 1))"
    /usr/bin/time -f "report_wall_s %e  report_peak_rss_kb %M" iosim report "$sweep" -o "$dir/report_$name.html" 2>&1 \
      | grep -E "report_wall_s|rror" || true
    echo "page_bytes $(stat -c %s "$dir/report_$name.html")"
    grep -o "it draws [0-9,]* of [0-9,]* predicted rows" "$dir/report_$name.html" || true
  done
} > "$out"
cat "$out"
