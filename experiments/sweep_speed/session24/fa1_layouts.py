"""CPU seconds of `iosim.schedules.shapes` for each schedule over cpu_ab.py's large grid (21,120
problems, H100), the best of 3 after one call, and how many distinct shapes each gives: fa1's
layout (its split of batch x heads CTAs) is worked out problem by problem. Also the whole
`predict_many(..., limiter=False)` of the grid (its 84,480 rows), per CPU second.

    PYTHONPATH=$PWD python experiments/sweep_speed/session24/fa1_layouts.py > experiments/sweep_speed/session24/fa1_layouts.log
"""

import time

import iosim
from iosim.analysis.predict import predict_many
from iosim.core.hardware import load
from iosim.schedules import shapes

hw, four = load("h100"), ["naive", "fa1", "fa2", "fa3"]
probs = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c)
         for n in (256 * 2**i for i in range(10)) for d in (64, 128, 256)
         for c in (False, True) for b in (2**i for i in range(11)) for h in range(4, 129, 4)]
keys = [p.shape_key() for p in probs]


def cpu(f, k=3):
    f()
    best = float("inf")
    for _ in range(k):
        t = time.process_time()
        f()
        best = min(best, time.process_time() - t)
    return best


for s in four:
    got = shapes(s, probs, hw, keys=keys)
    print(f"{s}: shapes() of {len(probs):,} problems {cpu(lambda s=s: shapes(s, probs, hw, keys=keys)):.3f} CPU s, "
          f"{len(set(got))} distinct shapes")
rows = len(predict_many(probs, hw, four, limiter=False))
print(f"predict_many(..., limiter=False): {rows:,} rows, "
      f"{rows / cpu(lambda: predict_many(probs, hw, four, limiter=False), 2):,.0f} per CPU s")
