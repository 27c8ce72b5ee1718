"""The shared row tables (predictions, sweeps, measurements): their column names, and reading
them from CSV or Parquet.

Column names are the contract in DESIGN.md ("Data and reports"); this module owns the lists.
Bad files get one clear line (an `InputError`), never a pandas traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from iosim.core.hardware import InputError
from iosim.core.problem import Problem

PROBLEM_COLUMNS = ["hw", "schedule", "direction", "batch", "heads", "kv_heads", "seqlen_q",
                   "seqlen_k", "head_dim", "dtype", "causal"]
COUNT_COLUMNS = ["hbm_read_bytes_2level", "hbm_write_bytes_2level", "dram_read_bytes",
                 "dram_write_bytes", "sram_bytes", "tensor_flops", "exp_ops", "alu_flops"]
PREDICTION_COLUMNS = ["time_roofline_ms", "bound_roofline", "time_pred_ms", "tflops_pred", "bound"]
MEASURED_COLUMNS = ["time_ms", "tflops", "dram_read_bytes_ncu", "dram_write_bytes_ncu",
                    "max_rel_err", "status", "gpu_name"]


def problem_fields(p: Problem) -> dict:
    return {"direction": p.direction.value, "batch": p.batch, "heads": p.heads,
            "kv_heads": p.kv_heads, "seqlen_q": p.seqlen_q, "seqlen_k": p.seqlen_k,
            "head_dim": p.head_dim, "dtype": p.dtype.value, "causal": p.causal,
            "causal_align": p.causal_align.value}


INT_COLUMNS = ["batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim"]
STR_COLUMNS = ["hw", "schedule", "direction", "dtype"]
# What a file needs to be read as predictions (sweep/predict output) or as measurements (bench).
PREDICTED_NEEDS = [*PROBLEM_COLUMNS, *COUNT_COLUMNS, "time_pred_ms", "tflops_pred", "bound"]
MEASURED_NEEDS = [*PROBLEM_COLUMNS, "time_ms", "tflops", "status"]

_TRUE = {"true", "1", "yes", "t", "1.0"}
_FALSE = {"false", "0", "no", "f", "0.0"}


def _as_bool(v: object) -> bool:
    s = str(v).strip().lower()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    raise InputError(f"causal: cannot read {v!r} as true/false (allowed: True, False, 1, 0)")


def normalize(df: pd.DataFrame) -> pd.DataFrame:
    """The problem columns in one type each (ints, bool causal, strings), so that frames from
    predict(), a CSV and a Parquet file join on equal keys. Returns a copy."""
    df = df.copy()
    for c in INT_COLUMNS:
        if c in df.columns:
            try:
                df[c] = pd.to_numeric(df[c]).astype("int64")
            except (ValueError, TypeError):
                raise InputError(f"column '{c}' must hold whole numbers "
                                 f"(found e.g. {df[c].iloc[0]!r})") from None
    if "causal" in df.columns and df["causal"].dtype != bool:  # (a read table is bool already)
        df["causal"] = df["causal"].map(_as_bool).astype(bool)
    for c in STR_COLUMNS:
        if c in df.columns:
            df[c] = df[c].astype(str)
    for c in ("status", "gpu_name"):
        if c in df.columns:
            df[c] = df[c].fillna("").astype(str)
    return df


def require_columns(df: pd.DataFrame, required: Sequence[str], where: str) -> None:
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(f"{where}: missing columns: {', '.join(missing)} "
                         f"(required: {', '.join(required)})")


def read_rows(path: str | Path, required: Sequence[str] = PROBLEM_COLUMNS) -> pd.DataFrame:
    """A table of rows from CSV (or Parquet: .parquet/.pq), normalized; InputError when the file
    is missing, empty, unreadable or lacks any of `required`."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"data file not found: {p}")
    kind = "Parquet" if p.suffix.lower() in (".parquet", ".pq") else "CSV"
    empty = f"{p}: empty file (expected a {kind} table with columns: {', '.join(required)})"
    if p.stat().st_size == 0:
        raise InputError(empty)
    try:
        df = pd.read_parquet(p) if kind == "Parquet" else pd.read_csv(p)
    except pd.errors.EmptyDataError:
        raise InputError(empty) from None
    except Exception as e:  # noqa: BLE001 - any parser failure is bad input, said on one line
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(f"{p}: not a readable {kind} table: {msg}") from None
    require_columns(df, required, str(p))
    if df.empty:
        raise InputError(f"{p}: has a header but no rows")
    return normalize(df)


__all__ = ["COUNT_COLUMNS", "MEASURED_COLUMNS", "PREDICTION_COLUMNS", "problem_fields", "MEASURED_NEEDS", "PREDICTED_NEEDS", "PROBLEM_COLUMNS",
           "normalize", "read_rows", "require_columns"]
