"""Instructions (callgrind's Ir) per _schedule pass of iosim.predict (the record problem and
its causal twin, one call each), trees side by side: each tree's run with `--calls` passes of
both problems less its run without, over the calls; collector off, PYTHONHASHSEED=0.

    python experiments/sweep_speed/sched22/sched_instructions.py TREE [TREE ...] [--calls 50]
"""
import argparse
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

CHILD = f"""
import gc, sys
args, sys.argv = sys.argv[1:], ["x"]
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
import sched_bench as S
from iosim.model import timing as T
from iosim.analysis import predict as P
which = [int(x) for x in args[1].split(",")]
calls = []
for i in which:
    p = S.problems(False)[i]
    for _ in range(3):
        P.predict(p, S.hw, S.four)
    calls += S.capture(p)
S.run(calls)
gc.collect()
gc.disable()
for _ in range(int(args[0])):
    S.run(calls)
"""  # (this folder's sched_bench, whichever tree runs)


def instructions(tree, calls, which):
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                        sys.executable, "-c", CHILD, str(calls), which], capture_output=True, text=True,
                       check=True, cwd=tree, env={**os.environ, "PYTHONPATH": tree, "PYTHONHASHSEED": "0"})
    return int(re.search(r"Collected : (\d+)", r.stderr).group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--calls", type=int, default=50)
    a = ap.parse_args()
    jobs = [(t, n, w) for t in a.trees for w in ("0", "1") for n in (0, a.calls)]
    with ThreadPoolExecutor(2) as pool:
        got = dict(zip(jobs, pool.map(lambda j: instructions(*j), jobs)))
    for t in a.trees:
        per = [(got[t, a.calls, w] - got[t, 0, w]) / a.calls for w in ("0", "1")]
        print(f"{t}: _schedule per predict: record {per[0]:,.0f}, causal {per[1]:,.0f} instructions")


if __name__ == "__main__":
    main()
