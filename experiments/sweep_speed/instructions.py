"""The model's work in instructions, against earlier versions: a count other users of the machine
do not move.

cpu_ab.py's CPU seconds still move with the machine's load (caches and hyperthreads shared). This
script counts the instructions each version executes instead (valgrind's callgrind, `Ir`), which
depend on the code alone: each version from its own `git worktree --detach` (PYTHONPATH), a
fresh process per count, PYTHONHASHSEED=0 (a dict's or set's order does not move them). Per
workload, the instructions of N calls less those of one call, over N - 1: the work of one call,
the imports and the first call's warm-up taken off. Writes experiments/sweep_speed/instructions.json:

- one: `predict_rows` of cpu_ab.py's problem (batch 4, heads 32, N 4096, d 128), four
  schedules (naive, fa1, fa2, fa3), H100; N = 11;
- batch: `predict_many` of cpu_ab.py's 216 problems x those four schedules (864 rows); N = 3;
- grid: `predict_many` of its grid of 1,920 problems (7,680 rows), with the limiter; N = 2.

Slow (valgrind runs Python some 50 times slower): a few minutes a version, `--jobs` at a time.

    python experiments/sweep_speed/instructions.py --base 734a4eb [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep_speed import ROOT, cpu_name  # noqa: E402

CHILD = """
import sys
import iosim
from iosim.analysis import predict as P
from iosim.core.hardware import load
hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]
n, what = int(sys.argv[1]), sys.argv[2]
if what == "one":
    p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
    call = lambda: P.predict_rows(p, hw, four)
elif what == "batch":
    probs = [iosim.Problem(batch=b, heads=h, seqlen_q=q, head_dim=d, causal=c)
             for q in (512, 1024, 2048, 4096, 8192, 16384) for d in (64, 128) for c in (False, True)
             for b in (1, 4, 16) for h in (8, 32, 64)]
    call = lambda: P.predict_many(probs, hw, four)
else:
    probs = [iosim.Problem(batch=b, heads=h, seqlen_q=q, head_dim=d, causal=c)
             for q in (256, 512, 1024, 2048, 4096, 8192, 16384, 32768) for d in (64, 128, 256)
             for c in (False, True) for b in (1, 2, 4, 8, 16, 32, 64, 128)
             for h in (8, 16, 32, 64, 128)]
    call = lambda: P.predict_many(probs, hw, four)
for _ in range(n):
    call()
"""
CALLS = {"one": 11, "batch": 3, "grid": 2}


def instructions(tree: Path, what: str, n: int) -> int:
    """Instructions (callgrind's Ir) of a process that makes n calls of `what` from `tree`."""
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                        sys.executable, "-c", CHILD, str(n), what], capture_output=True, text=True,
                       check=True, cwd=tree,
                       env={**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"})
    return int(re.search(r"Collected : (\d+)", r.stderr).group(1))


def per_call(tree: Path, what: str) -> float:
    n = CALLS[what]
    return (instructions(tree, what, n) - instructions(tree, what, 1)) / (n - 1)


def commit(tree: Path) -> str:
    return subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", action="append", required=True, help="an earlier version (repeatable)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default=str(Path(__file__).with_name("instructions.json")))
    args = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("error: valgrind is not installed (apt-get install valgrind)", file=sys.stderr)
        sys.exit(2)
    git = ["git", "-C", str(ROOT)]
    with tempfile.TemporaryDirectory() as d:
        trees = []
        for i, rev in enumerate(args.base):
            trees.append(Path(d) / f"base{i}")
            subprocess.run([*git, "worktree", "add", "--detach", str(trees[-1]), rev], check=True,
                           capture_output=True)
        trees.append(ROOT)
        try:
            jobs = [(t, w) for w in CALLS for t in trees]
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                counts = list(pool.map(lambda job: per_call(*job), jobs))
            versions = [{"commit": commit(t), **{f"{w}_instructions": c for (tt, w), c in zip(jobs, counts)
                                                  if tt == t}} for t in trees]
        finally:
            for t in trees[:-1]:
                subprocess.run([*git, "worktree", "remove", "--force", str(t)], check=False)
    this = versions[-1]
    result = {"versions": versions, "calls": CALLS,
              "this_over": {v["commit"]: {k: this[k] / v[k] for k in v if k != "commit"}
                            for v in versions[:-1]},
              "machine": {"cpu": cpu_name(), "python": sys.version.split()[0]},
              "date": time.strftime("%Y-%m-%d")}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for v in versions:
        print(v)


if __name__ == "__main__":
    main()
