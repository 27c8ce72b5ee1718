#!/bin/bash
# the loop that made this folder's runs (its output: stages.log): stages.py of main as wave19
# branched from it (4f0fd86, exported with `git archive 4f0fd86 | tar -x -C /tmp/w19base`) and
# of wave19, alternately, 3 runs each, each tree's own stages.py and PYTHONPATH
D=/work/wt/wave19/experiments/sweep_speed/wave19
for i in 1 2 3; do
  echo "run $i main $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  (cd /tmp/w19base && PYTHONPATH=/tmp/w19base python experiments/sweep_speed/stages.py --rounds 15 --grid-rounds 9 --out $D/stages_4f0fd86_run$i.json > /dev/null)
  echo "run $i wave19 $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)"
  (cd /work/wt/wave19 && PYTHONPATH=/work/wt/wave19 python experiments/sweep_speed/stages.py --rounds 15 --grid-rounds 9 --out $D/stages_run$i.json > /dev/null)
done
echo "done $(date -u +%T)"
