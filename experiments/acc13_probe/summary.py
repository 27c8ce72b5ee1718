"""What experiments/acc13_probe/h100/probe13 shows (issue 23; acc13's one H100 call).

    python experiments/acc13_probe/summary.py [experiments/acc13_probe/h100/probe13]
    python experiments/acc13_probe/summary.py experiments/acc13_probe/h100/small13

1. fa2 forward at d = 128, the tilings of experiments/tune_fa2 that the model and the
   measurement disagree on: each one's median over 7 interleaved rounds, as a ratio to the
   best, beside the model's prediction (today's, registers as the plan gives them).
2. standard attention's backward at four small committed points: each kernel's duration under
   Nsight Compute (--clock-control none) beside the model's time for it with and without the
   profile's launch overhead, and the CTA's busy time on its SM (sm__cycles_active.avg x SMs
   / CTAs, at the clock ncu measured: gpc__cycles_elapsed.max / gpu__time_duration), and
   what the kernel lasts beyond it (launch and grid drain; at one-wave points).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.model import memory, timing
from iosim.schedules import Tiles, plan

H100 = load("h100")


def fa2_rounds(folder: Path) -> pd.DataFrame:
    d = pd.read_csv(folder / "fa2_d128_rounds.csv")
    keys = ["batch", "heads", "seqlen_q", "block_m", "block_n", "warps", "stages"]
    g = d.groupby(keys).time_ms.median().reset_index()
    g["vs_best"] = g.time_ms / g.groupby("seqlen_q").time_ms.transform("min")
    pred = []
    for r in g.itertuples(index=False):
        p = Problem(batch=r.batch, heads=r.heads, seqlen_q=r.seqlen_q, head_dim=128)
        pl = plan("fa2", p, H100, Tiles(block_m=r.block_m, block_n=r.block_n, warps=r.warps,
                                        stages=r.stages), check=True)
        pred.append(sum(t.seconds for t in timing.predict(pl, H100, memory.estimate(pl, H100), False)) * 1e3)
    g["pred_ms"] = pred
    g["pred_vs_best"] = g.pred_ms / g.groupby("seqlen_q").pred_ms.transform("min")
    return g.round(4)


def per_kernel(folder: Path, file: str = "ncu.csv") -> pd.DataFrame:
    d = pd.read_csv(folder / file)
    d = d[~d.point.str.contains('"tiles"')]  # the small points (not the fa2 tilings)
    out = []
    for pt, g in d.groupby("point", sort=False):
        a = json.loads(pt)
        p = Problem(batch=a["b"], heads=a["h"], seqlen_q=a["n"], head_dim=a["d"],
                    direction=a["dir"])
        pl = plan(a["s"], p, H100)
        w = g.pivot_table(index="Kernel Name", columns="Metric Name", values="value")
        for k, t in zip(pl.kernels, timing.predict(pl, H100, memory.estimate(pl, H100), False)):
            r = w.loc[k.name]
            hz = r["gpc__cycles_elapsed.max"] / (r["gpu__time_duration.sum"] * 1e-9)
            busy = r["sm__cycles_active.avg"] * H100.sm_count / min(k.ctas, H100.sm_count) / hz
            out.append({"s": a["s"], "dir": a["dir"], "B": a["b"], "H": a["h"], "N": a["n"],
                        "d": a["d"], "kernel": k.name,
                        "ctas": k.ctas, "ncu_us": r["gpu__time_duration.sum"] * 1e-3,
                        "model_us": t.seconds * 1e6,
                        "model_less_launch_us": (t.seconds - H100.launch_overhead_s) * 1e6,
                        "cta_busy_us": busy * 1e6,
                        "beyond_busy_us": r["gpu__time_duration.sum"] * 1e-3 - busy * 1e6})
    return pd.DataFrame(out).round(2)


def small13(folder: str = "experiments/acc13_probe/h100/small13") -> str:
    """small13's call: the same per-kernel table at more small points (naive forward and
    backward at d = 64, naive forward at d = 128, fa2 and fa3 forward)."""
    n = per_kernel(Path(folder), "ncu_small.csv")
    one = n[n.ctas <= H100.sm_count]
    tot = n.groupby(["s", "dir", "B", "H", "N", "d"], sort=False)[["ncu_us", "model_us"]].sum()
    return (n.to_string(index=False) + "\n\nsums over a point's kernels (us):\n"
            + tot.round(1).to_string()
            + f"\n\nduration beyond the busy time, kernels of one wave (CTAs <= SMs): median "
            f"{one.beyond_busy_us.median():.2f} us, range {one.beyond_busy_us.min():.2f}-"
            f"{one.beyond_busy_us.max():.2f} us over {len(one)} kernels")


def main(folder: str = "experiments/acc13_probe/h100/probe13") -> str:
    f = Path(folder)
    if f.name == "small13":
        return small13(folder)
    n = per_kernel(f)
    one = n[n.ctas <= H100.sm_count]
    tot = n.groupby(["s", "dir", "B", "H", "N", "d"], sort=False)[["ncu_us", "model_us"]].sum().round(1)
    return ("fa2 forward, d = 128: median of 7 interleaved rounds (ms) and its ratio to the "
            "best; the model's prediction and its ratio:\n" + fa2_rounds(f).to_string(index=False)
            + "\n\nnaive backward at small points, per kernel: Nsight Compute's duration, the "
            "model's time (with and without the launch overhead), the CTA's busy time on "
            "its SM and the duration beyond it (us):\n" + n.to_string(index=False)
            + "\n\nsums over the five kernels (us):\n" + tot.to_string()
            + f"\n\nduration beyond the busy time, kernels of one wave (CTAs <= SMs): median "
            f"{one.beyond_busy_us.median():.2f} us, range {one.beyond_busy_us.min():.2f}-"
            f"{one.beyond_busy_us.max():.2f} us over {len(one)} kernels; the profile's launch "
            f"overhead {H100.launch_overhead_s * 1e6:.2f} us")


if __name__ == "__main__":
    print(main(*sys.argv[1:]))
