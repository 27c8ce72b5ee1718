"""In-process A/B of `table._model` (the DRAM estimate, facts table and predict_batch of
iosim.predict's four schedules): another tree's model modules against this tree's, in one
process, interleaved, so a loaded machine slows both alike (quick_ab's fresh processes see
the load change between runs).

    PYTHONPATH=. python experiments/sweep_speed/model_ab.py /work/main [--rounds 21] [--glue]

The other tree's iosim/model/timing.py, iosim/model/memory.py and iosim/analysis/table.py are
loaded under other names beside this tree's package (the rest of iosim is this tree's: valid
while the two trees differ in those three files alone). Each problem's `_model` inputs are
taken from this tree's iosim.predict; both trees' answers must be equal to the bit. Prints
CPU microseconds a call, the best of `--rounds` rounds: the record problem (b4 h32 N4096
d128), its causal one and the mean over 24 varied problems (quick_ab.py's). `--glue`: with
each tree's `_schedule` answering from a store (its own first answer for that many rows),
what the calls around the schedule pass cost.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time

import numpy as np

import iosim
from iosim.analysis import predict as P
from iosim.analysis import table
from iosim.core.hardware import load
from iosim.model import timing

FOUR = ["naive", "fa1", "fa2", "fa3"]


def other_tree(root: str):
    """The other tree's table module, wired to its own timing and memory modules."""
    mods = {}
    for name, path in (("timing", "iosim/model/timing.py"), ("memory", "iosim/model/memory.py"),
                       ("table", "iosim/analysis/table.py")):
        spec = importlib.util.spec_from_file_location(f"ab_{name}", f"{root}/{path}")
        mods[name] = importlib.util.module_from_spec(spec)
        sys.modules[f"ab_{name}"] = mods[name]
        spec.loader.exec_module(mods[name])
    mods["table"].timing, mods["table"].memory = mods["timing"], mods["memory"]
    return mods["table"], mods["timing"]


def stored(mod) -> None:
    """mod._schedule answering from a store: its first answer for that many rows."""
    real, store = mod._schedule, {}

    def schedule(f, r, slots, b, kidx, deps=False, bound=False):
        key = (len(kidx), deps)
        if key not in store:
            store[key] = real(f, r, slots, b, kidx, deps, bound)
        return store[key]
    mod._schedule = schedule


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("other")
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--glue", action="store_true")
    a = ap.parse_args()
    old_table, old_timing = other_tree(a.other)
    hw = load("h100")
    rec = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
    cau = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128, causal=True)
    var = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c) for n in (1024, 8192, 32768)
           for d in (64, 128) for c in (False, True) for b, h in ((1, 16), (8, 32))]
    args, new = [], table._model
    table._model = lambda *x: (args.append(x), new(*x))[1]
    for p in [rec, cau] + var:
        P.predict(p, hw, FOUR)
    table._model = new
    for x in args:  # the same answers
        u, v = new(*x), old_table._model(*x)
        for f in ("roof", "pred", "dram_r", "dram_w", "roof_bound", "busiest", "util"):
            if not np.array_equal(getattr(u, f), getattr(v, f)):
                sys.exit(f"the trees' {f} differ")
        if u.bound != v.bound:
            sys.exit("the trees' limiters differ")
    if a.glue:
        stored(old_timing)
        stored(timing)
        sets = {"record": ([args[0]], 40), "causal": ([args[1]], 40)}
    else:
        sets = {"record": ([args[0]], 100), "causal": ([args[1]], 50), "varied": (args[2:], 4)}

    def cpu(f, xs, n):
        t = time.process_time()
        for _ in range(n):
            for x in xs:
                f(*x)
        return (time.process_time() - t) / n / len(xs) * 1e6

    best = {k: [np.inf, np.inf] for k in sets}
    for _ in range(a.rounds):
        for k, (xs, n) in sets.items():
            best[k] = [min(best[k][0], cpu(old_table._model, xs, n)), min(best[k][1], cpu(new, xs, n))]
    print(("glue (stored schedules) " if a.glue else "") + "  ".join(
        f"{k}: other {o:.1f} this {t:.1f} us ({t - o:+.1f})" for k, (o, t) in best.items()))


if __name__ == "__main__":
    main()
