"""What binds each profiled kernel, from experiments/ncu_mechanism/ncu_mechanism.py's table, and whether the
model's `bound` names the same unit.

    python tools/ncu_summary.py experiments/ncu_mechanism/h100/ncu_mechanism.csv [--hw h100]

One line per (point, kernel): duration, SM clock, issue-slot use (share of the cycles in which
a sub-partition's scheduler issued), the busiest pipes (share of their peak while the SM was
active), achieved warps per scheduler, registers, and the top stall reasons (warps stalled per
issued instruction). Then per kernel: ncu's busiest unit beside the model's bound, and the warp
instructions ncu counted over those the model counts (`inst_ncu/model`).
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
# the model's units and levels, as Nsight Compute measures their busy share
BUSY = {"tensor": ["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"],
        "issue": ["smsp__issue_active.avg.pct_of_peak_sustained_active"],
        "hbm": ["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"],
        "l2": ["lts__throughput.avg.pct_of_peak_sustained_elapsed"],
        "sfu": ["sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active"],
        "alu": ["sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
                "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active"],
        # the LSU data pipe that ldmatrix and shared loads/stores go through (its wavefronts
        # also count global accesses: an upper bound on shared memory's busy share)
        "sram": ["l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed"]}


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


def agreement(path: str, hw_name: str = "h100") -> pd.DataFrame:
    """Per profiled kernel: ncu's busiest unit (largest busy share) beside the model's busiest
    unit, and the model's limiter (`bound`: what a 2x rate shortens most)."""
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    from iosim.core import hardware
    from iosim.core.problem import Problem
    from iosim.model import memory, timing
    from iosim.schedules import Tiles, plan

    hw = hardware.load(hw_name)
    df = pd.read_csv(path)
    keys = ["schedule", "batch", "heads", "seqlen", "head_dim", "causal", "Kernel Name"]
    rows = []
    if "direction" not in df:
        df["direction"] = "fwd"
    for (s, b, h, n, d, c, name, direction), g in df.groupby(keys + ["direction"], sort=False):
        m = g.groupby("metric")["value"].mean()
        busy = {u: max(m.get(x, 0.0) for x in names) for u, names in BUSY.items()}
        # these profiles predate fa1's splits: its forward and backward ran one CTA per head
        # (iosim.core.rows.measured_split_rows, measured_split_cols)
        t = Tiles(split_rows=int(n)) if (s, direction) == ("fa1", "fwd") else \
            Tiles(split_cols=int(n)) if (s, direction) == ("fa1", "bwd") else Tiles()
        pl = plan(s, Problem(batch=int(b), heads=int(h), seqlen_q=int(n), head_dim=int(d),
                             causal=bool(c), direction=direction), hw, t)
        i = next(i for i, k in enumerate(pl.kernels) if k.name == name)
        k = pl.kernels[i]
        kt = timing.predict(pl, hw, memory.estimate(pl, hw))[i]
        ncu = max(busy, key=busy.get)
        # warp instructions executed against the model's count (mma + other, iosim.timing, and
        # what the kernel's loop issues beyond them: KernelPlan.loop_issue, loop_shadow a trip)
        mma, other = timing.instructions(k.work.tensor_flops, k.work.alu_flops + k.work.exp_ops,
                                         k.traffic.sram, hw, k.overlap == "warpspecialized",
                                         k.inst_per_op)
        other += (k.loop_issue + k.loop_shadow) * float(k.trips.sum()) * k.ctas / len(k.trips)
        inst = m.get("smsp__inst_executed.sum", float("nan")) / (mma + other) if mma + other else float("nan")
        rows.append({"schedule": s, "N": n, "d": d, "causal": c, "kernel": name, "ncu_busiest": ncu,
                     "ncu_pct": busy[ncu], "model_busiest": kt.busiest,
                     "model_util_pct": 100 * kt.util, "agree": kt.busiest == ncu,
                     "model_bound": kt.bound, "inst_ncu/model": inst})
    return pd.DataFrame(rows)


def report(path: str, hw_name: str = "h100") -> str:
    """What the command prints (tools/update_readme.py puts it in the README)."""
    a = agreement(path, hw_name)
    with pd.option_context("display.width", 250, "display.max_colwidth", 80):
        return "\n".join([summary(path).round(1).to_string(index=False), "",
                          a.round(1).to_string(index=False),
                          f"model busiest = ncu busiest unit for {int(a.agree.sum())} of {len(a)} kernels"])


if __name__ == "__main__":
    print(report(sys.argv[1], sys.argv[3] if len(sys.argv) > 3 and sys.argv[2] == "--hw" else "h100"))
