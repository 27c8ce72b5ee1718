"""The `iosim` command line."""

from __future__ import annotations

import itertools
import math
import os
import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

# the model (numpy, the schedules, iosim.analysis) is imported by the commands that run it, so
# that `iosim --help`, `--version`, `hw list` and a usage error start without it
from iosim.core import hardware
from iosim.core.hardware import InputError
from iosim.core.problem import CausalAlign, Direction, Dtype, Fp8Scaling, Problem

HELP = {"help_option_names": ["-h", "--help"]}
app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  context_settings=HELP,
                  help="IO-complexity simulator and roofline tool for attention schedules.")
hw_app = typer.Typer(no_args_is_help=True, context_settings=HELP, help="Hardware profiles.")
app.add_typer(hw_app, name="hw")


def _version(value: bool) -> None:
    if value:
        from iosim import __version__

        typer.echo(f"iosim {__version__}")
        raise typer.Exit()


@app.callback()
def _options(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="print the version and exit")] = False) -> None:
    """IO-complexity simulator and roofline tool for attention schedules."""


class Fmt(str, Enum):
    table = "table"
    json = "json"
    csv = "csv"


# -o's extension says the format; --format, when given too, must agree (one line if not)
FORMAT_OF_SUFFIX = {".txt": Fmt.table, ".csv": Fmt.csv, ".json": Fmt.json}
FmtOpt = Annotated[Fmt | None, typer.Option(
    "--format", case_sensitive=False,
    help="table (for people), json or csv (the rows); default: -o's extension, else table")]
OutOpt = Annotated[Path | None, typer.Option(
    "-o", "--output", help="write to this file instead: .txt (table), .json or .csv")]


def out_format(fmt: Fmt | None, output: Path | None, force: bool) -> Fmt:
    """The output format, from --format and -o's extension; -o is checked before any work."""
    if output is None:
        return fmt or Fmt.table
    from iosim.core.output import check_writable

    check_writable(output, tuple(FORMAT_OF_SUFFIX), force)
    implied = FORMAT_OF_SUFFIX[output.suffix.lower()]
    if fmt is not None and fmt is not implied:
        raise InputError(f"--format {fmt.value} disagrees with -o {output} (a {implied.value} file; "
                         f"allowed: a {fmt.value} file's extension, or no --format)")
    return implied


def emit(text: str, output: Path | None, what: str) -> None:
    """Print `text`, or write it (atomically) to `output` and say so."""
    if output is None:
        typer.echo(text, nl=not text.endswith("\n"))
        return
    from iosim.core.output import write_text

    write_text(output, text if text.endswith("\n") else text + "\n")
    typer.echo(f"wrote {what} to {output}")


def rows_text(df, fmt: Fmt) -> str:
    return df.to_json(orient="records", indent=1) if fmt is Fmt.json else df.to_csv(index=False)


class Dir(str, Enum):
    fwd = "fwd"
    bwd = "bwd"
    both = "both"


def fail(msg: str) -> None:
    typer.echo(f"error: {msg}", err=True)
    raise typer.Exit(2)


def parse_schedules(text: str) -> list[str] | None:
    """None for all schedules, else the named ones (any case, no repeats)."""
    from iosim.analysis.sweep import parse_choice
    from iosim.schedules import SCHEDULES

    return None if text.strip().lower() == "all" else parse_choice(text, SCHEDULES, "schedule")


# the tile knobs (iosim.schedules.knobs): unset, the schedule's own tiles (or the tiles file's)
BlockM = Annotated[int | None, typer.Option("--block-m", help="query rows per tile (knob)")]
BlockN = Annotated[int | None, typer.Option("--block-n", help="key columns per tile (knob)")]
Warps = Annotated[int | None, typer.Option("--warps", help="warps per CTA (knob)")]
Stages = Annotated[int | None, typer.Option("--stages", help="K/V pipeline stages (knob)")]
# one convention for every file a command writes (iosim.core.output): an existing file is
# replaced only with --force, and a file holding measurements never
Force = Annotated[bool, typer.Option(
    "--force", help="replace an existing output file (never one that holds measurements)")]


TilesFile = Annotated[Path | None, typer.Option(
    "--tiles", metavar="FILE",
    help="tuned tiles (`iosim tune --write`) for the schedules' defaults; default: $IOSIM_TILES")]
TILES_ENV = "IOSIM_TILES"  # the tiles file when --tiles is not given


def knob_tiles(block_m, block_n, warps, stages):
    from iosim.schedules import Tiles

    return Tiles(block_m=block_m, block_n=block_n, warps=warps, stages=stages)


def tuned_tiles(path: Path | None):
    """The tiles file a command was given (--tiles, else $IOSIM_TILES), read once; None: none."""
    from iosim.schedules.knobs import read_tiles

    if path is not None:
        return read_tiles(path, "--tiles ")
    env = os.environ.get(TILES_ENV)
    return read_tiles(Path(env), f"{TILES_ENV}=") if env else None


TABLE = [("schedule", "schedule", "{}"), ("block_m", "Br", "{}"), ("block_n", "Bc", "{}"),
         ("hbm_read_bytes_2level", "HBM rd GB", "{:.3f}"),
         ("hbm_write_bytes_2level", "HBM wr GB", "{:.3f}"), ("dram_read_bytes", "DRAM rd GB", "{:.3f}"),
         ("dram_write_bytes", "DRAM wr GB", "{:.3f}"), ("sram_bytes", "SRAM GB", "{:.2f}"),
         ("tensor_flops", "TC TFLOP", "{:.3f}"), ("exp_ops", "exp G", "{:.2f}"),
         ("alu_flops", "ALU GFLOP", "{:.1f}"), ("intensity_flop_per_byte", "FLOP/B", "{:.0f}"),
         ("time_roofline_ms", "roof ms", "{:.3f}"), ("bound_roofline", "roof bound", "{}"),
         ("time_pred_ms", "pred ms", "{:.3f}"), ("tflops_pred", "TFLOP/s", "{:.0f}"),
         ("bound", "bound", "{}"), ("hbm_vs_naive", "HBM/lean-naive", "{:.4f}"),
         ("time_vs_naive", "time/lean-naive", "{:.3f}")]
TABLE += [("fits", "fits", "{}"), ("backing", "backing", "{}")]
BASELINE_NOTE = ("  lean-naive: ratios to `naive`, our lean unfused baseline; `standard` is the "
                 "FA papers' PyTorch baseline")
# the default table fits 120 columns; --wide shows all of TABLE
NARROW = ["schedule", "block_m", "block_n", "hbm_2level", "dram", "tensor_flops", "time_pred_ms",
          "tflops_pred", "bound", "time_vs_naive", "fits", "backing"]
SUMS = {"hbm_2level": ("HBM GB", "{:.3f}", ("hbm_read_bytes_2level", "hbm_write_bytes_2level")),
        "dram": ("DRAM GB", "{:.3f}", ("dram_read_bytes", "dram_write_bytes"))}
GIGA = {"hbm_read_bytes_2level", "hbm_write_bytes_2level", "dram_read_bytes", "dram_write_bytes",
        "sram_bytes", "exp_ops", "alu_flops", "hbm_2level", "dram"}


def format_table(rows: list[dict], wide: bool = False) -> str:
    """The predict table of `rows` (predict_rows): the columns of NARROW (read + write summed),
    or with `wide` all."""
    if not wide:
        rows = [r | {k: r[a] + r[b] for k, (_, _, (a, b)) in SUMS.items()} for r in rows]
        table = {c[0]: c for c in TABLE} | {k: (k, h, f) for k, (h, f, _) in SUMS.items()}
        cols = [table[k] for k in NARROW if k in rows[0]]
    else:
        cols = [c for c in TABLE if c[0] in rows[0]]
    cells = [[h for _, h, _ in cols]]
    for r in rows:
        vals = []
        for key, _, f in cols:
            v = r[key]
            v = v / 1e9 if key in GIGA else v / 1e12 if key == "tensor_flops" else v
            vals.append("yes" if v is True else "NO" if v is False else
                        "-" if isinstance(v, float) and v != v else f.format(v))
        cells.append(vals)
    widths = [max(len(row[i]) for row in cells) for i in range(len(cols))]
    lines = ["  ".join(c.rjust(w) for c, w in zip(row, widths)) for row in cells]
    if any(k in ("time_vs_naive", "hbm_vs_naive") for k, _, _ in cols):
        lines.append(BASELINE_NOTE)
    return "\n".join(lines)


@app.command("predict")
def predict_cmd(
    batch: Annotated[int, typer.Option(help="batch size")] = 4,
    heads: Annotated[int, typer.Option(help="query heads")] = 32,
    kv_heads: Annotated[int | None, typer.Option(help="K/V heads (GQA/MQA); default: heads")] = None,
    seqlen: Annotated[int, typer.Option(help="query sequence length N")] = 4096,
    seqlen_k: Annotated[int | None, typer.Option(help="key sequence length; default: seqlen")] = None,
    head_dim: Annotated[int, typer.Option(help="head dimension d")] = 128,
    dtype: Annotated[Dtype, typer.Option(case_sensitive=False, help="input dtype")] = Dtype.bf16,
    causal: Annotated[str, typer.Option(
        metavar="BOOL", help="causal mask: true|false|yes|no|1|0|both (alone: true)")] = "false",
    causal_align: Annotated[CausalAlign, typer.Option(case_sensitive=False,
        help="causal diagonal when Nq != Nk: top-left (torch is_causal) or bottom-right "
        "(FlashAttention 2.1+)")] = CausalAlign.top_left,
    direction: Annotated[Dir, typer.Option(case_sensitive=False, help="forward, backward or both")] = Dir.fwd,
    fp8_scaling: Annotated[Fp8Scaling, typer.Option(case_sensitive=False,
        help="fp8_e4m3: one scale per tile of rows per head (block) or per tensor")] = Fp8Scaling.block,
    hadamard: Annotated[bool, typer.Option("--hadamard", help="fp8_e4m3: rotate Q and K by a random-sign Hadamard transform before quantising")] = False,
    deterministic: Annotated[bool, typer.Option("--deterministic", help="backward: dQ's partial sums added in a fixed order, the same bits every run (fa3's deterministic mode; fa2 has none)")] = False,
    window: Annotated[int | None, typer.Option(
        help="sliding window W (causal, forward): row i sees the W keys back from its diagonal")] = None,
    page_size: Annotated[int | None, typer.Option(
        help="paged K/V cache: tokens a page, through a block table (decode)")] = None,
    seqlens_k: Annotated[str | None, typer.Option(
        help="ragged batch: each sequence's cached length, comma-separated, --batch of them (decode)")] = None,
    hw: Annotated[str, typer.Option(help="profile name or path to a TOML (a short name picks the calibrated profile)")] = "h100",
    schedule: Annotated[str, typer.Option(help="comma list of naive,standard,fa1,fa1_paper,fa2,fa3,decode or 'all' (decode: Nq <= 16)")] = "all",
    fmt: FmtOpt = None,
    output: OutOpt = None,
    wide: Annotated[bool, typer.Option("--wide", help="every column (wider than 120)")] = False,
    block_m: BlockM = None, block_n: BlockN = None, warps: Warps = None, stages: Stages = None,
    tiles_file: TilesFile = None,
    compare: Annotated[bool, typer.Option(
        "--compare", help="with two --hw profiles: what changed from the first to the second")] = False,
    force: Force = False,
) -> None:
    """Predict IO, work and time of every schedule for one attention problem (several --hw:
    side by side)."""
    from iosim.analysis.predict import directions, predict_rows
    from iosim.analysis.sweep import parse_bool

    fmt = out_format(fmt, output, force)
    names = [h.strip() for h in hw.split(",") if h.strip()]
    if not names:
        raise InputError("--hw: empty value (allowed: profile names or paths, comma-separated)")
    profiles = [hardware.load(name) for name in names]
    seen: dict[str, str] = {}
    for name, prof in zip(names, profiles):
        if prof.name in seen:
            raise InputError(f"--hw: {seen[prof.name]} and {name} are the same profile ({prof.name}) "
                             "(allowed: distinct profiles)")
        seen[prof.name] = name
    if compare and len(names) != 2:
        raise InputError(f"--compare needs two --hw profiles (got {len(names)}: {hw})")
    tiles, tuned = knob_tiles(block_m, block_n, warps, stages), tuned_tiles(tiles_file)
    parts = []  # (rows, skipped) per problem: plain dicts, so the default table needs no pandas
    for profile in profiles:
        for d in directions(direction.value):
            for c in parse_bool(causal):
                p = Problem(batch=batch, heads=heads, kv_heads=kv_heads, seqlen_q=seqlen,
                            seqlen_k=seqlen_k, head_dim=head_dim, dtype=dtype, causal=c,
                            causal_align=causal_align, direction=d, fp8_scaling=fp8_scaling,
                            hadamard=hadamard, deterministic=deterministic,
                            window=window,
                            page_size=page_size, seqlens_k=lengths(seqlens_k))
                parts.append(predict_rows(p, profile, parse_schedules(schedule), tiles, tuned))
    n = sum(len(rows) for rows, _ in parts)
    if fmt is Fmt.table and len(profiles) == 1:
        emit(predict_text(parts, profiles[0], wide), output, f"{n} rows")
        return
    import pandas as pd

    df = pd.DataFrame([r for rows, _ in parts for r in rows])
    if fmt is not Fmt.table:
        for _, skipped in parts:
            for s, why in skipped.items():
                typer.echo(f"note: {s} not predicted: {why}", err=True)
        emit(rows_text(df, fmt), output, f"{n} rows")
    else:
        from iosim.analysis.compare import compare_profiles, side_by_side

        emit(compare_profiles(df) if compare else side_by_side(df), output, "the comparison")


def optional_values(text: str | None, name: str) -> list[int | None]:
    """Values of an option that may be unset: whole numbers in the range grammar, `none` for
    unset (e.g. --page-size none,64); not given: [None]."""
    from iosim.analysis.sweep import parse_values

    if text is None:
        return [None]
    items = [x.strip() for x in text.split(",")]
    out = [None if x.lower() == "none" else x for x in items]
    nums = [x for x in out if x is not None]
    return [None] * (len(out) - len(nums)) + (parse_values(",".join(nums), int, name) if nums else [])


def lengths(text: str | None) -> tuple[int, ...] | None:
    """--seqlens-k: comma-separated whole numbers, or one line saying what is allowed."""
    if text is None:
        return None
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise InputError(f"--seqlens-k {text}: not a list of lengths "
                         "(allowed: whole numbers, comma-separated, one per sequence)") from None


def predict_text(parts, profile, wide: bool) -> str:
    """predict's table: the profile, then per problem its rows and what cannot run."""
    lines = [f"profile {profile.name}: {profile.describe()}"]
    for rows, skipped in parts:
        p0 = rows[0]
        align = f" ({p0['causal_align']})" if p0["causal"] and p0["seqlen_q"] != p0["seqlen_k"] else ""
        lines.append(f"{profile.name}  {p0['direction']}  B={p0['batch']} H={p0['heads']} "
                     f"KVH={p0['kv_heads']} Nq={p0['seqlen_q']} Nk={p0['seqlen_k']} d={p0['head_dim']} "
                     f"{p0['dtype']} causal={p0['causal']}{align}"
                     + (f" window={p0['window']}" if p0.get("window") is not None else "")
                     + (f" page={p0['page_size']}" if p0.get("page_size") is not None else "")
                     + (f" seqlens_k={p0['seqlens_k']}" if p0.get("seqlens_k") is not None else "")
                     + (" deterministic" if p0.get("deterministic") else ""))
        lines.append(format_table(rows, wide))
        lines += [f"  {s}: not predicted: {why}" for s, why in skipped.items()]
        lines += [f"  {r['schedule']}: cannot run: its tensors need {r['hbm_footprint_bytes'] / 1e9:,.1f} GB "
                  f"of HBM, over {profile.name}'s {profile.hbm_capacity_bytes / 1e9:,.1f} GB"
                  for r in rows if not r["fits"]]
        hypothetical = [r["schedule"] for r in rows if r["backing"] == "hypothetical"]
        if hypothetical:
            lines.append(f"  {', '.join(hypothetical)}: hypothetical: no kernel, here or published, "
                         "runs it here;")
            lines.append("    the model's numbers only (dtype, head_dim, direction, GPU or tiles)")
    return "\n".join(lines)


@app.command("sweep")
def sweep_cmd(
    seqlen: Annotated[str, typer.Option(help="N: a,b,c | a..b (doubling) | a..b:step")] = "4096",
    seqlen_k: Annotated[str | None, typer.Option(help="key length(s); default: seqlen")] = None,
    head_dim: Annotated[str, typer.Option(help="d values")] = "128",
    batch: Annotated[str, typer.Option(help="batch sizes")] = "4",
    heads: Annotated[str, typer.Option(help="query heads")] = "32",
    kv_heads: Annotated[str | None, typer.Option(help="K/V heads; default: heads")] = None,
    dtype: Annotated[str, typer.Option(help="comma list of fp16,bf16,fp8_e4m3,fp32")] = "bf16",
    causal: Annotated[str, typer.Option(
        metavar="BOOL", help="true|false|yes|no|1|0 or both (alone: true)")] = "false",
    causal_align: Annotated[str, typer.Option(
        help="causal diagonal when Nq != Nk: top-left, bottom-right or both")] = "top-left",
    direction: Annotated[str, typer.Option(help="fwd, bwd or both")] = "fwd",
    window: Annotated[str | None, typer.Option(
        help="sliding window(s) W (causal, forward: fa2, fa3, decode)")] = None,
    page_size: Annotated[str | None, typer.Option(help="paged K/V: tokens a page (decode)")] = None,
    schedule: Annotated[str, typer.Option(help="comma list of naive,standard,fa1,fa1_paper,fa2,fa3,decode or 'all' (decode: Nq <= 16)")] = "all",
    hw: Annotated[str, typer.Option(
        help="comma list of profile names or TOML paths (a short name picks the calibrated profile)")] = "h100",
    set_: Annotated[list[str] | None, typer.Option(
        "--set", help="what-if hardware FIELD=VALUES, e.g. smem_per_sm_bytes=262144,458752 "
        "or efficiency.hbm=0.8,0.9 (repeatable)")] = None,
    block_m: Annotated[str | None, typer.Option(help="tile knob values: query rows per tile")] = None,
    block_n: Annotated[str | None, typer.Option(help="tile knob values: key columns per tile")] = None,
    warps: Annotated[str | None, typer.Option(help="tile knob values: warps per CTA")] = None,
    stages: Annotated[str | None, typer.Option(help="tile knob values: K/V pipeline stages")] = None,
    tiles_file: TilesFile = None,
    output: Annotated[str, typer.Option("--output", "-o", help=".csv, or .parquet/.pq")] = "sweep.csv",
    progress: Annotated[bool | None, typer.Option(
        "--progress/--no-progress",
        help="progress bar on stderr, also when piped (default: only on a terminal)")] = None,
    force: Force = False,
    resume: Annotated[bool, typer.Option(
        "--resume", help="continue the sweep of the same grid that an interruption left unfinished "
        "for -o (its points are not computed again)")] = False,
    engine: Annotated[str, typer.Option(
        help="where the chunks run: local (processes on this machine) or dask (dask.distributed: "
        "a local cluster, or --scheduler's)")] = "local",
    scheduler: Annotated[str | None, typer.Option(
        help="with --engine dask: a running cluster's scheduler address, e.g. tcp://host:8786")] = None,
    workers: Annotated[int | None, typer.Option(
        min=1, help="processes (local, or the local Dask cluster's); default: the CPUs for large sweeps")] = None,
) -> None:
    """Sweep a grid of problems, schedules and (what-if) hardware; write one row per point, a
    chunk at a time (memory bounded whatever the grid)."""
    import contextlib
    import io

    from iosim.analysis.sweep import stream

    grid = {"seqlen_q": seqlen, "seqlen_k": seqlen_k, "head_dim": head_dim, "batch": batch,
            "heads": heads, "kv_heads": kv_heads, "dtype": dtype, "causal": causal,
            "causal_align": causal_align, "direction": direction, "window": window,
            "page_size": page_size, "schedule": schedule, "hw": hw, "set": list(set_ or []),
            "block_m": block_m, "block_n": block_n, "warps": warps, "stages": stages}
    res = stream(grid, output, force=force, resume=resume, progress=progress, workers=workers,
                 tuned=tuned_tiles(tiles_file), engine=engine, scheduler=scheduler)
    if not res.rows:
        fail("no point of the grid can be planned ("
             + "; ".join(f"{n} skipped: {why}" for why, n in res.skipped.most_common()) + ")")
    for name in dict.fromkeys(s.strip() for s in hw.split(",")):  # the profiles used, as predict says
        with contextlib.redirect_stderr(io.StringIO()):  # the sweep has warned about them once
            profile = hardware.load(name)
        typer.echo(f"profile {profile.name}: {profile.describe()}")
    typer.echo(f"{res.summary}\nwrote {res.path} in {res.seconds:.2f} s "
               f"({res.computed} points computed, {res.points_per_second:,.0f} points/s)")


@hw_app.command("list")
def hw_list(fmt: FmtOpt = None, output: OutOpt = None, force: Force = False) -> None:
    """List the embedded hardware profiles."""
    fmt = out_format(fmt, output, force)
    rows = []
    for name in hardware.available():
        p = hardware.load(name)
        rows.append({"name": name, "gpu_name": p.gpu_name, "sm_count": p.sm_count,
                     "hbm_tb_per_s": round(p.hbm_bandwidth_bytes_per_s / 1e12, 2),
                     "bf16_tflop_per_s": round(p.tensor_flops_per_s["bf16"] / 1e12)})
    if fmt is not Fmt.table:  # the rows as a frame: pandas only here
        import pandas as pd

        emit(rows_text(pd.DataFrame(rows), fmt), output, f"{len(rows)} profiles")
        return
    cells = [["profile", "GPU", "SMs", "HBM TB/s", "bf16 TFLOP/s"]]
    cells += [[r["name"], r["gpu_name"], str(r["sm_count"]), f"{r['hbm_tb_per_s']:.2f}",
               str(r["bf16_tflop_per_s"])] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(cells[0]))]
    text = "\n".join("  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                               for i, (c, w) in enumerate(zip(row, widths))).rstrip()
                     for row in cells)
    emit(text, output, f"{len(rows)} profiles")


@hw_app.command("show")
def hw_show(name: Annotated[str, typer.Argument(help="profile name or path")]) -> None:
    """Show one profile with the source of every number."""
    p = hardware.load(name)
    for k, v in p.model_dump(exclude={"sources", "provenance"}).items():
        src = p.sources.get(k, "")
        typer.echo(f"{k:38s} {v!s:40s} {src}")
    for k, v in p.provenance.items():
        typer.echo(f"provenance.{k:27s} {v}")


@app.command("bench")
def bench_cmd(
    out: Annotated[Path, typer.Option("-o", "--output", "--out", help="CSV to append rows to")],
    schedule: Annotated[str, typer.Option(help="comma list of naive,fa1,fa2,fa3,decode (fa3: Hopper; decode: Nq <= 16)")] = "naive,fa1,fa2",
    seqlen: Annotated[str, typer.Option(help="N values: a,b | a..b (powers of 2) | a..b:step")] = "512..16384",
    seqlen_k: Annotated[str | None, typer.Option(help="key lengths (decode: the K/V cache); default: seqlen")] = None,
    page_size: Annotated[str | None, typer.Option(
        help="decode: paged K/V, tokens a page: values, 'none' a contiguous cache (e.g. none,64)")] = None,
    window: Annotated[str | None, typer.Option(
        help="sliding window(s) W (causal, forward: fa2, fa3, decode); 'none' no window")] = None,
    kv_splits: Annotated[str | None, typer.Option(
        help="decode: K/V split counts forced, each a point (default: the Plan's choice)")] = None,
    head_dim: Annotated[str, typer.Option(help="d values")] = "64,128,256",
    causal: Annotated[str, typer.Option(
        metavar="BOOL", help="true|false|yes|no|1|0 or both (alone: true)")] = "both",
    causal_align: Annotated[CausalAlign, typer.Option(case_sensitive=False,
        help="causal diagonal when Nq != Nk: top-left or bottom-right")] = CausalAlign.top_left,
    dtype: Annotated[str, typer.Option(help="comma list of bf16,fp16,fp8_e4m3 (fp8: fa3 forward)")] = "bf16",
    fp8_scaling: Annotated[str, typer.Option(
        help="fp8_e4m3: comma list of block (a scale per tile of rows per head), tensor")] = "block",
    hadamard: Annotated[str, typer.Option(metavar="BOOL",
        help="fp8_e4m3: random-sign Hadamard on Q and K: true|false|both")] = "false",
    deterministic: Annotated[str, typer.Option(metavar="BOOL",
        help="backward: dQ added in a fixed order (fa3's deterministic mode; fa2 has none): "
        "true|false|both (peers: the default problems only)")] = "false",
    batch: Annotated[str | None, typer.Option(help="batch values; default 16384/max(N, key length)")] = None,
    heads: Annotated[str | None, typer.Option(help="head values; default 2048/d")] = None,
    kv_heads: Annotated[int | None, typer.Option(help="K/V heads (GQA); default: heads")] = None,
    peers: Annotated[str, typer.Option(
        help="comma list of torch (its SDPA backends), flex (compiled FlexAttention), or none")] = "none",
    ncu: Annotated[bool, typer.Option("--ncu", help="profile DRAM bytes with Nsight Compute")] = False,
    resume: Annotated[bool, typer.Option("--resume", help="skip points already in the file")] = False,
    hw: Annotated[str | None, typer.Option(help="profile for predictions; default: detected")] = None,
    progress: Annotated[bool | None, typer.Option(
        "--progress/--no-progress",
        help="progress bar on stderr, also when piped (default: only on a terminal)")] = None,
    direction: Annotated[Dir, typer.Option(case_sensitive=False, help="forward, backward (dQ, dK, dV) or both")] = Dir.fwd,
    block_m: BlockM = None, block_n: BlockN = None, warps: Warps = None, stages: Stages = None,
    tiles_file: TilesFile = None,
    flush: Annotated[str, typer.Option(
        help="how the L2 is flushed before each timed repetition: write (zero-fill a buffer of "
        "twice the L2: leaves its lines dirty) or read (read it: leaves them clean)")] = "write",
    queued: Annotated[bool, typer.Option(
        "--queued", help="also time every row with its launches queued ahead of the start "
        "event (time_queued_ms: the host's launch cost left out, as a CUDA graph would; "
        "decode rows always are)")] = False,
    settle: Annotated[float, typer.Option(
        metavar="SECONDS", help="idle the GPU this long before each problem's rows "
        "(recorded as settle_s): right after a heavy point (a batch-32 paged decode step) the next kernels "
        "have run up to 1.17x slower for over a second (experiments/decode/h100/after32ab12)")] = 0.0,
) -> None:
    """Check, time (and profile) the real kernels on this GPU; rows appended as they finish."""
    from iosim.analysis import bench
    from iosim.analysis.predict import directions
    from iosim.analysis.sweep import parse_bool, parse_choice, parse_values

    real = ["naive", "fa1", "fa2", "fa3", "decode"]
    scheds = parse_choice(schedule, real, "schedule", both=real[:4])
    if flush not in ("write", "read"):
        raise InputError(f"--flush {flush}: not a flush (allowed: write, read)")
    if not 0 <= settle <= 600:
        raise InputError(f"--settle {settle:g}: not a pause (allowed: 0 to 600 seconds)")
    peer_groups = bench.parse_peers(peers)
    if "flex" in peer_groups and direction is not Dir.fwd:
        raise InputError("--peers flex: FlexAttention is timed forward only (allowed with it: --direction fwd)")
    splits = [None] if kv_splits is None else parse_values(kv_splits, int, "kv-splits")
    if kv_splits is not None and scheds != ["decode"]:
        raise InputError("--kv-splits forces decode's split count (allowed with it: --schedule decode)")
    pages, windows = optional_values(page_size, "page-size"), optional_values(window, "window")
    if pages != [None] and "decode" not in scheds:
        raise InputError("--page-size: a paged K/V cache is decode's (allowed with it: --schedule decode)")
    nks = [None] if seqlen_k is None else parse_values(seqlen_k, int, "seqlen-k")
    problems = []
    dtypes = parse_choice(dtype, ["bf16", "fp16", "fp8_e4m3"], "dtype")
    scalings = parse_choice(fp8_scaling, [x.value for x in Fp8Scaling], "fp8-scaling")
    hads = parse_bool(hadamard, "hadamard")
    dets = parse_bool(deterministic, "deterministic")
    if "fp8_e4m3" not in dtypes and (scalings != ["block"] or hads != [False]):
        raise InputError("--fp8-scaling and --hadamard apply to --dtype fp8_e4m3 only "
                         "(allowed without it: the defaults, block and false)")
    for n in parse_values(seqlen, int, "seqlen"):
        for d in parse_values(head_dim, int, "head-dim"):
            for c in parse_bool(causal):
                for dt in dtypes:
                    quant = [dict(fp8_scaling=fs, hadamard=hd) for fs in scalings for hd in hads] \
                        if dt == "fp8_e4m3" else [{}]
                    for nk, ps, w in itertools.product(nks, pages, windows):
                        for b in parse_values(batch, int, "batch") if batch else [max(1, 16384 // max(n, nk or n))]:
                            for h in parse_values(heads, int, "heads") if heads else [max(1, 2048 // d)]:
                                for di in directions(direction.value):
                                    for qk, det in itertools.product(
                                            quant, dets if di is Direction.bwd else [False]):
                                        problems.append(Problem(
                                            batch=b, heads=h, kv_heads=kv_heads, seqlen_q=n,
                                            seqlen_k=nk, head_dim=d, dtype=dt, causal=c,
                                            causal_align=causal_align, direction=di,
                                            page_size=ps, window=w, deterministic=det, **qk))
    if not out.parent.exists():
        raise InputError(f"-o {out}: directory {out.parent} does not exist")
    profile = hardware.load(hw) if hw else None
    df = bench.run(problems, scheds, peer_groups, out, profile, resume, ncu,
                   progress=progress, tiles=knob_tiles(block_m, block_n, warps, stages),
                   tuned=tuned_tiles(tiles_file), kv_splits=splits, flush=flush, queued=queued,
                   settle_s=settle)
    ok = df[df.status == "ok"] if "status" in df else df
    typer.echo(f"{len(df)} rows in {out}; {len(ok)} ok, {len(df) - len(ok)} not ok")


@app.command("validate")
def validate_cmd(
    files: Annotated[list[Path], typer.Argument(help="measured CSV/Parquet files (iosim bench output)")],
    hw: Annotated[str | None, typer.Option(help="profile for every row (default: each row's GPU, calibrated if shipped)")] = None,
    fmt: FmtOpt = None,
    output: OutOpt = None,
    max_mape: Annotated[float | None, typer.Option("--max-mape", help="exit 1 if any schedule's time MAPE exceeds this percent")] = None,
    by: Annotated[str | None, typer.Option(help="also group by these measured columns, comma-separated (e.g. source,figure of experiments/papers/published.csv)")] = None,
    force: Force = False,
) -> None:
    """Re-predict measured rows with today's model: time error per schedule (and the
    roofline's), worst points, DRAM vs ncu."""
    from iosim.analysis.validate import format_report, to_json, validate

    if max_mape is not None and not (max_mape > 0 and math.isfinite(max_mape)):
        raise InputError(f"--max-mape {max_mape:g}: not allowed (allowed: a finite percent > 0)")
    fmt = out_format(fmt, output, force)
    times, dram = validate(files, hardware.load(hw) if hw else None,
                           [c.strip() for c in by.split(",") if c.strip()] if by else [])
    text = {Fmt.json: lambda: to_json(times, dram), Fmt.csv: lambda: times.to_csv(index=False),
            Fmt.table: lambda: format_report(times, dram)}[fmt]()
    emit(text, output, f"the errors of {len(times)} schedule groups")
    if max_mape is not None and (times.mape_pct > max_mape).any():
        worst = times.loc[times.mape_pct.idxmax()]
        typer.echo(f"MAPE {worst.mape_pct:.1f}% for {worst.schedule} on {worst.hw} exceeds "
                   f"--max-mape {max_mape:g}", err=True)
        raise typer.Exit(1)


@app.command("calibrate")
def calibrate_cmd(
    files: Annotated[list[Path], typer.Argument(help="measured CSV/Parquet files of our kernels (iosim bench output)")],
    hw: Annotated[str, typer.Option(help="profile to start from (its GPU's rows are fitted)")],
    output: Annotated[Path, typer.Option("-o", "--output", help="calibrated profile to write (.toml)")],
    holdout_where: Annotated[str | None, typer.Option(help="rows held out of the fit: column comparisons joined by and/or/not, e.g. 'seqlen_q>=8192'")] = None,
    ncu: Annotated[Path | None, typer.Option(help="ncu table (experiments/ncu_mechanism/ncu_mechanism.py) to measure the mma.sync rate and instructions per op")] = None,
    transfer_to: Annotated[list[str] | None, typer.Option(help="also write this GPU's datasheet profile with the fitted parameters (repeatable)")] = None,
    force: Force = False,
) -> None:
    """Fit the profile's free parameters to measured rows; write a calibrated profile."""
    from iosim.analysis.calibrate import calibrate

    targets = [hardware.load(t) for t in transfer_to or []]
    f = calibrate(files, hardware.load(hw), output, holdout_where, targets, ncu, force)
    typer.echo(f"wrote {output}; measured: " + ", ".join(f"{k}={v:.4g}" for k, v in f.measured.items()))
    typer.echo("fitted: " + ", ".join(f"{k}={_get(f.profile, k):.4g}" for k in f.fields))
    typer.echo("train (time error by schedule, percent):\n" + f.train.round(1).to_string(index=False))
    if not f.holdout.empty:
        typer.echo(f"held out ({holdout_where}):\n" + f.holdout.round(1).to_string(index=False))
    for t in targets:
        typer.echo(f"wrote {output.parent / (t.name.removesuffix('.calibrated') + '.calibrated.toml')} (not refitted)")


@app.command("explain")
def explain_cmd(
    schedule: Annotated[str, typer.Option(help="one of naive, fa1, fa2, fa3")] = "fa2",
    batch: Annotated[int, typer.Option(help="batch size")] = 4,
    heads: Annotated[int, typer.Option(help="query heads")] = 32,
    kv_heads: Annotated[int | None, typer.Option(help="K/V heads (GQA/MQA); default: heads")] = None,
    seqlen: Annotated[int, typer.Option(help="query sequence length N")] = 4096,
    seqlen_k: Annotated[int | None, typer.Option(help="key sequence length; default: seqlen")] = None,
    head_dim: Annotated[int, typer.Option(help="head dimension d")] = 128,
    dtype: Annotated[Dtype, typer.Option(case_sensitive=False, help="input dtype")] = Dtype.bf16,
    causal: Annotated[str, typer.Option(metavar="BOOL", help="causal mask: true|false|yes|no|1|0 (alone: true)")] = "false",
    causal_align: Annotated[CausalAlign, typer.Option(case_sensitive=False, help="causal diagonal when Nq != Nk")] = CausalAlign.top_left,
    direction: Annotated[str, typer.Option(help="fwd or bwd")] = "fwd",
    hw: Annotated[str, typer.Option(help="profile name or path (a short name picks the calibrated profile)")] = "h100",
    block_m: BlockM = None, block_n: BlockN = None, warps: Warps = None, stages: Stages = None,
    tiles_file: TilesFile = None,
    measured: Annotated[list[Path] | None, typer.Option(
        "--measured", help="bench CSV(s): measured time (and ncu counts) beside the prediction")] = None,
    fmt: FmtOpt = None,
    output: OutOpt = None,
    force: Force = False,
) -> None:
    """Why one schedule runs at its predicted speed: per kernel occupancy, waves, each unit's
    share of peak, the binding and next limit, and what would move it."""
    import json

    from iosim.analysis.explain import explain, format_text
    from iosim.analysis.sweep import parse_bool, parse_choice

    fmt = out_format(fmt, output, force)
    cs, ds = parse_bool(causal), parse_choice(direction, ["fwd", "bwd"], "direction")
    if len(cs) != 1 or len(ds) != 1:
        raise InputError("--causal and --direction: one value each for explain "
                         "(allowed: true or false; fwd or bwd)")
    c, d = cs[0], ds[0]
    for f in measured or []:
        if not f.is_file():
            raise InputError(f"--measured {f}: no such file")
    p = Problem(batch=batch, heads=heads, kv_heads=kv_heads, seqlen_q=seqlen, seqlen_k=seqlen_k,
                head_dim=head_dim, dtype=dtype, causal=c, causal_align=causal_align, direction=d)
    e = explain(schedule.strip(), p, hardware.load(hw),
                knob_tiles(block_m, block_n, warps, stages), measured, tuned_tiles(tiles_file))
    if fmt is Fmt.csv:  # one row per kernel, nested fields flattened (alone_ms.tensor, ...)
        import pandas as pd

        rows = pd.json_normalize([{"schedule": e["schedule"], "hw": e["hw"], **e["problem"], **k}
                                  for k in e["kernels"]])
        text = rows.to_csv(index=False)
    else:
        text = json.dumps(e, indent=1) if fmt is Fmt.json else format_text(e)
    emit(text, output, f"the explanation of {schedule}")


@app.command("tune")
def tune_cmd(
    schedule: Annotated[str, typer.Option(help="fa2, fa1 or fa3")] = "fa2",
    seqlen: Annotated[str, typer.Option(help="N values: a,b | a..b (doubling) | a..b:step")] = "1024..16384",
    head_dim: Annotated[str, typer.Option(help="d values")] = "64,128,256",
    causal: Annotated[str, typer.Option(metavar="BOOL", help="true|false|yes|no|1|0 or both")] = "false",
    dtype: Annotated[str, typer.Option(help="bf16 or fp16")] = "bf16",
    batch: Annotated[str | None, typer.Option(help="batch values; default 16384/N")] = None,
    heads: Annotated[str | None, typer.Option(help="head values; default 2048/d")] = None,
    hw: Annotated[str, typer.Option(help="profile name or path")] = "h100",
    block_m: BlockM = None, block_n: BlockN = None, warps: Warps = None, stages: Stages = None,
    top: Annotated[int, typer.Option("--top", help="configurations shown, and verified, per problem")] = 5,
    verify: Annotated[bool, typer.Option("--verify", help="check and time the top configurations on this GPU")] = False,
    fmt: Annotated[Fmt | None, typer.Option(
        "--format", case_sensitive=False,
        help="table (the ranking) or json/csv (every ranked or verified row); default: -o's extension")] = None,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="every ranked (or verified) row to a .csv or .json file, or the ranking to .txt")] = None,
    write: Annotated[Path | None, typer.Option(
        "--write", help="tiles file (.json) to merge the picks into (--tiles FILE or export "
        "IOSIM_TILES=FILE to use them)")] = None,
    force: Force = False,
) -> None:
    """Rank a schedule's tile configurations with the model; --verify times the top ones on the GPU."""
    import sys

    from iosim.analysis import tune
    from iosim.analysis.sweep import parse_bool, parse_choice, parse_values

    if top < 1:
        raise InputError(f"--top {top}: must be at least 1")
    fmt = out_format(fmt, output, force)
    if write is not None and write.suffix.lower() != ".json":
        raise InputError(f"--write {write}: a tiles file is .json (allowed: a path ending in .json)")
    if write is not None and not (write.parent if str(write.parent) else Path(".")).is_dir():
        raise InputError(f"--write {write}: directory {write.parent} does not exist")
    profile = hardware.load(hw)
    problems = [Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, dtype=dt, causal=c)
                for d in parse_values(head_dim, int, "head-dim")
                for n in parse_values(seqlen, int, "seqlen") for c in parse_bool(causal)
                for dt in parse_choice(dtype, ["bf16", "fp16"], "dtype")
                for b in (parse_values(batch, int, "batch") if batch else [max(1, 16384 // n)])
                for h in (parse_values(heads, int, "heads") if heads else [max(1, 2048 // d)])]
    if verify:  # before compiling anything: no GPU is one line, at once
        from iosim.gpu.bench import require_gpu

        require_gpu("iosim tune --verify")
    rows_out = output if fmt is not Fmt.table else None
    # the rows on stdout: what tune says goes to stderr
    say = (lambda m: print(m, file=sys.stderr)) if fmt is not Fmt.table and output is None else typer.echo
    table = tune.run(schedule.strip(), problems, profile, knob_tiles(block_m, block_n, warps, stages),
                     top, verify, rows_out, write, say, force)
    if fmt is Fmt.table and output is not None:  # the ranking itself, to a .txt file
        emit(tune.format_ranking(table, top, profile), output, "the ranking")
    elif fmt is not Fmt.table and output is None:
        typer.echo(rows_text(table, fmt), nl=False)


@app.command("compare")
def compare_cmd(
    before: Annotated[Path, typer.Argument(help="rows before: a sweep or bench CSV/Parquet")],
    after: Annotated[Path, typer.Argument(help="rows after: a sweep or bench CSV/Parquet")],
    fmt: FmtOpt = None,
    output: OutOpt = None,
    force: Force = False,
) -> None:
    """What changed between two tables of rows (two sweeps, two profiles, a bench and a sweep):
    table (a summary) or csv/json (every row)."""
    from iosim.analysis.compare import compare_files, format_changes

    fmt = out_format(fmt, output, force)
    c = compare_files(before, after)
    text = format_changes(c, str(before), str(after)) if fmt is Fmt.table else rows_text(c, fmt)
    emit(text, output, f"{len(c)} rows")


def _get(profile, field: str) -> float:
    from iosim.analysis.calibrate import get

    return get(profile, field)


class ImageFormat(str, Enum):
    png = "png"
    svg = "svg"


@app.command("report")
def report_cmd(
    files: Annotated[list[Path], typer.Argument(
        help="prediction rows (iosim sweep/predict CSV or Parquet) and measured rows (iosim bench)")],
    output: Annotated[Path, typer.Option("-o", "--output", help="HTML file to write")] = Path("report.html"),
    force: Annotated[bool, typer.Option(
        "--force", help="replace an existing output file (never one that holds measurements)")] = False,
    hw: Annotated[list[str] | None, typer.Option(
        "--hw", help="profile (name or TOML) whose peaks the roofline draws for its GPU's rows, e.g. "
        "h100 (the calibrated profile) or the TOML a sweep used (repeatable; default: each GPU's "
        "shipped profile, calibrated where one is)")] = None,
    image_dir: Annotated[Path | None, typer.Option(
        "--image-dir", help="also write each chart (default view) as an image file in this folder "
        "(drawn in a headless Chromium)")] = None,
    image_format: Annotated[ImageFormat, typer.Option("--image-format", help="png or svg")] = ImageFormat.png,
) -> None:
    """Write one self-contained HTML report (roofline, IO and time against N, accuracy, what-if)."""
    try:  # plotly: the GPU machine running `iosim bench` may not have it
        from iosim.report.page import report
    except ImportError as e:
        raise InputError(f"iosim report needs {e.name} (pip install -e .)") from None
    out, images = report(files, output, hw or (), image_dir, image_format.value, force)
    typer.echo(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
    if images:
        typer.echo(f"wrote {len(images)} {image_format.value} images in {image_dir}: "
                   + ", ".join(p.name for p in images))


# Problem's fields by the option that sets them, for messages that name what the user typed
OPTION_OF_FIELD = {"seqlen_q": "--seqlen", "seqlen_k": "--seqlen-k", "head_dim": "--head-dim",
                   "kv_heads": "--kv-heads", "batch": "--batch", "heads": "--heads",
                   "dtype": "--dtype", "causal_align": "--causal-align", "window": "--window",
                   "page_size": "--page-size", "seqlens_k": "--seqlens-k"}
BOOL_OPTIONS = ("--causal",)  # take a value in the one boolean grammar; alone they mean true


def bare_flags(argv: list[str]) -> list[str]:
    """`--causal` alone is `--causal true` and `--no-causal` is `--causal false`, so that the flag
    spelling and the value spelling (true/false/yes/no/1/0/both) work in every command."""
    out: list[str] = []
    for i, a in enumerate(argv):
        if a in [f"--no-{o[2:]}" for o in BOOL_OPTIONS]:
            out += ["--" + a[5:], "false"]
            continue
        out.append(a)
        nxt = argv[i + 1] if i + 1 < len(argv) else None
        if a in BOOL_OPTIONS and (nxt is None or nxt.startswith("-")):  # no value follows
            out.append("true")
    return out


def command(argv: list[str] = ()):
    """The click command of `app`, its help without typer's type labels (`<int>`, `<bool>`,
    `<list[Path]>`) or braces round arguments: an option shows its METAVAR, a flag nothing.
    Where `argv` starts with the name of one of app's commands (or of a group of them, `hw`),
    the group holds that command alone: typer reads the signature of every command it builds
    (most of `iosim predict`'s time after the imports), and the others cannot run."""
    import copy

    import typer.main

    def plain(cmd) -> None:
        for sub in getattr(cmd, "commands", {}).values():
            plain(sub)

        def help_option(ctx, made=cmd.get_help_option):  # -h/--help is made on demand
            opt = made(ctx)
            if opt is not None:
                opt.display_type_rich = lambda ctx: None
            return opt

        cmd.get_help_option = help_option
        for p in cmd.params:
            if type(p).__name__ == "TyperArgument":
                label = (p.metavar or p.name.upper()) + ("..." if p.nargs != 1 else "")
                p.metavar = label
                p._usage_display_name = lambda label=label: label
                p.display_type_rich = lambda ctx: None
            elif getattr(p, "is_flag", False) or getattr(p, "count", False):
                p.display_type_rich = lambda ctx: None
            elif (desc := getattr(p, "type_descriptor", None)) is not None:
                # (typer releases without type_descriptor keep their own labels)
                choices = [getattr(c, "value", c) for c in desc.choices or ()] \
                    if desc.is_choice else []
                label = p.metavar or "|".join(map(str, choices)) or p.name.upper()
                p.display_type_rich = lambda ctx, label=label: label

    name = argv[0] if argv else None
    one = [c for c in app.registered_commands if c.name == name]
    sub = [g for g in app.registered_groups if g.name == name]
    group = app
    if one or sub:  # the same group (its callback, options and help) with that command alone
        group = copy.copy(app)
        group.registered_commands, group.registered_groups = one, sub
    cmd = typer.main.get_command(group)
    plain(cmd)
    return cmd


def main(argv: list[str] | None = None) -> None:
    """Entry point: bad input becomes one line and exit status 2, never a traceback."""
    from pydantic import ValidationError

    # numpy's OpenBLAS starts a thread per further core when numpy is imported, which spins
    # waiting for work: on 2 cores about a quarter of `iosim predict`'s CPU time, and wall time
    # where the other core is busy. No command's linear algebra is large enough to use it
    # (calibrate fits the same numbers with one thread) and a sweep's workers are processes
    # already. Set before a command imports numpy; the user's own setting stands.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

    def bad(msg: str) -> None:
        print(f"error: {msg}", file=sys.stderr)
        sys.exit(2)

    args = bare_flags(list(sys.argv[1:] if argv is None else argv))
    try:
        rv = command(args)(args=args, prog_name="iosim", standalone_mode=False)
    except InputError as e:
        bad(str(e))
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(OPTION_OF_FIELD.get(str(x), str(x)) for x in err["loc"])
        msg = err["msg"].removeprefix("Value error, ")
        bad(f"{loc}: {msg}" if loc else msg)
    except Exception as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # `iosim`, `iosim hw`: help (printed), no error
            sys.exit(0)
        if hasattr(e, "format_message") and getattr(e, "exit_code", 0) == 2:  # usage errors
            bad(" ".join(e.format_message().split()))
        if type(e).__name__ == "Abort":
            sys.exit(130)
        raise
    sys.exit(rv if isinstance(rv, int) else 0)


if __name__ == "__main__":  # python -m iosim.cli
    main()
