"""The few Nsight Compute numbers that say what binds a kernel, from a raw CSV (`ncu --csv --page
raw --print-units base`, as experiments/fp8/speed10/run.sh writes it): per kernel, its duration
and SM clock, issue-slot use, each pipe's share of its peak (active cycles; 2% and more), the
stall reasons per issued instruction (0.1 and more), shared-memory bank conflicts and wavefronts.

    python tools/ncu_brief.py experiments/fp8/h100/speed10/round1/ncu_raw_d128_bn128.csv
"""

from __future__ import annotations

import io
import re
import sys

import pandas as pd

KEEP = [  # (label, regex over the metric names), printed in this order where present
    ("duration ns", r"^gpu__time_duration\.sum$"),
    ("SM clock Hz", r"^gpc__cycles_elapsed\.avg\.per_second$"),
    ("issue active %", r"^smsp__issue_active\.avg\.pct_of_peak_sustained_active$"),
    ("pipe %", r"^sm__(inst_executed_pipe|pipe)_[a-z_0-9]+(_cycles_active)?\.avg\.pct_of_peak_sustained_active$"),
    ("stall/issue", r"^smsp__average_warps_issue_stalled_[a-z_]+_per_issue_active\.ratio$"),
    ("bank conflicts", r"^l1tex__data_bank_conflicts_pipe_lsu_mem_shared(_op_ld|_op_st)?\.sum$"),
    ("smem wavefronts", r"^l1tex__data_pipe_lsu_wavefronts_mem_shared(_op_ld|_op_st)?\.sum$"),
]


def read(path: str) -> pd.DataFrame:
    lines = [ln for ln in open(path).read().splitlines() if ln.startswith('"')]
    wide = pd.read_csv(io.StringIO("\n".join(lines)), header=0, skiprows=[1], dtype=str)
    long = wide.melt(id_vars=["ID", "Kernel Name"], var_name="metric", value_name="value")
    long["value"] = pd.to_numeric(long["value"].str.replace(",", ""), errors="coerce")
    return long.dropna(subset=["value"])


def report(path: str) -> str:
    df = read(path)
    out = []
    for (kid, name), g in df.groupby(["ID", "Kernel Name"]):
        out.append(f"== {name} (ID {kid})")
        vals = dict(zip(g["metric"], g["value"]))
        for label, pat in KEEP:
            hits = sorted(((m, v) for m, v in vals.items() if re.search(pat, m)),
                          key=lambda mv: -mv[1])
            if label in ("pipe %", "stall/issue"):
                hits = [(m, v) for m, v in hits if v >= (2.0 if label == "pipe %" else 0.1)]
            for m, v in hits:
                out.append(f"  {label:16s} {m:76s} {v:10.4g}")
    return "\n".join(out)


if __name__ == "__main__":
    print(report(sys.argv[1]))
