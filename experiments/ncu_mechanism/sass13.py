"""fa1's backward under Nsight Compute, instruction classes and DRAM/L2 bytes: what
tools/fa1_sass.py counts from the SASS offline, measured.

On the GPU machine (after `. experiments/gpu_env.sh ncu_mechanism`):
    python3 experiments/ncu_mechanism/sass13.py OUTDIR
profiles fa1_bwd at POINTS once each with METRICS (those this ncu knows; `ncu --query-metrics`
filters them, so an unknown name drops out instead of failing the run), the per-opcode counts
as instance details; writes OUTDIR/ncu_sass13.csv (point, kernel, metric, value; an instanced
metric's instances as metric@instance) and each point's raw ncu output (ncu_<point>.txt).
"""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
import sys
from pathlib import Path

# (batch, heads, seqlen, head_dim, causal): the one-wave points of wave12 (d = 128, 256) and a
# DRAM-heavy multi-wave one (d = 256, two CTAs an SM's worth of heads)
POINTS = [(8, 16, 2048, 128, False), (16, 8, 1024, 256, False), (32, 8, 512, 256, False)]
METRICS = ["sass__inst_executed_per_opcode", "smsp__inst_executed.sum", "gpu__time_duration.sum",
           "dram__bytes_read.sum", "dram__bytes_write.sum",
           "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum",
           "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum", "lts__t_sectors_srcunit_tex_op_write.sum",
           "lts__t_sectors_srcunit_tex_op_red.sum", "lts__t_sectors_srcunit_tex_op_write_lookup_miss.sum",
           "lts__throughput.avg.pct_of_peak_sustained_elapsed",
           "dram__throughput.avg.pct_of_peak_sustained_elapsed",
           *(f"smsp__inst_executed_pipe_{p}.sum" for p in
             ("alu", "fma", "fmaheavy", "xu", "lsu", "adu", "cbu", "uniform", "tensor_op_hmma")),
           *(f"smsp__sass_inst_executed_op_{o}.sum" for o in
             ("global_ld", "global_st", "global_red", "shared_ld", "shared_st", "ldsm", "ldgsts",
              "branch")),
           "smsp__sass_thread_inst_executed_op_integer_pred_on.sum",
           "smsp__sass_thread_inst_executed_op_fp32_pred_on.sum"]


def known(names: list[str]) -> list[str]:
    """The names whose base metric this ncu lists for the GPU (sass__ ones: always kept)."""
    out = subprocess.run(["ncu", "--query-metrics", "--csv"], capture_output=True, text=True).stdout
    bases = set(re.findall(r'^"?([a-z0-9_]+)', out, re.M))
    if len(bases) < 100:  # no list (an older ncu, no GPU context): ask for them all
        return names
    return [m for m in names if m.startswith("sass__") or m.split(".")[0] in bases]


def profile(point: tuple, metrics: list[str], outdir: Path, **extra) -> list[dict]:
    """`extra`: more of iosim.gpu.once's arguments (prefetch14.py: split_cols)."""
    b, h, n, d, causal = point
    args = dict(schedule="fa1", hw="h100-sxm5-80gb", seed=1234, direction="bwd", batch=b, heads=h,
                kv_heads=h, seqlen_q=n, seqlen_k=n, head_dim=d, dtype="bf16", causal=causal, **extra)
    cmd = ["ncu", "--csv", "--page", "raw", "--print-units", "base", "--print-metric-instances",
           "details", "--metrics", ",".join(metrics), "--kernel-name", "regex:^fa1_bwd$",
           sys.executable, "-m", "iosim.gpu.once", json.dumps(args)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=200)
    name = "_".join(str(x) for x in point)
    (outdir / f"ncu_{name}.txt").write_text(out.stdout + "\n--- stderr\n" + out.stderr[-4000:])
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith('"')]
    if len(lines) < 3:
        raise RuntimeError(f"{point}: ncu gave no rows: {out.stderr.strip()[-400:]}")
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    head, data = rows[0], rows[2:]
    recs = []
    for r in data:
        for m, v in zip(head, r):
            if m in ("ID", "Kernel Name") or not v:
                continue
            for part in v.split(";"):  # instance details: "name: value" (or "(name) value")
                key, val = m, part.strip()
                got = re.match(r"^\(?([^():]+?)\)?[:\s]\s*([-0-9.,e+]+)$", val)
                if got and not re.fullmatch(r"[-0-9.,e+]+", val):
                    key, val = f"{m}@{got.group(1).strip()}", got.group(2)
                try:
                    x = float(val.replace(",", ""))
                except ValueError:
                    continue
                recs.append({"batch": b, "heads": h, "seqlen": n, "head_dim": d, "causal": causal,
                             "kernel": r[head.index("Kernel Name")], "metric": key, "value": x})
    return recs


def main(outdir: str) -> None:
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    metrics = known(METRICS)
    print("metrics:", ",".join(metrics), flush=True)
    recs: list[dict] = []
    for pt in POINTS:
        try:
            recs += profile(pt, metrics, out)
            print("ok", pt, flush=True)
        except Exception as e:  # one failing point keeps the others
            print("FAILED", pt, str(e)[:300], flush=True)
        with open(out / "ncu_sass13.csv", "w", newline="") as f:  # as it goes
            w = csv.DictWriter(f, ["batch", "heads", "seqlen", "head_dim", "causal", "kernel",
                                   "metric", "value"])
            w.writeheader()
            w.writerows(recs)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python3 experiments/ncu_mechanism/sass13.py OUTDIR")
    main(sys.argv[1])
