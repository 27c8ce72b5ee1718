"""What binds our kernels: Nsight Compute's speed-of-light, pipe, issue and stall sections.

On the GPU machine (after `. experiments/gpu_env.sh ncu_mechanism`):
    python3 experiments/ncu_mechanism/ncu_mechanism.py OUT.csv [fwd|bwd|bwd_wave]
runs every point below (POINTS forward, POINTS_BWD backward, POINTS_BWD_WAVE fa1's one-wave
backward) once under `ncu --page raw` with the sections that say what binds a
kernel (SpeedOfLight, ComputeWorkloadAnalysis, InstructionStats, SchedulerStats,
WarpStateStats, Occupancy, LaunchStats) and writes one long table: point, kernel, metric,
value. docs/model.md cites what this table shows; tools/ncu_summary.py
summarises it (busiest pipe, issue-slot use, top stall reasons per kernel).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pandas as pd

SECTIONS = ["SpeedOfLight", "ComputeWorkloadAnalysis", "InstructionStats", "SchedulerStats",
            "WarpStateStats", "Occupancy", "LaunchStats"]
# (schedule, batch, heads, seqlen, head_dim, causal): the FA convention's large-N shapes and
# a few small ones, so that what binds is seen where each schedule spends its time.
POINTS = [
    ("fa2", 4, 32, 4096, 64, False), ("fa2", 4, 16, 4096, 128, False),
    ("fa2", 4, 8, 4096, 256, False), ("fa2", 4, 16, 4096, 128, True),
    ("fa2", 32, 16, 512, 128, False), ("fa1", 4, 16, 4096, 128, False),
    ("fa1", 32, 32, 512, 64, False), ("naive", 4, 16, 4096, 128, False),
    ("naive", 4, 32, 2048, 64, True),
]
# backward (direction bwd): the FA2 and FA1 backward's main kernels, where the time goes (FA1:
# as many CTAs as SMs and fewer)
POINTS_BWD = [("fa2", 2, 32, 8192, 64, False), ("fa2", 2, 16, 8192, 128, False),
              ("fa1", 4, 32, 4096, 64, False), ("fa1", 4, 16, 2048, 128, False),
              ("fa1", 4, 8, 4096, 256, False)]
# fa1's backward at about one wave of CTAs, one a head (dQacc read and written back every step,
# DRAM near its share), where the model over-predicts (session 12: tools/trip_terms.py)
POINTS_BWD_WAVE = [("fa1", 8, 16, 2048, 128, False), ("fa1", 16, 8, 1024, 256, False),
                   ("fa1", 8, 16, 2048, 128, True)]
KERNELS = {"naive": "naive_qk|naive_softmax|naive_pv", "fa1": "fa1_init|fa1_fwd", "fa2": "fa2_fwd"}
KERNELS_BWD = {"fa2": "fa2_bwd", "fa1": "fa1_bwd"}


def profile(point: tuple, direction: str = "fwd", sections=SECTIONS, names: str = "",
            options: tuple[str, ...] = ()) -> pd.DataFrame:
    """One point under ncu: `sections`, kernels matching `names` (default: the schedule's main
    kernels), more ncu `options` (e.g. --clock-control none)."""
    s, b, h, n, d, causal = point
    names = names or (KERNELS if direction == "fwd" else KERNELS_BWD)[s]
    args = dict(schedule=s, hw="h100-sxm5-80gb", seed=1234, direction=direction, batch=b, heads=h,
                kv_heads=h, seqlen_q=n, seqlen_k=n, head_dim=d, dtype="bf16", causal=causal)
    extra = [] if direction == "fwd" else [  # the backward's dQ goes through L2 atomics
        "--section", "MemoryWorkloadAnalysis",
        "--metrics", "lts__t_sectors_op_red.sum,lts__t_requests_op_red.sum,lts__t_sectors_op_atom.sum"]
    cmd = ["ncu", "--csv", "--page", "raw", "--print-units", "base", *options,
           *[a for sec in sections for a in ("--section", sec)], *extra,
           "--kernel-name", f"regex:^({names})$", sys.executable, "-m", "iosim.gpu.once",
           json.dumps(args)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith('"')]
    if len(lines) < 3:
        raise RuntimeError(f"{point}: ncu gave no rows: {out.stderr.strip()[-400:]}")
    wide = pd.read_csv(io.StringIO("\n".join(lines)), header=0, skiprows=[1], dtype=str)
    long = wide.melt(id_vars=["ID", "Kernel Name"], var_name="metric", value_name="value")
    long["value"] = pd.to_numeric(long["value"].str.replace(",", ""), errors="coerce")
    long = long.dropna(subset=["value"])
    return long.assign(schedule=s, batch=b, heads=h, seqlen=n, head_dim=d, causal=causal,
                       direction=direction)


def main(path: str, direction: str = "fwd") -> None:
    """`direction`: fwd (POINTS), bwd (POINTS_BWD) or bwd_wave (POINTS_BWD_WAVE)."""
    frames = []
    points = {"fwd": POINTS, "bwd": POINTS_BWD, "bwd_wave": POINTS_BWD_WAVE}[direction]
    for pt in points:
        try:
            frames.append(profile(pt, direction.removesuffix("_wave")))
            print("ok", pt, flush=True)
        except Exception as e:  # one failing point keeps the others
            print("FAILED", pt, str(e)[:300], flush=True)
        pd.concat(frames).to_csv(path, index=False)  # as it goes: nothing measured is lost


if __name__ == "__main__":
    main(sys.argv[1], *sys.argv[2:3])  # OUT.csv [fwd|bwd|bwd_wave]
