"""Instructions (callgrind's Ir) of the parts of iosim.predict branch counts23 works on,
counted alone: each part runs inside functools.reduce, and callgrind collects only while
functools_reduce runs (--collect-atstart=no --toggle-collect) and dumps when it returns
(--dump-after), one dump a part, the last nine dumps (a few earlier calls of reduce, in
imports: a few thousand instructions). Parts: the four Plans (schedules.plan, as
predict._columns asks) and table._shapes of them (the counts), the record problem (b4 h32
N4096 d128) and its causal twin, warm; and for problems never asked before (counts22's 24,
the shape caches cleared before each, as ../counts22/cold_parts_instr.py) the clearing alone,
it and the Plans, it and the Plans and their _shapes: cold_plans is the second less the first,
cold_shapes the third less the second; and, nothing cleared, 48 problems of lengths asked of
nothing before (3001 + 8i and 5001 + 8i): fresh_plans their Plans, fresh_shapes
the _shapes of Plans made before. One process a tree (PYTHONPATH the tree),
PYTHONHASHSEED=0, the collector off.

    python experiments/sweep_speed/counts23/toggle_instr.py TREE [TREE ...] [--calls 100]
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
from iosim.schedules import plan
from iosim.core.hardware import load
hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]
rec = [iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128, causal=c) for c in (False, True)]
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
for _ in range(20):
    for p in rec:
        P.predict(p, hw, four)
calls = int(sys.argv[1])
def run(f, n=calls):
    gc.collect()
    gc.disable()
    functools.reduce(lambda a, i: f(i), range(n), None)
    gc.enable()
for p in rec:
    pls = [plan(s, p, hw, check=True) for s in four]
    items = [(pl, hw, False, None) for pl in pls]
    run(lambda i: [plan(s, p, hw, check=True) for s in four])
    run(lambda i: table._shapes(items))
def cold(i, what):
    clear()
    if what:
        q = probs[i % len(probs)]
        ps = [table.predictable(plan(s, q, hw, check=True), hw) for s in four]
        if what == 2:
            table._shapes([(pl, hw, False, None) for pl in ps])
for what in range(3):
    run(lambda i: cold(i, what), 48)
# fresh: 48 problems of lengths asked of nothing before (nothing cleared), their Plans, then
# (other lengths, their Plans made before) their _shapes
def fresh(n0):
    return [iosim.Problem(batch=(1, 2, 4, 8)[i % 4], heads=(8, 16, 32)[i % 3], seqlen_q=n0 + 8 * i,
                          head_dim=(64, 128)[i % 2], causal=bool(i // 2 % 2)) for i in range(48)]
new = fresh(3001)
run(lambda i: [table.predictable(plan(s, new[i], hw, check=True), hw) for s in four], 48)
new = [[table.predictable(plan(s, q, hw, check=True), hw) for s in four] for q in fresh(5001)]
run(lambda i: table._shapes([(pl, hw, False, None) for pl in new[i]]), 48)
"""
PARTS = ("plans", "shapes", "plans_causal", "shapes_causal")


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
    ap.add_argument("--calls", type=int, default=100)
    a = ap.parse_args()
    with ThreadPoolExecutor(2) as pool:
        got = dict(zip(a.trees, pool.map(lambda t: dumps(t, a.calls), a.trees)))
    for t in a.trees:
        g = got[t][-9:]  # (reduce's earlier calls: in imports, a few thousand instructions)
        warm = "  ".join(f"{p} {x / a.calls:,.0f}" for p, x in zip(PARTS, g[:4]))
        c0, c1, c2 = g[4:7]
        print(f"{t}: {warm}  cold_plans {(c1 - c0) / 48:,.0f}  cold_shapes {(c2 - c1) / 48:,.0f}"
              f"  fresh_plans {g[7] / 48:,.0f}  fresh_shapes {g[8] / 48:,.0f} instructions a call")


if __name__ == "__main__":
    main()
