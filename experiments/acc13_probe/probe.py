"""acc13's one H100 call (issue 23): what the model needs to decide two things.

    python3 experiments/acc13_probe/probe.py time OUT.csv
        fa2 forward at d = 128 (the tune problems of experiments/tune_fa2 at N = 2048 and 8192):
        the tile configurations the model and the measurement disagree on, each checked once on
        NaN-poisoned fresh data against the float32 reference, then timed in ROUNDS interleaved
        rounds (one Timer median each, the L2 flushed before every repetition)
    python3 experiments/acc13_probe/probe.py ncu OUT.csv
        Nsight Compute (--clock-control none) on the same configurations at N = 2048 (the shared
        pipe, issue, tensor pipe, stalls), then on standard attention's backward at four small
        committed points of experiments/small_new (each kernel's duration and instructions)
    python3 experiments/acc13_probe/probe.py ncu_small OUT.csv
        small13's call: the same per-kernel metrics at small committed points of
        experiments/small_new beyond naive backward at d = 128: naive forward and backward at
        d = 64, naive forward at d = 128, fa2 and fa3 forward (each kernel's duration against
        its CTAs' busy time on their SMs: the launch and the kernel's edges)
    python3 experiments/acc13_probe/probe.py once JSON     (ncu's target: one run of one point)
"""

from __future__ import annotations

import io
import json
import subprocess
import sys

import pandas as pd

FA2 = [(128, 32, 4, 2), (256, 32, 8, 2), (128, 128, 8, 2), (128, 32, 4, 3)]
TUNE = [(8, 16, 2048), (2, 16, 8192)]  # (batch, heads, N) at d = 128, as experiments/tune_fa2
ROUNDS = 7
SMALL = [(1, 1, 256, 128), (1, 1, 512, 128), (1, 16, 512, 128), (3, 8, 384, 128)]
FA2_METRICS = ["gpu__time_duration.sum", "gpc__cycles_elapsed.max", "sm__cycles_active.avg",
               "smsp__inst_executed.sum", "sm__issue_active.avg.pct_of_peak_sustained_elapsed",
               "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
               "sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_elapsed",
               "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
               "l1tex__data_pipe_lsu_wavefronts.sum.pct_of_peak_sustained_elapsed",
               "l1tex__data_bank_reads.sum.pct_of_peak_sustained_elapsed",
               "l1tex__data_bank_writes.sum.pct_of_peak_sustained_elapsed",
               "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio",
               "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
               "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
               "launch__registers_per_thread", "launch__grid_size"]
NAIVE_METRICS = ["gpu__time_duration.sum", "gpc__cycles_elapsed.max", "sm__cycles_active.avg",
                 "smsp__inst_executed.sum", "sm__issue_active.avg.pct_of_peak_sustained_elapsed",
                 "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
                 "launch__grid_size"]


def problem(b, h, n, d, direction="fwd"):
    from iosim.core.problem import Problem
    return Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, direction=direction)


def time_fa2(out: str) -> None:
    from iosim.core.hardware import load
    from iosim.gpu.bench import Timer, check, error_bound, inputs, reference, require_gpu
    from iosim.gpu.launch import Launcher
    from iosim.schedules import Tiles, plan

    torch = require_gpu()
    hw = load("h100-sxm5-80gb")
    timer = Timer(torch, hw.l2_bytes)
    rows = []
    for i, (b, h, n) in enumerate(TUNE):
        p = problem(b, h, n, 128)
        q, k, v = inputs(torch, p, 4242 + i)
        ref, lse_ref, same, s_max = reference(torch, q, k, v, p)
        bound = error_bound("fa2", p, same, s_max)
        ls = {}
        for c in FA2:
            t = Tiles(block_m=c[0], block_n=c[1], warps=c[2], stages=c[3])
            la = Launcher(plan("fa2", p, hw, t, check=True), q, k, v)
            err, ok = check(torch, la, ref, lse_ref, bound)
            print("check", b, h, n, c, err, ok, flush=True)
            if ok:
                ls[c] = la
        for r in range(ROUNDS):
            for c, la in ls.items():
                rows.append(dict(batch=b, heads=h, seqlen_q=n, head_dim=128, block_m=c[0],
                                 block_n=c[1], warps=c[2], stages=c[3], round=r,
                                 time_ms=timer(la, budget_s=0.2)))
            pd.DataFrame(rows).to_csv(out, index=False)
        print(pd.DataFrame(rows).groupby(["seqlen_q", "block_m", "block_n", "warps", "stages"])
              .time_ms.median().to_string(), flush=True)
        del q, k, v, ref, ls
        torch.cuda.empty_cache()


def once(arg: str) -> None:
    from iosim.core.hardware import load
    from iosim.core.problem import Direction
    from iosim.gpu.bench import inputs, require_gpu
    from iosim.gpu.launch import Launcher
    from iosim.schedules import Tiles, plan

    a = json.loads(arg)
    torch = require_gpu()
    hw = load("h100-sxm5-80gb")
    p = problem(a["b"], a["h"], a["n"], a["d"], a["dir"])
    t = Tiles(**a.get("tiles", {}))
    q, k, v = inputs(torch, p, 7)
    if p.direction is Direction.bwd:
        from iosim.gpu.backward import BackwardLauncher, grad_output
        la = BackwardLauncher(plan(a["s"], p, hw, t), hw, q, k, v, grad_output(torch, p, 7))
    else:
        la = Launcher(plan(a["s"], p, hw, t, check=True), q, k, v)
    la.poison()
    la()
    torch.cuda.synchronize()


def ncu(point: dict, names: str, metrics: list[str]) -> pd.DataFrame:
    cmd = ["ncu", "--csv", "--print-units", "base", "--clock-control", "none",
           "--metrics", ",".join(metrics), "--kernel-name", f"regex:^({names})$",
           sys.executable, __file__, "once", json.dumps(point)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith('"')]
    if not lines:
        print("ncu gave no rows", point, r.stderr[-600:], flush=True)
        return pd.DataFrame()
    df = pd.read_csv(io.StringIO("\n".join(lines)))
    df["value"] = pd.to_numeric(df["Metric Value"].astype(str).str.replace(",", ""), errors="coerce")
    df = df[["ID", "Kernel Name", "Metric Name", "value"]]
    return df.assign(point=json.dumps(point))


def run_ncu(out: str) -> None:
    frames = []
    b, h, n = TUNE[0]
    for c in FA2[:3]:
        pt = dict(s="fa2", b=b, h=h, n=n, d=128, dir="fwd",
                  tiles=dict(block_m=c[0], block_n=c[1], warps=c[2], stages=c[3]))
        frames.append(ncu(pt, "fa2_fwd", FA2_METRICS))
        pd.concat(frames).to_csv(out, index=False)
        print("ok", pt, flush=True)
    for b, h, n, d in SMALL:
        pt = dict(s="naive", b=b, h=h, n=n, d=d, dir="bwd")
        frames.append(ncu(pt, "naive_bwd_[a-z]+", NAIVE_METRICS))
        pd.concat(frames).to_csv(out, index=False)
        print("ok", pt, flush=True)


# (schedule, direction, kernels, points (b, h, n, d)), most telling first
SMALL13 = [("naive", "bwd", "naive_bwd_[a-z]+", [(1, 1, 256, 64), (1, 4, 1024, 64)]),
           ("naive", "fwd", "naive_[a-z]+", [(1, 1, 256, 64), (1, 1, 1024, 128), (1, 16, 512, 64)]),
           ("fa2", "fwd", "fa2_fwd", [(1, 1, 256, 64), (1, 16, 1024, 128)]),
           ("fa3", "fwd", "fa3_fwd", [(1, 1, 256, 64), (1, 16, 1024, 128)])]


def run_ncu_small(out: str) -> None:
    frames = []
    for s, direction, names, points in SMALL13:
        for b, h, n, d in points:
            pt = dict(s=s, b=b, h=h, n=n, d=d, dir=direction)
            frames.append(ncu(pt, names, NAIVE_METRICS))
            pd.concat(frames).to_csv(out, index=False)
            print("ok", pt, flush=True)


if __name__ == "__main__":
    {"time": time_fa2, "ncu": run_ncu, "ncu_small": run_ncu_small,
     "once": once}[sys.argv[1]](sys.argv[2])
