"""Forward plus backward (`iosim bench --direction both`) beside torch's backends of the same run.

    python tools/both_ratios.py MEASURED_BOTH.csv [SCHEDULE]

Per (head_dim, causal, N): each schedule's forward+backward TFLOP/s (both passes' FLOPs, in
FlashAttention's convention, over the sum of both times; a schedule whose two rows did not both
pass has none) and SCHEDULE's (default fa3) ratio to the fastest torch backend measured both ways.
"""

from __future__ import annotations

import sys

import pandas as pd

POINT = ["head_dim", "causal", "seqlen_q"]


def report(path: str, schedule: str = "fa3") -> str:
    df = pd.read_csv(path)
    ok = df[df.status == "ok"].assign(flops=lambda d: d.tflops * d.time_ms * 1e9)
    both = ok.groupby([*POINT, "schedule"]).filter(lambda g: set(g.direction) == {"fwd", "bwd"})
    sums = both.groupby([*POINT, "schedule"])[["flops", "time_ms"]].sum()
    wide = (sums.flops / sums.time_ms / 1e9).unstack("schedule")
    peers = [c for c in wide.columns if c.startswith("torch_")]
    best = wide[peers].max(axis=1)
    wide[f"{schedule}/best torch"] = wide[schedule] / best
    wide["best torch"] = wide[peers].idxmax(axis=1).str.removeprefix("torch_")
    return "forward+backward TFLOP/s:\n" + wide.round(2).to_string()


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: python tools/both_ratios.py MEASURED_BOTH.csv [SCHEDULE]")
    print(report(*sys.argv[1:]))
