"""Instructions (callgrind's Ir) per iosim.predict call of one problem, four schedules, trees
side by side, the cyclic garbage collector off in the counted calls (as
../plan21/predict_instructions.py): `record`, the record problem (b4 h32 N4096 d128) and its
causal twin, warm; `cold`, sweep_speed.PROBLEM_SETS' first round of `new` problems (24, N
distinct, none a power of two) with the caches keyed by a shape cleared before each call (the
lru caches of iosim.schedules, iosim.model.timing, iosim.model.memory and fa1._FIXED, as
../session21/cold_caches.py): what a problem never asked before costs. Per tree and mode: the
run with the calls less the run without, over the calls. Each run in its own process
(PYTHONPATH the tree), PYTHONHASHSEED=0, two at a time.

    python experiments/sweep_speed/counts22/instr.py TREE [TREE ...] [--calls 40]
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
mode, calls = sys.argv[1], int(sys.argv[2])
if mode == "record":
    probs = [iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128, causal=c) for c in (False, True)]
else:
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
gc.collect()
gc.disable()
n = 0
while n < calls:
    for p in probs:
        if mode == "cold":
            clear()
        if n < calls:
            P.predict(p, hw, four)
        n += 1
"""


def instructions(tree: str, mode: str, calls: int) -> int:
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                        sys.executable, "-c", CHILD, mode, str(calls)], capture_output=True, text=True,
                       check=True, cwd=tree, env={**os.environ, "PYTHONPATH": tree, "PYTHONHASHSEED": "0"})
    return int(re.search(r"Collected : (\d+)", r.stderr).group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--calls", type=int, default=48)
    ap.add_argument("--modes", default="record,cold")
    a = ap.parse_args()
    modes = a.modes.split(",")
    jobs = [(t, m, n) for t in a.trees for m in modes for n in (0, a.calls)]
    with ThreadPoolExecutor(2) as pool:
        got = dict(zip(jobs, pool.map(lambda j: instructions(*j), jobs)))
    for t in a.trees:
        per = {m: (got[t, m, a.calls] - got[t, m, 0]) / a.calls for m in modes}
        print(f"{t}: " + "  ".join(f"{m} {v:,.0f}" for m, v in per.items()) + " instructions per predict")


if __name__ == "__main__":
    main()
