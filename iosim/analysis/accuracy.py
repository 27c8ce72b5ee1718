"""How far predictions are from measurements: one join and one error table, shared by
`iosim report` and `iosim validate`.

MAPE = mean over points of |time_pred_ms - time_ms| / time_ms, in percent. Only measured rows
with status == "ok" and a positive, finite time count (rows.measured_ok): a kernel that failed its check has no time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache

import pandas as pd

from iosim.core import hardware
from iosim.core.rows import (
    OPTION_COLUMNS,
    POINT_COLUMNS,
    PROBLEM_COLUMNS,
    RAN_COLUMNS,
    gpu_ms,
    measured_ok,
    normalize,
    point_key,
    ran_columns,
    require_columns,
)


@lru_cache(maxsize=64)
def canonical_hw(name: str) -> str:
    """The profile name for `name` (`h100` -> `h100-sxm5-80gb`); `name` itself if no profile."""
    try:
        return _profile(name).name
    except hardware.InputError:
        return name


@lru_cache(maxsize=64)
def _profile(name: str) -> hardware.HardwareProfile:
    return hardware.load(name)


def _field(profile: hardware.HardwareProfile, path: str) -> object:
    obj: object = profile
    for part in path.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else getattr(obj, part)
    return obj


def baseline(pred: pd.DataFrame) -> pd.DataFrame:
    """Drop what-if rows: a sweep that varies a hardware field writes it as `set_<field>`; only
    rows where that value is unset or equal to the real profile's describe the real GPU."""
    keep = pd.Series(True, index=pred.index)
    for col in [c for c in pred.columns if c.startswith("set_")]:
        field = col[4:]
        for i, (hw, v) in enumerate(zip(pred["hw"], pred[col], strict=True)):
            if pd.isna(v):
                continue
            try:
                real = _field(_profile(str(hw)), field)
            except (hardware.InputError, AttributeError, KeyError):
                keep.iloc[i] = False
                continue
            try:
                same = math.isclose(float(v), float(real), rel_tol=1e-9)
            except (TypeError, ValueError):
                same = str(v) == str(real)
            keep.iloc[i] = keep.iloc[i] and same
    return pred[keep]


def join(pred: pd.DataFrame, measured: pd.DataFrame, how: str = "inner",
         keep: Sequence[str] = ()) -> pd.DataFrame:
    """Measured rows beside the prediction for the same problem (on PROBLEM_COLUMNS; hardware
    names compared by profile, so `h100` meets `h100-sxm5-80gb`). `how="left"` keeps measured
    rows with no prediction (torch's backends). Model columns that the measured file also has
    (the prediction `iosim bench` stored beside its measurement) are dropped from it: the
    prediction given here is the one compared, so a change to the model shows at once.
    Measured rows that differ in a `keep` column (a published table's `figure`) are all kept."""
    require_columns(pred, PROBLEM_COLUMNS, "predictions")
    require_columns(measured, PROBLEM_COLUMNS, "measurements")
    p, m = normalize(pred), normalize(measured)
    p["hw"] = p["hw"].map(canonical_hw)
    m["hw"] = m["hw"].map(canonical_hw)
    # fp8 rows: also their quantisation; deterministic backward rows: that (rows without those
    # columns ran the default)
    keys = PROBLEM_COLUMNS + [c for c in OPTION_COLUMNS if c in p.columns or c in m.columns]
    if all(c in p.columns for c in RAN_COLUMNS):  # the kernel each row ran (validate's predictions)
        m = m.assign(**ran_columns(m))
        for df in (p, m):
            for c in RAN_COLUMNS:
                df[c] = df[c].map(point_key)
        keys += list(RAN_COLUMNS)
    # a bench file's window, paged cache, forced split count, causal alignment (where it has them)
    points = [c for c in POINT_COLUMNS if c in m.columns]
    for df in (p, m):
        for c in keys[len(PROBLEM_COLUMNS):]:
            if c not in df.columns:
                df[c] = ""
        for c in points:
            df[c] = df[c].map(point_key) if c in df.columns else ""
        _default_quant(df)
    keys += points
    p = baseline(p).drop_duplicates(keys, keep="first")
    # a resumed bench re-measures: newest wins
    m = m.drop_duplicates([*keys, *keep], keep="last")
    m = m.drop(columns=[c for c in p.columns if c in m.columns and c not in keys])
    return m.merge(p, on=keys, how=how, suffixes=("", "_pred"))


def _default_quant(df: pd.DataFrame) -> None:
    """fp8 rows with no quantisation columns (published tables) ran on e4m3 inputs (`given`,
    iosim.core.rows.quant_fields)."""
    fp8 = df["dtype"] == "fp8_e4m3"
    if "fp8_scaling" in df.columns:
        df.loc[fp8 & (df["fp8_scaling"] == ""), "fp8_scaling"] = "given"
    if "hadamard" in df.columns:
        df.loc[fp8 & (df["hadamard"] == ""), "hadamard"] = "False"


def _describe(r: pd.Series) -> str:
    shape = f"B={r.batch} H={r.heads}" + (f"/{r.kv_heads}" if r.kv_heads != r.heads else "")
    n = f"N={r.seqlen_q}" if r.seqlen_q == r.seqlen_k else f"Nq={r.seqlen_q} Nk={r.seqlen_k}"
    causal = " causal" if r.causal else ""
    return (f"{r.direction} {shape} {n} d={r.head_dim} {r.dtype}{causal}: "
            f"pred {r.time_pred_ms:.3g} ms vs {r.time_ms:.3g} ms ({r.err_pct:+.1f}%)")


def error_table(pred: pd.DataFrame, measured: pd.DataFrame, worst: int = 3,
                by: Sequence[str] = ()) -> pd.DataFrame:
    """Per (hw, schedule, direction, *by): n points, MAPE and signed mean error of time_pred_ms against time_ms
    (percent), the worst absolute percentage error and a description of the `worst` worst points;
    where the predictions carry `time_roofline_ms`, the roofline's MAPE beside the cycle
    model's (`roof_mape_pct`), so a reader sees what the cycle model adds.
    Measured rows need status == "ok"; schedules with no prediction (torch peers) do not appear."""
    require_columns(measured, ["time_ms", "status"], "measurements")
    require_columns(pred, ["time_pred_ms"], "predictions")
    require_columns(measured, by, "measurements (--by)")
    keys = ["hw", "schedule", "direction", *by]
    cols = [*keys, "n", "mape_pct", "mean_err_pct", "worst_ape_pct",
            "roof_mape_pct", "worst_points"]
    j = join(pred, measured, keep=by)
    j = j[measured_ok(j) & j["time_pred_ms"].notna()].copy()
    if j.empty:
        return pd.DataFrame(columns=cols)
    j["time_ms"] = gpu_ms(j)  # launches queued ahead where the row was timed so too
    j["err_pct"] = (j["time_pred_ms"] - j["time_ms"]) / j["time_ms"] * 100.0
    j["ape_pct"] = j["err_pct"].abs()
    roof = (j["time_roofline_ms"] - j["time_ms"]).abs() / j["time_ms"] * 100.0 \
        if "time_roofline_ms" in j else pd.Series(float("nan"), index=j.index)
    j["roof_ape_pct"] = roof
    rows = []
    for key, g in j.groupby(keys, sort=True):
        g = g.sort_values("ape_pct", ascending=False)
        rows.append({
            **dict(zip(keys, key, strict=True)), "n": len(g),
            "mape_pct": g["ape_pct"].mean(), "mean_err_pct": g["err_pct"].mean(),
            "worst_ape_pct": g["ape_pct"].iloc[0], "roof_mape_pct": g["roof_ape_pct"].mean(),
            "worst_points": "; ".join(_describe(r) for r in g.head(worst).itertuples()),
        })
    return pd.DataFrame(rows, columns=cols)
