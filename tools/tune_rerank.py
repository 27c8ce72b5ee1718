"""What-if for the timing model (issue 14): re-rank the configurations tried in
reports/data/h100/tune_fa2.csv with fa2_fwd's shared-memory reads counted per warp
(kernels/fa2.cu: every warp ldmatrix-reads all of K_j and V_j; iosim/schedules/flash.py counts
them once per CTA), registers as nvcc gave them. Prints, as is and with the per-warp reads, how
many problems have the model's pick within 5% of the measured best and the median Spearman's
rho. Post hoc, on the data that the current model's ranking chose: not a held-out test.

Usage: python tools/tune_sram_whatif.py
"""

from dataclasses import replace
from pathlib import Path

import pandas as pd

from iosim.hardware import load
from iosim.predict import row
from iosim.problem import Problem
from iosim.schedules import Tiles, plan
from iosim.tune import spearman, with_registers

ROOT = Path(__file__).resolve().parents[1]


def per_warp(pl, warps: int):
    k = pl.main
    sram = k.traffic.sram + 2 * (warps - 1) * k.traffic.reads["K"]  # K and V, each warp
    k2 = replace(k, traffic=replace(k.traffic, sram=sram))
    return replace(pl, kernels=tuple(k2 if x is k else x for x in pl.kernels))


def evaluate(df: pd.DataFrame, hw, warp_reads: bool) -> tuple[int, float, list]:
    ok, rhos, picks = 0, [], []
    for (d, n), g in df[df.status == "ok"].groupby(["head_dim", "seqlen_q"]):
        r0 = g.iloc[0]
        p = Problem(batch=int(r0.batch), heads=int(r0.heads), seqlen_q=int(n), head_dim=int(d))
        preds = []
        for r in g.itertuples():
            t = Tiles(block_m=r.block_m, block_n=r.block_n, warps=r.warps, stages=r.stages)
            pl = with_registers(plan("fa2", p, hw, t), int(r.registers))
            preds.append(row(per_warp(pl, r.warps) if warp_reads else pl, hw)["time_pred_ms"])
        g = g.assign(pred=preds)
        pick = g.loc[g.pred.idxmin()]
        ok += pick.time_ms <= 1.05 * g.time_ms.min()
        rhos.append(spearman(g.pred, g.time_ms))
        picks.append(f"d={d} N={n}: {pick.config} {pick.time_ms / g.time_ms.min():.3f}x best")
    return ok, float(pd.Series(rhos).median()), picks


if __name__ == "__main__":
    data = pd.read_csv(ROOT / "reports/data/h100/tune_fa2.csv")
    h100 = load("h100")
    for label, flag in (("as counted", False), ("K/V shared-memory reads per warp", True)):
        ok, rho, picks = evaluate(data, h100, flag)
        print(f"{label}: pick within 5% of the measured best in {ok} of "
              f"{data.groupby(['head_dim', 'seqlen_q']).ngroups} problems, median rho {rho:.2f}")
        print("  " + "; ".join(picks))
