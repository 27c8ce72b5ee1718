"""Sweeps: a grid of problems x schedules x hardware (and what-if hardware) -> one DataFrame.

A grid maps each problem field, `schedule`, `hw` and what-if hardware fields (`set`) to a list
of values, or to text in the range grammar:

    a,b,c        a list
    a..b         a, 2a, 4a, ... up to b (powers of two when a is one)
    a..b:step    a, a+step, ... up to b

`block_m`, `block_n`, `warps`, `stages` (the tile knobs, iosim.knobs) take values like the
problem fields; a configuration a schedule's kernel cannot run is skipped with the reason.
`causal` takes true,false,both; `direction` fwd,bwd,both; `schedule` a list or `all`; `hw`
profile names or TOML paths; `set` maps a HardwareProfile field (`smem_per_sm_bytes`,
`efficiency.hbm`, `tensor_flops_per_s.bf16`, ...) to values, each combination a what-if copy
of every profile (`HardwareProfile.with_changes`); each swept field is an extra column
`set_<field>` (the name `iosim report` and `accuracy.baseline` read).

Points that cannot exist or be planned (fa3 on a GPU without wgmma, tiles over the SRAM,
kv_heads not dividing heads) are left out and counted in `SweepResult.skipped`.
"""

from __future__ import annotations

import itertools
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from pydantic import ValidationError

from iosim.analysis.predict import row
from iosim.core import hardware
from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.output import check_writable, write_table
from iosim.core.problem import CausalAlign, Direction, Dtype, Problem
from iosim.schedules import SCHEDULES, Tiles, plan
from iosim.schedules.knobs import KNOBS, TunedTiles

INT_FIELDS = ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim")
ALIASES = {"seqlen": "seqlen_q", "schedules": "schedule", "kv-heads": "kv_heads",
           "seqlen-k": "seqlen_k", "head-dim": "head_dim", "causal-align": "causal_align"}
DEFAULTS: dict[str, list] = {"batch": [4], "heads": [32], "kv_heads": [None], "seqlen_q": [4096],
                             "seqlen_k": [None], "head_dim": [128], "dtype": [Dtype.bf16],
                             "causal": [False], "causal_align": [CausalAlign.top_left],
                             "direction": [Direction.fwd],
                             "schedule": list(SCHEDULES), "hw": ["h100"],  # as `iosim predict`
                             **{k: [None] for k in KNOBS}}
PARALLEL_POINTS = 2000  # sweeps this large run in one process per CPU
MAX_VALUES = 10_000  # values one option may expand to (a typo like 1..1e9:1 is refused, not run)
MAX_POINTS = 10_000_000  # points of one sweep
CHUNKS_PER_WORKER = 8  # pieces of work per process (progress granularity, balance)


def parse_values(text: str, kind: type = int, name: str = "value") -> list:
    """Values of one option in the range grammar (see the module docstring)."""
    text = str(text).strip()
    items = [s.strip() for s in text.split(",")]
    if not text or any(not s for s in items):
        raise InputError(f"--{name}: empty value or list item in '{text}' "
                         "(allowed: a,b,c or a..b or a..b:step)")
    out: list = []
    for item in items:
        if ".." not in item:
            out.append(_number(item, kind, name))
            continue
        lo_s, _, rest = item.partition("..")
        hi_s, colon, step_s = rest.partition(":")
        lo, hi = _number(lo_s, kind, name), _number(hi_s, kind, name)
        if lo > hi:
            raise InputError(f"--{name}: range '{item}' is inverted (allowed: a..b with a <= b)")
        if colon:
            step = _number(step_s, kind, name)
            if step <= 0:
                raise InputError(f"--{name}: step in '{item}' must be > 0")
            n = int(math.floor((hi - lo) / step + 1e-9)) + 1
            if n > MAX_VALUES:
                raise InputError(f"--{name}: range '{item}' has {n:,} values "
                                 f"(allowed: at most {MAX_VALUES:,})")
            out += [kind(lo + i * step) for i in range(n)]
        else:
            if lo <= 0:
                raise InputError(f"--{name}: range '{item}' doubles from {lo}: it must start above 0")
            if hi / lo > 2.0**64:
                raise InputError(f"--{name}: range '{item}' spans more than 64 doublings")
            v = lo
            while v <= hi * (1 + 1e-12):
                out.append(kind(v))
                v *= 2
    if kind is int and min(out) < 1:  # every whole-number option is a size, a count or a tile
        raise InputError(f"--{name}: {min(out)} is not allowed (allowed: whole numbers >= 1)")
    return list(dict.fromkeys(out))  # in order, without repeats


def _number(s: str, kind: type, name: str):
    s = s.strip()
    try:
        if kind is int:
            f = float(s)
            if not f.is_integer():
                raise ValueError
            return int(f)
        v = float(s)
        if not math.isfinite(v):
            raise ValueError
        return v
    except ValueError:
        what = "a whole number" if kind is int else "a finite number"
        raise InputError(f"--{name}: '{s}' is not {what}") from None


def parse_choice(text: str, allowed: Iterable[str], name: str, both: Iterable[str] = ()) -> list[str]:
    allowed = list(allowed)
    items = [s.strip().lower() for s in str(text).split(",")]
    if not str(text).strip() or any(not s for s in items):
        raise InputError(f"--{name}: empty value (allowed: {', '.join(allowed)})")
    out: list[str] = []
    for s in items:
        if s in ("both", "all") and both:
            out += list(both)
        elif s in allowed:
            out.append(s)
        else:
            raise InputError(f"--{name}: '{s}' is not allowed (allowed: {', '.join(allowed)})")
    return list(dict.fromkeys(out))


TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")


def parse_bool(text: str, name: str = "causal") -> list[bool]:
    """One grammar for every boolean option: true/yes/on/1, false/no/off/0, a comma list of them,
    or both (false and true), any case."""
    items = [s.strip().lower() for s in str(text).split(",")]
    out: list[bool] = []
    for s in items:
        if s == "both":
            out += [False, True]
        elif s in TRUE_WORDS or s in FALSE_WORDS:
            out.append(s in TRUE_WORDS)
        else:
            raise InputError(f"--{name}: '{s}' is not allowed "
                             "(allowed: true, false, yes, no, on, off, 1, 0, both)")
    return list(dict.fromkeys(out))


def hw_field_kind(key: str) -> type:
    """float or int for a what-if field; InputError naming the allowed ones otherwise."""
    from iosim.core.hardware import Efficiency

    fields = HardwareProfile.model_fields
    scalar = [k for k, f in fields.items() if f.annotation in (int, float, "int", "float")]
    allowed = scalar + [f"efficiency.{k}" for k in Efficiency.model_fields] + \
        ["tensor_flops_per_clk_per_sm.<dtype>", "tensor_flops_per_s.<dtype> (a device peak)"]
    if key.startswith("efficiency."):
        if key.split(".", 1)[1] in Efficiency.model_fields:
            return float
    elif key.startswith(("tensor_flops_per_s.", "tensor_flops_per_clk_per_sm.")) and key.split(".", 1)[1]:
        return float
    elif key in scalar:
        ann = fields[key].annotation
        return int if ann in (int, "int") else float
    raise InputError(f"--set: unknown hardware field '{key}' (allowed: {', '.join(allowed)})")


# CLI option of each grid field, for messages (the grid's keys are Problem's field names)
OPTION_NAMES = {"seqlen_q": "seqlen", "seqlen_k": "seqlen-k", "head_dim": "head-dim",
                "kv_heads": "kv-heads"}


def parse_set(items: Iterable[str]) -> dict[str, list]:
    """`FIELD=VALUES` what-if options -> {field: values}."""
    out: dict[str, list] = {}
    for it in items:
        key, eq, vals = str(it).partition("=")
        key = key.strip()
        if not eq or not key:
            raise InputError(f"--set: '{it}' is not FIELD=VALUES (e.g. smem_per_sm_bytes=262144,458752)")
        out[key] = parse_values(vals, hw_field_kind(key), f"set {key}")
    return out


@dataclass
class SweepResult:
    rows: pd.DataFrame
    points: int = 0  # points asked for (problems x schedules x hardware)
    skipped: Counter = field(default_factory=Counter)  # reason -> points left out
    whatif: list[str] = field(default_factory=list)  # extra columns: set_<field> per swept field

    def summary(self) -> str:
        df = self.rows
        lines = [f"{len(df)} rows of {self.points} points"]
        for why, n in self.skipped.most_common():
            lines.append(f"  skipped {n}: {why}")
        if len(df):
            lines.append("  bound: " + ", ".join(f"{b} {n}" for b, n in df.bound.value_counts().items()))
            # one median per GPU (and what-if variant): rates of different GPUs never mix
            for gpu, part in df.groupby(["hw", *self.whatif], sort=False, dropna=False):
                gpu = (gpu,) if isinstance(gpu, str) else gpu
                label = " ".join([str(gpu[0])] + [f"{c}={v}" for c, v in zip(self.whatif, gpu[1:])])
                med = part.groupby("schedule", sort=False).tflops_pred.median()
                lines.append(f"  median predicted TFLOP/s on {label}: "
                             + ", ".join(f"{s} {v:.0f}" for s, v in med.items()))
            best = df.loc[df.groupby(["hw", "direction", "batch", "heads", "kv_heads", "seqlen_q",
                                      "seqlen_k", "head_dim", "dtype", "causal", "causal_align"]
                                     + self.whatif,
                                     dropna=False).time_pred_ms.idxmin(), "schedule"]
            lines.append("  fastest: " + ", ".join(f"{s} {n}" for s, n in best.value_counts().items()))
        return "\n".join(lines)


def _as_list(v, kind, name):
    if isinstance(v, str):
        return parse_values(v, kind, name)
    if isinstance(v, Iterable):
        return list(v)
    return [v]


def normalize_grid(grid: Mapping) -> tuple[dict[str, list], dict[str, list]]:
    """(problem/schedule/hw values, what-if values) from a grid of lists or grammar text."""
    g = {k: list(v) for k, v in DEFAULTS.items()}
    sets: dict[str, list] = {}
    for key, v in grid.items():
        key = ALIASES.get(key, key)
        opt = OPTION_NAMES.get(key, key)
        if key == "set":
            sets = parse_set(v) if isinstance(v, (list, tuple, str)) \
                else {k: _as_list(x, hw_field_kind(k), f"set {k}") for k, x in dict(v).items()}
            for k in sets:
                hw_field_kind(k)
            continue
        if v is None:
            continue
        if key in INT_FIELDS or key in KNOBS:
            g[key] = _as_list(v, int, opt.replace("_", "-"))
        elif key == "dtype":
            vals = parse_choice(v, [d.value for d in Dtype], key) if isinstance(v, str) else list(v)
            g[key] = [Dtype(x) for x in vals]
        elif key == "causal":
            g[key] = parse_bool(v) if isinstance(v, str) else [bool(x) for x in _as_list(v, bool, key)]
        elif key == "causal_align":
            aligns = [a.value for a in CausalAlign]
            vals = parse_choice(v, [*aligns, "both"], "causal-align", both=aligns) \
                if isinstance(v, str) else list(v)
            g[key] = [CausalAlign(x) for x in vals]
        elif key == "direction":
            vals = parse_choice(v, ["fwd", "bwd", "both"], key, both=["fwd", "bwd"]) \
                if isinstance(v, str) else list(v)
            g[key] = [Direction(x) for x in vals]
        elif key == "schedule":
            g[key] = parse_choice(v, [*SCHEDULES, "all"], key, both=list(SCHEDULES)) \
                if isinstance(v, str) else list(v)
            for s in g[key]:
                if s not in SCHEDULES:
                    raise InputError(f"unknown schedule '{s}' (allowed: {', '.join(SCHEDULES)})")
        elif key == "hw":
            g[key] = [s.strip() for s in v.split(",")] if isinstance(v, str) else list(v)
            if not g[key] or any(isinstance(s, str) and not s for s in g[key]):
                raise InputError("--hw: empty value (allowed: profile names or paths, comma-separated)")
        else:
            allowed = [*INT_FIELDS, "seqlen", "dtype", "causal", "causal_align", "direction",
                       "schedule", "hw", "set",
                       *KNOBS]
            raise InputError(f"unknown sweep field '{key}' (allowed: {', '.join(allowed)})")
        if not g[key]:
            raise InputError(f"--{opt}: no values")
    return g, sets


def profiles(hw_values: list, sets: dict[str, list],
             skipped: Counter | None = None) -> list[tuple[HardwareProfile, dict]]:
    """Every profile x every what-if combination, with the swept values. A combination that
    describes no GPU (e.g. more shared memory a CTA than an SM has) is left out, its reason
    counted in `skipped` (raised when there is no `skipped`)."""
    out = []
    base = [h if isinstance(h, HardwareProfile) else hardware.load(h) for h in hw_values]
    keys = list(sets)
    for h in base:
        for combo in itertools.product(*(sets[k] for k in keys)):
            changes = dict(zip(keys, combo))
            try:
                out.append((h.with_changes(**changes) if changes else h, changes))
            except InputError as e:
                if skipped is None:
                    raise
                skipped["what-if profile: " + str(e).split("Value error, ")[-1]] += 1
    return out


def _rows(job: tuple) -> tuple[list[list[dict]], Counter]:
    """Rows of some problems for every (profile, schedule) of the sweep: one list per
    (profile, schedule), problems in order. Profiles vary fastest, so a problem's cached
    pieces (block maps, trip counts) serve all of them."""
    todo, problems, tuned = job
    out: list[list[dict]] = [[] for _ in todo]
    skipped: Counter = Counter()
    for p in problems:
        for i, (hw, changes, s, t) in enumerate(todo):
            if s == "fa3" and not hw.has_wgmma:
                skipped[f"fa3 on {hw.name} ({hw.arch}: no wgmma)"] += 1
                continue
            try:
                r = row(plan(s, p, hw, t, check=True, tuned=tuned), hw)
            except InputError as e:
                skipped[f"{s}: " + str(e).split(" (allowed")[0].removeprefix(f"{s}: ")] += 1
            else:
                r.update({f"set_{k}": v for k, v in changes.items()})
                out[i].append(r)
    return out, skipped


def sweep_result(grid: Mapping, progress: bool | None = False, workers: int | None = None,
                 tuned: TunedTiles | None = None) -> SweepResult:
    """Rows for every point of the grid, with what was skipped and why. `workers`: processes
    (default: the CPUs when the sweep is large enough to gain from them); `tuned`: a tiles
    file's entries."""
    g, sets = normalize_grid(grid)
    size = math.prod(len(g[k]) for k in ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k",
                                         "head_dim", "dtype", "causal", "causal_align",
                                         "direction", "schedule", "hw")) \
        * math.prod(len(v) for v in sets.values())
    if size > MAX_POINTS:
        raise InputError(f"the grid has {size:,} points (allowed: at most {MAX_POINTS:,} in one sweep)")
    skipped: Counter = Counter()
    bad_hw: Counter = Counter()  # what-if combinations that describe no GPU
    hws = profiles(g["hw"], sets, bad_hw)
    if not hws:
        raise InputError("no hardware profile of the grid is valid: " + "; ".join(bad_hw))
    problems = []
    n_sched = len(g["schedule"])
    for b, h, kvh, nq, nk, d, dt, c, ca, di in itertools.product(
            g["batch"], g["heads"], g["kv_heads"], g["seqlen_q"], g["seqlen_k"], g["head_dim"],
            g["dtype"], g["causal"], g["causal_align"], g["direction"]):
        if ca is not CausalAlign.top_left and (not c or nq == (nk or nq)):
            continue  # the alignment changes nothing: one row, not two equal ones
        try:
            problems.append(Problem(batch=b, heads=h, kv_heads=kvh, seqlen_q=nq, seqlen_k=nk,
                                    head_dim=d, dtype=dt, causal=c, causal_align=ca,
                                    direction=di))
        except ValidationError as e:
            err = e.errors()[0]
            msg = err["msg"].removeprefix("Value error, ")
            loc = [f"--{OPTION_NAMES.get(str(x), str(x))}" for x in err["loc"]]
            skipped[f"invalid problem: {': '.join([*loc, msg])}"] += n_sched * len(hws)
    knob_sets = [Tiles(**dict(zip(KNOBS, c))) for c in itertools.product(*(g[k] for k in KNOBS))]
    todo = [(hw, ch, s, t) for s in g["schedule"] for t in knob_sets for hw, ch in hws]
    for why, n in bad_hw.items():  # every problem, schedule and knob set on that profile
        skipped[why] += n * len(problems) * len(g["schedule"]) * len(knob_sets)
    points = len(problems) * len(todo) + sum(skipped.values())
    if not problems:  # every point invalid (e.g. --seqlen 0, or --kv-heads 3 with 32 heads)
        return SweepResult(pd.DataFrame(), points, skipped, [f"set_{k}" for k in sets])
    if workers is None:
        workers = (os.cpu_count() or 1) if len(problems) * len(todo) >= PARALLEL_POINTS else 1
    workers = max(1, min(workers, len(problems) or 1))
    n_chunks = min(len(problems), workers * CHUNKS_PER_WORKER) if workers > 1 else \
        min(len(problems), CHUNKS_PER_WORKER)
    n_chunks = max(n_chunks, 1)
    size = -(-len(problems) // n_chunks)
    chunks = [problems[i:i + size] for i in range(0, len(problems), size)] or [[]]
    jobs = [(todo, ch, tuned) for ch in chunks]
    bar = None
    if progress is not False:
        from tqdm import tqdm

        bar = tqdm(total=len(problems) * len(todo), unit="pt", leave=False,
                   disable=None if progress is None else not progress)
    if workers > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            results = []
            for res in pool.map(_rows, jobs):
                results.append(res)
                if bar:
                    bar.update(sum(len(x) for x in res[0]) or 1)
    else:
        results = []
        for job in jobs:
            results.append(_rows(job))
            if bar:
                bar.update(len(job[1]) * len(todo))
    if bar:
        bar.close()
    rows: list[dict] = []
    for t in range(len(todo)):  # schedule, profile, then problems in grid order
        for res, _ in results:
            rows += res[t]
    for _, sk in results:
        skipped.update(sk)
    return SweepResult(pd.DataFrame(rows), points, skipped, [f"set_{k}" for k in sets])


def sweep(grid: Mapping, progress: bool | None = False) -> pd.DataFrame:
    """One row per plannable point of `grid` (see the module docstring), shared columns."""
    return sweep_result(grid, progress).rows


TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


def write(df: pd.DataFrame, path: str | Path, force: bool = False) -> Path:
    """CSV, or Parquet for .parquet/.pq, written atomically; never over measurements, and over
    another existing file only with `force` (iosim.core.output)."""
    return write_table(df, check_writable(path, TABLE_SUFFIXES, force))
