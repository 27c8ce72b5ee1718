"""Measured fa2/fa1 speed ratio (fa1's time over fa2's, as the FA2 paper's "2x faster") per
(direction, d, causal, N) from committed bench CSVs, each ratio within one file (one run):
fa2's and fa1's rows with status ok, beside the split fa1 ran (split_cols: key rows per CTA of
the backward; split_rows: query rows per CTA of the forward; empty: measured before it).
Usage: python tools/fa1_ratios.py CSV [CSV ...]
  e.g. python tools/fa1_ratios.py experiments/fa1_fair/h200/measured_fa1_bwd.csv \
           experiments/bwd_grid/h200/measured_bwd.csv"""

import sys
from pathlib import Path

import pandas as pd

KEYS = ["direction", "head_dim", "causal", "seqlen_q"]


def ratios(path: str) -> pd.DataFrame:
    """One row per (direction, d, causal, N) with both schedules ok: times and fa2/fa1 speed."""
    df = pd.read_csv(path)
    df = df[df.schedule.isin(["fa1", "fa2"]) & (df.status == "ok")]
    t = df.pivot_table(index=KEYS, columns="schedule", values="time_ms", aggfunc="min").dropna()
    cols = [c for c in ("split_cols", "split_rows") if c in df.columns]
    split = df[df.schedule == "fa1"].set_index(KEYS)[cols].groupby(level=KEYS).first()
    split = split.dropna(axis=1, how="all")  # a split the file's rows do not record
    out = t.rename(columns={"fa1": "fa1_ms", "fa2": "fa2_ms"}).join(split)
    out["fa2_over_fa1"] = out.fa1_ms / out.fa2_ms
    return out


def report(*paths: str) -> str:
    """What the command prints (tools/update_readme.py puts it in docs/results.md)."""
    parts = []
    for path in paths:
        r = ratios(path)
        name = "/".join(Path(path).parts[-4:])  # experiments/NAME/GPU/FILE
        parts.append(f"{name}: fa2/fa1 speed (fa1 time / fa2 time) "
                     f"{r.fa2_over_fa1.min():.2f}-{r.fa2_over_fa1.max():.2f}")
        parts.append(r.round(3).to_string())
    return "\n".join(parts)


if __name__ == "__main__":
    print(report(*sys.argv[1:]))
