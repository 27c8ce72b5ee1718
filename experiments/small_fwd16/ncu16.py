"""The fixed cost of a kernel at tiny sizes under Nsight Compute (issue 23, session 16): how long
each kernel lasts beyond its busiest SM's active cycles, and what its CTAs wait on at their
start (instruction fetch: `no_instruction`, constants: `imc_miss`) and end (`drain`: stores
leaving the SM, `membar`), for the kernels whose small-problem rows the cycle model fits with a
launch overhead (4.68 us) that seems to hold ~2 us of CTA busy time it does not describe.

On the GPU machine (after `. experiments/gpu_env.sh small_fwd16`):
    python3 experiments/small_fwd16/ncu16.py OUTDIR
profiles POINTS with experiments/ncu_mechanism/small15b.py's driver (its sections: WarpStateStats,
LaunchStats, Occupancy; clocks not locked) and METRICS (those this ncu knows), most telling first
(one CTA a kernel where the grid allows), writes OUTDIR/ncu16.csv (small15b's columns) and each
point's raw ncu output. Offline:
    python experiments/small_fwd16/ncu16.py --summary CSV
prints per point and kernel: duration, the SM clock over it, the busiest SM's active time and what
the kernel lasts beyond it, CTAs, warps, instructions and the stalls a warp spends at its start
and end.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "ncu_mechanism"))
import small15b  # noqa: E402  (the driver: profile(point, metrics, outdir))

# (schedule, direction, batch, heads, seqlen, head_dim, causal): kernels with no work
# (null_kernel.py: what a launch costs beyond its SM time by itself), N = 128 d = 64 (one CTA in
# fa2/fa3/naive's GEMMs, two in fa1's), then the same kernels with 8 trips a CTA (N = 1024,
# fa2, fa1), then the small block's B = 1 H = 4 N = 256 (as small15b's first point) for naive
POINTS = [("null", "fwd", 1, 1, 0, 0, False), ("fa1", "fwd", 1, 1, 128, 64, False),
          ("fa2", "fwd", 1, 1, 128, 64, False), ("naive", "fwd", 1, 1, 128, 64, False),
          ("fa3", "fwd", 1, 1, 128, 64, False),
          ("naive", "bwd", 1, 1, 128, 64, False), ("fa2", "bwd", 1, 1, 128, 64, False),
          ("fa2", "fwd", 1, 1, 1024, 64, False), ("fa1", "fwd", 1, 1, 1024, 64, False),
          ("naive", "fwd", 1, 4, 256, 64, False)]
# kernels a point's run profiles (a backward runs its forward first: not profiled)
small15b.KERNELS.update({("null", "fwd"): "null_.*", ("fa3", "fwd"): "fa3_fwd",
                         ("naive", "fwd"): "naive_(qk|softmax|pv)", ("naive", "bwd"): "naive_bwd_.*",
                         ("fa2", "bwd"): "fa2_bwd.*"})
# small15b's, and what tells a kernel's span from its SMs' (the GPC/system clocks over the
# launch), warps launched, issue-active cycles in all (stall ratios x this = warp-cycles)
METRICS = small15b.METRICS + [
    "gpc__cycles_elapsed.max", "sys__cycles_elapsed.max", "gpu__cycles_elapsed.max",
    "smsp__warps_launched.sum", "smsp__issue_active.sum", "smsp__cycles_active.max",
    "sm__warps_active.sum", "smsp__inst_executed_op_global_st.sum",
    "smsp__inst_executed_op_global_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum",
    "launch__grid_size", "launch__block_size", "launch__registers_per_thread",
    "launch__shared_mem_per_block"]


def main(outdir: str) -> None:
    null = [str(Path(__file__).with_name("null_kernel.py"))]
    small15b.main(outdir, POINTS, METRICS, "ncu16.csv", lambda pt: null if pt[0] == "null" else None)


def summary(path: str) -> str:
    lines = []
    for key, v, stall in small15b.kernels(path):
        s, dr, b, h, n, hd, c, k = key
        ns = v.get("gpu__time_duration.sum", float("nan"))
        ghz = v.get("sm__cycles_elapsed.max", float("nan")) / ns  # the SM clock over the launch
        busy = v.get("sm__cycles_active.max", float("nan")) / ghz / 1e3
        edge = ", ".join(f"{m} {stall.get(m, 0):.2f}" for m in ("no_instruction", "imc_miss",
                                                                 "drain", "membar"))
        lines.append(
            f"{s} {dr} B={b} H={h} N={n} d={hd}{' causal' if c else ''} {k}: "
            f"{ns / 1e3:.2f} us at {ghz:.2f} GHz, busiest SM {busy:.2f} us "
            f"({v.get('sm__cycles_active.max', 0):.0f} cycles), beyond it {ns / 1e3 - busy:.2f} us; "
            f"CTAs {v.get('launch__grid_size', 0):.0f} (an SM {v.get('sm__ctas_launched.max', 0):.0f}), "
            f"warps {v.get('smsp__warps_launched.sum', 0):.0f}, inst {v.get('smsp__inst_executed.sum', 0):.0f}, "
            f"issue active {v.get('smsp__issue_active.avg.pct_of_peak_sustained_active', 0):.0f}%; "
            f"stalls/issue at the edges: {edge}")
    return "\n".join(lines)


if __name__ == "__main__":
    small15b.cli(main, summary, "usage: python3 experiments/small_fwd16/ncu16.py OUTDIR | --summary CSV")
