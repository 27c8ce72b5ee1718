"""The model against real measurements: re-predict every measured row with today's model and
profiles, then report the time error per schedule (beside the roofline's), the worst points,
and, where Nsight Compute counted them, the error of the L2-aware DRAM estimate.

    iosim validate experiments/fwd_grid/h100/measured.csv experiments/fwd_ncu/h100/measured_ncu.csv

Each row is predicted with its GPU's calibrated profile where one exists
(`hwprofiles/<gpu>.calibrated.toml`), else the datasheet one; `--hw` names one profile for
every row instead. A published table (experiments/papers/published.csv) reads the same way:
its `fwd+bwd` rows are predicted as the forward plus the backward pass, and rows of schedules
the model does not have (torch's backends; FA3 Table 2's ablated variants) are skipped and
counted in the report. A row with a `ran_tiles` column ("fwd 128x64x4; bwd
64x128x8": BLOCK_M x BLOCK_N x warps per pass; the published FA2 rows carry the FA2 library's) is
predicted with the tiles it ran, not the Plan's own. A bench row's sliding window, paged cache,
forced split count (`window`, `page_size`, `kv_splits`) and causal alignment are predicted as it
ran, each such point compared on its own (`--by page_size,kv_splits` groups them); a decode row
measured when the combine was a kernel of its own (`kernels` 2) is charged that kernel's launch,
and a paged one measured before the kernel read the block table a tile ahead (no `page_ahead`)
is predicted as the kernel it ran (`measured_page_ahead`).
Beside every group, `calibrated` says whether its profile was fitted to measurements (the A100
profile is the datasheet's).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache
from pathlib import Path

import pandas as pd

from iosim.analysis.accuracy import _profile, error_table, join
from iosim.analysis.predict import row
from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.problem import Problem
from iosim.core.rows import (
    FWD_BWD,
    MEASURED_NEEDS,
    OPTION_COLUMNS,
    POINT_COLUMNS,
    PROBLEM_COLUMNS,
    RAN_COLUMNS,
    measured_split_cols,
    measured_split_rows,
    option_fields,
    point_key,
    ran_columns,
    read_rows,
)
from iosim.schedules import SCHEDULES, Tiles, plan

# the columns that add up when a forward and a backward pass run one after the other
_SUMMED = ["time_pred_ms", "time_roofline_ms", "hbm_read_bytes_2level", "hbm_write_bytes_2level",
           "dram_read_bytes", "dram_write_bytes"]


def _predict(schedule: str, p: Problem, prof: HardwareProfile, t: Tiles = Tiles()) -> dict:
    return row(plan(schedule, p, prof, t), prof)


DQ_WRITER_WORD = "dq-writer"  # ran_tiles: the FA3 paper's dQ-writer warp (Tiles.dq_writer)


def ran_tiles(r, direction: str) -> Tiles:
    """The tiles a row's kernel ran in `direction`, where the row says (its `ran_tiles`, e.g.
    "fwd 128x64x4; bwd 64x128x8": BLOCK_M x BLOCK_N x warps per pass; the published FA2 rows
    carry the FA2 library's; "bwd dq-writer": the Plan's tiles with the FA3 paper's dQ-writer
    warp, as the published FA3 backward bars ran), else the Plan's own (Tiles())."""
    v = getattr(r, "ran_tiles", None)
    for part in v.split(";") if isinstance(v, str) else ():
        d, _, spec = part.strip().partition(" ")
        if d != direction:
            continue
        words = spec.split()
        t = Tiles(dq_writer=True) if DQ_WRITER_WORD in words else Tiles()
        for w in (w for w in words if w != DQ_WRITER_WORD):
            bm, bn, nw = (int(x) for x in w.split("x"))
            t = replace(t, block_m=bm, block_n=bn, warps=nw)
        return t
    return Tiles()


def _predict_fwd_bwd(schedule: str, fields: dict, prof: HardwareProfile, r=None) -> dict:
    """One row for a forward plus a backward pass: times and bytes summed, TFLOP/s by the
    FlashAttention convention (3.5x the forward's FLOPs over the summed time); each pass with
    the tiles the row ran (`ran_tiles`), if it says."""
    f, b = (_predict(schedule, Problem(**fields, direction=d), prof, ran_tiles(r, d))
            for d in ("fwd", "bwd"))
    out = f | {c: f[c] + b[c] for c in _SUMMED} | {"direction": FWD_BWD}
    out["tflops_pred"] = 3.5 * Problem(**fields).fa_flops() / (out["time_pred_ms"] * 1e9)
    out["bound"] = f"{f['bound']}+{b['bound']}"
    return out


def repredict(measured: pd.DataFrame, hw: HardwareProfile | None = None) -> pd.DataFrame:
    """Today's predictions for the measured rows of our own schedules (not torch's), with `hw`
    for every row, or else each row's GPU's preferred profile (calibrated if there is one);
    fa1 rows with the split they ran (`measured_split_rows`, `measured_split_cols`)."""
    ours = measured[measured.schedule.isin(list(SCHEDULES))]
    # the fa1 kernel each row ran (None: the Plan's own split)
    ours = ours.assign(split_rows=[measured_split_rows(r) for r in ours.itertuples(index=False)],
                       split_cols=[measured_split_cols(r) for r in ours.itertuples(index=False)],
                       **ran_columns(ours))
    quant = [c for c in OPTION_COLUMNS if c in ours.columns]  # fp8 quantisation, deterministic
    tiles = ["ran_tiles"] if "ran_tiles" in ours.columns else []  # the tiles a row ran
    # a bench row's window, paged cache, forced split count, causal alignment; and how many
    # kernels its Plan had then (a decode row before the combine was fused: two)
    points = [c for c in POINT_COLUMNS if c in ours.columns]
    ours = ours.assign(**{c: ours[c].map(point_key) for c in points})
    align = ["causal_align"] if "causal_align" in ours.columns else []
    ran = ["kernels"] if "kernels" in ours.columns else []
    keys = ours[[*PROBLEM_COLUMNS, "split_rows", "split_cols", *RAN_COLUMNS, *quant, *tiles,
                 *points, *align, *ran]]
    rows = []
    for r in keys.drop_duplicates().itertuples(index=False):
        prof = hw or preferred(r.hw)
        given = {c: getattr(r, c) for c in points if getattr(r, c) != ""}
        if align and isinstance(r.causal_align, str) and r.causal_align:
            given["causal_align"] = r.causal_align
        fields = dict(batch=r.batch, heads=r.heads, kv_heads=r.kv_heads, seqlen_q=r.seqlen_q,
                      seqlen_k=r.seqlen_k, head_dim=r.head_dim, dtype=r.dtype, causal=r.causal,
                      **{c: v for c, v in given.items() if c != "kv_splits"}, **option_fields(r))
        t = replace(ran_tiles(r, r.direction),
                    split_rows=None if pd.isna(r.split_rows) else int(r.split_rows),
                    split_cols=None if pd.isna(r.split_cols) else int(r.split_cols),
                    kv_splits=int(given["kv_splits"]) if "kv_splits" in given else None,
                    page_ahead=None if pd.isna(r.page_ahead) else bool(r.page_ahead),
                    dq_bulk=None if pd.isna(r.dq_bulk) else int(r.dq_bulk),
                    lazy_rescale=None if pd.isna(r.lazy_rescale) else bool(r.lazy_rescale),
                    persistent=None if pd.isna(r.persistent) else bool(r.persistent))
        pred = (_predict_fwd_bwd(r.schedule, fields, prof, r) if r.direction == FWD_BWD else
                _predict(r.schedule, Problem(**fields, direction=r.direction), prof, t))
        if r.schedule == "decode" and ran and pd.notna(r.kernels):  # the combine's own launch
            pred["time_pred_ms"] += 1e3 * prof.launch_overhead_s * max(0, r.kernels - pred["kernels"])
        rows.append(pred | {"hw": r.hw, "profile": prof.name} | {c: getattr(r, c) for c in points}
                    | {c: getattr(r, c) for c in RAN_COLUMNS})
    return pd.DataFrame(rows)


def skipped(measured: pd.DataFrame) -> dict[str, int]:
    """Rows per schedule name that the model has no schedule for (torch's backends, FA3 Table
    2's ablated variants): not predicted, so not in the error table."""
    other = measured[~measured.schedule.isin(list(SCHEDULES))]
    return {str(k): int(v) for k, v in other.schedule.value_counts().sort_index().items()}


def calibrated(names: pd.Series, hw: HardwareProfile | None) -> pd.Series:
    """'yes' where the profile that predicted the group was fitted to measurements, else 'no'."""
    return names.map(lambda n: "yes" if (hw or preferred(n)).name.endswith(".calibrated")
                     else "no")


def dram_table(pred: pd.DataFrame, measured: pd.DataFrame) -> pd.DataFrame:
    """Per (hw, schedule): points, and the min / max relative error (percent) of the predicted
    DRAM reads and writes against Nsight Compute's; empty without ncu columns."""
    cols = ["hw", "schedule", "n", "read_err_min_pct", "read_err_max_pct", "write_err_min_pct",
            "write_err_max_pct"]
    if "dram_read_bytes_ncu" not in measured.columns:
        return pd.DataFrame(columns=cols)
    j = join(pred, measured)
    j = j[(j.status == "ok") & (j.dram_read_bytes_ncu > 0) & (j.dram_write_bytes_ncu > 0)]
    if j.empty:
        return pd.DataFrame(columns=cols)
    j = j.assign(rd=(j.dram_read_bytes / j.dram_read_bytes_ncu - 1) * 100,
                 wr=(j.dram_write_bytes / j.dram_write_bytes_ncu - 1) * 100)
    g = j.groupby(["hw", "schedule"], sort=True)
    return pd.DataFrame({"n": g.size(), "read_err_min_pct": g.rd.min(),
                         "read_err_max_pct": g.rd.max(), "write_err_min_pct": g.wr.min(),
                         "write_err_max_pct": g.wr.max()}).reset_index()[cols]


@lru_cache(maxsize=64)
def preferred(name: str) -> HardwareProfile:
    """The calibrated profile of GPU `name` if one is shipped, else its datasheet profile."""
    base = _profile(name)
    try:
        return _profile(base.name.removesuffix(".calibrated") + ".calibrated")
    except InputError:
        return base


def validate(paths: Sequence[str | Path], hw: HardwareProfile | None = None,
             by: Sequence[str] = ()) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(time error table, DRAM error table) over the measurement files, predicted afresh; the
    time table grouped also by the measured columns `by`, its attrs["skipped"] the rows per
    schedule the model does not have."""
    if twice := [c for c in by if c in ("hw", "schedule", "direction")]:
        raise InputError(f"--by {','.join(twice)}: already grouped by (allowed: other columns "
                         "of the measured files, e.g. source,figure)")
    measured = pd.concat([read_rows(p, MEASURED_NEEDS) for p in paths], ignore_index=True)
    pred = repredict(measured, hw)
    times = error_table(pred, measured, by=by) if not pred.empty else pd.DataFrame()
    if times.empty:  # nothing checked is not a pass: a gate over no rows must fail
        raise InputError(f"no row of {', '.join(map(str, paths))} can be checked: none of naive, "
                         "fa1, fa2, fa3 has status ok and a positive, finite time_ms")
    times.insert(3 + len(by), "calibrated", calibrated(times.hw, hw))
    times.attrs["skipped"] = skipped(measured)
    return times, dram_table(pred, measured)


def format_report(times: pd.DataFrame, dram: pd.DataFrame) -> str:
    lines = ["time_pred_ms (cycle model) and time_roofline_ms against measured time_ms "
             "(time_queued_ms where a row has it: launches queued ahead) "
             "(status ok), percent; calibrated: whether the group's profile was fitted to "
             "measurements (no: the datasheet profile, uncalibrated):",
             times.drop(columns="worst_points").round(1).to_string(index=False), "",
             "worst points per group:"]
    lines += [f"  {r.hw} {r.schedule} {r.direction}: {r.worst_points}" for r in times.itertuples()]
    if skip := times.attrs.get("skipped"):
        lines += ["", "not predicted (no such schedule in the model), rows: "
                  + ", ".join(f"{k} {v}" for k, v in skip.items())]
    if not dram.empty:
        lines += ["", "DRAM estimate against Nsight Compute (dram__bytes_read/write.sum), percent:",
                  dram.round(1).to_string(index=False)]
    return "\n".join(lines)


def to_json(times: pd.DataFrame, dram: pd.DataFrame) -> str:
    return json.dumps({"time": times.to_dict(orient="records"),
                       "skipped": times.attrs.get("skipped", {}),
                       "dram": dram.to_dict(orient="records")}, indent=1, default=float)
