"""Sweeps: a grid of problems x schedules x hardware (and what-if hardware) -> rows: one
DataFrame (`sweep`, `sweep_result`), or a file written a chunk at a time (`stream`, what
`iosim sweep` runs). The grid's problems are made lazily, a chunk of CHUNK_PROBLEMS at a time,
and the chunks run in this process, a local process pool or on a Dask cluster (`executor`).

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

import importlib.util
import itertools
import math
import os
import shutil
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from iosim.analysis import table
from iosim.core import hardware
from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.output import check_writable, write_atomic, write_table
from iosim.core.problem import CausalAlign, Direction, Dtype, Problem
from iosim.core.rows import problem_fields
from iosim.schedules import ALL, SCHEDULES, Tiles
from iosim.schedules.knobs import KNOBS, TunedTiles

if TYPE_CHECKING:
    import pandas as pd

INT_FIELDS = ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim")
INFERENCE_FIELDS = ("window", "page_size")  # unset by default (no window, a contiguous cache)
ALIASES = {"seqlen": "seqlen_q", "schedules": "schedule", "kv-heads": "kv_heads",
           "seqlen-k": "seqlen_k", "head-dim": "head_dim", "causal-align": "causal_align",
           "page-size": "page_size"}
DEFAULTS: dict[str, list] = {"batch": [4], "heads": [32], "kv_heads": [None], "seqlen_q": [4096],
                             "seqlen_k": [None], "head_dim": [128], "dtype": [Dtype.bf16],
                             "causal": [False], "causal_align": [CausalAlign.top_left],
                             "direction": [Direction.fwd], "window": [None], "page_size": [None],
                             "schedule": list(ALL), "hw": ["h100"],  # as `iosim predict`
                             **{k: [None] for k in KNOBS}}
PARALLEL_POINTS = 2000  # sweeps this large run in one process per CPU
MAX_VALUES = 10_000  # values one option may expand to (a typo like 1..1e9:1 is refused, not run)
MAX_POINTS = 10_000_000  # points of one sweep
CHUNK_PROBLEMS = 256  # problems per piece of work at least (whole shapes): one chunk of rows


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
                "kv_heads": "kv-heads", "page_size": "page-size"}


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


class Summary:
    """What `iosim sweep` says of its rows, added a part at a time (a streamed sweep's chunks):
    rows per bound, the median predicted TFLOP/s per GPU (and what-if variant) and schedule,
    and how often each schedule is the fastest. A problem's rows are in one part."""

    def __init__(self, whatif: list[str]):
        self.whatif, self.rows = whatif, 0
        self.bound: Counter = Counter()
        self.fastest: Counter = Counter()
        self.tflops: dict[tuple, list] = {}  # (hw, *what-if values) -> {schedule: [arrays]}

    def add(self, df: pd.DataFrame) -> None:
        if not len(df):
            return
        self.rows += len(df)
        self.bound.update(df.bound.value_counts().to_dict())
        for key, part in df.groupby(["hw", *self.whatif, "schedule"], sort=False, dropna=False):
            per = self.tflops.setdefault(tuple(key[:-1]), {})
            per.setdefault(key[-1], []).append(part.tflops_pred.to_numpy(float))
        best = df.loc[df.groupby(["hw", "direction", "batch", "heads", "kv_heads", "seqlen_q",
                                  "seqlen_k", "head_dim", "dtype", "causal", "causal_align"]
                                 + self.whatif, dropna=False).time_pred_ms.idxmin(), "schedule"]
        self.fastest.update(best.value_counts().to_dict())

    def text(self, points: int, skipped: Counter) -> str:
        import numpy as np

        lines = [f"{self.rows} rows of {points} points"]
        for why, n in skipped.most_common():
            lines.append(f"  skipped {n}: {why}")
        if self.rows:
            lines.append("  bound: " + ", ".join(f"{b} {n}" for b, n in self.bound.most_common()))
            # one median per GPU (and what-if variant): rates of different GPUs never mix
            for gpu, per in self.tflops.items():
                label = " ".join([str(gpu[0])] + [f"{c}={v}" for c, v in zip(self.whatif, gpu[1:])])
                lines.append(f"  median predicted TFLOP/s on {label}: " + ", ".join(
                    f"{s} {np.nanmedian(np.concatenate(v)):.0f}" for s, v in per.items()))
            lines.append("  fastest: " + ", ".join(f"{s} {n}" for s, n in self.fastest.most_common()))
        return "\n".join(lines)


@dataclass
class SweepResult:
    rows: pd.DataFrame
    points: int = 0  # points asked for (problems x schedules x hardware)
    skipped: Counter = field(default_factory=Counter)  # reason -> points left out
    whatif: list[str] = field(default_factory=list)  # extra columns: set_<field> per swept field

    def summary(self) -> str:
        acc = Summary(self.whatif)
        acc.add(self.rows)
        return acc.text(self.points, self.skipped)


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
        if key in INT_FIELDS or key in KNOBS or key in INFERENCE_FIELDS:
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
            g[key] = parse_choice(v, [*SCHEDULES, "all"], key, both=list(ALL)) \
                if isinstance(v, str) else list(v)
            for s in g[key]:
                if s not in SCHEDULES:
                    raise InputError(f"unknown schedule '{s}' (allowed: {', '.join(SCHEDULES)})")
        elif key == "hw":
            g[key] = [s.strip() for s in v.split(",")] if isinstance(v, str) else list(v)
            if not g[key] or any(isinstance(s, str) and not s for s in g[key]):
                raise InputError("--hw: empty value (allowed: profile names or paths, comma-separated)")
        else:
            allowed = [*INT_FIELDS, *INFERENCE_FIELDS, "seqlen", "dtype", "causal", "causal_align", "direction",
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


def _rows(job: tuple) -> tuple[list[dict | None], Counter]:
    """Rows of some problems for every (profile, schedule) of the sweep, as columns
    (iosim.analysis.table; numbers as numpy arrays, cheap to send between processes, no
    pandas needed): one table per (profile, schedule), problems in order, None where none
    could be planned. The problems of one shape share a template Plan per (profile,
    schedule), and all of the chunk's are predicted in one batch."""
    import numpy as np

    todo, problems, tuned = job
    skipped: Counter = Counter()
    temps, spans = [], []
    for hw, _, s, t in todo:
        if s == "fa3" and not hw.has_wgmma:
            skipped[f"fa3 on {hw.name} ({hw.arch}: no wgmma)"] += len(problems)
            spans.append(None)
            continue
        ts, order, errors = table.templates(problems, hw, s, t, tuned)
        for e, n in errors:
            skipped[f"{s}: " + str(e).split(" (allowed")[0].removeprefix(f"{s}: ")] += n
        spans.append(order if ts else None)
        temps += ts
    if not temps:
        return [None] * len(todo), skipped
    cols = table.columns(temps)
    out: list[dict | None] = []
    at = 0
    for (_, changes, _, _), order in zip(todo, spans):
        if order is None:
            out.append(None)
            continue
        # this entry's rows, back in the problems' order
        part = table.take(cols, at + np.argsort(np.asarray(order, np.int64), kind="stable"))
        at += len(order)
        part.update({f"set_{k}": [v] * len(order) for k, v in changes.items()})
        out.append(part)
    return out, skipped


@dataclass
class Points:
    """A grid ready to run: what runs on each problem (`todo`: profile, what-if values,
    schedule, tiles), the problems as a lazy stream, and the points counted so far."""
    g: dict[str, list]
    sets: dict[str, list]
    todo: list[tuple]
    n_knobs: int
    bad_hw: Counter
    skipped: Counter = field(default_factory=Counter)
    problems_seen: int = 0  # valid problems the stream has yielded

    @property
    def whatif(self) -> list[str]:
        return [f"set_{k}" for k in self.sets]

    def _tuples(self):
        """The grid's points, batch, heads and kv_heads varying fastest: a chunk of problems
        holds whole shapes (iosim.schedules.shape), each predicted from one template."""
        g = self.g
        for nq, nk, d, dt, c, ca, di, w, ps, b, h, kvh in itertools.product(
                g["seqlen_q"], g["seqlen_k"], g["head_dim"], g["dtype"], g["causal"],
                g["causal_align"], g["direction"], g["window"], g["page_size"], g["batch"],
                g["heads"], g["kv_heads"]):
            if ca is not CausalAlign.top_left and (not c or nq == (nk or nq)):
                continue  # the alignment changes nothing: one row, not two equal ones
            yield b, h, kvh, nq, nk, d, dt, c, ca, di, w, ps

    def expected(self) -> int:
        """Points to compute (a progress bar's total): one pass over the grid's tuples."""
        return sum(1 for _ in self._tuples()) * len(self.todo)

    def problems(self):
        """The grid's valid problems, made one at a time (never the whole grid at once)."""
        n_sched = len(self.g["schedule"])
        n_hw = len(self.todo) // max(n_sched * self.n_knobs, 1)
        for b, h, kvh, nq, nk, d, dt, c, ca, di, w, ps in self._tuples():
            try:
                p = Problem(batch=b, heads=h, kv_heads=kvh, seqlen_q=nq, seqlen_k=nk, head_dim=d,
                            dtype=dt, causal=c, causal_align=ca, direction=di, window=w,
                            page_size=ps)
            except ValidationError as e:
                err = e.errors()[0]
                msg = err["msg"].removeprefix("Value error, ")
                loc = [f"--{OPTION_NAMES.get(str(x), str(x))}" for x in err["loc"]]
                self.skipped[f"invalid problem: {': '.join([*loc, msg])}"] += n_sched * n_hw
                continue
            self.problems_seen += 1
            yield p

    def totals(self, planned: Counter) -> tuple[int, Counter]:
        """(points asked for, reasons -> points skipped), once the stream is spent; `planned`:
        the points the chunks could not plan (they are among problems x todo)."""
        skipped = Counter(self.skipped)
        for why, n in self.bad_hw.items():  # every problem, schedule and knob set on that profile
            skipped[why] += n * self.problems_seen * len(self.g["schedule"]) * self.n_knobs
        return self.problems_seen * len(self.todo) + sum(skipped.values()), skipped + planned


def points(grid: Mapping) -> Points:
    """The grid (see the module docstring) checked and ready to stream; InputError when it is
    too large or none of its hardware is valid."""
    g, sets = normalize_grid(grid)
    size = math.prod(len(g[k]) for k in ("batch", "heads", "kv_heads", "seqlen_q", "seqlen_k",
                                         "head_dim", "dtype", "causal", "causal_align",
                                         "direction", "schedule", "hw")) \
        * math.prod(len(v) for v in sets.values())
    if size > MAX_POINTS:
        raise InputError(f"the grid has {size:,} points (allowed: at most {MAX_POINTS:,} in one sweep)")
    bad_hw: Counter = Counter()  # what-if combinations that describe no GPU
    hws = profiles(g["hw"], sets, bad_hw)
    if not hws:
        raise InputError("no hardware profile of the grid is valid: " + "; ".join(bad_hw))
    knob_sets = [Tiles(**dict(zip(KNOBS, c))) for c in itertools.product(*(g[k] for k in KNOBS))]
    todo = [(hw, ch, s, t) for s in g["schedule"] for t in knob_sets for hw, ch in hws]
    return Points(g, sets, todo, len(knob_sets), bad_hw)


ENGINES = ("local", "dask")


def check_engine(engine: str, scheduler: str | None) -> None:
    """InputError, before any work, for an engine that is not known or not installed."""
    if engine not in ENGINES:
        raise InputError(f"--engine: '{engine}' is not allowed (allowed: {', '.join(ENGINES)})")
    if scheduler and engine != "dask":
        raise InputError("--scheduler: only with --engine dask")
    if engine == "dask":
        try:
            import dask.distributed  # noqa: F401
        except ImportError:
            raise InputError("--engine dask needs dask.distributed "
                             "(pip install 'dask[distributed]')") from None


@contextmanager
def executor(engine: str = "local", workers: int = 1, scheduler: str | None = None):
    """Where the chunks run: None (this process), a local process pool, or a Dask cluster
    (`scheduler`: its address, e.g. tcp://host:8786; none: a LocalCluster of `workers`
    processes on this machine). Both have submit() -> a future with result()."""
    check_engine(engine, scheduler)
    if engine == "dask":
        from dask.distributed import Client, LocalCluster

        if scheduler:
            with Client(scheduler) as client:
                yield client
        else:
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              dashboard_address=None) as cluster, Client(cluster) as client:
                yield client
    elif workers > 1:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
        with ProcessPoolExecutor(workers, mp_context=ctx) as pool:
            yield pool
    else:
        yield None


def run_chunks(pts: Points, pool, tuned: TunedTiles | None = None, done: set | None = None,
               window: int = 8, submitted=None):
    """(chunk's rows per todo entry, skipped) for every chunk of problems, in grid order, with
    at most `window` chunks in flight: memory stays bounded whatever the grid. Problems whose
    key is in `done` (a resumed sweep's) are not computed again. `submitted`: called once the
    first chunks are in flight (what the collecting process can do meanwhile)."""
    problems = pts.problems()
    if done:
        problems = (p for p in problems if problem_key(p) not in done)
    pending: deque = deque()
    for chunk in _chunks(problems, CHUNK_PROBLEMS):
        job = (pts.todo, chunk, tuned)
        if pool is None:
            yield len(chunk), _rows(job)
            continue
        pending.append((len(chunk), pool.submit(_rows, job)))
        if len(pending) >= window:
            if submitted:
                submitted()
                submitted = None
            n, fut = pending.popleft()
            yield n, fut.result()
    if submitted:
        submitted()
    while pending:
        n, fut = pending.popleft()
        yield n, fut.result()


def _chunks(problems, size: int):
    """Lists of at least `size` problems (the last may hold fewer) that end where the grid's
    other fields change: a shape's problems (iosim.schedules.shape) are never split between
    chunks, so each shape is planned once."""
    chunk: list[Problem] = []
    for p in problems:
        if len(chunk) >= size and p.shape_key() != chunk[-1].shape_key():
            yield chunk
            chunk = []
        chunk.append(p)
    if chunk:
        yield chunk


def problem_key(p: Problem) -> tuple:
    return tuple(problem_fields(p).values())


def usable_cpus() -> int:
    """The cores this process may run on (taskset, cgroup cpusets), not the machine's count."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _workers(workers: int | None, expected: int) -> int:
    if workers is None:
        return usable_cpus() if expected >= PARALLEL_POINTS else 1
    return max(1, workers)


def _bar(progress: bool | None, total: int, initial: int = 0):
    if progress is False:
        return None
    from tqdm import tqdm

    return tqdm(total=total, initial=initial, unit="pt", leave=False,
                disable=None if progress is None else not progress)


def sweep_result(grid: Mapping, progress: bool | None = False, workers: int | None = None,
                 tuned: TunedTiles | None = None, engine: str = "local",
                 scheduler: str | None = None) -> SweepResult:
    """Rows for every point of the grid in one DataFrame, with what was skipped and why.
    `workers`: processes (default: the CPUs when the sweep is large enough to gain from them);
    `tuned`: a tiles file's entries; `engine`/`scheduler`: see `executor`. For grids too large
    to hold, `stream` writes a file a chunk at a time."""
    pts = points(grid)
    expected = pts.expected()
    per_todo: list[list[dict]] = [[] for _ in pts.todo]  # column tables, chunk by chunk
    planned: Counter = Counter()
    bar = _bar(progress, expected)
    with executor(engine, _workers(workers, expected), scheduler) as pool:
        # pandas (for the frame) while the workers, started without it, compute
        for n, (res, sk) in run_chunks(pts, pool, tuned, submitted=_import_pandas):
            planned.update(sk)
            for acc, part in zip(per_todo, res):
                if part is not None:
                    acc.append(part)
            if bar:
                bar.update(n * len(pts.todo))
    if bar:
        bar.close()
    total, skipped = pts.totals(planned)
    # schedule, profile, then problems in grid order
    return SweepResult(_frame([part for acc in per_todo for part in acc]), total, skipped, pts.whatif)


def _import_pandas(parquet: bool = False) -> None:
    """What the collecting process needs for the frames (and Parquet files) it writes."""
    import pandas  # noqa: F401

    if parquet:
        import pyarrow.parquet  # noqa: F401


def _frame(parts: list[dict]) -> pd.DataFrame:
    """Column tables end to end, one DataFrame."""
    import pandas as pd

    return table.as_frame(table.concat(parts)) if parts else pd.DataFrame()


def sweep(grid: Mapping, progress: bool | None = False) -> pd.DataFrame:
    """One row per plannable point of `grid` (see the module docstring), shared columns."""
    return sweep_result(grid, progress).rows


TABLE_SUFFIXES = (".csv", ".parquet", ".pq")


def write(df: pd.DataFrame, path: str | Path, force: bool = False) -> Path:
    """CSV, or Parquet for .parquet/.pq, written atomically; never over measurements, and over
    another existing file only with `force` (iosim.core.output)."""
    return write_table(df, check_writable(path, TABLE_SUFFIXES, force))


# A streamed sweep writes each chunk as a part file (atomically) in a folder beside the output,
# `.NAME.parts/`, then joins the parts into NAME and removes the folder: an interrupted sweep
# leaves readable parts, which `resume` reads (their problems' keys) and continues.
PARTS_GRID = "grid.json"
PART_ROWS = 5_000  # rows of one part: the memory a streamed sweep holds (a few MB), and
# what an interruption can lose


def parts_dir(path: Path) -> Path:
    return path.parent / f".{path.name}.parts"


@dataclass
class StreamResult:
    path: Path
    points: int
    rows: int
    skipped: Counter
    summary: str
    seconds: float
    computed: int  # points computed by this run (a resumed sweep's earlier ones not counted)

    @property
    def points_per_second(self) -> float:
        return self.computed / max(self.seconds, 1e-9)


def _grid_text(pts: Points, tuned) -> str:
    """The grid as text, so a resumed sweep can tell that it continues the same grid."""
    import json

    return json.dumps({"grid": {k: [str(v) for v in vs] for k, vs in pts.g.items()},
                       "set": {k: [str(v) for v in vs] for k, vs in pts.sets.items()},
                       "tiles": str(tuned)}, sort_keys=True)


def _read_part(path: Path, columns: list[str] | None = None) -> pd.DataFrame:
    import pandas as pd

    if path.suffix == ".csv":
        return pd.read_csv(path, usecols=columns)
    return pd.read_parquet(path, columns=columns)


def _start_parts(path: Path, pts: Points, tuned, resume: bool, force: bool) -> tuple[Path, set, int]:
    """The parts folder, the problem keys its parts hold, and the next part's number."""
    parts, grid = parts_dir(path), _grid_text(pts, tuned)
    if parts.exists() and not resume:
        if not force:
            raise InputError(f"-o {path}: an interrupted sweep of this file is in {parts} "
                             "(allowed: --resume to continue it, --force to start over)")
        shutil.rmtree(parts)
    if not parts.exists():
        try:
            parts.mkdir()
            (parts / PARTS_GRID).write_text(grid)
        except OSError as e:
            raise InputError(f"cannot write {path}: {e.strerror or e}") from None
        return parts, set(), 0
    if (parts / PARTS_GRID).read_text() != grid:
        raise InputError(f"--resume: {parts} holds a sweep of another grid "
                         "(allowed: the same options as the interrupted sweep, or --force to start over)")
    done: set = set()
    files = sorted(parts.glob("part-*"))
    key_cols = ["direction", "batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim",
                "dtype", "causal", "causal_align"]
    for f in files:
        done.update(map(tuple, _read_part(f, key_cols)[key_cols].itertuples(index=False)))
    return parts, done, len(files)


def _join_parts(parts: Path, path: Path, summary: Summary, written: dict[Path, int]) -> int:
    """Join the parts into `path` (atomically), one part in memory at a time; their rows. The
    parts this run wrote (`written`: their rows) are in the summary already; an earlier run's
    (a resumed sweep's) are read for it."""
    files = sorted(parts.glob("part-*"))
    rows = 0

    def write(tmp: str) -> None:
        nonlocal rows
        if path.suffix.lower() == ".csv":
            with open(tmp, "wb") as out:
                for i, f in enumerate(files):
                    with open(f, "rb") as src:
                        if i:
                            src.readline()  # the header, written once
                        shutil.copyfileobj(src, out)
                    if f in written:
                        rows += written[f]
                        continue
                    df = _read_part(f)
                    summary.add(df)
                    rows += len(df)
            return
        import pyarrow.parquet as pq

        writer = None
        try:
            for f in files:
                table = pq.read_table(f)
                writer = writer or pq.ParquetWriter(tmp, table.schema)
                writer.write_table(table.cast(writer.schema))
                if f not in written:
                    summary.add(table.to_pandas())
                rows += table.num_rows
        finally:
            if writer:
                writer.close()

    write_atomic(path, write)
    return rows


def stream(grid: Mapping, path: str | Path, force: bool = False, resume: bool = False,
           progress: bool | None = None, workers: int | None = None,
           tuned: TunedTiles | None = None, engine: str = "local",
           scheduler: str | None = None) -> StreamResult:
    """Sweep `grid` into `path` (CSV, or Parquet for .parquet/.pq) a chunk at a time: memory
    bounded whatever the grid size. `resume`: continue the parts an interrupted sweep of the
    same grid left (see `parts_dir`); `engine`/`scheduler`: where the chunks run (`executor`)."""
    import time

    path = check_writable(path, TABLE_SUFFIXES, force)
    check_engine(engine, scheduler)
    parquet = path.suffix.lower() != ".csv"
    if parquet and importlib.util.find_spec("pyarrow") is None:  # imported while chunks compute
        raise InputError("writing Parquet needs pyarrow (pip install pyarrow), or use .csv")
    t0 = time.perf_counter()
    pts = points(grid)
    expected = pts.expected()
    parts, done, n_part = _start_parts(path, pts, tuned, resume, force)
    already = len(done) * len(pts.todo)
    suffix = ".csv" if path.suffix.lower() == ".csv" else ".parquet"
    bar = _bar(progress, expected, min(already, expected))
    computed, planned, buf, held = 0, Counter(), [], 0
    summary, written = Summary(pts.whatif), {}

    def flush() -> None:  # whole chunks to one part: a part holds all rows of its problems
        nonlocal n_part, held
        if buf:
            frame, f = _frame(buf), parts / f"part-{n_part:06d}{suffix}"
            write_table(frame, f)
            summary.add(frame)
            written[f] = len(frame)
            n_part += 1
            buf.clear()
            held = 0

    with executor(engine, _workers(workers, expected - already), scheduler) as pool:
        for n, (res, sk) in run_chunks(pts, pool, tuned, done,
                                       submitted=lambda: _import_pandas(parquet)):
            planned.update(sk)
            for part in res:
                if part is not None:
                    buf.append(part)
                    held += len(part["hw"])
            if held >= PART_ROWS:
                flush()
            computed += n * len(pts.todo)
            if bar:
                bar.update(n * len(pts.todo))
        flush()
    if bar:
        bar.close()
    total, skipped = pts.totals(planned)
    rows = _join_parts(parts, path, summary, written) if n_part else 0
    shutil.rmtree(parts, ignore_errors=True)  # joined, or nothing to join
    return StreamResult(path, total, rows, skipped, summary.text(total, skipped),
                        time.perf_counter() - t0, computed)
