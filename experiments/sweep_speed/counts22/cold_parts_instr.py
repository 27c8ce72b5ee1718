"""Instructions (callgrind's Ir) of the four Plans (schedules.plan, as predict._columns asks)
and of table._shapes of them (the counts) for problems never asked before: sweep_speed.
PROBLEM_SETS' first round of `new` problems (24: N distinct, none a power of two; d 64/128,
causal both, batch 1..8, heads 8..32), the caches keyed by a shape cleared before each (the lru
caches of iosim.schedules, iosim.model.timing, iosim.model.memory and fa1._FIXED, as
../session21/cold_caches.py). Runs: the clearing alone, it and the Plans, it, the Plans and
their _shapes, `--calls` problems each; per problem: the Plans' (the second run less the
first) and the counts' (the third less the second). Each run in its own process (PYTHONPATH
the tree), PYTHONHASHSEED=0, the collector off.

    python experiments/sweep_speed/counts22/cold_parts_instr.py TREE [TREE ...] [--calls 96]
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
from iosim.analysis import predict as P, table
from iosim.schedules import plan
from iosim.core.hardware import load
hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]
probs = [iosim.Problem(batch=(1, 2, 4, 8)[i % 4], heads=(8, 16, 32)[i % 3], seqlen_q=1056 + 64 * i,
                       head_dim=(64, 128)[i % 2], causal=bool(i // 2 % 2)) for i in range(24)]
shape = [v for n, m in sys.modules.items() if n.startswith(("iosim.schedules", "iosim.model.timing", "iosim.model.memory"))
         for v in vars(m).values() if hasattr(v, "cache_clear") and getattr(v, "__module__", "").startswith("iosim")]
fa1 = sys.modules["iosim.schedules.fa1"]
def clear():
    for f in shape:
        f.cache_clear()
    fa1._FIXED.__init__()
for _ in range(3):
    for p in probs:
        P.predict(p, hw, four)
run, calls = sys.argv[1], int(sys.argv[2])
gc.collect()
gc.disable()
for i in range(calls):
    p = probs[i % len(probs)]
    clear()
    if run != "clear":
        pls = [table.predictable(plan(s, p, hw, check=True), hw) for s in four]
        if run == "shapes":
            table._shapes([(pl, hw, False, None) for pl in pls])
"""
RUNS = ("clear", "plans", "shapes")


def instructions(tree: str, run: str, calls: int) -> int:
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                        sys.executable, "-c", CHILD, run, str(calls)], capture_output=True, text=True,
                       check=True, cwd=tree, env={**os.environ, "PYTHONPATH": tree, "PYTHONHASHSEED": "0"})
    return int(re.search(r"Collected : (\d+)", r.stderr).group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--calls", type=int, default=96)
    a = ap.parse_args()
    jobs = [(t, run) for t in a.trees for run in RUNS]
    with ThreadPoolExecutor(2) as pool:
        got = dict(zip(jobs, pool.map(lambda j: instructions(*j, a.calls), jobs)))
    for t in a.trees:
        plans = (got[t, "plans"] - got[t, "clear"]) / a.calls
        counts = (got[t, "shapes"] - got[t, "plans"]) / a.calls
        print(f"{t}: never-seen problems, shape caches cleared: plans {plans:,.0f}  counts (_shapes) "
              f"{counts:,.0f} instructions a problem")


if __name__ == "__main__":
    main()
