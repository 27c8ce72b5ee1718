"""Instructions per call of one function of predict (its args captured from the record and causal
problems' predict), per tree: python irf.py FUNC TREE [TREE...]  FUNC: model|predict_batch|dram|facts|chosen|predict"""
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

N = int(os.environ.get("N", 300))
SETUP = r'''
import copy, numpy as np, iosim
from iosim.analysis import predict as P, table
from iosim.model import timing, memory
from iosim.core.hardware import load
hw = load("h100"); four = ["naive","fa1","fa2","fa3"]
probs = [iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128, causal=c) for c in (False, True)]
cap = {}
def spy(mod, name):
    f = getattr(mod, name)
    def w(*a, **k):
        cap.setdefault(name, []).append((a, k)); return f(*a, **k)
    setattr(mod, name, w); return f
fs = {n: spy(m, n) for m, n in ((table, "_model"), (timing, "predict_batch"), (memory, "dram_arrays"), (timing, "facts_table"), (timing, "_chosen"))}
for p in probs: P.predict(p, hw, four)
for m, n in ((table, "_model"), (timing, "predict_batch"), (memory, "dram_arrays"), (timing, "facts_table"), (timing, "_chosen")): setattr(m, n, fs[n])
def fresh(b): return timing.Batch(b.table, b.rates, b.launch, b.periods, b.pidx)
def run_model():
    for a, k in cap["_model"]: fs["_model"](*a, **k)
def run_pb():
    for a, k in cap["predict_batch"]: fs["predict_batch"](fresh(a[0]), *a[1:], **k)
def run_dram():
    for a, k in cap["dram_arrays"]: fs["dram_arrays"](*a, **k)
def run_facts():
    for a, k in cap["facts_table"]: fs["facts_table"](*a, **k)
def run_chosen():
    for a, k in cap["_chosen"]: fs["_chosen"](*a, **k)
def run_predict():
    for p in probs: P.predict(p, hw, four)
for _ in range(5): run_FUNC()
import gc; gc.collect(); gc.disable()
'''
def run(tree, func, n):
    code = SETUP.replace("FUNC", func) + f"\nfor _ in range({n}):\n    run_{func}()\n"
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", code],
                       capture_output=True, text=True, cwd=tree, env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": tree})
    m = re.search(r"Collected : (\d+)", r.stderr)
    if not m or r.returncode:
        print(r.stderr[-3000:])
        raise SystemExit
    return int(m.group(1))
func, trees = sys.argv[1], sys.argv[2:]
with ThreadPoolExecutor(2) as ex:
    jobs = {(t, n): ex.submit(run, t, func, n) for t in trees for n in (0, N)}
    for t in trees:
        print(f"{(jobs[t, N].result() - jobs[t, 0].result()) / N / 2:12,.0f}  {func} per problem  {t}")
