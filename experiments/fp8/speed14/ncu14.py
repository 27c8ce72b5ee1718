"""fa3's fp8 forward variants (experiments/fp8/speed14/variants.py) under Nsight Compute at the
GPU's own clocks (`--clock-control none`): what binds at d = 128.

On the GPU machine (after `. experiments/gpu_env.sh fp8/speed14`):
    python3 experiments/fp8/speed14/ncu14.py OUT.csv NAME [NAME ...]     (variants.py names)
    python3 experiments/fp8/speed14/ncu14.py --summary OUT.csv
Per variant one process under ncu: fresh N(0, 1) inputs (a seed a variant), the float32
reference, O and LSE NaN-poisoned, the variant's Plan launched once (the quantisation kernel,
fp8_quant, whose pass also writes V transposed, and the attention kernel are both profiled; ncu
replays each, restoring memory), then the outputs checked (a `check_*` metric). Sections: speed
of light, pipe utilisation (tensor, XU = MUFU, FMA, ALU), issue activity, warp stall reasons,
occupancy, shared-memory wavefronts and bank conflicts, plus the instruction counts per pipe.
One long table (variant, kernel, metric, value), written as it goes; --summary prints the
metrics that say what binds, a column per variant.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
SECTIONS = ["SpeedOfLight", "ComputeWorkloadAnalysis", "InstructionStats", "SchedulerStats",
            "WarpStateStats", "Occupancy", "LaunchStats", "MemoryWorkloadAnalysis_Tables"]
METRICS = ["sm__inst_executed_pipe_tensor_op_gmma.sum", "sm__inst_executed_pipe_xu.sum",
           "sm__inst_executed_pipe_fma.sum", "sm__inst_executed_pipe_alu.sum",
           "smsp__inst_executed.sum", "sm__cycles_elapsed.avg", "sm__cycles_active.avg",
           "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
           "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
           "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
           "smsp__cycles_active.avg", "smsp__issue_active.avg.pct_of_peak_sustained_active"]
KERNELS = "regex:^(fa3_fwd_fp8|fp8_quant)$"
# what --summary prints (a metric name, or its start for the stall reasons)
SHOW = ["gpu__time_duration.sum", "gpc__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",
        "smsp__issue_active.avg.pct_of_peak_sustained_active",
        "smsp__inst_executed.sum", "sm__inst_executed_pipe_xu.sum", "sm__inst_executed_pipe_fma.sum",
        "sm__inst_executed_pipe_alu.sum", "sm__inst_executed_pipe_tensor_op_gmma.sum",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum",
        "sm__warps_active.avg.pct_of_peak_sustained_active", "check_err", "check_bound", "check_ok"]
STALLS = "smsp__average_warps_issue_stalled_"


def variants():
    spec = __import__("importlib.util").util.spec_from_file_location("v14", HERE / "variants.py")
    m = __import__("importlib.util").util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def check_point(arg: str) -> None:
    """Fresh inputs, the reference, poisoned outputs, one launch of the Plan (ncu's), the check."""
    import torch

    from iosim.core.hardware import load
    from iosim.gpu.bench import check, checked_inputs
    from iosim.gpu.launch import Launcher

    a = json.loads(arg)
    m = variants()
    d, n, kind = m.v13.VARIANTS[a["name"]]
    pl = m.variant_plan(load(a["hw"]), d, n, kind)
    got = checked_inputs(torch, "fa3", pl.problem, a["seed"], (pl.main.block_m, pl.main.block_n))
    if isinstance(got, dict):
        print(f"check status={got['status']}", flush=True)
        return
    (q, k, v), (ref, lse_ref), bound, _ = got
    err, ok = check(torch, Launcher(pl, q, k, v), ref, lse_ref, bound)
    print(f"check err={err:.3e} bound={bound:.3e} ok={int(ok)}", flush=True)


def profile(name: str, hw: str, seed: int) -> pd.DataFrame:
    arg = json.dumps({"name": name, "hw": hw, "seed": seed})
    cmd = ["ncu", "--csv", "--page", "raw", "--print-units", "base", "--clock-control", "none",
           *[x for sec in SECTIONS for x in ("--section", sec)], "--metrics", ",".join(METRICS),
           "--kernel-name", KERNELS, "--launch-count", "2", sys.executable, __file__, "--point", arg]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=150)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith('"')]
    checks = [ln for ln in out.stdout.splitlines() if ln.startswith("check ")]
    if len(lines) < 3 or not checks:
        raise RuntimeError(f"{name}: ncu gave no rows or no check: {out.stdout[-300:]} "
                           f"{out.stderr.strip()[-400:]}")
    wide = pd.read_csv(io.StringIO("\n".join(lines)), header=0, skiprows=[1], dtype=str)
    long = wide.melt(id_vars=["ID", "Kernel Name"], var_name="metric", value_name="value")
    long["value"] = pd.to_numeric(long["value"].str.replace(",", ""), errors="coerce")
    long = long.dropna(subset=["value"])
    fields = dict(x.split("=") for x in checks[-1].split()[1:])
    if "ok" not in fields:
        raise RuntimeError(f"{name}: {checks[-1]}")
    extra = pd.DataFrame({"ID": -1, "Kernel Name": "fa3_fwd_fp8",
                          "metric": ["check_err", "check_bound", "check_ok"],
                          "value": [float(fields["err"]), float(fields["bound"]), float(fields["ok"])]})
    return pd.concat([long, extra]).assign(variant=name)


def summary(path: str) -> str:
    df = pd.read_csv(path)
    df = df[df["Kernel Name"].str.startswith("fa3_fwd_fp8")]
    keep = df.metric.isin(SHOW) | (df.metric.str.startswith(STALLS) & df.metric.str.endswith("_per_issue_active.ratio"))
    t = df[keep].pivot_table(index="metric", columns="variant", values="value", aggfunc="first", sort=False)
    t.index = [i.replace(STALLS, "stall ").replace("_per_issue_active.ratio", "") for i in t.index]
    t = t[(t != 0).any(axis=1)]  # stall reasons that never occurred left out
    quant = pd.read_csv(path).query("`Kernel Name` == 'fp8_quant' and metric == 'gpu__time_duration.sum'")
    q = quant.groupby("variant").value.first()
    fmt = lambda x: f"{x:.4g}"  # noqa: E731
    return (t.to_string(float_format=fmt) + "\nfp8_quant (quantisation, V transposed) gpu__time_duration.sum:\n"
            + q.to_string(float_format=fmt))


def main(path: str, names: list[str]) -> None:
    frames = []
    for i, name in enumerate(names):
        try:
            frames.append(profile(name, os.environ.get("HW", "h100-sxm5-80gb"), seed=1400 + i))  # fresh data a variant
            ok = frames[-1].query("metric == 'check_ok'").value.iloc[0]
            print("ok" if ok else "FAILED CHECK", name, flush=True)
        except Exception as e:  # one failing variant keeps the others
            print("FAILED", name, str(e)[:500], flush=True)
        if frames:
            pd.concat(frames).to_csv(path, index=False)  # as it goes: nothing measured is lost
    if frames:
        print(summary(path))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--point"]:
        check_point(sys.argv[2])
    elif sys.argv[1:2] == ["--summary"]:
        print(summary(sys.argv[2]))
    else:
        main(sys.argv[1], sys.argv[2:])
