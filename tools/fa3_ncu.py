"""FlashAttention-3's forward as Nsight Compute measured it beside the model, per point
(experiments/fa3_ncu).

    python tools/fa3_ncu.py experiments/fa3_ncu/h100/fa3_ncu.csv

One line per point: ncu's duration (--clock-control none) and the model's, the model's error,
then each unit's busy share of the kernel's time, ncu's (pipe cycles or instructions against
their peak) beside the model's (its work at the unit's peak over the predicted time): tensor
(gmma), MUFU (ncu's XU pipe; the model's exp2), FP32 (ncu: the FMA and ALU pipes, the model's
ALU work), issue; and ncu's two stalls that say whether consumer warps on one sub-partition run
their softmax at the same time (MUFU queue full, ready but not selected; warps per issue).
"""

from __future__ import annotations

import sys

import pandas as pd

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.model import memory, timing
from iosim.schedules import plan

POINT = ["batch", "heads", "seqlen", "head_dim", "causal", "dtype"]
ACTIVE = ".avg.pct_of_peak_sustained_active"
METRICS = {"gpu__time_duration.sum": "ncu_ns", "check_ok": "check_ok",
           "sm__pipe_tensor_cycles_active" + ACTIVE: "ncu_tensor",
           "sm__inst_executed_pipe_xu" + ACTIVE: "ncu_mufu",
           "sm__inst_executed_pipe_fma" + ACTIVE: "ncu_fma",
           "sm__inst_executed_pipe_alu" + ACTIVE: "ncu_alu",
           "smsp__issue_active" + ACTIVE: "ncu_issue",
           "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio": "mio",
           "smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio": "not_sel"}
# the model's units, and the efficiency its fluid time carries (issue: none)
UNITS = {"tensor": "tensor_wgmma", "sfu": "sfu", "alu": "alu", "issue": None}


def points(path: str, hw: str = "h100") -> pd.DataFrame:
    """One row per point: ncu's figures (METRICS) and the model's time and unit shares."""
    d = pd.read_csv(path)
    d = d[d.metric.isin(METRICS)].assign(metric=lambda x: x.metric.map(METRICS))
    wide = d.pivot_table(index=POINT, columns="metric", values="value").reset_index()
    prof = load(hw)
    eff = prof.efficiency
    rows = []
    for r in wide.itertuples(index=False):
        p = Problem(batch=r.batch, heads=r.heads, seqlen_q=r.seqlen, head_dim=r.head_dim,
                    causal=r.causal, dtype=r.dtype, direction="fwd")
        pl = plan("fa3", p, prof)
        dram = memory.estimate(pl, prof)
        i = next(j for j, k in enumerate(pl.kernels) if k is pl.main)
        t = timing.predict(pl, prof, dram, False)[i].seconds
        k = pl.main
        busy = timing.fluid(k, dram[i], timing.Rates.of(k, prof, p), prof.sm_count, prof)
        model = {f"model_{u}": 100 * busy[u] * (getattr(eff, e) if e else 1.0) / t
                 for u, e in UNITS.items()}
        rows.append(r._asdict() | {"ncu_ms": r.ncu_ns * 1e-6, "model_ms": t * 1e3,
                                   "err_pct": 100 * (t * 1e9 / r.ncu_ns - 1)} | model)
    return pd.DataFrame(rows)


def report(path: str) -> str:
    t = points(path)
    t["ncu_fp32"] = t.ncu_fma + t.ncu_alu / 2  # the ALU pipe takes a warp instruction in 2 clocks
    cols = [*POINT, "check_ok", "ncu_ms", "model_ms", "err_pct", "ncu_tensor", "model_tensor",
            "ncu_mufu", "model_sfu", "ncu_fp32", "model_alu", "ncu_issue", "model_issue",
            "mio", "not_sel"]
    return ("FA3 forward: ncu's duration (--clock-control none) and the model's (ms), its error "
            "(percent); each unit's busy share of the time (percent of peak), ncu's beside the "
            "model's: tensor, MUFU (exp2), FP32 (FMA + ALU pipes, in FMA issue slots), issue; "
            "warps stalled per issue on the full MUFU/shared queue (mio) and ready but not "
            "selected (not_sel):\n"
            + t[cols].round({"ncu_ms": 4, "model_ms": 4, "err_pct": 1, **{c: 0 for c in cols[10:-2]},
                             "mio": 2, "not_sel": 2}).to_string(index=False))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tools/fa3_ncu.py FA3_NCU.csv")
    print(report(sys.argv[1]))
