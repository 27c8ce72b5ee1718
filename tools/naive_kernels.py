"""Standard attention kernel by kernel: Nsight Compute's duration at the GPU's own clocks
beside the model's, per point (experiments/naive_kernels).

    python tools/naive_kernels.py experiments/naive_kernels/h100/naive_kernels.csv

One line per kernel: its measured and predicted time, the model's error, and what ncu saw it
use (DRAM throughput and issue-slot activity, percent of peak).
"""

from __future__ import annotations

import sys

import pandas as pd

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.model import memory, timing
from iosim.schedules import plan

POINT = ["direction", "batch", "heads", "seqlen", "head_dim", "causal"]
METRICS = {"gpu__time_duration.sum": "ncu_ns",
           "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
           "sm__issue_active.avg.pct_of_peak_sustained_elapsed": "issue_pct"}


def kernel_times(path: str, hw: str = "h100") -> pd.DataFrame:
    """One row per (point, kernel): ncu's duration (ms), the model's (ms), their ratio, and
    ncu's DRAM and issue activity."""
    d = pd.read_csv(path)
    d = d[d.metric.isin(METRICS)].assign(metric=lambda x: x.metric.map(METRICS))
    wide = d.pivot_table(index=[*POINT, "Kernel Name"], columns="metric", values="value").reset_index()
    profile = load(hw)
    out = []
    for key, g in wide.groupby(POINT):
        direction, b, h, n, hd, causal = key
        p = Problem(batch=b, heads=h, seqlen_q=n, head_dim=hd, causal=causal, direction=direction)
        pl = plan("naive", p, profile)
        model = timing.predict(pl, profile, memory.estimate(pl, profile), False)
        by_name = g.set_index("Kernel Name")
        for k, t in zip(pl.kernels, model):
            r = by_name.loc[k.name]
            out.append(dict(zip(POINT, key)) | {
                "kernel": k.name, "ncu_ms": r.ncu_ns * 1e-6, "model_ms": t.seconds * 1e3,
                "ratio": t.seconds * 1e9 / r.ncu_ns, "dram_pct": r.dram_pct,
                "issue_pct": r.issue_pct})
    return pd.DataFrame(out)


def report(path: str) -> str:
    t = kernel_times(path)
    t["err_pct"] = 100 * (t.ratio - 1)
    cols = [*POINT, "kernel", "ncu_ms", "model_ms", "err_pct", "dram_pct", "issue_pct"]
    return ("each kernel's duration (ncu, --clock-control none) and the model's, the model's "
            "error (percent); ncu's DRAM throughput and issue activity (percent of peak):\n"
            + t[cols].round({"ncu_ms": 3, "model_ms": 3, "err_pct": 1, "dram_pct": 0,
                             "issue_pct": 0}).to_string(index=False))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/naive_kernels.py NAIVE_KERNELS.csv")
    print(report(sys.argv[1]))
