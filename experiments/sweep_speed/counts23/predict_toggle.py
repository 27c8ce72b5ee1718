"""Instructions (callgrind's Ir) of the whole `iosim.predict` (its DataFrame), four schedules,
the record problem (b4 h32 N4096 d128) and its causal twin, counted alone as toggle_instr.py
counts its parts (inside functools.reduce, callgrind collecting only there: no difference of
two whole-process counts, whose warm-ups differ by more than a change here), 20 calls each
after 20 to warm up; the collector off. One process a tree, PYTHONHASHSEED=0.

    python experiments/sweep_speed/counts23/predict_toggle.py TREE [TREE ...] [--calls 20]
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
from iosim.analysis import predict as P
from iosim.core.hardware import load
hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]
calls = int(sys.argv[1])
for c in (False, True):
    p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128, causal=c)
    for _ in range(20):
        P.predict(p, hw, four)
    gc.collect()
    gc.disable()
    functools.reduce(lambda a, i: P.predict(p, hw, four), range(calls), None)
    gc.enable()
"""


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
                if line.startswith("totals:"):
                    got.append(int(line.split()[1]))
                    break
        return got[-2:]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--calls", type=int, default=20)
    a = ap.parse_args()
    with ThreadPoolExecutor(2) as pool:
        got = dict(zip(a.trees, pool.map(lambda t: dumps(t, a.calls), a.trees)))
    for t in a.trees:
        r, c = (x / a.calls for x in got[t])
        print(f"{t}: iosim.predict record {r:,.0f}  causal {c:,.0f}  mean {(r + c) / 2:,.0f} instructions a call")


if __name__ == "__main__":
    main()
