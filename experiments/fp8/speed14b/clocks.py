"""fa3's attention kernel timed while NVML samples the SM clock, the board power and the clock
event (throttle) reasons (issue 24, session 14): does the FP8 kernel run at the clock its
per-clock rates assume, and how far is it from the FP8 tensor peak at the clock it ran at?

    python3 experiments/fp8/speed14b/clocks.py OUT.csv [--rounds R] [--sustain S]
    python3 experiments/fp8/speed14b/clocks.py --summary OUT.csv

Points: the Plan of `iosim bench --schedule fa3` (batch 16384/N, heads 2048/d, non-causal) at fp8
(block scaling: experiments/fp8/speed14/variants.py's `base`) for d = 128 and 256, and bf16 at
d = 128 as the peer; each checked first on fresh NaN-poisoned data (iosim.gpu.bench.check).
Two phases, a sampler thread reading NVML every ~5 ms throughout:
  rounds:  R interleaved rounds, each point's attention kernel timed once by bench's Timer (L2
           flushed before each repetition, median; what variants.py and `iosim bench` report);
  sustain: each point's kernel launched back to back for S seconds (no flush), timed by CUDA
           events in windows of ~0.1 s: the clock it settles at under sustained load.
One row per timed segment: TFLOP/s, the median SM clock (MHz) and mean power (W) of the samples
inside it, the union of the clock event reasons seen (NVML bit names), TFLOP/s per GHz, and the
fraction of the dtype's tensor peak at the median clock (hwprofiles/: the per-SM rate x SMs x
clock). Plus a file OUT.samples.csv of every sample.
"""

from __future__ import annotations

import csv
import importlib.util
import sys
import threading
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))
spec = importlib.util.spec_from_file_location("v14", HERE.parent / "speed14" / "variants.py")
v14 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(v14)

POINTS = [("fp8", 128, 8192), ("fp8", 128, 16384), ("fp8", 256, 8192), ("fp8", 256, 16384),
          ("bf16", 128, 8192)]
COLUMNS = ["point", "dtype", "head_dim", "seqlen", "phase", "round", "ms", "tflops", "sm_mhz",
           "sm_mhz_min", "power_w", "reasons", "samples", "tflops_per_ghz", "peak_at_clock",
           "frac_peak", "status", "max_rel_err", "err_bound", "gpu_name"]


class Sampler(threading.Thread):
    """NVML every ~5 ms: (time, SM MHz, power W, clock event reasons bitmask)."""

    def __init__(self):
        super().__init__(daemon=True)
        import pynvml as nv

        self.nv = nv
        nv.nvmlInit()
        self.h = nv.nvmlDeviceGetHandleByIndex(0)
        self.rows: list[tuple[float, float, float, int]] = []
        self.stop = False
        get = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None)
        self.reasons = get or nv.nvmlDeviceGetCurrentClocksThrottleReasons
        # bit -> name from the module's constants
        self.names = {getattr(nv, a): a.split("Reason")[-1] for a in dir(nv)
                      if a.startswith(("nvmlClocksEventReason", "nvmlClocksThrottleReason"))
                      and isinstance(getattr(nv, a), int) and a[-3:] not in ("All", "one")
                      and bin(getattr(nv, a)).count("1") == 1}

    def run(self):
        nv, h = self.nv, self.h
        while not self.stop:
            t = time.perf_counter()
            mhz = nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)
            mw = nv.nvmlDeviceGetPowerUsage(h)
            r = self.reasons(h)
            self.rows.append((t, float(mhz), mw / 1000.0, int(r)))
            time.sleep(0.005)

    def window(self, t0: float, t1: float) -> dict:
        s = [r for r in self.rows if t0 <= r[0] <= t1]
        if not s:
            return {"samples": 0}
        bits = 0
        for r in s:
            bits |= r[3]
        names = "|".join(n for b, n in sorted(self.names.items()) if bits & b) or "none"
        return {"sm_mhz": float(np.median([r[1] for r in s])), "sm_mhz_min": min(r[1] for r in s),
                "power_w": float(np.mean([r[2] for r in s])), "reasons": names, "samples": len(s)}

    def limits(self) -> str:
        nv, h = self.nv, self.h
        out = []
        for name, f in [("power_limit_w", lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000),
                        ("max_sm_mhz", lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM)),
                        ("app_sm_mhz", lambda: nv.nvmlDeviceGetApplicationsClock(h, nv.NVML_CLOCK_SM)),
                        ("temp_c", lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU))]:
            try:
                out.append(f"{name}={f()}")
            except Exception as e:  # one NVML query this driver refuses keeps the others
                out.append(f"{name}=error:{type(e).__name__}")
        return " ".join(out)


def prepare(torch, bench, hw, point, seed):
    from iosim.core.problem import Problem
    from iosim.gpu.launch import Launcher
    from iosim.schedules import Tiles, plan

    dt, d, n = point
    if dt == "fp8":
        pl = v14.variant_plan(hw, d, n, "base")
    else:
        p = Problem(batch=16384 // n, heads=2048 // d, kv_heads=2048 // d, seqlen_q=n, seqlen_k=n,
                    head_dim=d, causal=False, dtype="bf16")
        pl = plan("fa3", p, hw, Tiles())
    k = pl.main
    got = bench.checked_inputs(torch, "fa3", pl.problem, seed, (k.block_m, k.block_n))
    if isinstance(got, dict):
        return None, pl, {"status": got["status"]}
    (q, kk, v), (ref, lse_ref), bound, _ = got
    launcher = Launcher(pl, q, kk, v)
    err, ok = bench.check(torch, launcher, ref, lse_ref, bound)
    return (launcher if ok else None), pl, {"status": "ok" if ok else "failed_check",
                                            "max_rel_err": err, "err_bound": bound}


def main(out: str, rounds: int, sustain: float) -> None:
    from iosim.core.hardware import load
    from iosim.gpu import bench

    torch = bench.require_gpu("clocks.py")
    gpu = torch.cuda.get_device_name(0)
    hw = load(bench.profile_for(gpu))
    per_clk = {"fp8": hw.tensor_flops_per_s["fp8_e4m3"] / hw.clock_hz,
               "bf16": hw.tensor_flops_per_s["bf16"] / hw.clock_hz}  # FLOP/s per Hz, whole GPU
    timer = bench.Timer(torch, hw.l2_bytes)
    smp = Sampler()
    print("nvml:", smp.limits(), flush=True)
    smp.start()
    f = open(out, "w", newline="")
    w = csv.DictWriter(f, COLUMNS)
    w.writeheader()

    def row(name, point, pl, phase, rnd, ms, t0, t1, extra):
        dt, d, n = point
        tf = pl.problem.fa_flops() / (ms * 1e-3) / 1e12
        win = smp.window(t0, t1)
        r = {"point": name, "dtype": dt, "head_dim": d, "seqlen": n, "phase": phase, "round": rnd,
             "ms": ms, "tflops": tf, "gpu_name": gpu, **extra, **win}
        if win.get("samples"):
            ghz = win["sm_mhz"] / 1e3
            r.update(tflops_per_ghz=tf / ghz, peak_at_clock=per_clk[dt] * ghz * 1e9 / 1e12,
                     frac_peak=tf / (per_clk[dt] * ghz * 1e9 / 1e12))
        w.writerow(r)
        f.flush()
        return r

    ready = []
    for i, pt in enumerate(POINTS):
        name = f"{pt[0]}_d{pt[1]}_{pt[2] // 1024}k"
        launcher, pl, info = prepare(torch, bench, hw, pt, 1400 + i)
        print(f"check {name:16s} {info['status']} err {info.get('max_rel_err', float('nan')):.3g}"
              f" / bound {info.get('err_bound', float('nan')):.3g}", flush=True)
        if launcher is None:
            w.writerow({"point": name, "status": info["status"], "gpu_name": gpu})
            continue
        ready.append((name, pt, pl, launcher, launcher.only(pl.main.name), info))
    for rnd in range(1, rounds + 1):
        for name, pt, pl, _, fn, info in ready if rnd % 2 else ready[::-1]:
            t0 = time.perf_counter()
            ms = timer(fn, budget_s=0.25)
            r = row(name, pt, pl, "rounds", rnd, ms, t0, time.perf_counter(), info)
            print(f"round {rnd} {name:16s} {r['tflops']:7.1f} TFLOP/s {r.get('sm_mhz', 0):6.0f} MHz "
                  f"{r.get('power_w', 0):5.0f} W {r.get('reasons', '')}", flush=True)
    for name, pt, pl, _, fn, info in ready:
        fn()
        torch.cuda.synchronize()
        end = time.perf_counter() + sustain
        win = 0
        while time.perf_counter() < end:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            t0 = time.perf_counter()
            a.record()
            reps = 0
            while time.perf_counter() - t0 < 0.1 or reps < 3:
                fn()
                reps += 1
                if reps % 16 == 0:
                    torch.cuda.current_stream().synchronize()  # queue no more than ~16 ahead
            b.record()
            b.synchronize()
            win += 1
            r = row(name, pt, pl, "sustain", win, a.elapsed_time(b) / reps, t0, time.perf_counter(), info)
        print(f"sustain {name:16s} last window {r['tflops']:7.1f} TFLOP/s {r.get('sm_mhz', 0):6.0f} MHz "
              f"{r.get('power_w', 0):5.0f} W {r.get('reasons', '')}", flush=True)
    smp.stop = True
    smp.join()
    f.close()
    with open(out.replace(".csv", "") + ".samples.csv", "w") as g:
        g.write("t,sm_mhz,power_w,reasons\n")
        for t, mhz, pw, rs in smp.rows:
            g.write(f"{t:.4f},{mhz:.0f},{pw:.1f},{rs}\n")
    print(summary(out))


def summary(path: str) -> str:
    import pandas as pd

    df = pd.read_csv(path)
    df = df[df.status == "ok"]
    g = df.groupby(["phase", "point"], sort=False)
    t = g[["dtype", "head_dim", "seqlen"]].first()
    for c in ("tflops", "sm_mhz", "power_w", "tflops_per_ghz", "peak_at_clock", "frac_peak"):
        t[c] = g[c].median()
    t["sm_mhz_min"] = g.sm_mhz_min.min()
    t["n"] = g.size()
    t["reasons"] = g.reasons.agg(lambda s: "|".join(sorted(set("|".join(s.dropna()).split("|")) - {""})))
    return t.round(3).to_string()


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["--summary"] and len(a) == 2:
        print(summary(a[1]))
    elif a and not a[0].startswith("-"):
        opts = dict(zip(a[1::2], a[2::2]))
        bad = set(opts) - {"--rounds", "--sustain"}
        if bad or len(a) % 2 == 0:
            sys.exit(f"error: unknown options {sorted(bad) or a}; allowed: --rounds R, --sustain S")
        main(a[0], int(opts.get("--rounds", 3)), float(opts.get("--sustain", 1.5)))
    else:
        sys.exit("error: usage: clocks.py OUT.csv [--rounds R] [--sustain S] | --summary OUT.csv")
