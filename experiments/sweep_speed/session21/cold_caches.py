"""iosim.predict of quick_ab's 24 problems in turn (CPU ms a problem, the least of 5 passes),
warm, and with the caches keyed by a shape (the lru caches of iosim.schedules,
iosim.model.timing and iosim.model.memory, and fa1._FIXED) cleared before each problem; three
times. Output: cold_caches.log.

    PYTHONPATH=$PWD python experiments/sweep_speed/session21/cold_caches.py
"""

import sys
import time

import iosim
from iosim.analysis import predict as P
from iosim.core.hardware import load

hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]
var = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c) for n in (1024, 8192, 32768)
       for d in (64, 128) for c in (False, True) for b, h in ((1, 16), (8, 32))]
for q in var:
    P.predict(q, hw, four)
shape = [v for n, m in sys.modules.items() if n.startswith(("iosim.schedules", "iosim.model.timing", "iosim.model.memory"))
         for v in vars(m).values() if hasattr(v, "cache_clear") and getattr(v, "__module__", "").startswith("iosim")]
fa1 = sys.modules["iosim.schedules.fa1"]


def run(cold: bool) -> float:
    t = time.process_time()
    for q in var:
        if cold:
            for f in shape:
                f.cache_clear()
            fa1._FIXED.__init__()
        P.predict(q, hw, four)
    return (time.process_time() - t) / len(var) * 1e3


print(f"{len(shape)} caches: " + ", ".join(sorted({f"{f.__module__}.{f.__name__}" for f in shape})))
for _ in range(3):
    print(f"warm {min(run(False) for _ in range(5)):.3f}  shape caches cleared before each "
          f"{min(run(True) for _ in range(5)):.3f} (CPU ms a problem)")
