"""The papers' speedups of FlashAttention-2 and -3 over their PyTorch standard attention against
the model's, from the published table: per figure and N, the published speedup (the two
published rates: the same FLOPs, so the time ratio), the model's (its `standard` over its fa2
or fa3, both predicted with the same profile as `iosim validate` picks), and the model's error;
then per figure and schedule the range of each and how many N are within 25% (issue 22's
target). Figures without a standard bar (FA3 d = 256, FP8) have no speedup to compare.
Usage: python tools/paper_speedups.py experiments/papers/published.csv"""

import sys

import pandas as pd

from iosim.analysis.validate import repredict
from iosim.core.rows import read_rows

KEYS = ["hw", "paper", "figure", "direction", "dtype", "head_dim", "causal", "seqlen_q"]
TARGET = 25.0  # percent: the model's speedup within 25% of the published one


def speedups(path: str) -> pd.DataFrame:
    """One row per (figure, N, schedule fa2/fa3) with a published standard bar beside it."""
    df = read_rows(path)
    df = df[df.published_unit == "TFLOP/s"]
    pred = repredict(df)[["hw", "schedule", "direction", "batch", "heads", "seqlen_q",
                          "head_dim", "dtype", "causal", "time_pred_ms"]]
    df = df.merge(pred, on=["hw", "schedule", "direction", "batch", "heads", "seqlen_q",
                            "head_dim", "dtype", "causal"])
    base = df[df.schedule == "standard"].set_index(KEYS)[["tflops", "time_pred_ms"]]
    rows = []
    for r in df[df.schedule.isin(["fa2", "fa3"])].itertuples(index=False):
        key = tuple(getattr(r, k) for k in KEYS)
        if key not in base.index:
            continue
        std = base.loc[key]
        paper, model = r.tflops / std.tflops, std.time_pred_ms / r.time_pred_ms
        rows.append(dict(zip(KEYS, key, strict=True)) | {
            "schedule": r.schedule, "paper_x": paper, "model_x": model,
            "err_pct": 100 * (model / paper - 1)})
    return pd.DataFrame(rows)


def report(path: str) -> str:
    """What the command prints (tools/update_readme.py puts it in docs/results.md)."""
    s = speedups(path)
    g = s.groupby(["hw", "paper", "figure", "schedule"], sort=True)
    summary = g.agg(n=("err_pct", "size"), paper_x_min=("paper_x", "min"),
                    paper_x_max=("paper_x", "max"), model_x_min=("model_x", "min"),
                    model_x_max=("model_x", "max"), mean_err_pct=("err_pct", "mean"),
                    worst_err_pct=("err_pct", lambda e: e.abs().max()),
                    within_25=("err_pct", lambda e: int((e.abs() <= TARGET).sum())))
    ok, n = int((s.err_pct.abs() <= TARGET).sum()), len(s)
    per_n = s.pivot_table(index=["hw", "paper", "figure", "seqlen_q"], columns="schedule",
                          values=["paper_x", "model_x", "err_pct"])
    per_n.columns = [f"{sched} {what}" for what, sched in per_n.columns]
    per_n = per_n[sorted(per_n.columns)]
    with pd.option_context("display.width", 250, "display.max_columns", 20):
        return (f"speedup over the papers' PyTorch standard attention, published (paper_x) and "
                f"model (model_x); within {TARGET:.0f}%: {ok} of {n}\n"
                + summary.round(2).to_string() + "\n\nper N:\n" + per_n.round(2).to_string())


if __name__ == "__main__":
    print(report(sys.argv[1]))
