"""CPU microseconds a call of each of model23's functions, on its arguments captured from
iosim.predict of the record problem (arg `causal`: its causal twin), _schedule answering from a
store (its first answer for that many rows): best of 7 rounds of 2000 calls, GC off (as
predict runs).
    PYTHONPATH=$PWD python experiments/sweep_speed/model23/parts.py [causal]"""
import gc
import sys
import time

import iosim
from iosim.analysis import predict as P
from iosim.analysis import table
from iosim.core.hardware import load
from iosim.model import memory, timing

hw = load("h100")
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128, causal="causal" in sys.argv)
NAMES = ((table, "_model"), (memory, "dram_arrays"), (timing, "facts_table"), (timing, "predict_batch"),
         (timing, "_busy"), (timing, "_shortest"), (timing, "_fluid"), (timing, "_chosen"))
cap, real = {}, {}


def spy(mod, name):
    f = real[name] = getattr(mod, name)

    def w(*a, **k):
        cap.setdefault(name, (a, k))
        return f(*a, **k)
    setattr(mod, name, w)


for m, n in NAMES:
    spy(m, n)
P.predict(p, hw, ["naive", "fa1", "fa2", "fa3"])
for m, n in NAMES:
    setattr(m, n, real[n])
sched, store = timing._schedule, {}


def stored(f, r, slots, b, kidx, deps=False, bound=False):
    key = (len(kidx), deps)
    if key not in store:
        store[key] = sched(f, r, slots, b, kidx, deps, bound)
    return store[key]


timing._schedule = stored


def fresh(b):
    return timing.Batch(b.table, b.rates, b.launch, b.periods, b.pidx)


def cpu(name, n=2000):
    a, k = cap[name]
    f = real[name]
    best = float("inf")
    for _ in range(7):
        bs = [fresh(a[0]) for _ in range(n)] if isinstance(a[0], timing.Batch) else None
        t = time.process_time()
        if bs is None:
            for _ in range(n):
                f(*a, **k)
        else:
            for b in bs:
                f(b, *a[1:], **k)
        best = min(best, time.process_time() - t)
    return best / n * 1e6


gc.disable()  # (as iosim.predict runs)
print("  ".join(f"{n} {cpu(n):.1f}" for _, n in NAMES))
