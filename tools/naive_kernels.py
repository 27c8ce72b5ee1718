"""Standard attention kernel by kernel: Nsight Compute's duration at the GPU's own clocks
beside the model's, per point (experiments/naive_kernels).

    python tools/naive_kernels.py experiments/naive_kernels/h100/naive_kernels.csv
    python tools/naive_kernels.py experiments/naive_kernels/h100/naive_kernels.csv --inst

One line per kernel: its measured and predicted time, the model's error, and what ncu saw it
use (DRAM throughput, issue-slot and tensor-pipe activity, percent of peak). --inst: the GEMMs' instructions
beyond the model's own count (iosim.kernels GEMM_INST_STAGED), fitted from ncu's inst_executed.
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.model import memory, timing
from iosim.schedules import plan
from iosim.schedules.base import Tiles

POINT = ["direction", "batch", "heads", "seqlen", "head_dim", "causal"]
METRICS = {"gpu__time_duration.sum": "ncu_ns",
           "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": "dram_pct",
           "sm__issue_active.avg.pct_of_peak_sustained_elapsed": "issue_pct",
           "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": "tensor_pct"}


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
                "issue_pct": r.issue_pct, "tensor_pct": r.tensor_pct})
    return pd.DataFrame(out)


def gemm_inst(path: str, hw: str = "h100") -> tuple[np.ndarray, pd.DataFrame]:
    """Least squares of Nsight Compute's inst_executed per CTA of naive's GEMMs, less the model's
    own count without the loop's extra (mma.sync, ldmatrix/cp.async per 512 shared-memory bytes,
    element operations), on (512-byte chunks a CTA's trips stage, elements of its C tile):
    (coefficients, one row per kernel with the fit's relative error)."""
    d = pd.read_csv(path)
    d = d[d.metric == "inst_executed"]
    profile = load(hw)
    rows = []
    for key, g in d.groupby(POINT):
        direction, b, h, n, hd, causal = key
        p = Problem(batch=b, heads=h, seqlen_q=n, head_dim=hd, causal=causal, direction=direction)
        for k in plan("naive", p, profile, Tiles()).kernels:
            if k.name not in set(g["Kernel Name"]) or "BLOCK_K" not in k.defines:
                continue
            w, x = k.work, k.defines
            mma, other = timing.instructions(w.tensor_flops, w.alu_flops + w.exp_ops,
                                             k.traffic.sram, profile, False)
            ncu = g.loc[g["Kernel Name"] == k.name, "value"].iloc[0]
            staged = (x["BLOCK_M"] + x["BLOCK_N"]) * x["BLOCK_K"] * p.elem_bytes / 512
            rows.append({"point": key, "kernel": k.name, "extra": (ncu - mma - other) / k.ctas,
                         "staged": staged * float(k.trips.mean()),
                         "c_elems": x["BLOCK_M"] * x["BLOCK_N"]})
    t = pd.DataFrame(rows)
    a = t[["staged", "c_elems"]].to_numpy(float)
    coef = np.linalg.lstsq(a, t.extra.to_numpy(float), rcond=None)[0]
    return coef, t.assign(fit_err=a @ coef / t.extra - 1)


def inst_report(path: str) -> str:
    coef, t = gemm_inst(path)
    return (f"naive's GEMMs, Nsight Compute's inst_executed per CTA beyond the model's own count, "
            f"least squares over {len(t)} kernels: {coef[0]:.1f} warp instructions per 512 bytes "
            f"a CTA's loop stages, {coef[1]:.3f} per element of its C tile; the fit's error per "
            f"kernel (percent): {', '.join(f'{100 * e:+.0f}' for e in t.fit_err)}")


def report(path: str, *flags: str) -> str:
    if flags == ("--inst",):
        return inst_report(path)
    t = kernel_times(path)
    t["err_pct"] = 100 * (t.ratio - 1)
    cols = [*POINT, "kernel", "ncu_ms", "model_ms", "err_pct", "dram_pct", "issue_pct", "tensor_pct"]
    return ("each kernel's duration (ncu, --clock-control none) and the model's, the model's "
            "error (percent); ncu's DRAM throughput, issue activity and tensor pipe activity "
            "(percent of peak):\n"
            + t[cols].round({"ncu_ms": 3, "model_ms": 3, "err_pct": 1, "dram_pct": 0,
                             "issue_pct": 0, "tensor_pct": 0}).to_string(index=False))


if __name__ == "__main__":
    args = sys.argv[1:]
    if not 1 <= len(args) <= 2 or args[1:] not in ([], ["--inst"]):
        sys.exit("usage: python tools/naive_kernels.py NAIVE_KERNELS.csv [--inst]")
    print(report(*args))
