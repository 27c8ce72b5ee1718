"""The model against real measurements: re-predict every measured row with today's model and
profiles, then report the time error per schedule (beside the roofline's), the worst points,
and, where Nsight Compute counted them, the error of the L2-aware DRAM estimate.

    iosim validate experiments/fwd_grid/h100/measured.csv experiments/fwd_ncu/h100/measured_ncu.csv

Each row is predicted with its GPU's calibrated profile where one exists
(`hwprofiles/<gpu>.calibrated.toml`), else the datasheet one; `--hw` names one profile for
every row instead.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import pandas as pd

from iosim.analysis.accuracy import _profile, error_table, join
from iosim.analysis.predict import row
from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.problem import Problem
from iosim.core.rows import MEASURED_NEEDS, PROBLEM_COLUMNS, read_rows
from iosim.schedules import SCHEDULES, plan


def repredict(measured: pd.DataFrame, hw: HardwareProfile | None = None) -> pd.DataFrame:
    """Today's predictions for the measured rows of our own schedules (not torch's), with `hw`
    for every row, or else each row's GPU's preferred profile (calibrated if there is one)."""
    keys = measured[measured.schedule.isin(list(SCHEDULES))][PROBLEM_COLUMNS].drop_duplicates()
    rows = []
    for r in keys.itertuples(index=False):
        prof = hw or preferred(r.hw)
        p = Problem(batch=r.batch, heads=r.heads, kv_heads=r.kv_heads, seqlen_q=r.seqlen_q,
                    seqlen_k=r.seqlen_k, head_dim=r.head_dim, dtype=r.dtype, causal=r.causal,
                    direction=r.direction)
        rows.append(row(plan(r.schedule, p, prof), prof) | {"hw": r.hw, "profile": prof.name})
    return pd.DataFrame(rows)


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


def validate(paths: Sequence[str | Path], hw: HardwareProfile | None = None
             ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(time error table, DRAM error table) over the measurement files, predicted afresh."""
    measured = pd.concat([read_rows(p, MEASURED_NEEDS) for p in paths], ignore_index=True)
    pred = repredict(measured, hw)
    times = error_table(pred, measured)
    if times.empty:  # nothing checked is not a pass: a gate over no rows must fail
        raise InputError(f"no row of {', '.join(map(str, paths))} can be checked: none of naive, "
                         "fa1, fa2, fa3 has status ok and a positive, finite time_ms")
    return times, dram_table(pred, measured)


def format_report(times: pd.DataFrame, dram: pd.DataFrame) -> str:
    lines = ["time_pred_ms (cycle model) and time_roofline_ms against measured time_ms "
             "(status ok), percent:",
             times.drop(columns="worst_points").round(1).to_string(index=False), "",
             "worst points per schedule:"]
    lines += [f"  {r.hw} {r.schedule} {r.direction}: {r.worst_points}" for r in times.itertuples()]
    if not dram.empty:
        lines += ["", "DRAM estimate against Nsight Compute (dram__bytes_read/write.sum), percent:",
                  dram.round(1).to_string(index=False)]
    return "\n".join(lines)


def to_json(times: pd.DataFrame, dram: pd.DataFrame) -> str:
    return json.dumps({"time": times.to_dict(orient="records"),
                       "dram": dram.to_dict(orient="records")}, indent=1, default=float)
