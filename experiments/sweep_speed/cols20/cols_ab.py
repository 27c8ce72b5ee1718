"""predict's path from the model's answers to its frame, A/B: CPU ms (best of 7 rounds of 200)
of `iosim.predict` of one problem (four schedules), predict_rows, table.as_frame and
table.as_rows of its columns, and table.columns with _shapes and _model answering from memory
(its glue alone), each tree in its own process (PYTHONPATH), alternately, `--repeat` times;
prints one JSON line a run.

    python experiments/sweep_speed/cols20/cols_ab.py --tree /work/main --tree . [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

CHILD = """
import json, time, iosim
from iosim.analysis import predict as P, table
from iosim.core.hardware import load
from iosim.schedules import plan
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]

def best(f, n=200, k=7):
    out = []
    for _ in range(k):
        t0 = time.process_time()
        for _ in range(n):
            f()
        out.append((time.process_time() - t0) / n)
    return round(min(out) * 1e3, 4)

cols = P._columns(p, hw, four, P.Tiles(), None)[0]
out = {"predict": best(lambda: P.predict(p, hw, four)),
       "predict_rows": best(lambda: P.predict_rows(p, hw, four)),
       "as_frame": best(lambda: table.as_frame(cols)),
       "as_rows": best(lambda: table.as_rows(cols))}
plans = [table.predictable(plan(s, p, hw, P.Tiles(), check=True), hw) for s in four]
shapes, model, memo = table._shapes, table._model, {}
table._shapes = lambda todo: memo["s"] if "s" in memo else memo.setdefault("s", shapes(todo))
table._model = lambda *a: memo["m"] if "m" in memo else memo.setdefault("m", model(*a))
out["columns_glue"] = best(lambda: table.columns([table.Template(pl, hw, [pl.problem]) for pl in plans]))
print(json.dumps(out))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    for _ in range(args.repeat):
        for tree in args.tree:
            env = dict(os.environ, PYTHONPATH=str(Path(tree).resolve()))
            out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True)
            print(tree, out.stdout.strip(), flush=True)


if __name__ == "__main__":
    main()
