"""How fast do iosim start and sweep, against the previous version, in one run?

Writes experiments/sweep_speed/sweep_speed.json. The previous version is checked out with
`git worktree add --detach` at `--base` (default: where this branch left main, i.e. the commit
before this change) and each version runs from its own tree (PYTHONPATH), in fresh processes,
alternately (one of each measurement of one version, then of the other), on this machine,
each tree's modules compiled to bytecode first (`python -m compileall iosim`, as pip does when
it installs a package: where PYTHONDONTWRITEBYTECODE is set, every start below would otherwise
compile iosim's sources, which no installed copy does):

- import: `python -X importtime -c "from iosim.cli import main"` (the CLI module's cumulative
  import time) and the modules of note it loads;
- predict: the wall time of `iosim predict` (the console script's code,
  `python -c "from iosim.cli import main; main()" predict`), interpreter start included;
- sweep: the issue's grid (N 256..131072, d 64/128/256, causal both, all schedules, batch
  1..32, heads 8..128, H100 and A100: 12,600 points), `iosim.sweep(grid)` in Python and
  `iosim sweep -o FILE.parquet` from the shell, points per second;
- memory: the peak resident memory (the sweep's own process, and its largest worker) of
  `iosim sweep -o FILE.parquet` on that grid and on a larger one (`LARGE`): a sweep that
  streams holds about the same whatever the grid size;
- predict in Python: `iosim.predict` (its DataFrame) and `predict_rows` (its rows as dicts,
  what the CLI prints) of one problem, four schedules (naive, fa1, fa2, fa3), each the best
  of 7 rounds of 50 (ms); `iosim.predict` of that problem causal, and of 24 problems in turn
  (N 1024/8192/32768, d 64/128, causal both, batch x heads 1 x 16 and 8 x 32: nothing
  remembered of one problem serves the next; per problem, the best of 7 rounds of 2 passes; the
  schedules' caches of a shape's tiles and block maps do serve a problem's second pass), and of
  problems never asked before (7 rounds of 24, N distinct for every problem: no cache keyed by a
  shape serves them; per problem, the best round's mean);
  and a batch of 216 problems x those four schedules,
  planned and predicted (`iosim.predict_many` where the version has it, else `predict.rows`
  of the Plans, else `row` per Plan), in schedule-problems per second; on this version also
  the time alone (`limiter=False`) and a grid of 1,920 problems (8 N x 3 d x causal both x 8
  batch sizes x 5 head counts, 240 shapes), with and without the limiter;
- tune: `tune.rank("fa2", [problem])`, every fa2 tile configuration the kernel accepts for
  the default problem, ranked by the model with the compile results cached (a first call
  fills the cache; best of 5, s), and `iosim tune` from the shell (wall, s);
- a million points: `iosim sweep -o FILE.parquet` of `MILLION` (this version only: the
  previous one would take many minutes), wall seconds, rows and peak memory.

    python experiments/sweep_speed/sweep_speed.py [--repeat 3] [--base REV]
    python experiments/sweep_speed/sweep_speed.py --start [--repeat 21] [--base REV] [--instructions]
        (the start alone, `START`: for each version alternately `iosim predict`, `iosim --version`
        and `iosim hw list` in a shell, wall and CPU seconds (user + system, the child's own,
        `os.wait4`), and the CLI module's import time; medians and every sample. CPU seconds
        move less than wall clocks with the load of a shared machine; `--instructions` also
        counts each command's instructions once (valgrind's callgrind, PYTHONHASHSEED=0), which
        only the code moves. The load averages at the start and the end are recorded.)
    python experiments/sweep_speed/sweep_speed.py --base-tree DIR --commit REV   (where this
        tree is no git checkout, e.g. the GPU machine's copy: DIR holds the previous version,
        `git archive REV iosim hwprofiles kernels | tar -x -C DIR`, DIR/.commit its commit; REV
        names this tree; experiments/sweep_speed/device.sh)

Under `taskset -c 0,1` the sweeps' worker pools take the two cores they may run on
(`iosim.analysis.sweep.usable_cpus`), and `machine.cpus` says two.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GRID = {"seqlen": "256..131072", "head_dim": "64,128,256", "causal": "both", "batch": "1..32",
        "heads": "8..128", "schedule": "all", "direction": "fwd", "hw": "h100,a100"}
LARGE = {**GRID, "batch": "1..128", "heads": "8..128:8"}  # 8 x 16 instead of 6 x 5: 4.3x the points
# 1,013,760 points: both directions and two dtypes, 11 batch sizes, 32 head counts
MILLION = {**GRID, "batch": "1..1024", "heads": "4..128:4", "direction": "both", "dtype": "bf16,fp16"}
# iosim.predict's problem sets beyond the record problem (`iosim` in scope), in PREDICT and
# cpu_ab.py's CHILD: the record problem causal; 24 problems in turn; problems never asked before
PROBLEM_SETS = """causal = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128, causal=True)
varied = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c) for n in (1024, 8192, 32768)
          for d in (64, 128) for c in (False, True) for b, h in ((1, 16), (8, 32))]
# problems never asked before, 24 a round, each round its own: N distinct for every problem
# (1056 + 64 i: none a power of two, as every other benchmark's N), d 64/128, causal both,
# batch 1..8, heads 8..32: no cache keyed by a shape or a problem serves them (a cache of what
# many shapes share still does)
new = [[iosim.Problem(batch=(1, 2, 4, 8)[i % 4], heads=(8, 16, 32)[i % 3], seqlen_q=1056 + 64 * (24 * r + i),
                      head_dim=(64, 128)[i % 2], causal=bool(i // 2 % 2)) for i in range(24)] for r in range(7)]
"""
PREDICT = """
import json, time
import iosim
from iosim.analysis import predict as P
from iosim.core.hardware import load
from iosim.schedules import plan
hw = load("h100")
four = ["naive", "fa1", "fa2", "fa3"]
p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
P.predict_rows(p, hw, four)

def best(f, n, k=7):
    out = []
    for _ in range(k):
        t0 = time.perf_counter()
        for _ in range(n):
            f()
        out.append((time.perf_counter() - t0) / n)
    return min(out)

problems = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c)
            for n in (512, 1024, 2048, 4096, 8192, 16384) for d in (64, 128) for c in (False, True)
            for b in (1, 4, 16) for h in (8, 32, 64)][:BATCH]
PROBLEM_SETS
rows = getattr(P, "rows", None)
many = getattr(P, "predict_many", None)
# a grid of problems (N, d, causal, batch, heads): many problems share a shape
grid = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c)
        for n in (256, 512, 1024, 2048, 4096, 8192, 16384, 32768) for d in (64, 128, 256)
        for c in (False, True) for b in (1, 2, 4, 8, 16, 32, 64, 128) for h in (8, 16, 32, 64, 128)]

def batch(probs=problems, limiter=True):
    if many:  # the version's batch API
        return many(probs, hw, four, limiter=limiter)
    plans = [(plan(s, q, hw, check=True), hw) for q in probs for s in four]
    return rows(plans) if rows else [P.row(pl, h) for pl, h in plans]

n = len(batch())
for q in [p, causal, *varied]:
    P.predict(q, hw, four)
out = {"predict_four_ms": best(lambda: P.predict_rows(p, hw, four), 50) * 1e3,
       "predict_frame_ms": best(lambda: P.predict(p, hw, four), 50) * 1e3,
       "predict_causal_ms": best(lambda: P.predict(causal, hw, four), 50) * 1e3,
       # 24 problems in turn: nothing remembered of one problem serves the next
       "predict_varied_ms": best(lambda: [P.predict(q, hw, four) for q in varied], 2) * 1e3 / len(varied),
       "batch_points": n, "batch_points_per_second": n / best(batch, 1, 3)}
out["predict_new_ms"] = min(best(lambda: [P.predict(q, hw, four) for q in qs], 1, 1) for qs in new) * 1e3 / 24
if many:  # this version: the time alone, and a grid of problems
    out["batch_time_only_per_second"] = n / best(lambda: batch(limiter=False), 1, 3)
    g = len(batch(grid))
    out.update({"grid_points": g, "grid_points_per_second": g / best(lambda: batch(grid), 1, 3),
                "grid_time_only_per_second": g / best(lambda: batch(grid, False), 1, 3)})
print(json.dumps(out))
""".replace("BATCH", "216").replace("PROBLEM_SETS\n", PROBLEM_SETS)
TUNE = """
import json, time
import iosim
from iosim.analysis import tune
from iosim.core.hardware import load
hw = load("h100")
p = iosim.Problem(batch=4, heads=16, seqlen_q=4096, head_dim=128)  # iosim tune's default batch, heads
df = tune.rank("fa2", [p], hw)  # fills the compile cache on a first run
out = []
for _ in range(5):
    t0 = time.perf_counter()
    tune.rank("fa2", [p], hw)
    out.append(time.perf_counter() - t0)
print(json.dumps({"tune_rank_seconds": min(out), "tune_configs": len(df)}))
"""
TUNE_ARGS = ["tune", "--schedule", "fa2", "--seqlen", "4096", "--head-dim", "128"]
NOTE_MODULES = ("pandas", "pyarrow", "plotly", "scipy", "typer", "tqdm", "cupy", "torch")
API = """
import json, sys, time
t0 = time.perf_counter()
import iosim
df = iosim.sweep(json.loads(sys.argv[1]))
print(json.dumps({"rows": len(df), "seconds": time.perf_counter() - t0}))
"""
MODULES = f"""
import sys
from iosim.cli import main
try:
    main(["predict"])
except SystemExit:
    pass
print([m for m in {NOTE_MODULES!r} if m in sys.modules], file=sys.stderr)
"""
PEAK = """
import atexit, json, resource, sys
def peak():
    kb = lambda who: resource.getrusage(who).ru_maxrss / 1024
    print(json.dumps({"main_mib": kb(resource.RUSAGE_SELF), "worker_mib": kb(resource.RUSAGE_CHILDREN)}),
          file=sys.stderr)
atexit.register(peak)
from iosim.cli import main
main(sys.argv[1:])
"""


def points(grid: dict) -> int:
    """Points of a grid (what `iosim sweep` computes), counted by this tree's iosim."""
    sys.path.insert(0, str(ROOT))
    from iosim.analysis.sweep import points as grid_points

    return grid_points(grid).expected()


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run(tree: Path, args: list[str], **kw) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, check=True,
                          env=env, cwd=tree, **kw)


def import_seconds(tree: Path) -> float:
    err = run(tree, ["-X", "importtime", "-c", "from iosim.cli import main"]).stderr
    line = next(ln for ln in err.splitlines() if ln.rstrip().endswith("| iosim.cli"))
    return int(line.split("|")[1]) / 1e6


def predict_seconds(tree: Path) -> float:
    t0 = time.perf_counter()
    run(tree, ["-c", "from iosim.cli import main; main()", "predict"])
    return time.perf_counter() - t0


def grid_args(grid: dict) -> list[str]:
    return [a for k, v in grid.items() for a in (f"--{k.replace('_', '-')}", v)]


def cli_sweep(tree: Path, grid: dict) -> dict:
    """`iosim sweep -o FILE.parquet` on `grid`: wall seconds, rows, peak memory."""
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "sweep.parquet"
        t0 = time.perf_counter()
        r = run(tree, ["-c", PEAK, "sweep", "--no-progress", "-o", str(out), *grid_args(grid)])
        wall = time.perf_counter() - t0
        import pyarrow.parquet as pq

        rows = pq.read_metadata(out).num_rows
    peak = json.loads(r.stderr.strip().splitlines()[-1])
    return {"seconds": wall, "rows": rows, **peak}


def last_json(tree: Path, code: str, *args: str) -> dict:
    return json.loads(run(tree, ["-c", code, *args]).stdout.strip().splitlines()[-1])


def tune_seconds(tree: Path) -> float:
    t0 = time.perf_counter()
    run(tree, ["-c", "from iosim.cli import main; main()", *TUNE_ARGS])
    return time.perf_counter() - t0


def sample(tree: Path) -> dict:
    """One of each measurement of one version."""
    api = last_json(tree, API, json.dumps(GRID))
    return {"import": import_seconds(tree), "predict": predict_seconds(tree), "api": api,
            "cli": cli_sweep(tree, GRID), "python": last_json(tree, PREDICT),
            "tune": last_json(tree, TUNE), "tune_shell": tune_seconds(tree)}


# --start: the commands timed, by the key they are recorded under
START = {"predict": ["predict"], "version": ["--version"], "hw_list": ["hw", "list"]}


def shell(tree: Path, args: list[str]) -> tuple[float, float]:
    """`iosim ARGS` (the console script's code) from `tree`: wall and CPU seconds, the CPU its
    process used itself (user + system, from wait4), interpreter start included."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", "from iosim.cli import main; main()", *args],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tree)
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status:
        raise SystemExit(f"iosim {' '.join(args)} failed in {tree} (status {status})")
    return wall, usage.ru_utime + usage.ru_stime


def instructions(tree: Path, args: list[str]) -> int | None:
    """Instructions `iosim ARGS` executes (callgrind's Ir, the whole process); None: no valgrind."""
    if shutil.which("valgrind") is None:
        return None
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable,
                        "-c", "from iosim.cli import main; main()", *args],
                       capture_output=True, text=True, env=env, cwd=tree, check=True)
    return int(re.search(r"Collected : (\d+)", r.stderr).group(1))


def compare_start(old: Path, new: Path, repeat: int, count: bool) -> tuple[dict, dict]:
    """The start alone (--start), both versions alternately."""
    samples: dict[Path, list] = {old: [], new: []}
    for tree in (old, new):
        run(tree, ["-m", "compileall", "-q", "iosim"])
        shell(tree, START["predict"])  # one start first: the files in the page cache
    for _ in range(repeat):
        for tree in (old, new):
            one = {"import": import_seconds(tree)}
            for key, args in START.items():
                one[key] = shell(tree, args)
            samples[tree].append(one)
    med = statistics.median
    out = []
    for tree in (old, new):
        got = samples[tree]
        res = {"commit": commit_of(tree), "cli_import_seconds": med(x["import"] for x in got),
               "cli_import_seconds_all": [round(x["import"], 4) for x in got],
               "predict_loads": run(tree, ["-c", MODULES]).stderr.strip().splitlines()[-1]}
        for key in START:
            res[f"{key}_wall_seconds"] = med(x[key][0] for x in got)
            res[f"{key}_cpu_seconds"] = med(x[key][1] for x in got)
            res[f"{key}_wall_seconds_all"] = [round(x[key][0], 4) for x in got]
            res[f"{key}_cpu_seconds_all"] = [round(x[key][1], 4) for x in got]
        if count:
            for key, args in START.items():
                res[f"{key}_instructions"] = instructions(tree, args)
        out.append(res)
    return out[0], out[1]


def write_start(out: str, previous: dict, this: dict, load: dict) -> None:
    ratio = {k: this[k] / previous[k] for k in this
             if isinstance(this[k], (int, float)) and isinstance(previous.get(k), (int, float))
             and previous[k]}
    result = {"commands": {k: " ".join(["iosim", *v]) for k, v in START.items()},
              "previous": previous, "this": this, "this_over_previous": ratio, "load_average": load,
              "machine": {"cpu": cpu_name(), "cpus": len(os.sched_getaffinity(0)),
                          "python": platform.python_version(), "platform": platform.platform()},
              "date": time.strftime("%Y-%m-%d")}
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(result, indent=1) + "\n")
    for name, v in (("previous", previous), ("this", this)):
        print(f"{name} {v['commit']}: import {v['cli_import_seconds']:.3f} s; "
              + "; ".join(f"{k} wall {v[f'{k}_wall_seconds']:.3f} s cpu {v[f'{k}_cpu_seconds']:.3f} s"
                          + (f" {v[f'{k}_instructions'] / 1e6:,.0f}M instructions"
                             if v.get(f"{k}_instructions") else "") for k in START))


COMMITS: dict[Path, str] = {}  # trees that are no git checkouts (--base-tree, --commit)


def commit_of(tree: Path) -> str:
    if tree in COMMITS:
        return COMMITS[tree]
    return subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"],
                          capture_output=True, text=True, check=True).stdout.strip()


def summarize(tree: Path, samples: list[dict], large: dict) -> dict:
    med = statistics.median
    rows = samples[0]["api"]["rows"]
    api_s = med(x["api"]["seconds"] for x in samples)
    cli_s = med(x["cli"]["seconds"] for x in samples)
    return {
        "commit": commit_of(tree),
        "cli_import_seconds": med(x["import"] for x in samples),
        "predict_shell_seconds": med(x["predict"] for x in samples),
        "predict_shell_seconds_all": [round(x["predict"], 3) for x in samples],
        "predict_loads": run(tree, ["-c", MODULES]).stderr.strip().splitlines()[-1],
        "sweep_rows": rows,
        "sweep_api_seconds": api_s,
        "sweep_api_points_per_second": rows / api_s,
        "sweep_cli_parquet_seconds": cli_s,
        "sweep_cli_parquet_points_per_second": rows / cli_s,
        "sweep_cli_peak_main_mib": max(x["cli"]["main_mib"] for x in samples),
        "sweep_cli_peak_worker_mib": max(x["cli"]["worker_mib"] for x in samples),
        "large_rows": large["rows"],
        "large_seconds": large["seconds"],
        "large_points_per_second": large["rows"] / large["seconds"],
        "large_peak_main_mib": large["main_mib"],
        "large_peak_worker_mib": large["worker_mib"],
        "predict_four_ms": med(x["python"]["predict_four_ms"] for x in samples),
        "predict_frame_ms": med(x["python"]["predict_frame_ms"] for x in samples),
        "predict_causal_ms": med(x["python"]["predict_causal_ms"] for x in samples),
        "predict_varied_ms": med(x["python"]["predict_varied_ms"] for x in samples),
        "predict_new_ms": med(x["python"]["predict_new_ms"] for x in samples),
        "batch_points": samples[0]["python"]["batch_points"],
        "batch_points_per_second": med(x["python"]["batch_points_per_second"] for x in samples),
        **{k: med(x["python"][k] for x in samples) for k in (
            "batch_time_only_per_second", "grid_points_per_second", "grid_time_only_per_second")
           if k in samples[0]["python"]},
        **({"grid_points": samples[0]["python"]["grid_points"]} if "grid_points" in samples[0]["python"] else {}),
        "tune_configs": samples[0]["tune"]["tune_configs"],
        "tune_rank_seconds": med(x["tune"]["tune_rank_seconds"] for x in samples),
        "tune_shell_seconds": med(x["tune_shell"] for x in samples),
    }


def compare(old: Path, new: Path, repeat: int) -> tuple[dict, dict]:
    """Both versions, alternately (a machine whose load drifts weighs on both alike)."""
    samples: dict[Path, list] = {old: [], new: []}
    for tree in (old, new):  # bytecode, as an installed package has it (module docstring)
        run(tree, ["-m", "compileall", "-q", "iosim"])
    for _ in range(repeat):
        for tree in (old, new):
            samples[tree].append(sample(tree))
    large = {tree: cli_sweep(tree, LARGE) for tree in (old, new)}
    previous, this = (summarize(t, samples[t], large[t]) for t in (old, new))
    million = cli_sweep(new, MILLION)
    this.update({"million_rows": million["rows"], "million_seconds": million["seconds"],
                 "million_points_per_second": million["rows"] / million["seconds"],
                 "million_peak_main_mib": million["main_mib"],
                 "million_peak_worker_mib": million["worker_mib"]})
    return previous, this


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--base", default=None, help="the previous version (default: merge-base with main)")
    ap.add_argument("--base-tree", default=None, help="the previous version, already extracted")
    ap.add_argument("--commit", default=None, help="this tree's commit, where it is no git checkout")
    ap.add_argument("--out", default=None, help="default: sweep_speed.json beside this script "
                    "(--start: start.json)")
    ap.add_argument("--start", action="store_true", help="the start alone (START), no sweeps")
    ap.add_argument("--instructions", action="store_true", help="--start: also count instructions")
    args = ap.parse_args()
    out = args.out or str(Path(__file__).with_name("start.json" if args.start else "sweep_speed.json"))
    if args.commit:
        COMMITS[ROOT] = args.commit
    load = {"start": os.getloadavg()}
    if args.start:
        def how(old, new, repeat):
            return compare_start(old, new, repeat, args.instructions)
    else:
        how = compare
    if args.base_tree:
        old_tree = Path(args.base_tree).resolve()
        COMMITS[old_tree] = (old_tree / ".commit").read_text().strip()
        previous, this = how(old_tree, ROOT, args.repeat)
    else:
        previous, this = compare_with_base(args.base, args.repeat, how)
    load["end"] = os.getloadavg()
    if args.start:
        write_start(out, previous, this, load)
    else:
        write(out, previous, this)


def compare_with_base(base: str | None, repeat: int, how=compare) -> tuple[dict, dict]:
    git = ["git", "-C", str(ROOT)]
    base = base or subprocess.run([*git, "merge-base", "HEAD", "main"], capture_output=True,
                                  text=True, check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as d:
        old_tree = Path(d) / "previous"
        subprocess.run([*git, "worktree", "add", "--detach", str(old_tree), base], check=True,
                       capture_output=True)
        try:
            previous, this = how(old_tree, ROOT, repeat)
        finally:
            subprocess.run([*git, "worktree", "remove", "--force", str(old_tree)], check=False)
    return previous, this


def write(out: str, previous: dict, this: dict) -> None:
    ratio = {k: this[k] / previous[k] for k in this
             if isinstance(this[k], float) and isinstance(previous.get(k), float) and previous[k]}
    result = {"grid": GRID, "large_grid": LARGE, "million_grid": MILLION,
              "million_points": points(MILLION), "previous": previous, "this": this,
              "this_over_previous": ratio,
              "machine": {"cpu": cpu_name(), "cpus": len(os.sched_getaffinity(0)), "python": platform.python_version(),
                          "platform": platform.platform()},
              "date": time.strftime("%Y-%m-%d")}
    Path(out).write_text(json.dumps(result, indent=1) + "\n")
    for name, v in (("previous", previous), ("this", this)):
        print(f"{name} {v['commit']}: import {v['cli_import_seconds']:.3f} s, predict "
              f"{v['predict_shell_seconds']:.2f} s, sweep {v['sweep_rows']} rows "
              f"{v['sweep_api_points_per_second']:.0f} points/s (API), "
              f"{v['sweep_cli_parquet_points_per_second']:.0f} points/s (CLI, Parquet), "
              f"peak {v['sweep_cli_peak_main_mib']:.0f} MiB; large {v['large_rows']} rows "
              f"{v['large_points_per_second']:.0f} points/s, peak {v['large_peak_main_mib']:.0f} MiB; "
              f"predict {v['predict_frame_ms']:.2f} ms (causal {v['predict_causal_ms']:.2f}, varied {v['predict_varied_ms']:.2f}, new {v['predict_new_ms']:.2f}, rows {v['predict_four_ms']:.2f} ms), batch {v['batch_points_per_second']:.0f}/s, "
              f"tune {v['tune_rank_seconds']:.3f} s ({v['tune_shell_seconds']:.2f} s shell)")
    print(f"million: {this['million_rows']} rows in {this['million_seconds']:.1f} s, peak "
          f"{this['million_peak_main_mib']:.0f} MiB main, {this['million_peak_worker_mib']:.0f} MiB worker")


if __name__ == "__main__":
    main()
