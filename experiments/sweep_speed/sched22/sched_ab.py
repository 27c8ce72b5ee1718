"""_schedule of two trees' timing.py in one process, on the arguments iosim.predict gives it
(the record problem and its causal twin, Batch.ends cleared before each call as predict's
fresh batch has it), alternated call by call: a load-independent ratio (both see the same
machine), each tree's best and median microseconds a predict's calls.

    PYTHONPATH=NEW python experiments/sweep_speed/sched22/sched_ab.py OLD_TIMING_PY [--rounds 400]
"""
import argparse
import importlib.util
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sched_bench as S  # noqa: E402

from iosim.analysis import predict as P  # noqa: E402
from iosim.model import timing as T  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("--rounds", type=int, default=400)
    a = ap.parse_args()
    spec = importlib.util.spec_from_file_location("timing_old", a.old)
    old = importlib.util.module_from_spec(spec)
    sys.modules["timing_old"] = old  # (dataclasses look their module up)
    spec.loader.exec_module(old)
    for p in S.problems(False):
        for _ in range(3):
            P.predict(p, S.hw, S.four)
        calls = S.capture(p)
        times = {"old": [], "new": []}
        for r in range(a.rounds):
            for name, f in (("old", old._schedule), ("new", T._schedule))[::1 if r % 2 else -1]:
                t0 = time.perf_counter()
                for args, kw in calls:
                    args[3].ends.clear()
                    f(*args, **kw)
                times[name].append((time.perf_counter() - t0) * 1e6)
        o, n = (statistics.median(times[x]) for x in ("old", "new"))
        print(f"{'causal' if p.causal else 'record'}: old median {o:.1f} us (best {min(times['old']):.1f}), "
              f"new median {n:.1f} us (best {min(times['new']):.1f}): new/old {n / o:.3f} (best {min(times['new']) / min(times['old']):.3f})")


if __name__ == "__main__":
    main()
