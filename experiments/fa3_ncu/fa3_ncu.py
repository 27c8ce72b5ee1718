"""FlashAttention-3's forward (kernels/fa3.cu) as Nsight Compute sees it, at the GPU's own clocks.

On the GPU machine (after `. experiments/gpu_env.sh fa3_ncu`):
    python3 experiments/fa3_ncu/fa3_ncu.py OUT.csv
For each point below, one process under `ncu --clock-control none` (the clocks the bench runs
at): fresh N(0, 1) inputs (a new seed a point), the float32 reference, the outputs NaN-poisoned,
the Plan launched once; that launch is the one profiled (ncu replays it, restoring memory), and
its outputs are checked against the reference after it (a `check` line: the error, its bound,
ok). Sections: duration, speed of light, pipe utilisation (tensor/gmma, XU = MUFU, FMA, ALU),
issue activity, warp stall reasons, achieved occupancy, DRAM and L2 throughput, plus the pipes'
instruction counts. One long table (point, kernel, metric, value), written as it goes, with a
`check_*` metric per point; tools/fa3_ncu.py compares it with the model.

    python3 experiments/fa3_ncu/fa3_ncu.py --point JSON     (what ncu runs: check one point)
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pandas as pd

SECTIONS = ["SpeedOfLight", "ComputeWorkloadAnalysis", "InstructionStats", "SchedulerStats",
            "WarpStateStats", "Occupancy", "LaunchStats"]
# instruction counts of the pipes the model's units stand for (the sections give their
# percentages of peak only)
METRICS = ["sm__inst_executed_pipe_tensor_op_gmma.sum", "sm__inst_executed_pipe_xu.sum",
           "sm__inst_executed_pipe_fma.sum", "sm__inst_executed_pipe_alu.sum",
           "smsp__inst_executed.sum", "sm__cycles_elapsed.avg", "sm__cycles_active.avg"]
# (batch, heads, seqlen, head_dim, causal, dtype): the two regimes the model misses (d = 64 at
# long N predicted slow; N = 512 at batch 32 predicted fast), one of each head_dim at N = 4096,
# and fp8 at d = 64 (over-predicted too); most important first
POINTS = [
    (1, 32, 16384, 64, False, "bf16"), (32, 32, 512, 64, True, "bf16"),
    (32, 8, 512, 256, False, "bf16"), (32, 32, 512, 64, False, "bf16"),
    (4, 32, 4096, 64, False, "bf16"), (4, 16, 4096, 128, False, "bf16"),
    (4, 8, 4096, 256, False, "bf16"), (2, 32, 8192, 64, False, "fp8_e4m3"),
]
KERNEL = {"bf16": "fa3_fwd", "fp8_e4m3": "fa3_fwd_fp8"}


def check_point(arg: str) -> None:
    """Fresh inputs, the reference, poisoned outputs, one launch (ncu's), then the check."""
    import torch

    from iosim.core.hardware import load
    from iosim.core.problem import Problem
    from iosim.gpu.bench import check, checked_inputs
    from iosim.gpu.launch import Launcher
    from iosim.schedules import plan

    a = json.loads(arg)
    hw, seed = load(a.pop("hw")), a.pop("seed")
    p = Problem(**a)
    pl = plan("fa3", p, hw)
    got = checked_inputs(torch, "fa3", p, seed, (pl.main.block_m, pl.main.block_n))
    if isinstance(got, dict):
        print(f"check status={got['status']}", flush=True)
        return
    (q, k, v), (ref, lse_ref), bound, _ = got
    err, ok = check(torch, Launcher(pl, q, k, v), ref, lse_ref, bound)
    print(f"check err={err:.3e} bound={bound:.3e} ok={int(ok)}", flush=True)


def profile(point: tuple, seed: int) -> pd.DataFrame:
    b, h, n, d, causal, dtype = point
    args = dict(hw="h100-sxm5-80gb", seed=seed, direction="fwd", batch=b, heads=h, kv_heads=h,
                seqlen_q=n, seqlen_k=n, head_dim=d, dtype=dtype, causal=causal)
    cmd = ["ncu", "--csv", "--page", "raw", "--print-units", "base", "--clock-control", "none",
           *[x for sec in SECTIONS for x in ("--section", sec)], "--metrics", ",".join(METRICS),
           "--kernel-name", f"regex:^({KERNEL[dtype]})$", "--launch-count", "1",
           sys.executable, __file__, "--point", json.dumps(args)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith('"')]
    checks = [ln for ln in out.stdout.splitlines() if ln.startswith("check ")]
    if len(lines) < 3 or not checks:
        raise RuntimeError(f"{point}: ncu gave no rows or no check: {out.stdout[-300:]} "
                           f"{out.stderr.strip()[-400:]}")
    wide = pd.read_csv(io.StringIO("\n".join(lines)), header=0, skiprows=[1], dtype=str)
    long = wide.melt(id_vars=["ID", "Kernel Name"], var_name="metric", value_name="value")
    long["value"] = pd.to_numeric(long["value"].str.replace(",", ""), errors="coerce")
    long = long.dropna(subset=["value"])
    fields = dict(x.split("=") for x in checks[-1].split()[1:])
    if "ok" not in fields:
        raise RuntimeError(f"{point}: {checks[-1]}")
    extra = pd.DataFrame({"ID": 0, "Kernel Name": KERNEL[dtype],
                          "metric": ["check_err", "check_bound", "check_ok"],
                          "value": [float(fields["err"]), float(fields["bound"]),
                                    float(fields["ok"])]})
    return pd.concat([long, extra]).assign(batch=b, heads=h, seqlen=n, head_dim=d, causal=causal,
                                           dtype=dtype)


def main(path: str) -> None:
    frames = []
    for i, pt in enumerate(POINTS):
        try:
            frames.append(profile(pt, seed=2300 + i))  # fresh data a point
            ok = frames[-1].query("metric == 'check_ok'").value.iloc[0]
            print("ok" if ok else "FAILED CHECK", pt, flush=True)
        except Exception as e:  # one failing point keeps the others
            print("FAILED", pt, str(e)[:500], flush=True)
        if frames:
            pd.concat(frames).to_csv(path, index=False)  # as it goes: nothing measured is lost


if __name__ == "__main__":
    if sys.argv[1:2] == ["--point"]:
        check_point(sys.argv[2])
    else:
        main(sys.argv[1])
