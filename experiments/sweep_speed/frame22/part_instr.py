"""The instructions of one part of `iosim.predict` (one problem, four schedules) per call, in
each tree, counted by valgrind (cachegrind's `I refs`: unmoved by a loaded machine's other
processes): `frame` is table.as_frame of predict's columns (made once), `columns` is
table.columns of its four templates (Plans made once), `other` is table.columns with its _shapes and _model answered from a first call (the lines
that make the other columns), `predict` the whole call.

Each (tree, part, count) runs in its own process (PYTHONPATH the tree, PYTHONHASHSEED=0,
address randomisation off with `setarch -R`): the part called 20 times first (imports,
layouts, memos), then `--calls` times and, in another process, `--calls` + `--more` times;
per call = the difference of the two counts / `--more`.

    python experiments/sweep_speed/frame22/part_instr.py --tree /work/main --tree . [--part frame --part columns --part predict]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys

CHILD = """
import sys, iosim
from iosim.analysis import predict as P, table
from iosim.analysis.table import predictable
from iosim.schedules import DEFAULT, plan
from iosim.core.hardware import load
hw = load("h100"); four = ["naive", "fa1", "fa2", "fa3"]
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
cols, _ = P._columns(p, hw, four, DEFAULT, None)
temps = [table.Template(predictable(plan(s, p, hw, DEFAULT, check=True), hw), hw, [p]) for s in four]
calls = {"predict": lambda: P.predict(p, hw, four), "frame": lambda: table.as_frame(cols, dicts=True),
         "columns": lambda: table.columns(temps)}
if sys.argv[1] == "other":  # columns' other lines: its _shapes and _model answered from a first call
    kept, shapes, model = {}, table._shapes, table._model
    table._shapes = lambda todo: kept.get("s") or kept.setdefault("s", shapes(todo))
    table._model = lambda *a: kept.get("m") or kept.setdefault("m", model(*a))
    calls["other"] = calls["columns"]
f = calls[sys.argv[1]]
for _ in range(20):
    f()
for _ in range(int(sys.argv[2])):
    f()
"""


def count(tree: str, part: str, calls: int) -> int:
    env = {**os.environ, "PYTHONPATH": tree, "PYTHONHASHSEED": "0"}
    fixed = ["setarch", "x86_64", "-R"] if shutil.which("setarch") else []
    out = subprocess.run([*fixed, "valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                          sys.executable, "-c", CHILD, part, str(calls)],
                         cwd=tree, env=env, capture_output=True, text=True, check=True).stderr
    return int(re.search(r"I\s+refs:\s+([\d,]+)", out).group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", required=True)
    ap.add_argument("--part", action="append", choices=["frame", "columns", "other", "predict"])
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--more", type=int, default=100)
    a = ap.parse_args()
    for part in a.part or ["frame", "columns", "predict"]:
        for tree in a.tree:
            per = (count(tree, part, a.calls + a.more) - count(tree, part, a.calls)) / a.more
            print(json.dumps({"tree": tree, "part": part, "calls": [a.calls, a.calls + a.more],
                              "instr_per_call": round(per)}), flush=True)


if __name__ == "__main__":
    main()
