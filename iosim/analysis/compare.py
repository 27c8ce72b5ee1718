"""Side by side: one problem on several profiles, and what changed between two profiles or two
tables of rows (sweeps, benches): time, bound and the counts, by how much."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from iosim.core.hardware import InputError
from iosim.core.rows import PROBLEM_COLUMNS

KEYS = [c for c in PROBLEM_COLUMNS if c != "hw"]
CHANGES = [("time_pred_ms", "predicted ms"), ("time_ms", "measured ms"),
           ("dram_bytes", "DRAM bytes"), ("hbm_2level", "HBM bytes (2-level)"),
           ("block_m", "block_m"), ("block_n", "block_n")]


def _with_sums(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    if {"dram_read_bytes", "dram_write_bytes"} <= set(df.columns):
        df["dram_bytes"] = df.dram_read_bytes + df.dram_write_bytes
    if {"hbm_read_bytes_2level", "hbm_write_bytes_2level"} <= set(df.columns):
        df["hbm_2level"] = df.hbm_read_bytes_2level + df.hbm_write_bytes_2level
    return df


def side_by_side(df: pd.DataFrame) -> str:
    """Predicted ms, TFLOP/s and bound of each schedule (rows) on each profile (columns)."""
    lines = []
    for _, part in df.groupby(["direction", "causal"], sort=False):
        p0 = part.iloc[0]
        lines.append(f"{p0.direction}  B={p0.batch} H={p0.heads} KVH={p0.kv_heads} "
                     f"Nq={p0.seqlen_q} Nk={p0.seqlen_k} d={p0.head_dim} {p0['dtype']} "
                     f"causal={p0.causal}")
        hws = list(dict.fromkeys(part.hw))
        cells = [["schedule", *hws]]
        for s, g in part.groupby("schedule", sort=False):
            by = g.set_index("hw")
            cells.append([s] + [f"{by.time_pred_ms[h]:.3f} ms {by.tflops_pred[h]:.0f} TF/s {by.bound[h]}"
                                if h in by.index else "-" for h in hws])
        widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
        lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in cells]
    return "\n".join(lines)


def changes(a: pd.DataFrame, b: pd.DataFrame, label_a: str, label_b: str) -> pd.DataFrame:
    """Rows of `a` and `b` matched on the problem columns and schedule, with each quantity
    before, after and the ratio after/before, and the bound before and after."""
    a, b = _with_sums(a), _with_sums(b)
    keys = [k for k in KEYS if k in a.columns and k in b.columns]
    for df in (a, b):
        if "status" in df.columns:
            df.drop(df.index[df.status.notna() & (df.status != "ok")], inplace=True)
    m = a.merge(b, on=keys, suffixes=("_a", "_b"))
    if m.empty:
        raise InputError(f"{label_a} and {label_b} share no (schedule, problem) row to compare")
    out = m[keys].copy()
    for col, _ in CHANGES:
        if f"{col}_a" in m and f"{col}_b" in m:
            out[f"{col}_a"], out[f"{col}_b"] = m[f"{col}_a"], m[f"{col}_b"]
            out[f"{col}_ratio"] = m[f"{col}_b"] / m[f"{col}_a"]
    for col in ("bound", "hw"):
        if f"{col}_a" in m and f"{col}_b" in m:
            out[f"{col}_a"], out[f"{col}_b"] = m[f"{col}_a"], m[f"{col}_b"]
    return out


def format_changes(c: pd.DataFrame, label_a: str, label_b: str, limit: int = 40) -> str:
    """Per schedule: how each quantity moved (median and range of after/before), bounds that
    changed; then the rows, up to `limit`."""
    lines = [f"from {label_a} to {label_b}: {len(c)} matched rows (after / before)"]
    for s, g in c.groupby("schedule", sort=False):
        parts, same = [], []
        for col, name in CHANGES:
            r = g.get(f"{col}_ratio")
            if r is None or not r.notna().any():
                continue
            if (r - 1).abs().max() < 1e-9:
                same.append(name)
            else:
                parts.append(f"{name} x{r.median():.3f} (x{r.min():.3f}..x{r.max():.3f})")
        lines.append(f"  {s}: " + "; ".join(parts or ["nothing moved"])
                     + (f"; unchanged: {', '.join(same)}" if same else ""))
        if "bound_a" in g:
            moved = g[g.bound_a != g.bound_b]
            if len(moved):
                pairs = (moved.bound_a + " -> " + moved.bound_b).value_counts()
                lines.append("    bound changed: " + ", ".join(f"{k} ({n} rows)" for k, n in pairs.items()))
    show = [k for k in ("schedule", "direction", "seqlen_q", "head_dim", "causal") if k in c]
    cols = show + [x for col, _ in CHANGES for x in (f"{col}_a", f"{col}_b", f"{col}_ratio")
                   if x in c and col in ("time_pred_ms", "time_ms")] + \
        [x for x in ("bound_a", "bound_b") if x in c]
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        lines.append(c[cols].head(limit).round(4).to_string(index=False))
    if len(c) > limit:
        lines.append(f"  ... {len(c) - limit} more rows (--format csv for all)")
    return "\n".join(lines)


def compare_profiles(df: pd.DataFrame) -> str:
    """Two profiles' rows of the same problems (predict --hw a,b --compare)."""
    from iosim.core import hardware

    a_name, b_name = list(dict.fromkeys(df.hw))[:2]
    c = changes(df[df.hw == a_name], df[df.hw == b_name], a_name, b_name)
    return profile_changes(hardware.load(a_name), hardware.load(b_name)) + "\n" + \
        format_changes(c, a_name, b_name)


def profile_changes(a, b) -> str:
    """The numbers that differ between two profiles, with their ratio."""
    da, db = a.model_dump(exclude={"name", "sources", "provenance"}), \
        b.model_dump(exclude={"name", "sources", "provenance"})

    def flat(d: dict, pre: str = "") -> dict:
        out = {}
        for k, v in d.items():
            out.update(flat(v, f"{pre}{k}.") if isinstance(v, dict) else {f"{pre}{k}": v})
        return out

    fa, fb = flat(da), flat(db)
    lines = [f"profile fields that differ ({a.name} -> {b.name}):"]
    for k in fa:
        va, vb = fa[k], fb.get(k)
        if va != vb:
            ratio = f"  x{vb / va:.3f}" if isinstance(va, (int, float)) and isinstance(vb, (int, float)) \
                and not isinstance(va, bool) and va else ""
            lines.append(f"  {k}: {va} -> {vb}{ratio}")
    return "\n".join(lines)


def compare_files(a: Path, b: Path) -> pd.DataFrame:
    from iosim.core.rows import read_rows

    return changes(read_rows(a), read_rows(b), str(a), str(b))
