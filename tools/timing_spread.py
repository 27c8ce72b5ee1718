"""How much two bench runs of the same grid differ, timed as issued and with launches queued.

    python tools/timing_spread.py RUN1.csv RUN2.csv

For the points both runs measured (status ok), the ratio of run 1's time to run 2's, as
percentiles, for `time_ms` (each launch issued after the L2 flush: a microsecond kernel can wait
for the host) and `time_queued_ms` (`iosim bench --queued`: the launches queued ahead of the start
event); and today's model against each run's two timings (MAPE and worst point, percent).
"""

from __future__ import annotations

import sys

import pandas as pd

KEYS = ["schedule", "direction", "batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim",
        "dtype", "causal"]
TIMES = ("time_ms", "time_queued_ms")
QUANTILES = (0.01, 0.05, 0.5, 0.95, 0.99)


def _ok(path: str) -> pd.DataFrame:
    df = pd.read_csv(path)
    return df[(df.status == "ok") & df.schedule.isin(["naive", "fa1", "fa2", "fa3"])]


def _model(df: pd.DataFrame) -> pd.DataFrame:
    """Today's prediction per measured row (iosim validate's)."""
    from iosim.analysis.validate import repredict

    pred = repredict(df)
    return df[KEYS + list(TIMES)].merge(pred[KEYS + ["time_pred_ms"]], on=KEYS)


def report(run1: str, run2: str) -> str:
    a, b = _ok(run1), _ok(run2)
    both = a[KEYS + list(TIMES)].merge(b[KEYS + list(TIMES)], on=KEYS, suffixes=("_1", "_2"))
    lines = [f"{len(both)} points in both runs; run 1 / run 2 at percentiles "
             + ", ".join(f"p{round(q * 100)}" for q in QUANTILES) + ":"]
    for t in TIMES:
        r = both[f"{t}_1"] / both[f"{t}_2"]
        lines.append(f"  {t:15s} " + "  ".join(f"{r.quantile(q):.3f}" for q in QUANTILES))
    lines.append("today's model against each (MAPE %, worst %):")
    for name, df in (("run 1", a), ("run 2", b)):
        m = _model(df)
        for t in TIMES:
            ape = ((m.time_pred_ms - m[t]) / m[t]).abs() * 100
            lines.append(f"  {name} {t:15s} MAPE {ape.mean():5.1f}  worst {ape.max():6.1f}")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: python tools/timing_spread.py RUN1.csv RUN2.csv")
    print(report(sys.argv[1], sys.argv[2]))
