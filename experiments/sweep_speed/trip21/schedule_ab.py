"""_schedule alone: CPU us of one pass, replayed from the calls iosim.predict made (the record
problem, it causal, 24 varied problems: the mean), best of 15 rounds of 100 (process time); with
a path, every answer pickled (a bit-for-bit compare between trees).

    PYTHONPATH=TREE python experiments/sweep_speed/trip21/schedule_ab.py [OUT.pkl]
"""
import pickle
import sys
import time

import iosim
from iosim.analysis import predict as P
from iosim.core.hardware import load
from iosim.model import timing

hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]
rec = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
cau = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128, causal=True)
var = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c) for n in (1024, 8192, 32768)
       for d in (64, 128) for c in (False, True) for b, h in ((1, 16), (8, 32))]
calls = []
orig = timing._schedule


def spy(*a, **k):
    calls.append((a, k))
    return orig(*a, **k)


timing._schedule = spy
for p in [rec, cau] + var:
    P.predict(p, hw, four)
timing._schedule = orig
print("calls", len(calls), [len(a[0].ctas) for a, k in calls[:4]], file=sys.stderr)
def best(f, n=100, k=15):
    o = []
    for _ in range(k):
        t = time.process_time()
        for _ in range(n):
            f()
        o.append((time.process_time() - t) / n)
    return min(o) * 1e6
# copies of the facts each call (schedule writes into x only, a gathered copy)
def run(i):
    a, k = calls[i]
    return orig(*a, **k)
r = best(lambda: run(0))
c = best(lambda: run(1))
vs = best(lambda: [run(i) for i in range(2, len(calls))], n=20) / (len(calls) - 2)
print(f"schedule us: record {r:.1f} causal {c:.1f} varied/call {vs:.1f}")
if len(sys.argv) > 1:
    outs = [run(i) for i in range(len(calls))]
    pickle.dump(outs, open(sys.argv[1], "wb"))
