"""predict's frame in instructions: what `iosim.predict` (a DataFrame) costs over
`predict_rows` (dicts) for one problem, four schedules, counted by valgrind (cachegrind's
instruction count, `I refs`: unmoved by the other processes of a loaded machine, which CPU
times are not; it counts no cache miss), per call, in each tree.

Each tree, mode and count runs in its own process (PYTHONPATH, PYTHONHASHSEED=0, address
randomisation off where `setarch -R` is at hand: the counts then repeat to some 3M of ~3G):
both calls made 20 times first (imports, layouts, memos), then the measured one `--calls`
times and, in another process, `--calls` + `--more` times; per call = the difference of the
two counts / `--more` (no count of a process's start and imports in it). Needs valgrind;
some 3 min a tree on an idle machine.

    python experiments/sweep_speed/frame21/frame_instr.py --tree /work/main --tree . [--calls 50 --more 200]
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
from iosim.analysis import predict as P
from iosim.core.hardware import load
hw = load("h100"); four = ["naive", "fa1", "fa2", "fa3"]
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
calls = {"predict": lambda: P.predict(p, hw, four), "rows": lambda: P.predict_rows(p, hw, four)}
for _ in range(20):
    for f in calls.values():
        f()
f = calls[sys.argv[1]]
for _ in range(int(sys.argv[2])):
    f()
"""


def count(tree: str, mode: str, calls: int) -> int:
    env = {**os.environ, "PYTHONPATH": tree, "PYTHONHASHSEED": "0"}
    fixed = ["setarch", "x86_64", "-R"] if shutil.which("setarch") else []
    out = subprocess.run([*fixed, "valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                          sys.executable, "-c", CHILD, mode, str(calls)],
                         cwd=tree, env=env, capture_output=True, text=True, check=True).stderr
    return int(re.search(r"I\s+refs:\s+([\d,]+)", out).group(1).replace(",", ""))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", required=True)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--more", type=int, default=200)
    a = ap.parse_args()
    for tree in a.tree:
        per = {m: (count(tree, m, a.calls + a.more) - count(tree, m, a.calls)) / a.more for m in ("predict", "rows")}
        print(json.dumps({"tree": tree, "calls": [a.calls, a.calls + a.more], "predict_instr": round(per["predict"]),
                          "predict_rows_instr": round(per["rows"]),
                          "frame_over_rows_instr": round(per["predict"] - per["rows"])}), flush=True)


if __name__ == "__main__":
    main()
