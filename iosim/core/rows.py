"""The shared row tables (predictions, sweeps, measurements): their column names, and reading
them from CSV or Parquet.

Column names are the contract in DESIGN.md ("Data and reports"); this module owns the lists.
Bad files get one clear line (an `InputError`), never a pandas traceback.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import pandas as pd

from iosim.core.hardware import InputError
from iosim.core.problem import Dtype, Problem

PROBLEM_COLUMNS = ["hw", "schedule", "direction", "batch", "heads", "kv_heads", "seqlen_q",
                   "seqlen_k", "head_dim", "dtype", "causal"]
COUNT_COLUMNS = ["hbm_read_bytes_2level", "hbm_write_bytes_2level", "dram_read_bytes",
                 "dram_write_bytes", "sram_bytes", "tensor_flops", "exp_ops", "alu_flops"]
PREDICTION_COLUMNS = ["time_roofline_ms", "bound_roofline", "time_pred_ms", "tflops_pred", "bound"]
MEASURED_COLUMNS = ["time_ms", "tflops", "dram_read_bytes_ncu", "dram_write_bytes_ncu",
                    "max_rel_err", "status", "gpu_name"]


# an fp8_e4m3 row's quantisation (columns only fp8 rows fill; joins and resumes key on them)
QUANT_COLUMNS = ["fp8_scaling", "hadamard"]
# a row of a deterministic backward (Problem.deterministic): only such rows fill it, "True"
DET_COLUMNS = ["deterministic"]
# the columns beyond PROBLEM_COLUMNS that tell two points apart (joins and resumes key on them)
OPTION_COLUMNS = [*QUANT_COLUMNS, *DET_COLUMNS]
# what else tells apart a row of `iosim bench` (present in its files, blank where unset): a
# sliding window and a paged cache (Problem fields) and decode's forced split count; validate
# predicts and joins on them where the measured file has them (and predicts with the row's
# causal_align, which files before it lack: not a join key, or their rows would stop matching
# the same problems' rows of files that have it)
POINT_COLUMNS = ["window", "page_size", "kv_splits"]


def point_key(v) -> str:
    """A POINT_COLUMNS value as join text: blank where unset, whole numbers without '.0'."""
    if v is None or (isinstance(v, float) and np.isnan(v)) or str(v).strip() in ("", "nan"):
        return ""
    try:
        f = float(v)
    except ValueError:
        return str(v).strip()
    return str(int(f)) if f == int(f) else str(f)


def problem_fields(p: Problem) -> dict:
    # (an enum member's _value_: its value, without .value's descriptor call)
    out = {"direction": p.direction._value_, "batch": p.batch, "heads": p.heads,
           "kv_heads": p.kv_heads, "seqlen_q": p.seqlen_q, "seqlen_k": p.seqlen_k,
           "head_dim": p.head_dim, "dtype": p.dtype._value_, "causal": p.causal,
           "causal_align": p.causal_align._value_}
    if p.window is not None:
        out.update({"window": p.window})
    if p.page_size is not None:
        out.update({"page_size": p.page_size})
    if p.seqlens_k is not None:
        out.update({"seqlens_k": ",".join(map(str, p.seqlens_k))})
    if p.dtype is Dtype.fp8_e4m3:
        out.update(fp8_scaling=p.fp8_scaling.value, hadamard=p.hadamard)
    if p.deterministic:
        out.update(deterministic=True)
    return out


def _truthy(v) -> bool:
    return v is not None and str(v).strip().lower() in ("true", "1", "1.0")


def option_fields(r) -> dict:
    """The Problem fields of a row's option columns: its fp8 quantisation (quant_fields) and
    `deterministic` where the row says so."""
    v = r.get("deterministic") if isinstance(r, dict) else getattr(r, "deterministic", None)
    return quant_fields(r) | ({"deterministic": True} if _truthy(v) else {})


def quant_fields(r) -> dict:
    """The Problem fields of a row's fp8 quantisation columns: {} where not fp8; an fp8 row
    without them (a published table: the FA3 paper times its kernel on e4m3 inputs) is
    fp8_scaling `given`."""
    dtype = r.get("dtype") if isinstance(r, dict) else getattr(r, "dtype", None)
    if str(dtype) != "fp8_e4m3":
        return {}
    out = {"fp8_scaling": "given"}
    for c in QUANT_COLUMNS:
        v = r.get(c) if isinstance(r, dict) else getattr(r, c, None)
        if v is None or (isinstance(v, float) and np.isnan(v)) or str(v).strip() in ("", "nan"):
            continue
        out[c] = str(v).strip().lower() in ("true", "1", "1.0") if c == "hadamard" else str(v)
    return out


def measured_split_rows(r) -> int | None:
    """The query rows per CTA that a measured fa1 forward row ran (its `split_rows`, which the
    bench records); a bench row without one was measured before fa1 split a head's query rows
    across CTAs (kernels/fa1.cu before SPLIT_ROWS): one CTA per head, all Nq rows. None (the
    Plan's own split) for a published row (its `paper`: the FlashAttention-1 library split as
    the Plan does) and for every other schedule and direction."""
    if r.schedule != "fa1" or getattr(r.direction, "value", r.direction) != "fwd":
        return None
    paper = getattr(r, "paper", None)
    if isinstance(paper, str) and paper:
        return None
    import pandas as pd

    v = getattr(r, "split_rows", None)
    return int(v) if v is not None and not pd.isna(v) else int(r.seqlen_q)


def measured_split_cols(r) -> int | None:
    """The key rows per CTA that a measured fa1 backward row ran (its `split_cols`, which the
    bench records); a bench row without one was measured before fa1's backward split a head's
    key blocks across CTAs (kernels/fa1.cu before SPLIT_COLS): one CTA per head, all Nk keys,
    dQ read-modify-written. None (the Plan's own split) for a published row and for every other
    schedule and direction."""
    if r.schedule != "fa1" or getattr(r.direction, "value", r.direction) != "bwd":
        return None
    paper = getattr(r, "paper", None)
    if isinstance(paper, str) and paper:
        return None
    import pandas as pd

    v = getattr(r, "split_cols", None)
    return int(v) if v is not None and not pd.isna(v) else int(r.seqlen_k)


def _cell(r, c: str):
    """Column `c` of a row (a named tuple, a pandas Series or a dict); None where blank."""
    import pandas as pd

    v = r.get(c) if hasattr(r, "get") else getattr(r, c, None)
    blank = v is None or (not isinstance(v, str) and pd.isna(v)) or str(v).strip() in ("", "nan")
    return None if blank else v


def measured_page_ahead(r) -> bool | None:
    """Whether a measured decode row's paged kernel read the block table a tile ahead (its
    `page_ahead`, which the bench records); a paged row without one was measured before
    (kernels/decode.cu before PAGE_AHEAD: each row's entry read as its load issued): False.
    None (the Plan's own) for a contiguous cache and every other schedule. `r`: a row as a
    named tuple, a pandas Series or a dict (decode_bench.py's rows name the kernel in `impl`)."""
    impl = str(_cell(r, "impl") or "")
    schedule = _cell(r, "schedule") or ("decode" if impl.startswith("decode") else None)
    if schedule != "decode" or _cell(r, "page_size") is None:
        return None
    v = _cell(r, "page_ahead")
    return False if v is None else bool(float(v))


def measured_dq_bulk(r) -> int | None:
    """The dQ reduction a measured fa3 backward row's kernel ran (its `dq_bulk`, which the bench
    records: fa3_bwd.cu DQ_BULK); a row without one was measured before the dQ warp: vector
    atomics, 0. None (the Plan's own) for every other schedule and direction and for a
    deterministic row (its own reduction). `r`: a named tuple, a pandas Series or a dict."""
    if _cell(r, "schedule") != "fa3" or _cell(r, "direction") != "bwd" \
            or str(_cell(r, "deterministic")) == "True":
        return None
    v = _cell(r, "dq_bulk")
    return 0 if v is None else int(float(v))


def measured_lazy_rescale(r) -> bool | None:
    """Whether a measured fa3 fp8 forward row's kernel ran the lazy rescale (its
    `lazy_rescale`, which the bench records: fa3.cu LAZY_RESCALE); a row without one was
    measured before it: False. None (the Plan's own) for every other schedule, direction and
    dtype. `r`: a named tuple, a pandas Series or a dict."""
    if _cell(r, "schedule") != "fa3" or _cell(r, "direction") != "fwd" \
            or _cell(r, "dtype") != "fp8_e4m3":
        return None
    v = _cell(r, "lazy_rescale")
    return False if v is None else bool(float(v))


def measured_persistent(r) -> bool | None:
    """Whether a measured fa3 fp8 forward row's kernel ran on a persistent grid (its
    `persistent`, which the bench records: fa3.cu PERSISTENT); a row without one was measured
    before it: False. None (the Plan's own) for every other schedule, direction and dtype."""
    if _cell(r, "schedule") != "fa3" or _cell(r, "direction") != "fwd" \
            or _cell(r, "dtype") != "fp8_e4m3":
        return None
    v = _cell(r, "persistent")
    return False if v is None else bool(float(v))


# which kernel a measured row ran where the Plan has changed since (None: the Plan's own): a
# join key of validate's, so that rows of two kernels of one problem meet their own predictions
RAN_COLUMNS = {"page_ahead": measured_page_ahead, "dq_bulk": measured_dq_bulk,
               "lazy_rescale": measured_lazy_rescale, "persistent": measured_persistent}


def ran_columns(df: pd.DataFrame) -> dict[str, list]:
    """RAN_COLUMNS of each measured row."""
    rows = df.to_dict("records")
    return {c: [f(r) for r in rows] for c, f in RAN_COLUMNS.items()}


INT_COLUMNS = ["batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim"]
STR_COLUMNS = ["hw", "schedule", "direction", "dtype"]
# What a file needs to be read as predictions (sweep/predict output) or as measurements (bench).
PREDICTED_NEEDS = [*PROBLEM_COLUMNS, *COUNT_COLUMNS, "time_pred_ms", "tflops_pred", "bound"]
MEASURED_NEEDS = [*PROBLEM_COLUMNS, "time_ms", "tflops", "status"]
# A published figure that times the forward and backward pass together (the FlashAttention-2
# README's and FA1's GPT-2 runtimes): its rows say so in `direction`; the model predicts both.
FWD_BWD = "fwd+bwd"

_TRUE = {"true", "1", "yes", "t", "1.0"}
_FALSE = {"false", "0", "no", "f", "0.0"}


def _as_bool(v: object) -> bool:
    s = str(v).strip().lower()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    raise InputError(f"causal: cannot read {v!r} as true/false (allowed: True, False, 1, 0)")


# measured and predicted quantities: numbers (NaN where not measured; inf is read, and rows
# whose time is not a positive finite number are never used as a measurement)
FLOAT_COLUMNS = ["time_ms", "tflops", "dram_read_bytes_ncu", "dram_write_bytes_ncu", "max_rel_err",
                 *COUNT_COLUMNS, "time_pred_ms", "tflops_pred", "time_roofline_ms"]


def _first_bad(df: pd.DataFrame, c: str, ok: pd.Series) -> str:
    i = int((~ok).to_numpy().argmax())
    v = df[c].iloc[i]
    return f"column '{c}', row {i + 1}: {getattr(v, 'item', lambda: v)()!r}"


def normalize(df: pd.DataFrame, where: str = "table") -> pd.DataFrame:
    """The problem columns in one type each (ints, bool causal, strings) and the measured ones as
    numbers, so that frames from predict(), a CSV and a Parquet file join on equal keys; a value
    that is not what its column holds is InputError naming the file, column and row. A copy."""
    import pandas as pd

    df = df.copy()
    for c in INT_COLUMNS:
        if c in df.columns:
            v = pd.to_numeric(df[c], errors="coerce")
            ok = v.notna() & np.isfinite(v) & (v == v.round()) & (v >= 1)
            if not ok.all():
                raise InputError(f"{where}: {_first_bad(df, c, ok)} is not allowed "
                                 "(allowed: whole numbers >= 1)")
            df[c] = v.astype("int64")
    for c in FLOAT_COLUMNS:
        if c in df.columns and not pd.api.types.is_numeric_dtype(df[c]):
            v = pd.to_numeric(df[c], errors="coerce")
            ok = v.notna() | df[c].isna() | (df[c].astype(str).str.strip() == "")
            if not ok.all():
                raise InputError(f"{where}: {_first_bad(df, c, ok)} is not a number "
                                 "(allowed: numbers; empty where not measured)")
            df[c] = v
    if "causal" in df.columns and df["causal"].dtype != bool:  # (a read table is bool already)
        df["causal"] = df["causal"].map(_as_bool).astype(bool)
    for c in STR_COLUMNS:
        if c in df.columns:
            df[c] = df[c].astype(str)
    for c in ("status", "gpu_name", *QUANT_COLUMNS):
        if c in df.columns:
            df[c] = df[c].map(lambda v: "" if pd.isna(v) else str(v))
    for c in DET_COLUMNS:  # "True" or empty, as problem_fields writes it
        if c in df.columns:
            df[c] = df[c].map(lambda v: "True" if _truthy(v) else "")
    return df


PROBLEM_FIELDS = ["batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim", "dtype",
                  "causal", "causal_align", "direction"]


def check_problems(df: pd.DataFrame, where: str) -> None:
    """Every row's problem columns make a valid Problem; else InputError naming the file, the row
    and the column (not a command-line option the user never typed)."""
    from pydantic import ValidationError

    cols = [c for c in PROBLEM_FIELDS if c in df.columns]
    for i, r in df[cols].drop_duplicates().iterrows():
        fields = {k: v for k, v in r.items() if not (isinstance(v, float) and np.isnan(v))}
        fields.update(option_fields(df.loc[i]))
        if fields.get("direction") == FWD_BWD:  # the same shapes as its forward pass
            fields["direction"] = "fwd"
        try:
            Problem(**fields)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(map(str, err["loc"]))
            raise InputError(f"{where}: row {df.index.get_loc(i) + 1}: "
                             + (f"column '{loc}': " if loc else "")
                             + err["msg"].removeprefix("Value error, ")) from None


def gpu_ms(df: pd.DataFrame) -> pd.Series:
    """The time the model is held to: where a row was also timed with its launches queued ahead
    of the start event (`time_queued_ms`: `iosim bench --queued`, every decode row), that one,
    the host's launch cost left out as a CUDA graph or a loop that runs ahead of the GPU leaves
    it out (issued one at a time, microsecond kernels wait for the host: docs/results.md,
    timing-spread); else `time_ms`."""
    import pandas as pd

    t = pd.to_numeric(df["time_ms"], errors="coerce")
    if "time_queued_ms" not in df:
        return t
    q = pd.to_numeric(df["time_queued_ms"], errors="coerce")
    return q.where(np.isfinite(q) & (q > 0), t)


def measured_ok(df: pd.DataFrame) -> pd.Series:
    """Rows that are measurements: status ok and a positive, finite time (a NaN or inf time is
    a corrupt row, never a measurement)."""
    import pandas as pd

    t = pd.to_numeric(df["time_ms"], errors="coerce")
    return (df["status"] == "ok") & np.isfinite(t) & (t > 0)


def require_columns(df: pd.DataFrame, required: Sequence[str], where: str) -> None:
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(f"{where}: missing columns: {', '.join(missing)} "
                         f"(required: {', '.join(required)})")


def read_rows(path: str | Path, required: Sequence[str] = PROBLEM_COLUMNS) -> pd.DataFrame:
    """A table of rows from CSV (or Parquet: .parquet/.pq), normalized; InputError when the file
    is missing, empty, unreadable or lacks any of `required`."""
    import pandas as pd

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
    df = normalize(df, str(p))
    check_problems(df, str(p))
    return df


__all__ = ["RAN_COLUMNS", "ran_columns", "measured_dq_bulk", "measured_lazy_rescale", "measured_page_ahead", "measured_persistent", "QUANT_COLUMNS", "DET_COLUMNS", "OPTION_COLUMNS", "POINT_COLUMNS", "point_key", "option_fields", "quant_fields", "COUNT_COLUMNS", "FWD_BWD", "MEASURED_COLUMNS", "PREDICTION_COLUMNS", "problem_fields", "MEASURED_NEEDS", "PREDICTED_NEEDS", "PROBLEM_COLUMNS",
           "normalize", "read_rows", "require_columns"]
