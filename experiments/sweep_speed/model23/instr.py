"""Instructions (callgrind) per call of table._model, its arguments captured from predict of the
record problem and its causal twin (four schedules, H100), mean of the two, per tree.
`mine`: timing._schedule (another helper's) replayed from its captured answers, so the count
is _model's own and its callees' but _schedule's (the part model23 works on).
    N=200 python experiments/sweep_speed/model23/instr.py mine|model TREE [TREE...]"""
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

N = int(os.environ.get("N", 200))
SETUP = r'''
import copy, numpy as np, iosim
from iosim.analysis import predict as P, table
from iosim.model import timing
from iosim.core.hardware import load
hw = load("h100"); four = ["naive","fa1","fa2","fa3"]
probs = [iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128, causal=c) for c in (False, True)]
cap, sched = [], []
model, schedule = table._model, timing._schedule
def spy(*a, **k):
    cap.append((a, k)); return model(*a, **k)
table._model = spy
for p in probs: P.predict(p, hw, four)
table._model = model
def record(*a, **k):
    out = schedule(*a, **k); sched.append(out); return out
if MINE:
    timing._schedule = record
    for a, k in cap: model(*a, **k)
    at = [0]
    def replay(*a, **k):
        out = sched[at[0] % len(sched)]; at[0] += 1
        return tuple(x.copy() if isinstance(x, np.ndarray) else x for x in out)
    timing._schedule = replay
def run():
    for a, k in cap: model(*a, **k)
for _ in range(5): run()
import gc; gc.collect(); gc.disable()
'''


def run(tree, mine, n):
    code = SETUP.replace("MINE", str(mine)) + f"\nfor _ in range({n}):\n    run()\n"
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", code],
                       capture_output=True, text=True, cwd=tree,
                       env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": tree})
    m = re.search(r"Collected : (\d+)", r.stderr)
    if not m or r.returncode:
        print(r.stderr[-3000:])
        raise SystemExit(1)
    return int(m.group(1))


what, trees = sys.argv[1], sys.argv[2:]
mine = what == "mine"
with ThreadPoolExecutor(2) as ex:
    jobs = {(t, n): ex.submit(run, t, mine, n) for t in trees for n in (0, N)}
    for t in trees:
        print(f"{(jobs[t, N].result() - jobs[t, 0].result()) / N / 2:12,.0f}  {what} per problem  {t}", flush=True)
