"""The DataFrame's cost inside `iosim.predict` and alone: CPU ms per call (best of 9 rounds of
200 calls, the collector off throughout, as predict has it) of `iosim.predict` of the record
problem (b4 h32 N4096 d128, four schedules, H100), of `predict._columns` (its columns, no
frame), of the two in turn (`_columns` then `table.as_frame`), of `table.as_frame` of one
`_columns` answer again and again, and of `predict_rows`. Three rounds of each.

    PYTHONPATH=$PWD python experiments/sweep_speed/session23/in_context.py > experiments/sweep_speed/session23/in_context.log
"""

import gc
import time

import iosim
from iosim.analysis import predict as P
from iosim.analysis import table
from iosim.core.hardware import load
from iosim.schedules import DEFAULT

hw, four = load("h100"), ["naive", "fa1", "fa2", "fa3"]
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
for _ in range(50):
    P.predict(p, hw, four)
gc.disable()


def best(f, n: int = 200, k: int = 9) -> float:
    out = []
    for _ in range(k):
        t = time.process_time()
        for _ in range(n):
            f()
        out.append((time.process_time() - t) / n * 1e3)
    return min(out)


def both():
    cols, _ = P._columns(p, hw, four, DEFAULT, None)
    return table.as_frame(cols, dicts=True)


once, _ = P._columns(p, hw, four, DEFAULT, None)
calls = {"predict": lambda: P.predict(p, hw, four),
         "_columns": lambda: P._columns(p, hw, four, DEFAULT, None),
         "_columns then as_frame": both,
         "as_frame of one answer, again": lambda: table.as_frame(once, dicts=True),
         "predict_rows": lambda: P.predict_rows(p, hw, four)}
for _ in range(3):
    print("  ".join(f"{k} {best(f):.4f}" for k, f in calls.items()))
