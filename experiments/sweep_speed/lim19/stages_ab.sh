#!/bin/bash
# the loop that made this folder's runs (its output: stages.log)
# stages.py of main (65b11c7) and of lim19, alternately, 3 runs each
D=/work/wt/lim19/experiments/sweep_speed/lim19
cd /work/wt/lim19
for i in 1 2 3; do
  echo "run $i main $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  PYTHONPATH=/work/main python experiments/sweep_speed/stages.py --rounds 15 --grid-rounds 9 --out $D/stages_65b11c7_run$i.json > /dev/null
  echo "run $i lim19 $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  PYTHONPATH=/work/wt/lim19 python experiments/sweep_speed/stages.py --rounds 15 --grid-rounds 9 --out $D/stages_run$i.json > /dev/null
done
echo "done $(date -u +%T)"
