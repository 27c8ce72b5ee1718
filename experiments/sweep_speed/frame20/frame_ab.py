"""predict's frame A/B: `iosim.predict` of one problem, four schedules (CPU and wall ms, the best
of 7 rounds of 50), its parts (predict_rows; pd.DataFrame of its rows, the old frame), and
predict_many of cpu_ab.py's grid (1,920 problems x four schedules; CPU ms, best of 3, and its
table.as_frame alone, best of 7 rounds of 5), and sweep_speed.GRID's sweep (19,800 rows,
one process) made one frame (sweep._frame: table.as_frame of its parts, best of 7), each tree in its own process (PYTHONPATH),
alternately, `--repeat` times; prints one JSON line a run and the medians.

    python experiments/sweep_speed/frame20/frame_ab.py --tree /work/main --tree . [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, time, iosim, pandas as pd
from iosim.analysis import predict as P, sweep, table
from iosim.core.hardware import load
GRID = {"seqlen": "256..131072", "head_dim": "64,128,256", "causal": "both", "batch": "1..32",
        "heads": "8..128", "schedule": "all", "direction": "fwd", "hw": "h100,a100"}  # sweep_speed's
hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
grid = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c)
        for n in (256, 512, 1024, 2048, 4096, 8192, 16384, 32768) for d in (64, 128, 256)
        for c in (False, True) for b in (1, 2, 4, 8, 16, 32, 64, 128) for h in (8, 16, 32, 64, 128)]

def best(f, n, k, clock=time.process_time):
    out = []
    for _ in range(k):
        t0 = clock()
        for _ in range(n):
            f()
        out.append((clock() - t0) / n)
    return min(out) * 1e3

rows = P.predict_rows(p, hw, four)[0]
P.predict(p, hw, four)
out = {"predict_cpu_ms": best(lambda: P.predict(p, hw, four), 50, 7),
       "predict_wall_ms": best(lambda: P.predict(p, hw, four), 50, 7, time.perf_counter),
       "predict_rows_cpu_ms": best(lambda: P.predict_rows(p, hw, four), 50, 7),
       "frame_of_rows_cpu_ms": best(lambda: pd.DataFrame(rows), 50, 7)}
seen = []  # the columns predict_many makes its frame of
frame = table.as_frame
table.as_frame = lambda cols: seen.append(cols) or frame(cols)
P.predict_many(grid, hw, four)
table.as_frame = frame
out["grid_rows"] = len(P.predict_many(grid, hw, four))
out["predict_many_grid_cpu_ms"] = best(lambda: P.predict_many(grid, hw, four), 1, 3)
out["grid_as_frame_cpu_ms"] = best(lambda: frame(seen[0]), 5, 7)
parts = []  # the sweep's column tables, made one frame by sweep._frame (table.as_frame)
whole = sweep._frame
sweep._frame = lambda ps: parts.append(ps) or whole(ps)
out["sweep_rows"] = len(sweep.sweep_result(GRID, workers=1).rows)
sweep._frame = whole
out["sweep_frame_cpu_ms"] = best(lambda: whole(parts[0]), 1, 7)
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tree", action="append", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    runs: dict = {t: [] for t in args.tree}
    for _ in range(args.repeat):
        for t in args.tree:
            env = {**os.environ, "PYTHONPATH": str(Path(t).resolve())}
            res = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                                 check=True, cwd=tempfile.gettempdir())  # not a tree: sys.path's first
            runs[t].append(json.loads(res.stdout.strip().splitlines()[-1]))
            print(t, runs[t][-1], flush=True)
    med = {t: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for t, rs in runs.items()}
    print(json.dumps({"medians": med, "cpu": os.cpu_count()}, indent=1))


if __name__ == "__main__":
    main()
