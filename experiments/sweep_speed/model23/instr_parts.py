"""Instructions (callgrind) per call of each of model23's functions, on their arguments captured
from iosim.predict of the record problem and its causal twin (mean of the two), timing._schedule
answering from a store (its first answer for that many rows: another helper's part left out),
GC off (as predict runs), per tree:
    N=200 python experiments/sweep_speed/model23/instr_parts.py FUNC[,FUNC...] TREE [TREE...]
FUNC: _model dram_arrays facts_table predict_batch _busy _shortest _fluid _chosen"""
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

N = int(os.environ.get("N", 200))
SETUP = r'''
import gc, numpy as np, iosim
from iosim.analysis import predict as P, table
from iosim.model import timing, memory
from iosim.core.hardware import load
hw = load("h100"); four = ["naive","fa1","fa2","fa3"]
probs = [iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128, causal=c) for c in (False, True)]
MODS = {"_model": table, "dram_arrays": memory}
cap, real = {}, {}
def spy(mod, name):
    f = real[name] = getattr(mod, name)
    def w(*a, **k):
        cap.setdefault(name, []).append((a, k)); return f(*a, **k)
    setattr(mod, name, w)
names = ("_model", "dram_arrays", "facts_table", "predict_batch", "_busy", "_shortest", "_fluid", "_chosen")
for n in names: spy(MODS.get(n, timing), n)
for p in probs: P.predict(p, hw, four)
for n in names: setattr(MODS.get(n, timing), n, real[n])
sched, store = timing._schedule, {}
def stored(f, r, slots, b, kidx, deps=False, bound=False):
    key = (len(kidx), deps, bound)
    if key not in store:
        store[key] = sched(f, r, slots, b, kidx, deps, bound)
    return store[key]
timing._schedule = stored
def fresh(x):
    return timing.Batch(x.table, x.rates, x.launch, x.periods, x.pidx) if isinstance(x, timing.Batch) else x
def run():
    f = real[FUNC]
    for a, k in cap[FUNC]:
        f(fresh(a[0]), *a[1:], **k)
for _ in range(5): run()
gc.collect(); gc.disable()
'''


def run(tree, func, n):
    code = SETUP.replace("FUNC", repr(func)) + f"\nfor _ in range({n}):\n    run()\n"
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", code],
                       capture_output=True, text=True, cwd=tree,
                       env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": tree})
    m = re.search(r"Collected : (\d+)", r.stderr)
    if not m or r.returncode:
        print(r.stderr[-3000:])
        raise SystemExit(1)
    return int(m.group(1))


funcs, trees = sys.argv[1].split(","), sys.argv[2:]
with ThreadPoolExecutor(2) as ex:
    jobs = {(f, t, n): ex.submit(run, t, f, n) for f in funcs for t in trees for n in (0, N)}
    for f in funcs:
        for t in trees:
            calls = 2  # (each function's calls of the two problems: run() makes them all)
            print(f"{(jobs[f, t, N].result() - jobs[f, t, 0].result()) / N / calls:12,.0f}  {f} per problem  {t}",
                  flush=True)
