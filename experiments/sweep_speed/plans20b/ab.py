"""issue 26, plans20b: the four Plans of predict's problem (schedules.plan, check=True), their
counts as predict_rows takes them (table._shapes of templates of their own problems) and
predict_rows itself, CPU microseconds a call (the best of 9 rounds of 200, 100 for
predict_rows), each tree in its own process (PYTHONPATH), alternately, 3 times; prints per
tree the medians and the least of the runs.

    python experiments/sweep_speed/plans20b/ab.py /work/main .
"""
import json
import os
import statistics
import subprocess
import sys

CHILD = r'''
import time, iosim, json
from iosim import schedules
from iosim.analysis import table, predict as P
from iosim.core.hardware import load
hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
def cpu(f, n=200):
    best=1e9
    for _ in range(9):
        t0=time.process_time()
        for _ in range(n): f()
        best=min(best,(time.process_time()-t0)/n)
    return best*1e6
pls=[schedules.plan(s,p,hw,check=True) for s in four]
print(json.dumps({"plans_us": cpu(lambda: [schedules.plan(s,p,hw,check=True) for s in four]),
 "shapes_us": cpu(lambda: table._shapes([(pl,hw,False,None) for pl in pls])),
 "predict_rows_us": cpu(lambda: P.predict_rows(p, hw, four), 100)}))
'''
trees = [os.path.abspath(t) for t in sys.argv[1:]]
res = {t: [] for t in trees}
for _ in range(3):
    for t in trees:
        r=subprocess.run([sys.executable,"-c",CHILD],capture_output=True,text=True,env={**os.environ,"PYTHONPATH":t},cwd=t,check=True)
        res[t].append(json.loads(r.stdout.strip().splitlines()[-1]))
for t,rs in res.items():
    print(t, {k: round(statistics.median(r[k] for r in rs),1) for k in rs[0]}, {k: round(min(r[k] for r in rs),1) for k in rs[0]})
