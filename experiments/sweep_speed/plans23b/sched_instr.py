"""Instructions (callgrind's Ir) of each schedule's Plan alone (schedules.plan, check=True, as
predict asks), the record problem (b4 h32 N4096 d128, non-causal), warm, counted as
../counts23/toggle_instr.py counts its parts (functools.reduce under --toggle-collect, a dump
when it returns); then table._rate_row of the Plans' kernels and timing._ctas_per_sm of them
(a list each call).

    python experiments/sweep_speed/plans23b/sched_instr.py TREE [TREE ...] [--calls 200]
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

CHILD = """
import functools, gc, sys
import iosim
from iosim.analysis import predict as P, table
from iosim.model import timing
from iosim.schedules import plan
from iosim.core.hardware import load
hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
for _ in range(20):
    P.predict(p, hw, four)
calls = int(sys.argv[1])
def run(f, n=calls):
    gc.collect()
    gc.disable()
    functools.reduce(lambda a, i: f(i), range(n), None)
    gc.enable()
for s in four:
    run(lambda i: plan(s, p, hw, check=True))
ks = [k for s in four for k in plan(s, p, hw, check=True).kernels]
run(lambda i: [table._rate_row(k, hw, p) for k in ks])
run(lambda i: [timing._ctas_per_sm(k, hw) for k in ks])
"""
PARTS = ("naive", "fa1", "fa2", "fa3", "rate_rows", "ctas_per_sm")


def dumps(tree: str, calls: int) -> list[int]:
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                        "--collect-atstart=no", "--toggle-collect=*functools_reduce*",
                        "--dump-after=functools_reduce", sys.executable, "-c", CHILD, str(calls)],
                       capture_output=True, text=True, check=True, cwd=tree,
                       env={**os.environ, "PYTHONPATH": tree, "PYTHONHASHSEED": "0"})
        got = []
        for f in sorted(glob.glob(out + ".*"), key=lambda x: int(x.rsplit(".", 1)[1])):
            for line in open(f):
                if line.startswith("totals:") or line.startswith("summary:"):
                    got.append(int(line.split()[1]))
                    break
        return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--calls", type=int, default=200)
    a = ap.parse_args()
    with ThreadPoolExecutor(2) as pool:
        got = dict(zip(a.trees, pool.map(lambda t: dumps(t, a.calls), a.trees)))
    for t in a.trees:
        g = got[t][-len(PARTS):]
        print(f"{t}: " + "  ".join(f"{p} {x / a.calls:,.0f}" for p, x in zip(PARTS, g))
              + " instructions a call")


if __name__ == "__main__":
    main()
