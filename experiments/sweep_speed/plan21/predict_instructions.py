"""Instructions (callgrind's Ir) per iosim.predict call of one problem, four schedules, trees
side by side, without the cyclic garbage collector's passes: the record problem (batch 4, heads
32, N 4096, d 128) and its causal twin, 20 calls each to warm up, then `--calls` more each with
the collector off (its full passes, tens of millions of instructions, come where allocations
fall: a change that moves them moves a short run's count by more than it saves; ../instructions.py
counts them in, over 10 calls of predict_rows). Per tree: the run with the calls less the run
without, over the calls. Each tree in its own process (PYTHONPATH), PYTHONHASHSEED=0, two at a
time.

    python experiments/sweep_speed/plan21/predict_instructions.py TREE [TREE ...] [--calls 100]
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

CHILD = """
import gc, sys
import iosim
from iosim.analysis import predict as P
from iosim.core.hardware import load
hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]
probs = [iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128, causal=c) for c in (False, True)]
for _ in range(20):
    for p in probs:
        P.predict(p, hw, four)
gc.collect()
gc.disable()
for _ in range(int(sys.argv[1])):
    for p in probs:
        P.predict(p, hw, four)
"""


def instructions(tree: str, calls: int) -> int:
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                        sys.executable, "-c", CHILD, str(calls)], capture_output=True, text=True,
                       check=True, cwd=tree, env={**os.environ, "PYTHONPATH": tree, "PYTHONHASHSEED": "0"})
    return int(re.search(r"Collected : (\d+)", r.stderr).group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--calls", type=int, default=100)
    a = ap.parse_args()
    jobs = [(t, n) for t in a.trees for n in (0, a.calls)]
    with ThreadPoolExecutor(2) as pool:
        got = dict(zip(jobs, pool.map(lambda j: instructions(*j), jobs)))
    for t in a.trees:
        per = (got[t, a.calls] - got[t, 0]) / (2 * a.calls)
        print(f"{t}: {per:,.0f} instructions per predict (the record and causal problems' mean)")


if __name__ == "__main__":
    main()
