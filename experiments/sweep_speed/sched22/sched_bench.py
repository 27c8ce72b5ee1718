"""_schedule alone, on the arguments iosim.predict gives it (one problem, four schedules):
the record problem and its causal twin (and with --varied, 24 problems). Captures each
call's arguments, then times _schedule on them (us per predict's worth of calls) and, with
--save/--check FILE, stores or compares its answers to the bit.

    PYTHONPATH=TREE python experiments/sweep_speed/sched22/sched_bench.py [--save F | --check F]
"""
import argparse
import pickle
import time

import numpy as np

import iosim
from iosim.analysis import predict as P
from iosim.core.hardware import load
from iosim.model import timing as T

hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]


def problems(varied):
    ps = [iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128, causal=c) for c in (False, True)]
    if varied:  # quick_ab's 24 varied problems (sweep_speed.PROBLEM_SETS) and 8 never-asked ones
        ps += [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c) for n in (1024, 8192, 32768)
               for d in (64, 128) for c in (False, True) for b, h in ((1, 16), (8, 32))]
        ps += [iosim.Problem(batch=(1, 2, 4, 8)[i % 4], heads=(8, 16, 32)[i % 3], seqlen_q=1056 + 64 * i,
                             head_dim=(64, 128)[i % 2], causal=bool(i // 2 % 2)) for i in range(8)]
    return ps


def run(calls):
    """_schedule on each captured call's arguments, as predict's fresh batch takes them
    (shared_end's answers not yet remembered: Batch.ends cleared)."""
    out = []
    for a, k in calls:
        a[3].ends.clear()
        out.append(T._schedule(*a, **k))
    return out


def capture(p):
    calls, orig = [], T._schedule

    def spy(*a, **k):
        calls.append((a, k))
        return orig(*a, **k)
    T._schedule = spy
    try:
        P.predict(p, hw, four)
    finally:
        T._schedule = orig
    return calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--save")
    ap.add_argument("--check")
    ap.add_argument("--varied", action="store_true")
    ap.add_argument("--reps", type=int, default=300)
    a = ap.parse_args()
    got = {}
    for i, p in enumerate(problems(a.varied or a.save or a.check)):
        for _ in range(3):
            P.predict(p, hw, four)
        calls = capture(p)
        outs = run(calls)
        got[i] = [[np.asarray(x) for x in o] for o in outs]
        if i < 2:
            best = []
            for _ in range(5):
                t0 = time.perf_counter()
                for _ in range(a.reps):
                    run(calls)
                best.append((time.perf_counter() - t0) / a.reps * 1e6)
            shapes = [(len(c[0][0].ctas), c[0][5] if len(c[0]) > 5 else c[1].get("deps", False)) for c in calls]
            print(f"problem {i} ({'causal' if p.causal else 'non-causal'}): calls (rows, deps) {shapes}: "
                  f"{min(best):.1f} us per predict's calls (best of 5)")
    if a.save:
        pickle.dump(got, open(a.save, "wb"))
    if a.check:
        ref = pickle.load(open(a.check, "rb"))
        bad = 0
        for i in ref:
            for o, r in zip(got[i], ref[i], strict=True):
                for x, y in zip(o, r, strict=True):
                    if x.dtype != y.dtype or x.shape != y.shape or x.tobytes() != y.tobytes():
                        bad += 1
        print(f"check: {bad} outputs differ of {sum(len(o) for v in ref.values() for o in v)}")


if __name__ == "__main__":
    main()
