"""Instructions (callgrind's Ir) of the parts of iosim.predict this branch works on, for the
record problem (b4 h32 N4096 d128, four schedules), warm: the four Plans (schedules.plan, as
predict._columns asks), table._shapes of them (the counts: _raw and timing.kernel_raw of the 7
kernels, and the arrays), _raw of the four alone, kernel_raw of the 7 kernels alone, and
backing of the four. Per part: the run with `--calls` calls less the run without, over the
calls; each in its own process (PYTHONPATH the tree), PYTHONHASHSEED=0, the collector off.

    python experiments/sweep_speed/counts22/parts_instr.py TREE [TREE ...] [--calls 300]
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
from iosim.model import timing, memory
from iosim.model.backing import backing
from iosim.schedules import plan
from iosim.core.hardware import load
hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
for _ in range(20):
    P.predict(p, hw, four)
pls = [plan(s, p, hw, check=True) for s in four]
ks = [k for pl in pls for k in pl.kernels]
size = memory.sizes(p, 1)
part, calls = sys.argv[1], int(sys.argv[2])
f = {"plans": lambda: [plan(s, p, hw, check=True) for s in four],
     "shapes": lambda: table._shapes([(pl, hw, False, None) for pl in pls]),
     "raw": lambda: [table._raw(pl, hw) for pl in pls],
     "kernel_raw": lambda: [timing.kernel_raw(k, hw, p, size) for k in ks],
     "backing": lambda: [backing(pl, hw) for pl in pls]}[part]
f()
gc.collect()
gc.disable()
for _ in range(calls):
    f()
"""
PARTS = ("plans", "shapes", "raw", "kernel_raw", "backing")


def instructions(tree: str, part: str, calls: int) -> int:
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                        sys.executable, "-c", CHILD, part, str(calls)], capture_output=True, text=True,
                       check=True, cwd=tree, env={**os.environ, "PYTHONPATH": tree, "PYTHONHASHSEED": "0"})
    return int(re.search(r"Collected : (\d+)", r.stderr).group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--calls", type=int, default=300)
    a = ap.parse_args()
    jobs = [(t, part, n) for t in a.trees for part in PARTS for n in (0, a.calls)]
    with ThreadPoolExecutor(2) as pool:
        got = dict(zip(jobs, pool.map(lambda j: instructions(*j), jobs)))
    for t in a.trees:
        print(f"{t}: " + "  ".join(f"{part} {(got[t, part, a.calls] - got[t, part, 0]) / a.calls:,.0f}"
                                   for part in PARTS) + " instructions a call")


if __name__ == "__main__":
    main()
