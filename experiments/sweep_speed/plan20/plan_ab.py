"""predict_rows' non-model part A/B (issue 26: plans, counts, the glue around the cycle model,
the other columns): `predict_rows` of one problem, four schedules (CPU ms, the best of 9 rounds
of 50), the same with `timing.predict_batch` answering from its first answer (what is left: the
part that is not the cycle model; rounds of each alternated in one process, 25 pairs of 40
calls, the least of each) and their difference (predict_batch in the flow), and predict_many of
cpu_ab.py's grid (1,920 problems x four schedules, rows a CPU second, the best of 3), each tree
in its own process (PYTHONPATH), alternately, `--repeat` times; prints one JSON line a run and
the medians.

    python experiments/sweep_speed/plan20/plan_ab.py --tree /work/main --tree . [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = """
import json, time, iosim
from iosim.analysis import predict as P
from iosim.core.hardware import load
from iosim.model import timing
hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
W = lambda: P.predict_rows(p, hw, four)
W()

def cpu(f, n):
    t0 = time.process_time()
    for _ in range(n):
        f()
    return (time.process_time() - t0) / n

rows_ms = min(cpu(W, 50) for _ in range(9)) * 1e3
real, held = timing.predict_batch, {}

def remembered(*a, **k):
    if "r" not in held:
        held["r"] = real(*a, **k)
    return held["r"]

whole, rest = [], []
for _ in range(25):
    whole.append(cpu(W, 40))
    timing.predict_batch = remembered
    rest.append(cpu(W, 40))
    timing.predict_batch = real
grid = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c)
        for n in (256, 512, 1024, 2048, 4096, 8192, 16384, 32768) for d in (64, 128, 256)
        for c in (False, True) for b in (1, 2, 4, 8, 16, 32, 64, 128)
        for h in (8, 16, 32, 64, 128)]  # cpu_ab.py's
n = len(P.predict_many(grid, hw, four))
g = min(cpu(lambda: P.predict_many(grid, hw, four), 1) for _ in range(3))
print(json.dumps({"predict_rows_ms": rows_ms, "non_model_ms": min(rest) * 1e3,
                  "predict_batch_in_flow_ms": (min(whole) - min(rest)) * 1e3,
                  "grid_rows_per_cpu_s": n / g}))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", action="append", required=True)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    runs: dict[str, list[dict]] = {t: [] for t in args.tree}
    for _ in range(args.repeat):
        for t in args.tree:
            path = os.path.abspath(t)
            r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True,
                               env={**os.environ, "PYTHONPATH": path}, cwd=path)
            runs[t].append(json.loads(r.stdout.strip().splitlines()[-1]))
            print(json.dumps({"tree": t, **runs[t][-1]}), flush=True)
    for t, rs in runs.items():
        print(json.dumps({"tree": t, "medians": {k: statistics.median(r[k] for r in rs) for k in rs[0]}}))


if __name__ == "__main__":
    main()
