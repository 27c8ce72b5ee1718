"""Regenerate the generated blocks of README.md and docs/results.md from the commands and
committed files they name.

Each block sits between `<!-- BEGIN name -->` and `<!-- END name -->`; the command that makes
it is written right above it. tests/test_validation.py fails when a block is stale.
Every block is made in this process (no subprocess), so that the test is cheap.
Usage: python tools/update_readme.py [--check]
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
import sys
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the files whose blocks are generated
DOCS = [ROOT / "README.md", ROOT / "docs" / "results.md", ROOT / "experiments" / "sweep_speed" / "README.md"]


def run(*args: str) -> str:
    """What `iosim ARGS` prints, run from the repository root in this process."""
    from iosim.cli import main

    out = io.StringIO()
    with contextlib.chdir(ROOT), contextlib.redirect_stdout(out):
        try:
            main(list(args))
        except SystemExit as e:
            if e.code:
                raise RuntimeError(f"iosim {' '.join(args)}: exit status {e.code}") from None
    return out.getvalue()


def block_predict() -> str:
    return "```\n$ iosim predict\n" + run("predict") + "```"


def block_predict_long() -> str:
    args = ["predict", "--seqlen", "16384", "--head-dim", "64", "--causal"]
    return "```\n$ iosim " + " ".join(args) + "\n" + run(*args) + "```"


def _predict_rows(unit: str) -> list[tuple[str, str, str]]:
    """Both speed tables' rows of iosim.predict and predict_rows (label, key, format), in `unit`."""
    return [(f"`iosim.predict`, one problem, four schedules, a DataFrame ({unit})", "predict_frame_ms", "{:.2f}"),
            (f"the same, causal ({unit})", "predict_causal_ms", "{:.2f}"),
            (f"the same, 24 problems in turn (N, d, causal, batch x heads varied), per problem ({unit})",
             "predict_varied_ms", "{:.2f}"),
            (f"the same, problems never asked before (no cache keyed by a shape serves them), per problem ({unit})",
             "predict_new_ms", "{:.2f}"),
            (f"`predict_rows`, one problem, four schedules, rows as dicts ({unit})", "predict_four_ms", "{:.2f}")]


def block_sweep_speed() -> str:
    path = ROOT / "experiments" / "sweep_speed" / "sweep_speed.json"
    if not path.exists():
        return "(not measured yet: run `python experiments/sweep_speed/sweep_speed.py`)"
    d = json.loads(path.read_text())
    m, this = d.get("machine", {}), d["this"]
    where = f"{m.get('cpus', '?')} cores of an {m.get('cpu', 'unknown CPU')}, Python {m.get('python', '?')}"
    lines = [f"On {where}, {d['date']}; the previous version and this one in the same run:", "",
             "| | previous | this | this / previous |", "| --- | --- | --- | --- |"]
    rows = [("commit", "commit", "{}"),
            ("`from iosim.cli import main` (import time, s)", "cli_import_seconds", "{:.3f}"),
            ("`iosim predict` in a shell (wall, s)", "predict_shell_seconds", "{:.2f}"),
            (f"sweep of {this['sweep_rows']:,} points, `iosim.sweep` (points/s)",
             "sweep_api_points_per_second", "{:,.0f}"),
            ("the same, `iosim sweep -o FILE.parquet`, start included (points/s)",
             "sweep_cli_parquet_points_per_second", "{:,.0f}"),
            ("its peak memory, main process (MiB)", "sweep_cli_peak_main_mib", "{:,.0f}"),
            (f"sweep of {this['large_rows']:,} points to Parquet (points/s)",
             "large_points_per_second", "{:,.0f}"),
            ("its peak memory, main process (MiB)", "large_peak_main_mib", "{:,.0f}"),
            *_predict_rows("ms"),
            (f"a batch of {this.get('batch_points', 0):,} schedule-problems, planned and predicted "
             "(per second)", "batch_points_per_second", "{:,.0f}"),
            ("the same, the time alone (`limiter=False`, per second)", "batch_time_only_per_second",
             "{:,.0f}"),
            (f"a grid of {this.get('grid_points', 0):,} schedule-problems, `iosim.predict_many` "
             "(per second)", "grid_points_per_second", "{:,.0f}"),
            ("the same, the time alone (per second)", "grid_time_only_per_second", "{:,.0f}"),
            (f"`tune.rank`, fa2's {this.get('tune_configs', 0)} configurations of one problem, "
             "compiles cached (s)", "tune_rank_seconds", "{:.3f}"),
            ("`iosim tune` of that problem in a shell (wall, s)", "tune_shell_seconds", "{:.2f}"),
            (f"sweep of {d.get('million_points', 0):,} points to Parquet: rows written", "million_rows", "{:,}"),
            ("its wall time (s)", "million_seconds", "{:.1f}"),
            ("its peak memory, main process / largest worker (MiB)", "million_peak", "{}")]
    for side in ("previous", "this"):
        v = d[side]
        if "million_peak_main_mib" in v:
            v["million_peak"] = f"{v['million_peak_main_mib']:,.0f} / {v['million_peak_worker_mib']:,.0f}"
    for label, key, fmt in rows:
        a, b = d["previous"].get(key), this.get(key)
        if b is None:
            continue
        ratio = f"{b / a:.2f}" if isinstance(a, float) and isinstance(b, float) and a else ""
        lines.append(f"| {label} | {'' if a is None else fmt.format(a)} | {fmt.format(b)} | {ratio} |")
    return "\n".join(lines)


# cpu_ab.py's run of record (session 24's: main at its end against main at its start, in one run)
CPU_AB = ROOT / "experiments" / "sweep_speed" / "session24" / "cpu_ab.json"


def block_sweep_speed_cpu() -> str:
    path = CPU_AB
    if not path.exists():
        return "(not measured yet: run `python experiments/sweep_speed/cpu_ab.py --base REV`)"
    d = json.loads(path.read_text())
    vs, m = d["versions"], d["machine"]
    this = vs[-1]
    lines = [f"On an {m['cpu']}, Python {m['python']}, {d['date']}; CPU time, medians of {d['repeat']} "
             "alternate runs:", "",
             "| | " + " | ".join(v["commit"] for v in vs) + " | "
             + " | ".join(f"this / {v['commit']}" for v in vs[:-1]) + " |",
             "| --- |" + " --- |" * (2 * len(vs) - 1)]
    rows = [(f"sweep of {int(this['sweep_points']):,} points, `sweep_result`, one process (points per CPU s)",
             "sweep_cpu_points_per_second", "{:,.0f}"),
            ("the same, `iosim sweep --workers 1 -o FILE.parquet` (points per CPU s)",
             "cli_cpu_points_per_second", "{:,.0f}"),
            *_predict_rows("CPU ms"),
            (f"a batch of {int(this['batch_points']):,} schedule-problems, planned and predicted "
             "(per CPU s)", "batch_points_per_second", "{:,.0f}"),
            ("the same batch, times alone (`predict_many(..., limiter=False)`, per CPU s)",
             "batch_time_only_points_per_second", "{:,.0f}"),
            (f"a grid of {int(this.get('grid_points', 0)):,} schedule-problems (1,920 problems), "
             "`predict_many` (per CPU s)", "grid_points_per_second", "{:,.0f}"),
            ("the same grid, times alone (per CPU s)", "grid_time_only_points_per_second", "{:,.0f}"),
            (f"a large grid of {int(this.get('large_points', 0)):,} schedule-problems (21,120 "
             "problems), `predict_many` (per CPU s)", "large_points_per_second",
             "{:,.0f}"),
            ("the same large grid, times alone (per CPU s)", "large_time_only_points_per_second",
             "{:,.0f}"),
            ("`tune.rank`, fa2's configurations of one problem, compiles cached (CPU s)",
             "tune_rank_seconds", "{:.3f}"),
            ("`iosim predict` in a shell, the whole process (CPU s)", "predict_shell_cpu_seconds",
             "{:.3f}")]
    for label, key, fmt in rows:
        if key not in this:
            continue
        # a version without the measurement (an option it lacks): blank
        lines.append(f"| {label} | " + " | ".join(fmt.format(v[key]) if key in v else "" for v in vs)
                     + " | " + " | ".join(f"{this[key] / v[key]:.2f}" if key in v else ""
                                          for v in vs[:-1]) + " |")
    return "\n".join(lines)


def block_h100_d128() -> str:
    import pandas as pd

    from iosim import sweep

    df = sweep({"seqlen_q": [512, 2048, 8192, 32768, 131072], "head_dim": [128],
                "causal": "both", "schedule": "all", "hw": ["h100"]})
    # a problem whose tensors exceed the card's HBM is not a result: it says so, with its need
    df["cell"] = [f"cannot run: {need / 1e12:,.1f} TB" if not fits else
                  f"{t:,.3f} ms {b}" if t < 100 else f"{t:,.0f} ms {b}"
                  for t, b, fits, need in zip(df.time_pred_ms, df.bound, df.fits, df.hbm_footprint_bytes)]
    t = df.pivot_table(index=["causal", "seqlen_q"], columns="schedule", values="cell",
                       aggfunc="first")[["naive", "fa1", "fa2", "fa3"]]
    t.columns.name = None
    with pd.option_context("display.width", 200):
        return "```\n" + t.reset_index().to_string(index=False) + "\n```"


VALIDATE_FILES = ["fwd_grid/h100/measured.csv", "new_shapes/h100/measured_new.csv",
                  "fwd_ncu/h100/measured_ncu.csv", "fa3/h100/measured_fa3.csv",
                  "bwd_grid/h100/measured_bwd.csv", "fwd_grid/h200/measured.csv",
                  "fwd_ncu/h200/measured_ncu.csv", "fa3/h200/measured_fa3.csv",
                  "bwd_grid/h200/measured_bwd.csv"]


def block_validate() -> str:
    files = [f"experiments/{f}" for f in VALIDATE_FILES]
    return "```\n$ iosim validate " + " ".join(files) + "\n" + run("validate", *files) + "\n```"


def block_validate_waves() -> str:
    """Wave quantisation and small problems (experiments/waves), by head_dim."""
    args = ["validate", "experiments/waves/h100/measured_waves.csv", "--by", "head_dim"]
    return "```\n$ iosim " + " ".join(args) + "\n" + run(*args).split("\n\n")[0] + "\n```"


def block_validate_small() -> str:
    """Small problems measured after the calibration (experiments/small_new)."""
    args = ["validate", "experiments/small_new/h100/measured_small.csv"]
    return "```\n$ iosim " + " ".join(args) + "\n" + run(*args).split("\n\n")[0] + "\n```"


def block_validate_small_queued() -> str:
    """The small problems and waves again, with launches queued (flush10)."""
    args = ["validate", "experiments/small_new/h100/flush10/measured_small_rq1.csv",
            "experiments/waves/h100/flush10/measured_waves_rq.csv"]
    return "```\n$ iosim " + " ".join(args) + "\n" + run(*args).split("\n\n")[0] + "\n```"


def block_fp8_validate(path: str) -> str:
    """An fp8 bench grid against the model by dtype and d (its first table)."""
    args = ["validate", path, "--by", "dtype,head_dim"]
    return "```\n$ iosim " + " ".join(args) + "\n" + run(*args).split("\n\n")[0] + "\n```"


def block_fp8_validate_c3() -> str:
    """FA3's fp8 bench grid with every row on its Plan's kernel (session 14, c3), by d."""
    return block_fp8_validate("experiments/fp8/h100/speed14c/c3/measured_fp8.csv")


def block_papers() -> str:
    """The model against the papers' published numbers, one group per figure."""
    args = ["validate", "experiments/papers/published.csv", "--by", "paper,figure"]
    return "```\n$ iosim " + " ".join(args) + "\n" + run(*args) + "\n```"


FA3_BWD_RUNS = ["experiments/fa3_bwd/h100/recheck/measured_bwd.csv", "experiments/fa3_bwd/h100/dqwarp/measured_bwd.csv",
                "experiments/fa3_bwd/h100/d256/measured_bwd.csv", "experiments/fa3_bwd/h100/dq256/run2/measured_bwd.csv",
                "experiments/fa3_bwd/h100/dq256/run2/measured_det.csv",
                "experiments/fa3_bwd/h200/measured_bwd.csv", "experiments/fa3_bwd/h200/dqwarp/measured_bwd.csv",
                "experiments/fa3_bwd/h200/d256/measured_bwd.csv",
                "experiments/fa3_bwd/h200/measured_det.csv"]


def block_fa3_bwd_validate() -> str:
    """The model's fresh prediction of kernels/fa3_bwd.cu on its committed H100 and H200 grids."""
    args = ["validate", *FA3_BWD_RUNS, "--by", "head_dim,deterministic"]
    return "```\n$ iosim " + " ".join(args) + "\n" + run(*args).split("\n\n")[0] + "\n```"


def block_fa3_bwd_new_shapes() -> str:
    """The model's fresh prediction of kernels/fa3_bwd.cu on shapes no grid measured, two runs."""
    args = ["validate", "experiments/fa3_bwd/h100/new_shapes/measured_new.csv",
            "experiments/fa3_bwd/h100/new_shapes/run2/measured_new.csv"]
    return "```\n$ iosim " + " ".join(args) + "\n" + run(*args).rstrip() + "\n```"


def _script(path: str):
    """The module of a script in this tree (tools/, experiments/), which is no package."""
    spec = importlib.util.spec_from_file_location(Path(path).stem, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def block_mask_add_cost() -> str:
    """The causal mask's cost in PyTorch's unfused attention, published or measured, and the model's."""
    module = _script("tools/mask_add_cost.py")
    with contextlib.chdir(ROOT):
        text = module.report()
    return "```\n$ python tools/mask_add_cost.py\n" + text.rstrip() + "\n```"


def block_validate_summary() -> str:
    """The validate command's first table (time error per schedule), for the README."""
    files = [f"experiments/{f}" for f in VALIDATE_FILES]
    table = run("validate", *files).split("\n\n")[0]
    return "```\n$ iosim validate " + " \\\n    ".join(files) + "\n" + table + "\n```"


# the small problems and waves with their launches queued (issued, the same point differs by up
# to twice between runs: the timing-spread block), FA3's backward as its kernels run today
# (the Plan's: the atomics at d = 64, the dQ warp at d = 128, the deterministic mode; their
# GEMM-turn waits: pipeline.wgmma_wait_cycles), and FA3's forward grid (the wgmma rate: 24 rows
# below N = 8192 beside the waves' 12)
CALIBRATE_DATA = ["experiments/fwd_grid/h100/measured.csv", "experiments/bwd_grid/h100/measured_bwd.csv",
                  "experiments/waves/h100/flush10/measured_waves_rq.csv",
                  "experiments/fa3_bwd/h100/dqwarp/measured_bwd.csv",
                  "experiments/fa3_bwd/h100/dq256/run2/measured_det.csv",
                  "experiments/fa3/h100/measured_fa3.csv"]
# held out: every N >= 8192 and the small problems with 1 and 4 heads (issue 23)
CALIBRATE_HOLDOUT = 'seqlen_q>=8192 or heads<=4'


def block_calibrate() -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = run("calibrate", *CALIBRATE_DATA, "--hw", "h100-sxm5-80gb",
                  "--ncu", "experiments/ncu_mechanism/h100/ncu_mechanism.csv", "--holdout-where",
                  CALIBRATE_HOLDOUT, "--transfer-to", "h200-sxm-141gb",
                  "-o", f"{tmp}/h100-sxm5-80gb.calibrated.toml")
    out = out.replace(tmp, "hwprofiles")
    return (f"```\n$ iosim calibrate {' '.join(CALIBRATE_DATA)} --hw h100-sxm5-80gb --ncu "
            f"experiments/ncu_mechanism/h100/ncu_mechanism.csv --holdout-where '{CALIBRATE_HOLDOUT}' "
            "--transfer-to h200-sxm-141gb -o hwprofiles/h100-sxm5-80gb.calibrated.toml --force\n"
            + out + "\n```")


def tool(script: str, data: str, *args: str) -> str:
    """A tools/ script's output on a committed file (its `report`), with its command line."""
    module = _script(f"tools/{script}")
    line = " ".join([data, *args])
    paths = [str(ROOT / a) if (ROOT / a).is_file() else a for a in args]  # committed files too
    return f"```\n$ python tools/{script} {line}\n" + module.report(str(ROOT / data), *paths).rstrip() + "\n```"


def experiment_summary(path: str, data: str) -> str:
    """An experiments/ script's `summary` of a committed file, with its command line."""
    module = _script(path)
    return f"```\n$ python {path} --summary {data}\n" + module.summary(str(ROOT / data)) + "\n```"


def block_fp8_ncu14() -> str:
    return experiment_summary("experiments/fp8/speed14/ncu14.py", "experiments/fp8/h100/speed14/r1/ncu14.csv")


def block_fp8_clocks14b() -> str:
    return experiment_summary("experiments/fp8/speed14b/clocks.py", "experiments/fp8/h100/speed14b/c1/clocks.csv")


def block_fp8_stalls14b() -> str:
    path = "experiments/fp8/speed14b/src_stalls.py"
    data = "experiments/fp8/h100/speed14b/c2/ncu.tgz:./src_base_d128_8k.csv"
    module = _script(path)
    return f"```\n$ python {path} {data} --top 12\n" + module.report(str(ROOT / data), 12) + "\n```"


def block_fa3ref16(call: str) -> str:
    return experiment_summary("experiments/fp8/fa3ref16/fa3ref.py", f"experiments/fp8/fa3ref16/h100/{call}")


def block_fa3ref16_fit() -> str:
    path, dirs = "experiments/fp8/fa3ref16/fa3ref.py", ["experiments/fp8/fa3ref16/h100/c1",
                                                       "experiments/fp8/fa3ref16/h100/c2"]
    module = _script(path)
    return (f"```\n$ python {path} --fit {' '.join(dirs)}\n"
            + module.fit([str(ROOT / d) for d in dirs]) + "\n```")


def block_fa3_bwd_prefetch() -> str:
    path = "experiments/fa3_bwd/h200/prefetch"
    module = _script(f"{path}/ab.py")
    return f"```\n$ python {path}/ab.py\n" + module.report(str(ROOT / path)) + "\n```"


DECODE_ARGS = ["predict", "--schedule", "decode", "--seqlen", "1", "--seqlen-k", "131072",
               "--kv-heads", "8"]


def block_predict_decode() -> str:
    return "```\n$ iosim " + " ".join(DECODE_ARGS) + "\n" + run(*DECODE_ARGS) + "```"


FUSED = "experiments/decode/h100/fused"


def block_decode_flush_h100() -> str:
    return tool("decode_flush.py", FUSED)


def block_decode_fused_h100() -> str:
    return tool("decode_summary.py", f"{FUSED}/bench_read.csv")


def block_decode_fused_h100_mha() -> str:
    return tool("decode_summary.py", f"{FUSED}/mha.csv")


def block_decode_fused_h100_window() -> str:
    return tool("decode_summary.py", f"{FUSED}/window.csv")


PAGES10 = "experiments/decode/h100/pages10"


def block_decode_pages_h100() -> str:
    return tool("decode_pages.py", PAGES10)


def block_decode_pages_h100_bench() -> str:
    return tool("decode_summary.py", f"{PAGES10}/bench_read.csv")


GRID12 = "experiments/decode/h100/gridab12"
DECODE_VALIDATE = ["validate", f"{GRID12}/bench_settle2.csv", f"{PAGES10}/window.csv",
                   "experiments/decode/h200/fused/bench_read.csv", "--by", "page_size"]


def block_decode_validate() -> str:
    return "```\n$ iosim " + " ".join(DECODE_VALIDATE) + "\n" + run(*DECODE_VALIDATE) + "```"


def block_measured() -> str:
    try:
        from iosim.analysis.measured import readme_table
    except ImportError:
        return "(no measurements committed yet)"
    return readme_table(ROOT / "experiments" / "fwd_grid")


EXPLAIN_ARGS = ["explain", "--schedule", "fa2", "--batch", "2", "--heads", "16", "--seqlen", "8192",
                "--head-dim", "128", "--measured", "experiments/fwd_grid/h100/measured.csv"]


def block_explain() -> str:
    return "```\n$ iosim " + " ".join(EXPLAIN_ARGS) + "\n" + run(*EXPLAIN_ARGS) + "```"


def block_tune() -> str:
    import pandas as pd

    from iosim.analysis.tune import format_verified

    path = ROOT / "experiments" / "tune_fa2" / "h100" / "run16b" / "tune_fa2.csv"  # the latest run
    if not path.exists():
        return "(not measured yet: run `bash experiments/tune_fa2/run.sh` on an H100)"
    return "```\n" + format_verified(pd.read_csv(path)) + "\n```"


def block_tune_rerank() -> str:
    """Today's model re-ranking the configurations the committed tune run tried."""
    import pandas as pd

    from iosim.core.hardware import load

    mod = _script("tools/tune_rerank.py")
    out = []
    for f in ("experiments/tune_fa2/h100/run16b/tune_fa2.csv", "experiments/tune_fa2/h100/run14/tune_fa2.csv",
              "experiments/tune_fa2/h100/tune_fa2.csv"):
        ok, n, rho, picks = mod.evaluate(pd.read_csv(ROOT / f), load("h100"))
        out.append(f"$ python tools/tune_rerank.py {f}\ntoday's pick within 5% of the measured best in "
                   f"{ok} of {n} problems, median rho {rho:.2f}\n" + "\n".join(picks))
    return "```\n" + "\n\n".join(out) + "\n```"


# the blocks that are a tools/ script's report on committed files: name -> (script, data, args)
TOOL_BLOCKS = {
    "timing-spread": (
        "timing_spread.py",
        "experiments/small_new/h100/flush10/measured_small_rq1.csv",
        "experiments/small_new/h100/flush10/measured_small_rq2.csv"),
    "paper-speedups": ("paper_speedups.py", "experiments/papers/published.csv"),
    "paper-kernels": ("paper_kernels.py", "experiments/papers/published.csv"),
    "naive-kernels": ("naive_kernels.py", "experiments/naive_kernels/h100/naive_kernels.csv"),
    "naive-gemm-inst": ("naive_kernels.py", "experiments/naive_kernels/h100/naive_kernels.csv", "--inst"),
    "fa3-ncu": ("fa3_ncu.py", "experiments/fa3_ncu/h100/fa3_ncu.csv"),
    "ncu-bound": ("ncu_summary.py", "experiments/ncu_mechanism/h100/ncu_mechanism.csv"),
    "ncu-bound-bwd": ("ncu_summary.py", "experiments/ncu_mechanism/h100/ncu_mechanism_bwd.csv"),
    "measured-bwd": ("bwd_ratios.py", "experiments/bwd_grid/h100/measured_bwd.csv"),
    "fa1-split-bwd": ("fa1_ratios.py", "experiments/fa1_fair/h200/measured_fa1_bwd.csv"),
    "measured-fa3-bwd": ("bwd_ratios.py", "experiments/fa3_bwd/h100/measured_bwd.csv", "fa3"),
    "measured-fa3-bwd-h200": ("bwd_ratios.py", "experiments/fa3_bwd/h200/measured_bwd.csv", "fa3"),
    "measured-fa3-bwd-dq256-run3-h100": ("bwd_ratios.py", "experiments/fa3_bwd/h100/dq256/run3/measured_bwd.csv", "fa3"),
    "measured-fa3-bwd-h100": (
        "bwd_ratios.py",
        "experiments/fa3_bwd/h100/recheck/measured_bwd.csv",
        "fa3"),
    "measured-fa3-bwd-dqwarp-h100": (
        "bwd_ratios.py",
        "experiments/fa3_bwd/h100/dqwarp/measured_bwd.csv",
        "fa3"),
    "measured-fa3-bwd-dqwarp-h200": (
        "bwd_ratios.py",
        "experiments/fa3_bwd/h200/dqwarp/measured_bwd.csv",
        "fa3"),
    "measured-fa3-both-dqwarp-h100": (
        "both_ratios.py",
        "experiments/fa3_bwd/h100/dqwarp/measured_both.csv"),
    "fa3-bwd-dq-warp": (
        "variant_ratios.py",
        "experiments/fa3_bwd/h100/speed10/run1/variants_dq.csv"),
    "measured-fa3-bwd-speed10-h100": (
        "bwd_ratios.py",
        "experiments/fa3_bwd/h100/speed10/run2/measured_bwd.csv",
        "fa3"),
    "fa3-bwd-dq-shared": ("variant_ratios.py", "experiments/fa3_bwd/h100/speed10/run2/run.log"),
    "fa3-bwd-stalls-dq-warp": (
        "ncu_stall_sites.py",
        "experiments/fa3_bwd/h100/speed10/run2/ncu_source_d128.csv"),
    "measured-fa3-bwd-d256-h100": (
        "bwd_ratios.py",
        "experiments/fa3_bwd/h100/d256/measured_bwd.csv",
        "fa3"),
    "fa3-bwd-d256-dq-warp": ("variant_ratios.py", "experiments/fa3_bwd/h100/dq256/ab.log"),
    "fa3-bwd-det-dq256-h100": (
        "fa3_dq.py",
        "experiments/fa3_bwd/h100/dq256/run2/measured_bwd.csv",
        "experiments/fa3_bwd/h100/dq256/run2/measured_det.csv"),
    "fa3-bwd-d256-l2": (
        "fa3_dq.py",
        "experiments/fa3_bwd/h100/dq256/ncu_d256_dq0.txt",
        "experiments/fa3_bwd/h100/dq256/run2/ncu_d256_dq2.txt"),
    "measured-fa3-bwd-dq256-h100": (
        "bwd_ratios.py",
        "experiments/fa3_bwd/h100/dq256/run2/measured_bwd.csv",
        "fa3"),
    "measured-fp8-h100": ("fp8_summary.py", "experiments/fp8/h100/recheck/measured_fp8.csv"),
    "fp8-ncu-d128": ("ncu_brief.py", "experiments/fp8/h100/speed10/round1/ncu_raw_d128_bn128.csv"),
    "fp8-speed11-candidate": ("fp8_variants.py", "experiments/fp8/h100/speed11/candidate/variants.csv"),
    "fp8-speed11-default": ("fp8_variants.py", "experiments/fp8/h100/speed11/default/variants.csv"),
    "measured-fp8-h100-speed11": ("fp8_summary.py", "experiments/fp8/h100/speed11/default/measured_fp8.csv"),
    "fp8-speed12-round1": ("fp8_rounds.py", "experiments/fp8/h100/speed12/round1/variants.csv"),
    "fp8-speed12-round2": ("fp8_rounds.py", "experiments/fp8/h100/speed12/round2/variants.csv"),
    "measured-fp8-h100-speed12": ("fp8_summary.py", "experiments/fp8/h100/speed12/round2/measured_fp8.csv"),
    "fp8-speed13-round1": ("fp8_rounds.py", "experiments/fp8/h100/speed13/round1/variants.csv"),
    "fp8-speed13-round2": ("fp8_rounds.py", "experiments/fp8/h100/speed13/round2/variants.csv"),
    "measured-fp8-h100-speed13": ("fp8_summary.py", "experiments/fp8/h100/speed13/round2/measured_fp8.csv"),
    "fp8-speed14-r1": ("fp8_rounds.py", "experiments/fp8/h100/speed14/r1/variants.csv"),
    "fp8-speed14-r2": ("fp8_rounds.py", "experiments/fp8/h100/speed14/r2/variants.csv"),
    "measured-fp8-h100-speed14": ("fp8_summary.py", "experiments/fp8/h100/speed14/r2/measured_fp8.csv"),
    "measured-fp8-h100-speed14c-c3": ("fp8_summary.py", "experiments/fp8/h100/speed14c/c3/measured_fp8.csv"),
    "fp8-speed14b-c2": ("fp8_rounds.py", "experiments/fp8/h100/speed14b/c2/variants.csv"),
    "fp8-speed14c-c1": ("fp8_rounds.py", "experiments/fp8/h100/speed14c/c1/variants.csv"),
    "fp8-speed15-c1": ("fp8_rounds.py", "experiments/fp8/h100/speed15/c1/variants.csv"),
    "fp8-speed15-c2-tiles": ("fp8_rounds.py", "experiments/fp8/h100/speed15/c2/tiles.csv"),
    "measured-fp8-h100-speed15-c2": ("fp8_summary.py", "experiments/fp8/h100/speed15/c2/measured.csv"),
    "fp8-speed15h-mufu": ("fp8_exp2.py", "experiments/fp8/h100/speed15h/c1/mufu.csv"),
    "fp8-speed15h-c1": ("fp8_rounds.py", "experiments/fp8/h100/speed15h/c1/variants.csv"),
    "fp8-speed15h-accuracy": ("fp8_exp2.py", "experiments/fp8/h100/speed15h/c1/accuracy.csv"),
    "fa3-bwd-stalls": ("ncu_stall_sites.py", "experiments/fa3_bwd/h100/ncu_source_d128.csv"),
    "measured-fp8": ("fp8_summary.py", "experiments/fp8/h200/measured_fp8.csv"),
    "fa3-dq-reduce": ("fa3_dq.py", "experiments/fa3_bwd/h100/dq/dq_reduce.csv"),
    "fa3-dq-ncu": ("fa3_dq.py", "experiments/fa3_bwd/h100/dq"),
    "decode-measured": (
        "decode_summary.py",
        "experiments/decode/h200/bench.csv",
        "experiments/decode/h200/variants.csv"),
    "decode-measured-h100-bench": ("decode_summary.py", "experiments/decode/h100/bench.csv"),
    "decode-measured-h100": ("decode_summary.py", "experiments/decode/h100/decode.csv"),
    "decode-state-h100": ("decode_state.py", "experiments/decode/h100/state11",
                          "experiments/decode/h100/grid11"),
    "decode-grid11-h100": ("decode_summary.py", "experiments/decode/h100/grid11/bench_read.csv"),
    "decode-state12-h100": ("decode_state.py", "experiments/decode/h100/alloc12",
                            "experiments/decode/h100/allocab12", "experiments/decode/h100/after32ab12",
                            "experiments/decode/h100/gridab12"),
    "decode-grid12-h100": ("decode_summary.py", "experiments/decode/h100/gridab12/bench_settle2.csv"),
}


BLOCKS = {name: partial(tool, *spec) for name, spec in TOOL_BLOCKS.items()} | {
          "fa3-bwd-prefetch": block_fa3_bwd_prefetch, "fp8-ncu14-d128": block_fp8_ncu14,
          "fp8-clocks14b": block_fp8_clocks14b, "fp8-stalls14b": block_fp8_stalls14b,
          "fa3ref16-c1": partial(block_fa3ref16, "c1"), "fa3ref16-c2": partial(block_fa3ref16, "c2"),
          "fa3ref16-fit": block_fa3ref16_fit,
          "predict": block_predict, "predict-long": block_predict_long,
          "h100-d128": block_h100_d128, "sweep-speed": block_sweep_speed,
          "sweep-speed-cpu": block_sweep_speed_cpu,
          "measured": block_measured, "validate": block_validate,
          "validate-waves": block_validate_waves, "validate-small": block_validate_small,
          "validate-small-queued": block_validate_small_queued,
          "papers": block_papers, "fp8-validate-speed14c-c3": block_fp8_validate_c3,
          "fp8-validate-speed15-c2": partial(block_fp8_validate, "experiments/fp8/h100/speed15/c2/measured.csv"),
          "fa3-bwd-validate": block_fa3_bwd_validate, "fa3-bwd-new-shapes": block_fa3_bwd_new_shapes, "mask-add-cost": block_mask_add_cost,
          "validate-summary": block_validate_summary, "calibrate": block_calibrate,
          "round-trip": lambda: tool("round_trip.py", "experiments/decode/h200/fused/bench_read.csv"),
          "explain": block_explain, "tune": block_tune,
          "predict-decode": block_predict_decode,
          "decode-flush-h100": block_decode_flush_h100, "decode-fused-h100": block_decode_fused_h100,
          "decode-fused-h100-mha": block_decode_fused_h100_mha,
          "decode-fused-h100-window": block_decode_fused_h100_window,
          "decode-pages-h100": block_decode_pages_h100,
          "decode-pages-h100-bench": block_decode_pages_h100_bench,
          "decode-validate": block_decode_validate,
          "tune-rerank": block_tune_rerank}


def render(text: str) -> str:
    for name, fn in BLOCKS.items():
        pat = re.compile(rf"(<!-- BEGIN {name} -->\n)(?:.*?\n)?(<!-- END {name} -->)", re.S)
        if pat.search(text):
            body = fn().rstrip("\n") + "\n"
            text = pat.sub(lambda m, b=body: m.group(1) + b + m.group(2), text)
    return text


def stale() -> dict[Path, str]:
    """The files in DOCS whose generated blocks are not current, with their rendered text."""
    return {path: new for path in DOCS if (new := render(path.read_text())) != path.read_text()}


if __name__ == "__main__":
    changed = stale()
    if "--check" in sys.argv and changed:
        sys.exit(f"stale generated blocks in {', '.join(str(p.relative_to(ROOT)) for p in changed)}: "
                 "run python tools/update_readme.py")
    for path, new in changed.items():
        path.write_text(new)
