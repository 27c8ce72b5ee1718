"""The model's own speed against earlier versions in CPU seconds, for a machine that others load.

sweep_speed.py times wall clocks (start-up, worker pools, the shell): on a machine whose other
users come and go, those move by tens of percent between runs. This script times what the
model's work costs the processor instead (`time.process_time` in each version's own process:
the sweep in one process, no pool), so the ratios between versions hold under load. Each
version runs from its own `git worktree --detach` (PYTHONPATH), in fresh processes,
alternately (one of each measurement of one version, then of the next), `--repeat` times;
medians. Writes experiments/sweep_speed/cpu_ab.json:

- sweep: the issue's grid (sweep_speed.GRID, 19,800 points), `sweep_result(grid, workers=1)`,
  and `iosim sweep --workers 1 -o FILE.parquet` (its CLI module imported before the clock
  starts), points per CPU second;
- predict four: `predict_rows` of one problem, four schedules, and `iosim.predict` of it (the
  same rows as a DataFrame), each the best of 7 rounds of 50 (ms); `iosim.predict` of the same
  problem causal (the same); and of 24 problems in turn (N 1024/8192/32768, d 64/128, causal
  both, batch x heads 1 x 16 and 8 x 32: nothing remembered of one problem serves the next; the
  schedules' caches of a shape's tiles and block maps do serve a problem's second pass), per
  problem, the best of 7 rounds of 2 passes; and of problems never asked before (7 rounds of
  24, N = 1056 + 64 i distinct for every problem, d 64/128, causal both, batch 1..8, heads
  8..32: no cache keyed by a shape serves them), per problem, the best round's mean;
- batch: 216 problems x those four schedules planned and predicted (sweep_speed.PREDICT's
  batch: `predict_many`, else `predict.rows`, else `row` per Plan), the best of 3, per second;
  and, where `predict_many` takes `limiter=False`, the same batch's times alone (no `bound`);
- grids, where the version has `predict_many`: `predict_many(problems, hw, four)` of sweep_speed's
  grid of 1,920 problems (N 256..32768, d 64/128/256, causal both, batch 1..128, heads 8..128:
  7,680 schedule-problems) and of a large grid of 21,120 (N 256..131072, d 64/128/256, causal
  both, batch 1..1024 in powers of two, heads 4..128 in steps of 4: 84,480 schedule-problems,
  more problems to a shape's template), each with the
  limiter and without (`limiter=False`, `bound` empty), schedule-problems (rows) per CPU
  second, the best of 3 (the large grid: of 2). Each call plans its templates afresh (no cache
  outlives a call but the schedules' own, of a shape's tiles and block maps, and what depends on
  those alone: a block map's period (`timing._period`), the key of its array (`base._array_key`)
  and `_expected_max`'s weights of a period's length and draws);
- tune: `tune.rank("fa2", [problem])` with its compile results cached, the best of 5 (s);
- predict in a shell: `iosim predict` (the console script's code, `python -c "from iosim.cli
  import main; main()" predict`), the CPU seconds (user + system) of the whole process,
  interpreter start included, the least of 3; each tree's modules compiled to bytecode first
  (`python -m compileall iosim`, as pip does when it installs a package).

    python experiments/sweep_speed/cpu_ab.py --base 94797ab --base beeb679 [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep_speed import GRID, PROBLEM_SETS, ROOT, cpu_name, grid_args, run  # noqa: E402

CHILD = """
import json, sys, tempfile, time
import iosim
from iosim.analysis import predict as P
from iosim.analysis import sweep, tune
from iosim.cli import main
from iosim.core.hardware import load
from iosim.schedules import plan
grid, cli_args = json.loads(sys.argv[1]), json.loads(sys.argv[2])
hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
problems = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c)
            for n in (512, 1024, 2048, 4096, 8192, 16384) for d in (64, 128) for c in (False, True)
            for b in (1, 4, 16) for h in (8, 32, 64)]
rows, many = getattr(P, "rows", None), getattr(P, "predict_many", None)

def batch():
    if many:
        return many(problems, hw, four)
    plans = [(plan(s, q, hw, check=True), hw) for q in problems for s in four]
    return rows(plans) if rows else [P.row(pl, h) for pl, h in plans]

def cpu(f, n=1, k=1):
    out = []
    for _ in range(k):
        t0 = time.process_time()
        for _ in range(n):
            f()
        out.append((time.process_time() - t0) / n)
    return min(out)

t0 = time.process_time()
points = len(sweep.sweep_result(grid, workers=1).rows)
out = {"sweep_points": points, "sweep_cpu_points_per_second": points / (time.process_time() - t0)}
with tempfile.TemporaryDirectory() as d:
    t0 = time.process_time()
    try:
        main(["sweep", "--no-progress", "--workers", "1", "-o", d + "/sweep.parquet", *cli_args])
    except SystemExit:
        pass
    out["cli_cpu_points_per_second"] = points / (time.process_time() - t0)
P.predict_rows(p, hw, four)
out["predict_four_ms"] = cpu(lambda: P.predict_rows(p, hw, four), 50, 7) * 1e3
P.predict(p, hw, four)
out["predict_frame_ms"] = cpu(lambda: P.predict(p, hw, four), 50, 7) * 1e3
PROBLEM_SETS
for q in [causal, *varied]:
    P.predict(q, hw, four)
out["predict_causal_ms"] = cpu(lambda: P.predict(causal, hw, four), 50, 7) * 1e3
# 24 problems in turn: nothing remembered of one problem serves the next
out["predict_varied_ms"] = cpu(lambda: [P.predict(q, hw, four) for q in varied], 2, 7) * 1e3 / len(varied)
out["predict_new_ms"] = min(cpu(lambda: [P.predict(q, hw, four) for q in qs], 1, 1) for qs in new) * 1e3 / 24
n = len(batch())
out.update(batch_points=n, batch_points_per_second=n / cpu(batch, 1, 3))
try:  # the time alone (no limiter), a cost function's need, where predict_many offers it
    many(problems, hw, four, limiter=False)
    out["batch_time_only_points_per_second"] = n / cpu(lambda: many(problems, hw, four, limiter=False), 1, 3)
except TypeError:
    pass
grids = {"grid": [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c)
                  for n in (256, 512, 1024, 2048, 4096, 8192, 16384, 32768) for d in (64, 128, 256)
                  for c in (False, True) for b in (1, 2, 4, 8, 16, 32, 64, 128)
                  for h in (8, 16, 32, 64, 128)],
         "large": [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c)
                   for n in (256 * 2**i for i in range(10)) for d in (64, 128, 256)
                   for c in (False, True) for b in (2**i for i in range(11))
                   for h in range(4, 129, 4)]}
for name, probs in grids.items() if many else ():
    k = 3 if name == "grid" else 2
    g = len(many(probs, hw, four))
    out[f"{name}_points"] = g
    out[f"{name}_points_per_second"] = g / cpu(lambda: many(probs, hw, four), 1, k)
    out[f"{name}_time_only_points_per_second"] = g / cpu(lambda: many(probs, hw, four, limiter=False), 1, k)
q = iosim.Problem(batch=4, heads=16, seqlen_q=4096, head_dim=128)
tune.rank("fa2", [q], hw)  # fills the compile cache
out["tune_rank_seconds"] = cpu(lambda: tune.rank("fa2", [q], hw), 1, 5)
print(json.dumps(out))
""".replace("PROBLEM_SETS\n", PROBLEM_SETS)


def shell_cpu(tree: Path, args: list[str]) -> float:
    """CPU seconds (user + system) of one `python ARGS` process from `tree`: its start, imports
    and work, what its wall time is on an idle machine (one thread)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run(tree, args)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def sample(tree: Path) -> dict:
    out = run(tree, ["-c", CHILD, json.dumps(GRID), json.dumps(grid_args(GRID))]).stdout
    predict = ["-c", "from iosim.cli import main; main()", "predict"]
    return {**json.loads(out.strip().splitlines()[-1]),
            "predict_shell_cpu_seconds": min(shell_cpu(tree, predict) for _ in range(3))}


def commit(tree: Path) -> str:
    return subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", action="append", required=True, help="an earlier version (repeatable)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--out", default=str(Path(__file__).with_name("cpu_ab.json")))
    args = ap.parse_args()
    git = ["git", "-C", str(ROOT)]
    with tempfile.TemporaryDirectory() as d:
        trees = []
        for i, rev in enumerate(args.base):
            trees.append(Path(d) / f"base{i}")
            subprocess.run([*git, "worktree", "add", "--detach", str(trees[-1]), rev], check=True,
                           capture_output=True)
        trees.append(ROOT)
        for t in trees:  # bytecode, as an installed package has it (sweep_speed.py's docstring)
            run(t, ["-m", "compileall", "-q", "iosim"])
        try:
            samples: dict[Path, list] = {t: [] for t in trees}
            for _ in range(args.repeat):
                for t in trees:
                    samples[t].append(sample(t))
            versions = [{"commit": commit(t), **{k: statistics.median(s[k] for s in samples[t])
                                                 for k in samples[t][0]}} for t in trees]
        finally:
            for t in trees[:-1]:
                subprocess.run([*git, "worktree", "remove", "--force", str(t)], check=False)
    this = versions[-1]
    result = {"grid": GRID, "versions": versions,
              "this_over": {v["commit"]: {k: this[k] / v[k] for k in v
                                          if k != "commit" and isinstance(v[k], float) and v[k]}
                            for v in versions[:-1]},
              "repeat": args.repeat,
              "machine": {"cpu": cpu_name(), "python": sys.version.split()[0]},
              "date": time.strftime("%Y-%m-%d")}
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    for v in versions:
        print(v)


if __name__ == "__main__":
    main()
