"""Time predict_batch for the Batch predict_rows(p, hw, four schedules) builds (issue 26's one
problem): with and without the limiter, and _busy's one-pass rows. CPU seconds, best of rounds.
Run with PYTHONPATH set to the tree under test; `prof SORT` profiles."""
import sys
import time

import numpy as np

import iosim
from iosim.analysis import predict as P
from iosim.core.hardware import load
from iosim.model import timing

hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
cap = {}
orig = timing.predict_batch


def spy(b, *a, **k):
    cap["b"], cap["a"], cap["k"] = b, a, k
    return orig(b, *a, **k)


timing.predict_batch = spy
P.predict_rows(p, hw, four)
timing.predict_batch = orig
b, a, k = cap["b"], cap["a"], cap["k"]


def best(f, n=200, r=7):
    out = []
    for _ in range(r):
        t0 = time.process_time()
        for _ in range(n):
            f()
        out.append((time.process_time() - t0) / n)
    return min(out) * 1e3


if __name__ == "__main__":
    print(iosim.__file__, len(b), b.pidx.tolist(), a, k)
    print(f"pb limiter {best(lambda: timing.predict_batch(b, *a, **k)):.4f} ms")
    print(f"pb nolimiter {best(lambda: timing.predict_batch(b, False, *a[1:], **k)):.4f} ms")
    n, step = len(b), len(timing.RELIEFS)
    ki, ri = np.arange(n).repeat(step), np.concatenate([np.arange(step)] * n)
    print(f"busy {len(ki)} rows {best(lambda: timing._busy(b, ki, ri)):.4f} ms")
    print(f"predict_rows {best(lambda: P.predict_rows(p, hw, four), n=50):.4f} ms")
    if "grid" in sys.argv:  # cpu_ab.py's grid of 1,920 problems (7,680 rows), predict_many
        probs = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c)
                 for n in (256, 512, 1024, 2048, 4096, 8192, 16384, 32768) for d in (64, 128, 256)
                 for c in (False, True) for b in (1, 2, 4, 8, 16, 32, 64, 128)
                 for h in (8, 16, 32, 64, 128)]
        print(f"grid limiter {best(lambda: P.predict_many(probs, hw, four), n=1, r=3):.4f} ms")
        t = best(lambda: P.predict_many(probs, hw, four, limiter=False), n=1, r=3)
        print(f"grid nolimiter {t:.4f} ms")
    if len(sys.argv) > 2 and sys.argv[1] == "prof":
        import cProfile
        import pstats
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(300):
            timing.predict_batch(b, *a, **k)
        pr.disable()
        pstats.Stats(pr).sort_stats(sys.argv[2]).print_stats(45)
