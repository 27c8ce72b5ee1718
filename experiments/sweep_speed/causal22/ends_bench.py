"""_shared_ends alone, on the arguments the causal record problem's predict gives it (b4 h32
N4096 d128 causal, four schedules): captures each call's arguments and its batch's remembered
ends, then times the calls (us per predict's worth) and prints their shapes; --profile: cProfile.

    PYTHONPATH=TREE python experiments/sweep_speed/causal22/ends_bench.py [--reps 300] [--profile]
        [--old OLD_TIMING_PY]   (A/B in one process: OLD's _shared_ends and TREE's, alternated)
"""
import argparse
import copy
import sys
import time

sys.path.insert(0, "experiments/sweep_speed/sched22")
import sched_bench as S  # noqa: E402

from iosim.model import timing as T  # noqa: E402


def capture():
    p = S.problems(False)[1]
    calls = S.capture(p)
    got, orig = [], T._shared_ends

    def spy(b, *a):
        got.append((copy.copy(b.ends), b, a))
        return orig(b, *a)
    T._shared_ends = spy
    try:
        S.run(calls)
    finally:
        T._shared_ends = orig
    return got


def run(got, f=None):
    for ends, b, a in got:
        b.ends = dict(ends)
        (f or T._shared_ends)(b, *a)


def ab(got, path, rounds):
    import importlib.util
    import statistics
    spec = importlib.util.spec_from_file_location("timing_old", path)
    old = importlib.util.module_from_spec(spec)
    sys.modules["timing_old"] = old  # (dataclasses look their module up)
    spec.loader.exec_module(old)
    for ends, b, a in got:  # the same answers, to the bit
        b.ends = dict(ends)
        x = T._shared_ends(b, *a)
        b.ends = dict(ends)
        assert x.tobytes() == old._shared_ends(b, *a).tobytes()
    times = {"old": [], "new": []}
    for r in range(rounds):
        for name, f in (("old", old._shared_ends), ("new", T._shared_ends))[::1 if r % 2 else -1]:
            t0 = time.perf_counter()
            for _ in range(20):
                run(got, f)
            times[name].append((time.perf_counter() - t0) / 20 * 1e6)
    o, n = (statistics.median(times[k]) for k in ("old", "new"))
    bo, bn = (min(times[k]) for k in ("old", "new"))
    print(f"_shared_ends: old median {o:.1f} us (best {bo:.1f}), new median {n:.1f} us (best {bn:.1f}): "
          f"new/old {n / o:.3f} (best {bn / bo:.3f})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=300)
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--old")
    a = ap.parse_args()
    got = capture()
    print("calls (rows, entries, known):", [(len(x[2][2].size), len(x[2][0]), len(x[0])) for x in got])
    if a.old:
        return ab(got, a.old, a.reps)
    if a.profile:
        import cProfile
        import pstats
        cProfile.runctx("for _ in range(n): run(got)", globals(), {"n": a.reps, "run": run, "got": got}, "/tmp/causal22.prof")
        pstats.Stats("/tmp/causal22.prof").sort_stats("tottime").print_stats(25)
        return
    best = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(a.reps):
            run(got)
        best.append((time.perf_counter() - t0) / a.reps * 1e6)
    print(f"_shared_ends: {min(best):.1f} us per predict's calls (best of 5)")


if __name__ == "__main__":
    main()
