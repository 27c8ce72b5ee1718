"""Re-rank the fa2 tile configurations an `iosim tune --verify` run tried, with today's model
(registers as nvcc gave them in that run), against their measured times: per problem, whether
the model's pick among them is within 5% of the measured best, and Spearman's rho. Post hoc, on
configurations an earlier model chose: not a held-out test.

Usage: python tools/tune_rerank.py [TUNE_CSV ...]
       (default: experiments/tune_fa2/h100/tune_fa2.csv and experiments/tune_fa2/h100/first_run/tune_fa2.csv)
"""

import sys
from pathlib import Path

import pandas as pd

from iosim.analysis.predict import row
from iosim.analysis.tune import spearman, with_registers
from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.schedules import Tiles, plan

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ["experiments/tune_fa2/h100/tune_fa2.csv", "experiments/tune_fa2/h100/first_run/tune_fa2.csv"]


def evaluate(df: pd.DataFrame, hw) -> tuple[int, int, float, list[str]]:
    ok, rhos, picks = 0, [], []
    groups = df[df.status == "ok"].groupby(["head_dim", "seqlen_q"])
    for (d, n), g in groups:
        r0 = g.iloc[0]
        p = Problem(batch=int(r0.batch), heads=int(r0.heads), seqlen_q=int(n), head_dim=int(d))
        preds = []
        for r in g.itertuples():
            t = Tiles(block_m=r.block_m, block_n=r.block_n, warps=r.warps, stages=r.stages)
            pl = with_registers(plan("fa2", p, hw, t, check=True), int(r.registers))
            preds.append(row(pl, hw)["time_pred_ms"])
        g = g.assign(pred=preds)
        pick = g.loc[g.pred.idxmin()]
        ok += pick.time_ms <= 1.05 * g.time_ms.min()
        rhos.append(spearman(g.pred, g.time_ms))
        picks.append(f"d={d} N={n}: {pick.config} {pick.time_ms / g.time_ms.min():.3f}x best")
    return ok, groups.ngroups, float(pd.Series(rhos).median()), picks


if __name__ == "__main__":
    h100 = load("h100")
    for f in sys.argv[1:] or DEFAULT:
        ok, n, rho, picks = evaluate(pd.read_csv(ROOT / f), h100)
        print(f"{f}: today's pick within 5% of the measured best in {ok} of {n} problems, "
              f"median rho {rho:.2f}")
        print("  " + "; ".join(picks))
