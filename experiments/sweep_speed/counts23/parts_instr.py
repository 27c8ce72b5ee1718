"""Instructions (callgrind's Ir) of the parts of iosim.predict branch counts23 works on: the
four Plans (schedules.plan, as predict._columns asks) and table._shapes of them (the counts:
_raw, timing.kernel_raw of every kernel, the arrays), for the record problem (b4 h32 N4096
d128) and its causal twin, warm; and for problems never asked before (counts22's 24, the
shape caches cleared before each, as ../counts22/cold_parts_instr.py), the Plans and the
counts. Per part: the run with `--calls` calls less the run with none (the same warm-up),
over the calls; each in its own process (PYTHONPATH the tree), PYTHONHASHSEED=0, the
collector off.

    python experiments/sweep_speed/counts23/parts_instr.py TREE [TREE ...] [--calls 200]
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
part, calls = sys.argv[1], int(sys.argv[2])
p = rec[part.endswith("_causal")]
pls = [plan(s, p, hw, check=True) for s in four]
items = [(pl, hw, False, None) for pl in pls]
def cold(shapes):
    for i in range(calls):
        clear()
        q = probs[i % len(probs)]
        ps = [table.predictable(plan(s, q, hw, check=True), hw) for s in four]
        if shapes:
            table._shapes([(pl, hw, False, None) for pl in ps])
f = {"plans": lambda: [plan(s, p, hw, check=True) for s in four],
     "shapes": lambda: table._shapes(items)}.get(part.removesuffix("_causal"))
gc.collect()
gc.disable()
if part.startswith("cold"):
    cold(part == "cold_shapes")
elif part != "none":
    for _ in range(calls):
        f()
"""
WARM = ("plans", "shapes", "plans_causal", "shapes_causal")


def instructions(tree: str, part: str, calls: int) -> int:
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                        sys.executable, "-c", CHILD, part, str(calls)], capture_output=True, text=True,
                       check=True, cwd=tree, env={**os.environ, "PYTHONPATH": tree, "PYTHONHASHSEED": "0"})
    return int(re.search(r"Collected : (\d+)", r.stderr).group(1))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--cold", type=int, default=48, help="never-asked problems (0: none)")
    ap.add_argument("--parts", default=",".join(WARM), help="of " + ",".join(WARM))
    a = ap.parse_args()
    warm = a.parts.split(",")
    jobs = [(t, part, a.calls) for t in a.trees for part in ("none", *warm)]
    if a.cold:
        jobs += [(t, part, a.cold) for t in a.trees for part in ("cold_clear", "cold_plans", "cold_shapes")]
    with ThreadPoolExecutor(2) as pool:
        got = dict(zip(jobs, pool.map(lambda j: instructions(*j), jobs)))
    for t in a.trees:
        none = got[t, "none", a.calls]
        line = "  ".join(f"{part} {(got[t, part, a.calls] - none) / a.calls:,.0f}" for part in warm)
        if a.cold:
            c = {part: got[t, part, a.cold] for part in ("cold_clear", "cold_plans", "cold_shapes")}
            line += (f"  cold_plans {(c['cold_plans'] - c['cold_clear']) / a.cold:,.0f}"
                     f"  cold_shapes {(c['cold_shapes'] - c['cold_plans']) / a.cold:,.0f}")
        print(f"{t}: {line} instructions a call")


if __name__ == "__main__":
    main()
