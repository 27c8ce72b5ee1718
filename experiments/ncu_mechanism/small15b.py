"""Small problems under Nsight Compute: where the cycle model is still short on the small
and wave grids (docs/results.md's validate-small-queued, fa3-bwd-new-shapes), per-SM cycles
spread, waves, occupancy, issue and stall reasons, DRAM bytes.

On the GPU machine (after `. experiments/gpu_env.sh ncu_mechanism`):
    python3 experiments/ncu_mechanism/small15b.py OUTDIR
profiles POINTS once each (clocks not locked: as `iosim bench` timed them) with the
WarpStateStats, LaunchStats and Occupancy sections and METRICS (those this ncu knows), writes
OUTDIR/ncu_small15b.csv (schedule, direction, point, kernel, metric, value) and each point's raw
ncu output (ncu_<point>.txt). Most important first: a timeout keeps the points done.
    python experiments/ncu_mechanism/small15b.py --summary CSV
prints one line a point and kernel: duration, SM active cycles (least, mean, most over the
SMs), CTAs an SM (least, most), waves, issue-active share and the three largest stall reasons.
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from sass13 import known  # noqa: E402

# (schedule, direction, batch, heads, seqlen, head_dim, causal): the worst residuals of
# validate-small-queued (session 15): fa1 forward d = 64 slow / d = 128 fast; fa2 backward
# causal vs non-causal of one shape (one wave, unequal CTAs); fa2 forward's wave points; fa3
# backward d = 256 N = 1000
POINTS = [("fa1", "fwd", 1, 4, 256, 64, False), ("fa1", "fwd", 1, 16, 1024, 128, True),
          ("fa2", "bwd", 16, 1, 1024, 64, True), ("fa2", "bwd", 16, 1, 1024, 64, False),
          ("fa2", "fwd", 17, 1, 1024, 128, True), ("fa2", "fwd", 34, 1, 1024, 64, False),
          ("fa1", "fwd", 1, 16, 512, 128, False), ("fa1", "fwd", 1, 16, 1024, 64, False),
          ("fa2", "bwd", 16, 1, 1024, 128, True), ("fa2", "bwd", 16, 1, 1024, 128, False),
          ("fa2", "fwd", 34, 1, 512, 64, True), ("fa3", "bwd", 8, 6, 1000, 256, True)]
KERNELS = {("fa1", "fwd"): "fa1_init|fa1_fwd", ("fa2", "fwd"): "fa2_fwd",
           ("fa2", "bwd"): "fa2_bwd.*", ("fa3", "bwd"): "fa[23]_bwd.*"}
METRICS = ["gpu__time_duration.sum", "sm__cycles_elapsed.avg", "sm__cycles_elapsed.max",
           "sm__cycles_active.avg", "sm__cycles_active.min", "sm__cycles_active.max",
           "sm__cycles_active.sum", "smsp__cycles_active.avg", "sm__ctas_launched.sum",
           "sm__ctas_launched.max", "sm__ctas_launched.min", "smsp__inst_executed.sum",
           "smsp__inst_executed.max", "smsp__issue_active.avg.pct_of_peak_sustained_active",
           "sm__warps_active.avg.pct_of_peak_sustained_active", "launch__waves_per_multiprocessor",
           "dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
           "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
           "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
           "smsp__inst_executed_pipe_tensor_op_hmma.sum", "sm__pipe_tensor_op_hmma_cycles_active.max"]
SECTIONS = ["WarpStateStats", "LaunchStats", "Occupancy"]
FIELDS = ["schedule", "direction", "batch", "heads", "seqlen", "head_dim", "causal", "kernel",
          "metric", "value"]


def profile(point: tuple, metrics: list[str], outdir: Path, run: list[str] | None = None) -> list[dict]:
    """`run`: what python runs under ncu instead of the point's kernels (iosim.gpu.once)."""
    s, direction, b, h, n, d, causal = point
    args = dict(schedule=s, hw="h100-sxm5-80gb", seed=1234, direction=direction, batch=b, heads=h,
                kv_heads=h, seqlen_q=n, seqlen_k=n, head_dim=d, dtype="bf16", causal=causal)
    cmd = ["ncu", "--csv", "--page", "raw", "--print-units", "base", "--clock-control", "none",
           *[a for sec in SECTIONS for a in ("--section", sec)], "--metrics", ",".join(metrics),
           "--kernel-name", f"regex:^({KERNELS[s, direction]})$", sys.executable,
           *(run or ["-m", "iosim.gpu.once", json.dumps(args)])]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    name = "_".join(str(x) for x in point)
    (outdir / f"ncu_{name}.txt").write_text(out.stdout + "\n--- stderr\n" + out.stderr[-4000:])
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith('"')]
    if len(lines) < 3:
        raise RuntimeError(f"{point}: ncu gave no rows: {out.stderr.strip()[-400:]}")
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    head, recs = rows[0], []
    for r in rows[2:]:
        for m, v in zip(head, r):
            try:
                x = float(v.replace(",", ""))
            except ValueError:
                continue
            if m not in ("ID", "Process ID"):
                recs.append(dict(zip(FIELDS, [*point, r[head.index("Kernel Name")], m, x])))
    return recs


def main(outdir: str, points=None, metrics=None, csv_name: str = "ncu_small15b.csv",
         runner=lambda pt: None) -> None:
    """Profile each point (default POINTS with METRICS), one failing point keeping the others,
    the CSV rewritten as it goes; `runner(point)`: the script ncu runs for it (None: bench's)."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    metrics = known(METRICS if metrics is None else metrics)
    print("metrics:", ",".join(metrics), flush=True)
    recs: list[dict] = []
    for pt in POINTS if points is None else points:
        try:
            recs += profile(pt, metrics, out, runner(pt))
            print("ok", pt, flush=True)
        except Exception as e:  # one failing point keeps the others
            print("FAILED", pt, str(e)[:300], flush=True)
        with open(out / csv_name, "w", newline="") as f:  # as it goes
            w = csv.DictWriter(f, FIELDS)
            w.writeheader()
            w.writerows(recs)


def cli(main, summary, usage: str) -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--summary":
        print(summary(sys.argv[2]))
    elif len(sys.argv) == 2:
        main(sys.argv[1])
    else:
        sys.exit(usage)


STALL = "smsp__average_warps_issue_stalled_"


def kernels(path: str):
    """Each profiled kernel of an ncu CSV made by main(): its point and kernel name (FIELDS[:8]),
    its metrics by name, and its stall reasons per issue by short name (STALL's)."""
    import pandas as pd

    for key, g in pd.read_csv(path).groupby(FIELDS[:8], sort=False):
        v = dict(zip(g.metric, g.value))
        stalls = {m[len(STALL):].removesuffix("_per_issue_active.ratio"): x for m, x in v.items()
                  if m.startswith(STALL) and m.endswith("_per_issue_active.ratio")}
        yield key, v, stalls


def summary(path: str) -> str:
    lines = []
    for key, v, stalls in kernels(path):
        top = sorted(stalls.items(), key=lambda kv: -kv[1])[:3]
        s, dr, b, h, n, hd, c, k = key
        lines.append(
            f"{s} {dr} B={b} H={h} N={n} d={hd}{' causal' if c else ''} {k}: "
            f"{v.get('gpu__time_duration.sum', float('nan')) / 1e3:.1f} us, SM active cycles "
            f"{v.get('sm__cycles_active.min', 0):.0f}/{v.get('sm__cycles_active.avg', 0):.0f}/"
            f"{v.get('sm__cycles_active.max', 0):.0f} (least/mean/most), CTAs an SM "
            f"{v.get('sm__ctas_launched.min', 0):.0f}-{v.get('sm__ctas_launched.max', 0):.0f} of "
            f"{v.get('launch__grid_size', 0):.0f}, waves {v.get('launch__waves_per_multiprocessor', 0):.2f}, "
            f"issue active {v.get('smsp__issue_active.avg.pct_of_peak_sustained_active', 0):.0f}%, "
            f"stalls/issue: " + ", ".join(f"{m} {x:.2f}" for m, x in top))
    return "\n".join(lines)


if __name__ == "__main__":
    cli(main, summary, "usage: python3 experiments/ncu_mechanism/small15b.py OUTDIR | --summary CSV")
