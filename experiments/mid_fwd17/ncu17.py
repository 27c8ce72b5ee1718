"""Mid-size forward problems the cycle model predicts too fast (issue 23, session 17 `model17b`)
under Nsight Compute: per kernel its duration, its SMs' active cycles (least / mean / most: a
CTA alone on its SM against two), instructions, issue and stall reasons, pipe and memory
throughput, for the small block's worst fast rows (docs/results.md validate-small-queued):
naive forward at d = 128 and 256 (its GEMMs' few-CTA trips: B = 1 H = 1 N = 1024 runs naive_pv
as 8 CTAs of 16 trips) beside d = 64, and fa1 forward at d = 256 (144 CTAs: 12 SMs hold two,
the rest one) beside 36 CTAs (one an SM); fa1 at QB = 2 (d = 64 and 128).

On the GPU machine (after `. experiments/gpu_env.sh mid_fwd17`):
    python3 experiments/mid_fwd17/ncu17.py OUTDIR
profiles POINTS (most telling first; a timeout keeps the points done) with
experiments/ncu_mechanism/small15b.py's driver (WarpStateStats, LaunchStats, Occupancy; clocks
not locked) and METRICS, writes OUTDIR/ncu17.csv (small15b's columns) and each point's raw
output. Offline:
    python experiments/mid_fwd17/ncu17.py --summary CSV
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parents[1] / "ncu_mechanism"))
import small15b  # noqa: E402  (the driver: profile(point, metrics, outdir))

# (schedule, direction, batch, heads, seqlen, head_dim, causal); the model's error on the small
# block (session 16's profile) in the comment
POINTS = [("naive", "fwd", 1, 1, 1024, 128, False),   # -9.8%: naive_pv 8 CTAs x 16 trips
          ("fa1", "fwd", 3, 8, 384, 256, False),      # -8.7%: 144 CTAs, 12 SMs hold two (most/least)
          ("fa1", "fwd", 3, 8, 384, 256, True),       # -16.6%
          ("naive", "fwd", 3, 8, 768, 256, False),    # -13.8%
          ("fa1", "fwd", 3, 8, 768, 64, False),       # -10.7%: 144 CTAs of QB = 2, 12 SMs hold two
          ("fa1", "fwd", 3, 8, 768, 128, False),      # -12.7%: 72 CTAs (8 warps) of QB = 2
          ("naive", "fwd", 1, 1, 1024, 64, False),    # -4.1%
          ("naive", "fwd", 1, 16, 1024, 128, False),  # -12.0%
          ("fa1", "fwd", 3, 2, 384, 256, False),      # +8.5%: 36 CTAs, one an SM
          ("naive", "fwd", 1, 16, 1024, 64, False)]   # +0.5%
small15b.KERNELS.update({("naive", "fwd"): "naive_(qk|softmax|pv)"})
METRICS = small15b.METRICS + [
    "smsp__warps_launched.sum", "smsp__issue_active.sum", "smsp__cycles_active.max",
    "launch__grid_size", "launch__block_size", "launch__registers_per_thread",
    "launch__shared_mem_per_block", "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__t_bytes_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_global_op_st.sum",
    "smsp__inst_executed_op_ldgsts.sum", "smsp__inst_executed_op_global_ld.sum",
    "smsp__inst_executed_op_global_st.sum", "smsp__inst_executed_op_ldsm.sum",
    "sm__pipe_tensor_op_hmma_cycles_active.avg", "sm__inst_executed_pipe_lsu.avg.pct_of_peak_sustained_active"]


def main(outdir: str) -> None:
    small15b.main(outdir, POINTS, METRICS, "ncu17.csv")


def summary(path: str) -> str:
    lines = []
    for key, v, stalls in small15b.kernels(path):
        s, dr, b, h, n, hd, c, k = key
        ns = v.get("gpu__time_duration.sum", float("nan"))
        ghz = v.get("sm__cycles_elapsed.max", float("nan")) / ns
        top = sorted(stalls.items(), key=lambda kv: -kv[1])[:5]
        lines.append(
            f"{s} {dr} B={b} H={h} N={n} d={hd}{' causal' if c else ''} {k}: {ns / 1e3:.2f} us at "
            f"{ghz:.2f} GHz; SM active cycles {v.get('sm__cycles_active.min', 0):.0f}/"
            f"{v.get('sm__cycles_active.avg', 0):.0f}/{v.get('sm__cycles_active.max', 0):.0f} "
            f"(least/mean/most); CTAs {v.get('launch__grid_size', 0):.0f}, an SM "
            f"{v.get('sm__ctas_launched.min', 0):.0f}-{v.get('sm__ctas_launched.max', 0):.0f}; inst "
            f"{v.get('smsp__inst_executed.sum', 0):.0f}, issue active "
            f"{v.get('smsp__issue_active.avg.pct_of_peak_sustained_active', 0):.0f}%; HMMA cycles most "
            f"{v.get('sm__pipe_tensor_op_hmma_cycles_active.max', 0):.0f}; L1 "
            f"{v.get('l1tex__throughput.avg.pct_of_peak_sustained_active', 0):.0f}% L2 "
            f"{v.get('lts__throughput.avg.pct_of_peak_sustained_elapsed', 0):.0f}% DRAM "
            f"{v.get('dram__throughput.avg.pct_of_peak_sustained_elapsed', 0):.0f}%; stalls/issue: "
            + ", ".join(f"{m} {x:.2f}" for m, x in top))
    return "\n".join(lines)


if __name__ == "__main__":
    small15b.cli(main, summary, "usage: python3 experiments/mid_fwd17/ncu17.py OUTDIR | --summary CSV")
