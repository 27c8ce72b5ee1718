"""What binds each profiled kernel, from benchmarks/ncu_mechanism.py's table.

    python tools/ncu_summary.py reports/data/h100/ncu_mechanism.csv

One line per (point, kernel): duration, SM clock, issue-slot use (share of the cycles in which
a sub-partition's scheduler issued), the busiest pipes (share of their peak while the SM was
active), achieved warps per scheduler, registers, and the top stall reasons (warps stalled per
issued instruction).
"""

from __future__ import annotations

import sys

import pandas as pd

PIPES = {"tensor": "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
         "hmma": "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active",
         "fma": "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
         "alu": "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",
         "xu": "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
         "lsu": "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active",
         "shared": "sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_active",
         "dram": "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
         "l2": "lts__throughput.avg.pct_of_peak_sustained_elapsed"}
STALL = "smsp__average_warps_issue_stalled_"


def summary(path: str) -> pd.DataFrame:
    df = pd.read_csv(path)
    keys = ["schedule", "batch", "heads", "seqlen", "head_dim", "causal", "Kernel Name"]
    rows = []
    for k, g in df.groupby(keys, sort=False):
        m = g.groupby("metric")["value"].mean()
        stalls = m[m.index.str.startswith(STALL) & m.index.str.endswith("_per_issue_active.ratio")]
        stalls.index = stalls.index.str[len(STALL):].str.replace("_per_issue_active.ratio", "")
        top = stalls.sort_values(ascending=False).head(4)
        r = dict(zip(keys, k))
        r.update(us=m.get("gpu__time_duration.sum", float("nan")) / 1e3,
                 mhz=m.get("gpc__cycles_elapsed.avg.per_second", float("nan")) / 1e6,
                 issue_pct=m.get("smsp__issue_active.avg.pct_of_peak_sustained_active"),
                 warps_per_sched=m.get("sm__warps_active.avg.pct_of_peak_sustained_active", 0) / 100 * 16,
                 regs=m.get("launch__registers_per_thread"),
                 **{p: m.get(name) for p, name in PIPES.items()},
                 stalls=", ".join(f"{n} {v:.2f}" for n, v in top.items()))
        rows.append(r)
    return pd.DataFrame(rows)


if __name__ == "__main__":
    pd.set_option("display.width", 250)
    pd.set_option("display.max_colwidth", 80)
    print(summary(sys.argv[1]).round(1).to_string(index=False))
