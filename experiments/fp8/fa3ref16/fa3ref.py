"""FlashAttention-3's FP8 forward (Dao-AILab/flash-attention hopper/, built by build.sh into
build/libfa3ref.so) beside kernels/fa3.cu's (the Plan of `iosim bench --schedule fa3 --dtype
fp8_e4m3`), in one process on one GPU (issue 24, session 16): is the FA3 paper's ~1000 TFLOP/s
at d = 128 reachable on this machine?

    python3 experiments/fp8/fa3ref16/fa3ref.py OUT_DIR [--libs NAME=SO,...] [--shapes d128c0,d128c1] [--rounds R]
    python3 experiments/fp8/fa3ref16/fa3ref.py --ncu OUT_DIR --libs NAME=SO,... --points KERNEL:N:CAUSAL,...  (d = 128)
    python3 experiments/fp8/fa3ref16/fa3ref.py --summary OUT_DIR
    python3 experiments/fp8/fa3ref16/fa3ref.py --fit OUT_DIR ...    (ncu cycles a tile against key blocks)

Problems: the issue's grid (batch 16384/N, heads 2048/d, N = 4096, 8192, 16384). Ours: block
scaling, the Plan's kernels; `ours` times its attention kernel alone (quantisation and V's
transpose done before, by its fp8_quant kernel), `ours_plan` the whole Plan. FA3: Q, K, V
quantised here (torch) to e4m3 with one scale per (batch, head), V row-major (FA3 transposes it
inside its kernel), O bf16; each FA3 library named in --libs (`fa3`: built with nvcc 13.0,
`fa3p128`: with ptxas 12.8, build.sh) times its one kernel (run_flash_fwd: for causal also a
4-byte memset of its tile counter).

Steps, all writing into OUT_DIR:
- small.csv: fresh N(0, 1) inputs at N = 512 (batch 2, heads 4), both kernels, O and LSE
  NaN-poisoned first: max |O - ref|, max |O - ref| / max |ref| against the float32 reference of
  the bf16 inputs (`ref`) and of FA3's own dequantised fp8 inputs (`deq`: FA3's arithmetic alone).
- rounds.csv: each shape checked first on fresh data (bench's reference and bound), then R rounds,
  each timing every (shape, kernel) once (bench's Timer: L2 flushed before each repetition,
  median), in order in odd rounds and reversed in even ones; wall-clock start and end of each.
- sustained.csv: per (shape, kernel) back-to-back launches for SUSTAIN_S seconds (no flush), the
  mean time a launch: the board at its steady clock and power. Start and end times: the clocks
  and power (smi.csv, nvidia-smi every 100 ms, started by run.sh) are joined by --summary.
"""

from __future__ import annotations

import csv
import ctypes
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from iosim.core.hardware import load  # noqa: E402
from iosim.core.problem import Problem  # noqa: E402
from iosim.schedules import plan  # noqa: E402

HERE = Path(__file__).resolve().parent
SEQLENS = (4096, 8192, 16384)
E4M3_MAX = 448.0
SUSTAIN_S = 1.0


def problem(d: int, n: int, causal: bool, batch: int | None = None, heads: int | None = None) -> Problem:
    b, h = batch or 16384 // n, heads or 2048 // d
    return Problem(batch=b, heads=h, kv_heads=h, seqlen_q=n, seqlen_k=n, head_dim=d,
                   causal=causal, dtype="fp8_e4m3", fp8_scaling="block")


def parse_shape(s: str) -> tuple[int, bool]:
    """'d128c1' -> (128, True)"""
    d, c = s[1:].split("c")
    return int(d), c == "1"


class Fa3:
    """FA3's forward on (b, s, h, d) e4m3 copies of bench's (b, h, s, d) bf16 inputs (V (b, h, d, s)
    where the library entry is V column-major: `lib` is load_lib's (CDLL, vcol))."""

    def __init__(self, torch, lib, p: Problem, q, k, v):
        self.torch, self.p = torch, p
        lib, self.vcol = lib
        self.fn = getattr(lib, f"fa3ref_fwd_d{p.head_dim}_c{int(p.causal)}_v{int(self.vcol)}")
        self.fn.restype = ctypes.c_int
        self.fn.argtypes = [ctypes.c_void_p] * 5 + [ctypes.c_int] * 5 + [ctypes.c_float] \
            + [ctypes.c_void_p] * 4 + [ctypes.c_int, ctypes.c_void_p]
        self.q8, self.qs = self.quant(q)
        self.k8, self.ks = self.quant(k)
        self.v8, self.vs = self.quant(v.transpose(2, 3) if self.vcol else v)
        if self.vcol:  # quant's (b, d, h, s) -> (b, h, d, s)
            self.v8 = self.v8.transpose(1, 2).contiguous()
        b, h, n, d = q.shape
        self.o = torch.empty(b, n, h, d, dtype=torch.bfloat16, device="cuda")
        self.lse = torch.empty(b, h, n, dtype=torch.float32, device="cuda")
        self.sem = torch.zeros(1, dtype=torch.int32, device="cuda")
        self.num_sm = torch.cuda.get_device_properties(0).multi_processor_count

    def quant(self, x):
        """(b, h, s, d) -> (b, s, h, d) e4m3 and its (b, h) float32 descale (amax / 448)."""
        torch = self.torch
        scale = (x.float().abs().amax(dim=(2, 3)) / E4M3_MAX).clamp_min(1e-12)
        x8 = (x.float() / scale[:, :, None, None]).transpose(1, 2).contiguous().to(torch.float8_e4m3fn)
        return x8, scale.contiguous()

    def dequant(self, x8, s):
        """(b, s, h, d) e4m3 -> (b, h, s, d) float32."""
        return x8.float().transpose(1, 2) * s[:, :, None, None]

    def __call__(self) -> None:
        p = self.p
        rc = self.fn(self.q8.data_ptr(), self.k8.data_ptr(), self.v8.data_ptr(), self.o.data_ptr(),
                     self.lse.data_ptr(), p.batch, p.seqlen_q, p.seqlen_k, p.heads, p.kv_heads,
                     p.scale, self.qs.data_ptr(), self.ks.data_ptr(), self.vs.data_ptr(),
                     self.sem.data_ptr(), self.num_sm, self.torch.cuda.current_stream().cuda_stream)
        if rc:
            raise RuntimeError(f"fa3ref launch returned CUDA error {rc}")

    def poison(self) -> None:
        self.o.fill_(float("nan"))
        self.lse.fill_(float("nan"))

    def outputs(self) -> dict:
        return {"O": self.o.transpose(1, 2), "LSE": self.lse}


def load_lib(spec: str):
    """'PATH' or 'PATH:vcol' (the column-major V entries) -> (CDLL, vcol)."""
    path, _, kind = str(spec).partition(":")
    return ctypes.CDLL(path), kind == "vcol"


def check(torch, bench, runner, ref, lse_ref) -> tuple[float, float]:
    """(O's and LSE's error by bench's measures) after one run on NaN-poisoned outputs."""
    runner.poison()
    runner()
    torch.cuda.synchronize()
    out = runner.outputs()
    return bench.rel_err(torch, out["O"], ref), bench.lse_err(torch, out["LSE"], lse_ref)


def ours(p: Problem, hw, q, k, v):
    from iosim.gpu.launch import Launcher

    return Launcher(plan("fa3", p, hw), q, k, v)


def small(torch, bench, libs: dict, hw, out: Path, shapes) -> None:
    """Both kernels at N = 512 (batch 2, heads 4) against float32 references."""
    rows = []
    for i, (d, causal) in enumerate(shapes):
        p = problem(d, 512, causal, batch=2, heads=4)
        q, k, v = bench.inputs(torch, p, 100 + i)
        ref, lse_ref, _ = bench.reference_chunks(torch, q, k, v, p)
        fa3s = {name: Fa3(torch, lib, p, q, k, v) for name, lib in libs.items()}
        fa3 = next(f for f in fa3s.values() if not f.vcol)  # its dequantised inputs: `deq`
        deq = [fa3.dequant(x8, s) for x8, s in ((fa3.q8, fa3.qs), (fa3.k8, fa3.ks), (fa3.v8, fa3.vs))]
        ref_deq, lse_deq, _ = bench.reference_chunks(torch, *deq, p)
        ln = ours(p, hw, q, k, v)
        for name, runner in (*fa3s.items(), ("ours", ln)):
            runner.poison()
            runner()
            torch.cuda.synchronize()
            o = runner.outputs()
            r = {"kernel": name, "head_dim": d, "causal": causal, "seqlen": 512, "batch": 2, "heads": 4,
                 "nan": int(torch.isnan(o["O"]).any().item() or torch.isnan(o["LSE"]).any().item()),
                 "max_abs_err_ref": (o["O"].float() - ref).abs().max().item(),
                 "rel_err_ref": bench.rel_err(torch, o["O"], ref),
                 "lse_err_ref": bench.lse_err(torch, o["LSE"], lse_ref)}
            if name in fa3s:
                r |= {"max_abs_err_deq": (o["O"].float() - ref_deq).abs().max().item(),
                      "rel_err_deq": bench.rel_err(torch, o["O"], ref_deq),
                      "lse_err_deq": bench.lse_err(torch, o["LSE"], lse_deq)}
            rows.append(r)
            print("small", " ".join(f"{a}={b:.3g}" if isinstance(b, float) else f"{a}={b}"
                                    for a, b in r.items()), flush=True)
    write(out / "small.csv", rows)


def write(path: Path, rows: list[dict]) -> None:
    cols = list(dict.fromkeys(c for r in rows for c in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, cols)
        w.writeheader()
        w.writerows(rows)


def prepare(torch, bench, libs: dict, hw, shapes) -> list[tuple]:
    """Per (shape, N): fresh inputs, both kernels checked (bench's reference and bound)."""
    from iosim.gpu.launch import Launcher

    ready = []
    for i, (d, causal) in enumerate(shapes):
        for n in SEQLENS:
            p = problem(d, n, causal)
            pl = plan("fa3", p, hw)
            got = bench.checked_inputs(torch, "fa3", p, 3000 + 10 * i + n // 4096,
                                       (pl.main.block_m, pl.main.block_n))
            (q, k, v), (ref, lse_ref), bound, _ = got
            ln = Launcher(pl, q, k, v)
            base = {"head_dim": d, "causal": causal, "seqlen": n, "batch": p.batch, "heads": p.heads,
                    "flops": p.fa_flops(), "err_bound": bound}
            e_o, e_l = check(torch, bench, ln, ref, lse_ref)
            ok_ours = max(e_o, e_l) <= bound
            print(f"check d={d} causal={causal} N={n}: ours O {e_o:.3g} LSE {e_l:.3g}; "
                  f"bound {bound:.3g}", flush=True)
            ready.append((base | {"kernel": "ours", "err_o": e_o, "err_lse": e_l, "ok": ok_ours},
                          ln.only(ln.plan.main.name), ln))
            ready.append((base | {"kernel": "ours_plan", "err_o": e_o, "err_lse": e_l, "ok": ok_ours},
                          ln, ln))
            # FA3 is a peer: timed whatever its error (said in the row); its quantisation is
            # per (batch, head), coarser than ours, so bench's bound is not its own
            for name, lib in libs.items():
                fa3 = Fa3(torch, lib, p, q, k, v)
                f_o, f_l = check(torch, bench, fa3, ref, lse_ref)
                print(f"check d={d} causal={causal} N={n}: {name} O {f_o:.3g} LSE {f_l:.3g}", flush=True)
                ready.append((base | {"kernel": name, "err_o": f_o, "err_lse": f_l,
                                      "ok": max(f_o, f_l) <= bound}, fa3, fa3))
            del ref, lse_ref
    return ready


def main(out: Path, libs: dict, shapes, rounds: int) -> None:
    from iosim.gpu import bench

    torch = bench.require_gpu("fa3ref.py")
    gpu = torch.cuda.get_device_name(0)
    hw = load(bench.profile_for(gpu))
    libs = {name: load_lib(path) for name, path in libs.items()}
    out.mkdir(parents=True, exist_ok=True)
    small(torch, bench, libs, hw, out, shapes)
    ready = prepare(torch, bench, libs, hw, shapes)
    timer = bench.Timer(torch, hw.l2_bytes)
    rows = []
    for rnd in range(1, rounds + 1):
        for r, fn, _ in ready if rnd % 2 else ready[::-1]:
            t0 = time.time()
            ms = timer(fn, budget_s=0.25)
            rows.append(r | {"round": rnd, "ms": ms, "tflops": r["flops"] / (ms * 1e-3) / 1e12,
                             "t0": t0, "t1": time.time(), "gpu_name": gpu})
        write(out / "rounds.csv", rows)
        print(f"round {rnd} done", flush=True)
    srows = []
    for r, fn, _ in ready:
        if r["kernel"] == "ours_plan":
            continue
        fn()
        torch.cuda.synchronize()
        t0 = time.time()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        launches = 0
        while time.time() - t0 < SUSTAIN_S:
            for _ in range(8):
                fn()
            launches += 8
            if launches % 64 == 0:  # keep the queue short: the loop's end is near its time
                torch.cuda.current_stream().synchronize()
        b.record()
        b.synchronize()
        ms = a.elapsed_time(b) / launches
        srows.append(r | {"launches": launches, "ms": ms, "tflops": r["flops"] / (ms * 1e-3) / 1e12,
                          "t0": t0, "t1": time.time(), "gpu_name": gpu})
        print(f"sustained {r['kernel']:5s} d={r['head_dim']} causal={r['causal']} N={r['seqlen']}: "
              f"{srows[-1]['tflops']:.0f} TFLOP/s", flush=True)
    write(out / "sustained.csv", srows)
    print(summary(out))


def ncu_point(arg: str) -> None:
    """One problem, one kernel launched once after a warm-up (ncu profiles the last launch)."""
    import torch

    from iosim.gpu import bench

    a = json.loads(arg)
    p = problem(a["d"], a["n"], a["causal"])
    hw = load(bench.profile_for(torch.cuda.get_device_name(0)))
    q, k, v = bench.inputs(torch, p, 4000)
    if a["kernel"] == "fa3":
        fn = Fa3(torch, load_lib(a["lib"]), p, q, k, v)
    else:
        ln = ours(p, hw, q, k, v)
        ln()
        fn = ln.only(ln.plan.main.name)
    fn()
    fn()
    torch.cuda.synchronize()
    print("ncu point done", a, flush=True)


SECTIONS = ["SpeedOfLight", "ComputeWorkloadAnalysis", "SchedulerStats", "WarpStateStats",
            "Occupancy", "LaunchStats"]
METRICS = ["sm__inst_executed_pipe_tensor_op_gmma.sum", "sm__inst_executed_pipe_xu.sum",
           "sm__inst_executed_pipe_fma.sum", "sm__inst_executed_pipe_alu.sum",
           "smsp__inst_executed.sum", "sm__cycles_elapsed.avg", "sm__cycles_active.avg",
           "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
           "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_elapsed",
           "smsp__issue_active.avg.pct_of_peak_sustained_active",
           "sm__throughput.avg.pct_of_peak_sustained_elapsed",
           "gpc__cycles_elapsed.avg.per_second", "dram__throughput.avg.pct_of_peak_sustained_elapsed"]
# (the two sm__pipe_tensor_op_gmma_cycles_active metrics do not exist in this ncu: no values come back;
# the tensor pipe's cycles are sm__pipe_tensor_cycles_active, from the ComputeWorkloadAnalysis section)
# what the summary shows (a metric, or the stall reasons' start)
SHOW = ["gpu__time_duration.sum", "gpc__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", "sm__cycles_active.avg",
        "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active",
        "smsp__issue_active.avg.pct_of_peak_sustained_active", "smsp__inst_executed.sum",
        "sm__inst_executed_pipe_tensor_op_gmma.sum", "sm__inst_executed_pipe_xu.sum",
        "sm__inst_executed_pipe_fma.sum", "sm__inst_executed_pipe_alu.sum",
        "dram__throughput.avg.pct_of_peak_sustained_elapsed", "launch__grid_size",
        "launch__registers_per_thread", "sm__warps_active.avg.pct_of_peak_sustained_active"]
STALLS = "smsp__average_warps_issue_stalled_"


def ncu(out: Path, libs: dict, points: list[tuple[str, int, bool]], d: int = 128,
        timeout: int = 100) -> None:
    """Each (kernel: ours or a --libs name, N, causal) point in its own process under ncu at the
    GPU's own clocks, its second launch profiled; one long table (kernel, seqlen, causal, metric,
    value) in ncu.csv."""
    import io
    import subprocess

    import pandas as pd

    frames = []
    for name, n, causal in points:
        arg = json.dumps({"kernel": name, "lib": libs.get(name), "d": d, "n": n, "causal": causal})
        regex = "regex:^fa3_fwd_fp8$" if name == "ours" else "regex:device_kernel"
        cmd = ["ncu", "--csv", "--page", "raw", "--print-units", "base", "--clock-control", "none",
               *[x for sec in SECTIONS for x in ("--section", sec)], "--metrics", ",".join(METRICS),
               "--kernel-name", regex, "--launch-skip", "1", "--launch-count", "1",
               sys.executable, __file__, "--ncu-point", arg]
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            print(f"ncu {name} N={n} causal={causal}: timed out after {timeout} s", flush=True)
            continue
        rows = [ln for ln in res.stdout.splitlines() if ln.startswith('"')]
        if len(rows) < 3:
            print(f"ncu {name} N={n} causal={causal}: no rows: {res.stdout[-300:]} {res.stderr[-400:]}",
                  flush=True)
            continue
        wide = pd.read_csv(io.StringIO("\n".join(rows)), header=0, skiprows=[1], dtype=str)
        long = wide.melt(id_vars=["ID", "Kernel Name"], var_name="metric", value_name="value")
        long["value"] = pd.to_numeric(long["value"].str.replace(",", ""), errors="coerce")
        frames.append(long.dropna(subset=["value"]).assign(kernel=name, head_dim=d, seqlen=n, causal=causal))
        pd.concat(frames).to_csv(out / "ncu.csv", index=False)
        print(f"ncu {name} N={n} causal={causal}: {len(frames[-1])} metrics", flush=True)


def ncu_summary(path: Path) -> str:
    import pandas as pd

    df = pd.read_csv(path)
    keep = df.metric.isin(SHOW) | (df.metric.str.startswith(STALLS)
                                   & df.metric.str.endswith("_per_issue_active.ratio"))
    if "causal" not in df:  # call c1: d = 128, N = 8192, non-causal only
        df["causal"] = False
    cols = ["seqlen", "causal", "kernel"]
    t = df[keep].pivot_table(index="metric", columns=cols, values="value", aggfunc="first", sort=False)
    t.index = [i.replace(STALLS, "stall ").replace("_per_issue_active.ratio", "") for i in t.index]
    t = t[(t.abs() > 0.005).any(axis=1)]  # stall reasons that never occurred left out
    return t.to_string(float_format=lambda x: f"{x:.4g}")


# FA3's key tile for e4m3 with V row-major (hopper/tile_size.h, tile_size_fwd_sm90, element size 1)
FA3_BLOCK_N = {64: 160, 128: 224, 256: 128}


def fit(dirs: list[str]) -> str:
    """Per kernel, an SM's active cycles a tile (ncu's sm__cycles_active.avg x SMs / tiles) at two
    or more N (non-causal ncu points of the folders given), fitted as `fixed + per_block x key
    blocks` (least squares; with two N the line through both): the main loop's cycles a key and
    what a tile costs besides (its prologue, epilogue, the CTA's start)."""
    import numpy as np
    import pandas as pd

    frames = [pd.read_csv(Path(d) / "ncu.csv").assign(folder=Path(d).name) for d in dirs]
    # call c1's points (no causal column) are all non-causal
    df = pd.concat(f if "causal" in f else f.assign(causal=False) for f in frames)
    df = df[~df.causal.astype(bool) & df.kernel.isin(["ours", "fa3"])]
    hw = load("h100-sxm5-80gb")
    rows = []
    for (kernel, n), g in df.groupby(["kernel", "seqlen"]):
        m = g.set_index("metric").value
        p = problem(128, int(n), False)
        tiles = p.batch * p.heads * -(-p.seqlen_q // 128)
        bn = plan("fa3", p, hw).main.block_n if kernel == "ours" else FA3_BLOCK_N[128]
        blocks = -(-p.seqlen_k // bn)
        per_tile = m["sm__cycles_active.avg"] * m["device__attribute_multiprocessor_count"] / tiles
        rows.append({"kernel": kernel, "seqlen": int(n), "folder": g.folder.iloc[0], "block_n": bn,
                     "key_blocks": blocks, "tiles": tiles, "active_cycles_per_tile": per_tile})
    t = pd.DataFrame(rows)
    out = [t.to_string(index=False, float_format=lambda x: f"{x:.0f}")]
    # the last key block is partial where block_n does not divide N (4096 = 21 x 192 + 64, 18 x
    # 224 + 64): counted whole (as launched), or at its share of keys (N / block_n)
    for kernel, g in t.groupby("kernel"):
        for how, x in (("whole", g.key_blocks), ("share", g.seqlen / g.block_n)):
            slope, fixed = np.polyfit(x, g.active_cycles_per_tile, 1)
            out.append(f"{kernel}, last block {how}: {slope:.0f} cycles a key block of "
                       f"{g.block_n.iloc[0]} ({slope / g.block_n.iloc[0]:.2f} a key), {fixed:.0f} "
                       f"cycles a tile besides (from N = {', '.join(map(str, g.seqlen))})")
    return "\n".join(out)


def smi_frame(path: Path):
    """nvidia-smi's CSV (timestamp, clocks.sm, power.draw, ...) with epoch seconds."""
    import pandas as pd

    df = pd.read_csv(path, skipinitialspace=True)
    df.columns = [c.split(" [")[0].strip() for c in df.columns]
    df["t"] = pd.to_datetime(df["timestamp"], format="%Y/%m/%d %H:%M:%S.%f").map(
        lambda x: time.mktime(x.timetuple()) + x.microsecond / 1e6)
    for c in df.columns:
        if c not in ("timestamp", "t", "clocks_event_reasons.active") and df[c].dtype == object:
            df[c] = pd.to_numeric(df[c].astype(str).str.split().str[0], errors="coerce")
    # nvidia-smi names clocks.sm `clocks.current.sm` in its header (some versions)
    sm = next(c for c in df.columns if c.startswith("clocks") and c.endswith(".sm"))
    return df.rename(columns={sm: "sm_clock", "power.draw": "power"})


def with_clocks(df, smi):
    """Median SM clock, power and samples of smi inside each row's [t0, t1]."""
    import numpy as np

    med = {"sm_mhz": [], "power_w": [], "samples": []}
    for t0, t1 in zip(df.t0, df.t1):
        s = smi[(smi.t >= t0) & (smi.t <= t1)]
        med["sm_mhz"].append(float(np.median(s["sm_clock"])) if len(s) else float("nan"))
        med["power_w"].append(float(np.median(s["power"])) if len(s) else float("nan"))
        med["samples"].append(len(s))
    return df.assign(**med)


def summary(out: Path) -> str:
    import pandas as pd

    out = Path(out)
    lines = []
    smi = smi_frame(out / "smi.csv") if (out / "smi.csv").exists() else None
    if (out / "small.csv").exists():
        s = pd.read_csv(out / "small.csv")
        lines.append("small problems (N = 512, batch 2, heads 4), errors against float32 references:")
        lines.append(s.to_string(index=False, float_format=lambda x: f"{x:.3g}"))
    if (out / "rounds.csv").exists():
        r = pd.read_csv(out / "rounds.csv")
        key = ["head_dim", "causal", "seqlen"]
        med = r.pivot_table(index=key, columns="kernel", values="tflops", aggfunc="median")
        ratio = r.pivot_table(index=key + ["round"], columns="kernel", values="tflops")
        for name in sorted(k for k in r.kernel.unique() if k.startswith("fa3")):
            med[f"{name}/ours"] = (ratio[name] / ratio["ours"]).groupby(level=key).median()
        if smi is not None:
            c = with_clocks(r, smi).pivot_table(index=key, columns="kernel", values="sm_mhz", aggfunc="median")
            med = med.join(c.add_suffix(" MHz"))
        lines.append(f"\nTFLOP/s, median of {r['round'].max()} interleaved rounds (L2 flushed before "
                     "each repetition); fa3*/ours: median per-round ratio; err/ok from the check:")
        lines.append(med.to_string(float_format=lambda x: f"{x:.3f}" if x < 10 else f"{x:.0f}"))
        first = r[(r["round"] == 1) & (r.kernel != "ours_plan")]  # ours_plan: ours's check
        chk = first.pivot_table(index=key, columns="kernel", values=["err_o", "err_lse"])
        chk.columns = [f"{k} {e}" for e, k in chk.columns]
        chk["bound"] = first.groupby(key).err_bound.first()
        chk["all ok"] = first.groupby(key).ok.all()
        lines.append("check on fresh data (O's and LSE's error, bench's measures and bound):")
        lines.append(chk.to_string(float_format=lambda x: f"{x:.3g}"))
    if (out / "ncu.csv").exists():
        lines.append("\nncu (d = 128; --clock-control none; the second launch of a process):")
        lines.append(ncu_summary(out / "ncu.csv"))
    if (out / "sustained.csv").exists():
        s = pd.read_csv(out / "sustained.csv")
        if smi is not None:
            s = with_clocks(s, smi)
        cols = [c for c in ("head_dim", "causal", "seqlen", "kernel", "launches", "tflops", "sm_mhz",
                            "power_w", "samples") if c in s]
        lines.append(f"\nsustained: back-to-back launches for {SUSTAIN_S:g} s; SM clock and power: "
                     "medians of nvidia-smi's 100 ms samples in that window:")
        lines.append(s[cols].to_string(index=False, float_format=lambda x: f"{x:.0f}"))
    return "\n".join(lines)


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["--ncu-point"]:
        ncu_point(a[1])
    elif a[:1] == ["--ncu"]:  # --ncu OUT_DIR --libs NAME=SO,... --points KERNEL:N:CAUSAL,...
        opts = dict(zip(a[2::2], a[3::2]))
        libs = dict(x.split("=", 1) for x in opts.get("--libs", "").split(",") if x)
        points = [(k, int(n), c == "1") for k, n, c in
                  (x.split(":") for x in opts.get("--points", "ours:8192:0").split(","))]
        ncu(Path(a[1]), libs, points)
        print(ncu_summary(Path(a[1]) / "ncu.csv"))
    elif a[:1] == ["--fit"]:
        print(fit(a[1:]))
    elif a[:1] == ["--summary"]:
        print(summary(Path(a[1])))
    else:
        opts = {"--libs": f"fa3={HERE / 'build' / 'nvcc13' / 'libfa3ref.so'}", "--shapes": "d128c0",
                "--rounds": "5"}
        pos = []
        it = iter(a)
        for x in it:
            if x in opts:
                opts[x] = next(it)
            else:
                pos.append(x)
        if len(pos) != 1:
            sys.exit("error: usage: fa3ref.py OUT_DIR [--libs NAME=SO,...] [--shapes d128c0,d128c1] [--rounds R]")
        libs = dict(x.split("=", 1) for x in opts["--libs"].split(","))
        main(Path(pos[0]), libs, [parse_shape(s) for s in opts["--shapes"].split(",")],
             int(opts["--rounds"]))
