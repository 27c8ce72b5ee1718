#!/bin/bash
# Instructions (callgrind's Ir) per call of small numpy operations at _schedule's sizes, each
# script's cases 100-200 times with collection toggled on (the client request, as ../vg_fn.py),
# less nothing (the `lambda` case: the call's own overhead). Note: valgrind emulates no AVX-512,
# so numpy takes its AVX2 loops and glibc's pow here, not SVML's (CPU time differs for pow).
#   bash experiments/sweep_speed/sched23/op_costs/run.sh > experiments/sweep_speed/sched23/op_costs/op_costs.log
cd "$(dirname "$0")"
PY=$(python -c 'import sys; print(sys.executable)')
for s in shapes calls views pow; do
  n=$(grep -oE "in range\(([0-9]+)\):$" $s.py | grep -oE "[0-9]+" || true); n=${n:-200}
  out=$(mktemp -d)
  PYTHONPATH=${PYTHONPATH:-../../../..} valgrind --tool=callgrind --collect-atstart=no --callgrind-out-file=$out/cg.out $PY $s.py > $out/names 2>/dev/null
  for i in $(ls $out | sed -n 's/^cg\.out\.\([0-9]*\).*/\1/p' | sort -n); do grep -m1 "^summary\|^totals" $out/cg.out.$i | awk '{print $2}'; done | paste - - | awk -v n=$n '{printf "%.0f\n", $2 / n}' > $out/vals
  echo "# $s.py"
  paste $out/names $out/vals
  rm -rf "$out"
done
