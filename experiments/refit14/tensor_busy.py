"""FA3's backward main kernel in Nsight Compute: how busy its tensor pipe is, and whether it runs
at the full wgmma rate when busy (issue 23, session 14). For each committed profile (d = 64 and
128, B = 2, H = 16, N = 8192, not causal; H100 and H200): ncu's SM throughput (its busiest
pipe, here the tensor pipe) against the Plan's tensor FLOPs at the datasheet's peak rate over
ncu's elapsed cycles. A ratio of 1 means the GEMMs run at the peak rate whenever the pipe is
busy; the rest of the time the pipe waits.

    python experiments/refit14/tensor_busy.py
"""

from __future__ import annotations

import re
from pathlib import Path

from iosim.core import hardware
from iosim.core.problem import Problem
from iosim.schedules import plan

ROOT = Path(__file__).resolve().parents[2]
FILES = [("experiments/fa3_bwd/h100/ncu_d64.txt", "h100-sxm5-80gb"),
         ("experiments/fa3_bwd/h100/ncu_d128.txt", "h100-sxm5-80gb"),
         ("experiments/fa3_bwd/h200/ncu_stalls_d64.txt", "h200-sxm-141gb"),
         ("experiments/fa3_bwd/h200/ncu_stalls_d128.txt", "h200-sxm-141gb")]


def row(path: str, hw_name: str) -> dict:
    text = (ROOT / path).read_text()
    cycles = float(re.search(r"Elapsed Cycles\s+cycle\s+([\d,]+)", text).group(1).replace(",", ""))
    busy = float(re.search(r"Compute \(SM\) Throughput\s+%\s+([\d.]+)", text).group(1))
    d = int(re.search(r"_d(\d+)\.txt", path).group(1))
    hw = hardware.load(hw_name)
    k = next(k for k in plan("fa3", Problem(batch=2, heads=16, seqlen_q=8192, head_dim=d,
                                            direction="bwd"), hw).kernels if k.name == "fa3_bwd")
    at_peak = 100 * k.work.tensor_flops / (hw.sm_count * cycles * hw.tensor_flops_per_clk_per_sm["bf16"])
    return {"file": path, "d": d, "elapsed_cycles": int(cycles), "ncu_sm_busy_pct": busy,
            "flops_at_peak_pct": round(at_peak, 2), "ratio": round(busy / at_peak, 3)}


def report() -> str:
    import pandas as pd

    return pd.DataFrame([row(*f) for f in FILES]).to_string(index=False)


if __name__ == "__main__":
    print(report())
