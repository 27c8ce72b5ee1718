"""Why a paged decode step measures slower in the bench grid than in pages_probe.py, and what
the decode kernel leaves to cuDNN at batch 32: A/B probes in one process, one GPU.

`pages`: at batch 1 (KV 128k, 32k) and batch 8 (32k), the contiguous cache and pages of 16
(two caches, each its own random page order and allocation), 64 and 256 tokens, each checked
once (NaN-poisoned outputs, fresh data), then timed as the bench times them (iosim.gpu.bench.
Timer, L2 flushed by a read) with the launches issued (`nq`, the bench's time_ms) and queued
ahead (`q`, its time_queued_ms), nq again, in three GPU states: `cold` (the host idle 1 s
first), `hot` (1.5 s of 1 GiB copies first: what the batch-32 rows before a batch-1 row leave)
and `steady` (right after). Each timing records the SM clock, power and clock-event reasons
NVML reported while it ran (sampled every 2 ms), and each case the host's cost of one launch.

`b32`: batch 32 at KV 4k, 32k, 128k (contiguous): the Plan's kernel beside variants (the K/V
loads' L2 prefetch size and evict-first policy, a 2-stage ring, 2 splits) and torch's cuDNN and
flash backends, in three interleaved rounds, issued and queued.

    python3 experiments/decode/state_probe.py pages OUT.csv
    python3 experiments/decode/state_probe.py b32 OUT.csv
    python3 experiments/decode/state_probe.py confirm OUT.csv   (the Plan's defaults, later)
    python3 experiments/decode/state_probe.py alloc OUT.csv
    python3 experiments/decode/state_probe.py alloc_ab OUT.csv

`alloc`: batch 1, KV 128k, 16- and 64-token pages: is the batch-1 paged step slower after a
batch-32 point because of the GPU's state or because of where its cache lies? The same kernel
on one cache allocated on its own (`own`), on caches placed at the start of one larger
allocation (`in_<GiB>`: as the bench's pool of grid11 and torch's caching allocator after a
batch-32 point place it), with its pages scattered over a 16 GiB pool (`spread16`, as a
serving engine's pool scatters them), the contiguous cache at the start of a 16 GiB allocation
(`contig_in16`), and `own` again after a batch-32 paged point ran (`own_after32`, allocated
before it) and allocated after it (`own_new_after32`). Each checked (NaN-poisoned outputs),
then timed issued and queued, in two rounds.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import sys
import threading
import time

import pandas as pd

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.gpu import bench
from iosim.gpu.compile import compile_kernel
from iosim.gpu.launch import Launcher
from iosim.schedules import Tiles, plan


class Nvml:
    """SM clock (MHz), power (W) and clock-event reasons of GPU 0, sampled every 2 ms."""

    def __init__(self):
        self.samples: list[tuple[float, int, int, int]] = []
        try:
            self.nv = ctypes.CDLL("libnvidia-ml.so.1")
            self.nv.nvmlInit_v2()
            self.h = ctypes.c_void_p()
            self.nv.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(self.h))
        except OSError:
            self.nv = None
            return
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self):
        clk, mw, why = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong()
        reasons = getattr(self.nv, "nvmlDeviceGetCurrentClocksEventReasons", None) \
            or self.nv.nvmlDeviceGetCurrentClocksThrottleReasons
        while True:
            self.nv.nvmlDeviceGetClockInfo(self.h, 1, ctypes.byref(clk))  # NVML_CLOCK_SM
            self.nv.nvmlDeviceGetPowerUsage(self.h, ctypes.byref(mw))
            reasons(self.h, ctypes.byref(why))
            self.samples.append((time.perf_counter(), clk.value, mw.value, why.value))
            time.sleep(0.002)

    def during(self, t0: float, t1: float) -> dict:
        xs = [s for s in list(self.samples) if t0 <= s[0] <= t1]
        if not xs:
            return {"sm_mhz": math.nan, "power_w": math.nan, "reasons": ""}
        why = 0
        for s in xs:
            why |= s[3]
        return {"sm_mhz": sum(s[1] for s in xs) / len(xs),
                "sm_mhz_min": min(s[1] for s in xs),
                "power_w": sum(s[2] for s in xs) / len(xs) / 1e3, "reasons": hex(why)}


def ours(torch, hw, base, q, k, v, ps=None, tiles=Tiles(), extra=None) -> Launcher:
    """The Plan's kernel on `base` (pages of `ps` tokens, random order), `extra` defines on top."""
    pl = plan("decode", base.model_copy(update={"page_size": ps}), hw, tiles)
    lz = Launcher(pl, q, k, v)
    if extra:
        kp = pl.main
        lz.kernels = [(kp, compile_kernel(kp.source, kp.name, {**kp.defines, **extra}, "bf16"))]
    return lz


def launch_us(torch, fn, n: int = 50) -> float:
    """Host microseconds of one call of fn (n queued, not synchronised in between)."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def timed(timer, fn, nvml: Nvml) -> tuple[float, dict]:
    t0 = time.perf_counter()
    ms = timer(fn)
    return ms, nvml.during(t0, time.perf_counter())


def _setup():
    """torch, this GPU's profile, NVML, the issued and queued timers (after a read flush), and
    the copy bandwidth measured now."""
    torch = bench.require_gpu()
    hw = load(bench.profile_for(torch.cuda.get_device_name()))
    qd = bench.Timer(torch, hw.l2_bytes, lead_cycles=bench.QUEUE_AHEAD_CYCLES, flush="read")
    return (torch, hw, Nvml(), bench.Timer(torch, hw.l2_bytes, flush="read"), qd,
            bench.copy_bandwidth(torch, qd))


def pages(out: str) -> None:
    torch, hw, nvml, nq, qd, bw = _setup()
    x = torch.empty(1 << 29, dtype=torch.float16, device="cuda")
    y = torch.empty_like(x)

    def heat(s: float) -> None:
        t = time.perf_counter()
        while time.perf_counter() - t < s:
            for _ in range(20):
                y.copy_(x)
            torch.cuda.synchronize()

    rows = []
    for b, nk in [(1, 131072), (1, 32768), (8, 32768)]:
        base = Problem(batch=b, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=nk, head_dim=128,
                       dtype="bf16", causal=False)
        q, k, v = bench.inputs(torch, base, seed=int.from_bytes(os.urandom(4), "little"))
        ref, lse_ref, same, s_max = bench.reference(torch, q, k, v, base)
        bound = bench.error_bound("decode", base, same, s_max)
        cases = {"contiguous": ours(torch, hw, base, q, k, v), "p16a": ours(torch, hw, base, q, k, v, 16),
                 "p16b": ours(torch, hw, base, q, k, v, 16), "p64": ours(torch, hw, base, q, k, v, 64),
                 "p256": ours(torch, hw, base, q, k, v, 256)}
        ok = {}
        for name, lz in cases.items():
            err, ok[name] = bench.check(torch, lz, ref, lse_ref, bound)
            print(f"check B={b} Nk={nk} {name}: err {err:.2e} bound {bound:.2e} {'ok' if ok[name] else 'FAILED'}",
                  flush=True)
        host = {name: launch_us(torch, lz) for name, lz in cases.items()}
        for state in ("cold", "hot", "steady"):
            if state == "cold":
                torch.cuda.synchronize()
                time.sleep(1.0)
            elif state == "hot":
                heat(1.5)
            for name, lz in cases.items():
                if not ok[name]:
                    continue
                for i, (mode, timer) in enumerate((("nq", nq), ("q", qd), ("nq", nq))):
                    ms, env = timed(timer, lz, nvml)
                    rows.append(dict(gpu=torch.cuda.get_device_name(), batch=b, seqlen_k=nk,
                                     case=name, page_size=lz.plan.problem.page_size,
                                     splits=lz.plan.main.defines["NUM_SPLITS"], state=state,
                                     mode=mode, rep=i, ms=ms, launch_host_us=host[name],
                                     bw_over_copy=bench.kv_bytes(base) / (ms * 1e-3) / bw,
                                     copy_bw=bw, t=time.perf_counter(), **env))
            sub = pd.DataFrame([r for r in rows if r["batch"] == b and r["seqlen_k"] == nk
                                and r["state"] == state])
            print(sub.pivot_table(index="case", columns=["mode", "rep"], values="ms").round(4)
                  .to_string(), "\n  SM MHz", sub.sm_mhz.min().round(0), "-",
                  sub.sm_mhz.max().round(0), "W", sub.power_w.max().round(0),
                  "reasons", sorted(set(sub.reasons)), flush=True)
        del cases, q, k, v, ref
        torch.cuda.empty_cache()
    pd.DataFrame(rows).to_csv(out, index=False)


# the K/V loads' L2 hints (kernels/decode.cu: KV_PREFETCH, KV_EVICT_FIRST) given explicitly, so
# that a variant names the same kernel whatever the defaults are
PLAIN = {"KV_PREFETCH": 0, "KV_EVICT_FIRST": 0}
VARIANTS = {"base": (Tiles(), PLAIN), "pf128": (Tiles(), {**PLAIN, "KV_PREFETCH": 128}),
            "pf256": (Tiles(), {**PLAIN, "KV_PREFETCH": 256}),
            "evict_first": (Tiles(), {**PLAIN, "KV_EVICT_FIRST": 1}),
            "pf256_ef": (Tiles(), {"KV_PREFETCH": 256, "KV_EVICT_FIRST": 1}),
            "stages2": (Tiles(stages=2), PLAIN), "splits2": (Tiles(kv_splits=2), PLAIN)}
# the second call: the kernel as the Plan runs it (its defaults: pf256_ef) beside the plain one
CONFIRM = {"plain": (Tiles(), PLAIN), "default": (Tiles(), None),
           "stages2": (Tiles(stages=2), None),
           # at batch 1 only: 8 splits, 64 CTAs, one an SM: the SM's own DRAM stream rate
           "plain_s8": (Tiles(kv_splits=8), PLAIN), "default_s8": (Tiles(kv_splits=8), None)}


def b32(out: str, variants: dict = VARIANTS, shapes=((32, 4096), (32, 131072), (32, 32768)),
        rounds: int = 3) -> None:
    torch, hw, nvml, nq, qd, bw = _setup()
    rows = []
    for b, nk in shapes:
        base = Problem(batch=b, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=nk, head_dim=128,
                       dtype="bf16", causal=False)
        q, k, v = bench.inputs(torch, base, seed=int.from_bytes(os.urandom(4), "little"))
        ref, lse_ref, same, s_max = bench.reference(torch, q, k, v, base)
        bound = bench.error_bound("decode", base, same, s_max)
        fns = {}
        for name, (tiles, extra) in variants.items():
            if name.endswith("_s8") and b > 1:
                continue
            lz = ours(torch, hw, base, q, k, v, None, tiles, extra)
            err, ok = bench.check(torch, lz, ref, lse_ref, bound)
            print(f"check B={b} Nk={nk} {name}: err {err:.2e} bound {bound:.2e} {'ok' if ok else 'FAILED'}",
                  flush=True)
            if ok:
                fns[name] = lz
        for peer, backend in (("torch_cudnn", "CUDNN_ATTENTION"), ("torch_flash", "FLASH_ATTENTION")):
            o = bench.sdpa(torch, q, k, v, base, backend)
            err = bench.rel_err(torch, o, ref)
            print(f"check B={b} Nk={nk} {peer}: err {err:.2e}", flush=True)
            if err <= bound:
                fns[peer] = functools.partial(bench.sdpa, torch, q, k, v, base, backend)
        del ref
        for rnd in range(rounds):
            for name, fn in fns.items():
                for mode, timer in (("q", qd), ("nq", nq)):
                    ms, env = timed(timer, fn, nvml)
                    rows.append(dict(gpu=torch.cuda.get_device_name(), batch=b, seqlen_k=nk,
                                     case=name, round=rnd, mode=mode, ms=ms,
                                     bw_over_copy=bench.kv_bytes(base) / (ms * 1e-3) / bw,
                                     copy_bw=bw, **env))
        sub = pd.DataFrame([r for r in rows if r["seqlen_k"] == nk and r["batch"] == b])
        print(sub.pivot_table(index="case", columns=["mode", "round"], values="ms").round(4)
              .to_string(), flush=True)
        del fns, q, k, v
        torch.cuda.empty_cache()
    pd.DataFrame(rows).to_csv(out, index=False)


def confirm(out: str) -> None:
    """The Plan's kernel (its L2 hints) beside the plain one, a 2-stage ring and torch, at
    batch 1 (32k, 128k) and 32 (32k, 128k): three interleaved rounds."""
    b32(out, CONFIRM, ((32, 32768), (32, 131072), (1, 32768), (1, 131072)))


GiB = 1 << 30


def batch1(torch):
    """The batch-1 decode step at 128k keys (32/8 heads, d = 128, bf16): the problem, fresh
    inputs, their reference O and LSE, and the error bound."""
    base = Problem(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=131072, head_dim=128,
                   dtype="bf16", causal=False)
    q, k, v = bench.inputs(torch, base, seed=int.from_bytes(os.urandom(4), "little"))
    ref, lse_ref, same, s_max = bench.reference(torch, q, k, v, base)
    return base, q, k, v, ref, lse_ref, bench.error_bound("decode", base, same, s_max)


def batch32_paged(torch, hw, base: Problem):
    """The heavy point the grid puts before a batch-1 one: `base` at batch 32 on 16-token pages,
    fresh inputs, checked once (NaN-poisoned outputs): (launcher, error, passed)."""
    b32p = Problem(**{**base.model_dump(), "batch": 32})
    q, k, v = bench.inputs(torch, b32p, seed=int.from_bytes(os.urandom(4), "little"))
    ref, lse, same, s_max = bench.reference(torch, q, k, v, b32p)
    big = ours(torch, hw, b32p, q, k, v, 16)
    err, ok = bench.check(torch, big, ref, lse, bench.error_bound("decode", b32p, same, s_max))
    print(f"check b32_p16: err {err:.2e} {'ok' if ok else 'FAILED'}", flush=True)
    return big, err, ok


def placed(torch, p, k, v, pool_bytes: int, spread: bool) -> dict:
    """Kc, Vc and BlockTable as launch.paged_cache makes them, but each cache in its own
    `pool_bytes` allocation: the pages at its start in a random order, or (`spread`) at random
    pages of the whole allocation."""
    ps, b = p.page_size, p.batch
    npg = -(-p.seqlen_k // ps)
    page_shape = (ps, p.kv_heads, p.head_dim)
    pool_pages = pool_bytes // (ps * p.kv_heads * p.head_dim * k.element_size())
    idx = (torch.randperm(pool_pages, device=k.device)[:b * npg] if spread
           else torch.randperm(b * npg, device=k.device))

    def pages(x):
        x = torch.nn.functional.pad(x, (0, 0, 0, npg * ps - p.seqlen_k))
        x = x.view(b, p.kv_heads, npg, ps, p.head_dim).permute(0, 2, 3, 1, 4)
        out = torch.empty(pool_bytes, dtype=torch.uint8, device=k.device)
        out = out.view(k.dtype).view(pool_pages, *page_shape)
        out[idx] = x.reshape(b * npg, *page_shape)
        return out

    return {"Kc": pages(k), "Vc": pages(v),
            "BlockTable": idx.to(torch.int32).view(b, npg).contiguous()}


def alloc(out: str) -> None:
    torch, hw, nvml, nq, qd, bw = _setup()
    rows = []
    base, q, k, v, ref, lse_ref, bound = batch1(torch)

    def measure(name: str, lz, rnd: int) -> None:
        err, ok = bench.check(torch, lz, ref, lse_ref, bound)
        print(f"check {name} round {rnd}: err {err:.2e} bound {bound:.2e} {'ok' if ok else 'FAILED'}",
              flush=True)
        if not ok:
            rows.append(dict(case=name, round=rnd, status="FAILED", err=err))
            return
        for mode, timer in (("nq", nq), ("q", qd)):
            ms, env = timed(timer, lz, nvml)
            rows.append(dict(gpu=torch.cuda.get_device_name(), case=name, round=rnd,
                             page_size=lz.plan.problem.page_size, mode=mode, ms=ms, err=err,
                             status="ok", bw_over_copy=bench.kv_bytes(base) / (ms * 1e-3) / bw,
                             copy_bw=bw, t=time.perf_counter(), **env))
        print(f"  {name}: " + ", ".join(f"{r['mode']} {r['ms']:.4f}" for r in rows[-2:]), flush=True)

    def case(name: str, ps, pool_gib: float = 0, spread: bool = False, rnd: int = 0) -> None:
        lz = ours(torch, hw, base, q, k, v, ps)
        if pool_gib and ps is None:  # the contiguous cache at the start of a larger allocation
            for n, x in (("K", k), ("V", v)):
                buf = torch.empty(int(pool_gib * GiB), dtype=torch.uint8, device="cuda")
                lz.buf[n] = buf[:x.numel() * x.element_size()].view(x.dtype).view(x.shape)
                lz.buf[n].copy_(x)
        elif pool_gib:
            lz.buf.update(placed(torch, lz.plan.problem, k, v, int(pool_gib * GiB), spread))
        measure(name, lz, rnd)
        del lz
        torch.cuda.empty_cache()

    for rnd in range(2):
        for ps in (16, 64):
            case(f"own_p{ps}", ps, rnd=rnd)
            for gib in (1, 4, 16, 32):
                case(f"in{gib}_p{ps}", ps, gib, rnd=rnd)
            case(f"spread16_p{ps}", ps, 16, True, rnd=rnd)
            case(f"own_p{ps}_again", ps, rnd=rnd)
        case("contig_own", None, rnd=rnd)
        case("contig_in16", None, 16, rnd=rnd)
    # the GPU's state: a cache allocated before a batch-32 paged point, timed after it
    before = ours(torch, hw, base, q, k, v, 16)
    measure("own_p16_before32", before, 0)
    big, err, ok = batch32_paged(torch, hw, base)
    for mode, timer in (("nq", nq), ("q", qd)) if ok else ():
        ms, env = timed(timer, big, nvml)
        rows.append(dict(gpu=torch.cuda.get_device_name(), case="b32_p16", round=0, page_size=16,
                         mode=mode, ms=ms, err=err, status="ok", t=time.perf_counter(), **env))
    del big
    torch.cuda.empty_cache()
    measure("own_p16_after32", before, 0)
    del before
    case("own_new_after32_p16", 16)
    df = pd.DataFrame(rows)
    df.to_csv(out, index=False)
    ok = df[df.status == "ok"]
    print(ok.pivot_table(index="case", columns=["mode", "round"], values="ms", sort=False)
          .round(4).to_string(), flush=True)


# `alloc_ab`: what holds a paged step's gathers to the contiguous cache's time where its pages
# lie far apart: the Plan's kernel (16 splits at batch 1, 3 stages) beside more splits (more
# CTAs, more gathers in flight an SM) and deeper rings (more tiles in flight a CTA)
AB = {"default": Tiles(), "s32": Tiles(kv_splits=32), "s64": Tiles(kv_splits=64),
      "st4": Tiles(stages=4), "st6": Tiles(stages=6), "s32_st4": Tiles(kv_splits=32, stages=4)}


def alloc_ab(out: str, rounds: int = 2) -> None:
    """Batch 1, KV 128k: each AB variant on each placement of the cache (PLACES, in turn), each
    checked, then timed issued and queued in interleaved rounds within the placement."""
    torch, hw, nvml, nq, qd, bw = _setup()
    base, q, k, v, ref, lse_ref, bound = batch1(torch)
    rows = []
    for where in os.environ.get("PLACES", "contig,own_p16,spread16_p16,spread16_p64").split(","):
        # contig | own_pP | spreadG_pP (pages over a G GiB pool a tensor) | fillG_pP / fillG_contig
        # (the cache allocated after G GiB of other allocations, kept while it runs)
        ps = None if where.endswith("contig") else int(where.rsplit("_p", 1)[1])
        gib = int("".join(c for c in where.split("_")[0] if c.isdigit()) or 0)
        filler = torch.empty(gib * GiB, dtype=torch.uint8, device="cuda") \
            if where.startswith("fill") else None
        pool, fns = None, {}
        for name, tiles in AB.items():
            lz = ours(torch, hw, base, q, k, v, ps, tiles)
            if where.startswith("spread"):
                pool = pool or placed(torch, lz.plan.problem, k, v, gib * GiB, True)
                lz.buf.update(pool)
            err, ok = bench.check(torch, lz, ref, lse_ref, bound)
            print(f"check {where} {name}: err {err:.2e} bound {bound:.2e} {'ok' if ok else 'FAILED'}",
                  flush=True)
            if ok:
                fns[name] = lz
            else:
                rows.append(dict(where=where, case=name, status="FAILED", err=err))
        for rnd in range(rounds):
            for name, lz in fns.items():
                for mode, timer in (("q", qd), ("nq", nq)):
                    ms, env = timed(timer, lz, nvml)
                    rows.append(dict(gpu=torch.cuda.get_device_name(), where=where, case=name,
                                     splits=lz.plan.main.defines["NUM_SPLITS"],
                                     stages=lz.plan.main.defines["STAGES"], round=rnd, mode=mode,
                                     ms=ms, status="ok", copy_bw=bw,
                                     bw_over_copy=bench.kv_bytes(base) / (ms * 1e-3) / bw, **env))
        sub = pd.DataFrame([r for r in rows if r["where"] == where and r["status"] == "ok"])
        print(sub.pivot_table(index="case", columns=["mode", "round"], values="ms", sort=False)
              .round(4).to_string(), flush=True)
        del fns, pool, filler, lz
        torch.cuda.empty_cache()
    pd.DataFrame(rows).to_csv(out, index=False)


def after32_ab(out: str, rounds: int = 3) -> None:
    """Batch 1, KV 128k: the AB variants on the contiguous cache and on 16- and 64-token pages of
    their own, one round timed fresh, then a batch-32 paged point (16-token pages, checked and
    timed as the bench does: the grid's order), then `rounds` rounds after it, interleaved."""
    torch, hw, nvml, nq, qd, bw = _setup()
    base, q, k, v, ref, lse_ref, bound = batch1(torch)
    fns, rows = {}, []
    for where, ps in (("contig", None), ("own_p16", 16), ("own_p64", 64)):
        for name, tiles in AB.items():
            lz = ours(torch, hw, base, q, k, v, ps, tiles)
            err, ok = bench.check(torch, lz, ref, lse_ref, bound)
            print(f"check {where} {name}: err {err:.2e} {'ok' if ok else 'FAILED'}", flush=True)
            if ok:
                fns[where, name] = lz

    def time_all(state: str, rnd: int) -> None:
        for (where, name), lz in fns.items():
            for mode, timer in (("q", qd), ("nq", nq)):
                ms, env = timed(timer, lz, nvml)
                rows.append(dict(gpu=torch.cuda.get_device_name(), state=state, where=where,
                                 case=name, splits=lz.plan.main.defines["NUM_SPLITS"],
                                 stages=lz.plan.main.defines["STAGES"], round=rnd, mode=mode,
                                 ms=ms, copy_bw=bw, t=time.perf_counter(),
                                 bw_over_copy=bench.kv_bytes(base) / (ms * 1e-3) / bw, **env))

    time_all("fresh", 0)
    big, err, ok = batch32_paged(torch, hw, base)
    if ok:
        for timer in (nq, qd):
            print(f"  b32_p16 {timer(big):.4f} ms", flush=True)
    del big
    torch.cuda.empty_cache()
    for rnd in range(rounds):
        time_all("after32", rnd)
    df = pd.DataFrame(rows)
    df.to_csv(out, index=False)
    print(df.pivot_table(index=["where", "case"], columns=["state", "round", "mode"], values="ms",
                         sort=False).round(4).to_string(), flush=True)


def alloc_ncu(_out: str) -> None:
    """For Nsight Compute: the 16-token paged step on a cache of its own, then on one at the
    start of a 16 GiB allocation and one spread over it, each checked and launched once."""
    torch, hw, *_ = _setup()
    base, q, k, v, ref, lse_ref, bound = batch1(torch)
    for name, gib, spread in (("own", 0, False), ("in16", 16, False), ("spread16", 16, True)):
        lz = ours(torch, hw, base, q, k, v, 16)
        if gib:
            lz.buf.update(placed(torch, lz.plan.problem, k, v, gib * GiB, spread))
        err, ok = bench.check(torch, lz, ref, lse_ref, bound)
        print(f"check {name}: err {err:.2e} {'ok' if ok else 'FAILED'}", flush=True)
        if ok:
            lz()
            torch.cuda.synchronize()
        del lz
        torch.cuda.empty_cache()


if __name__ == "__main__":
    {"pages": pages, "b32": b32, "confirm": confirm, "alloc": alloc,
     "alloc_ncu": alloc_ncu, "alloc_ab": alloc_ab,
     "after32_ab": after32_ab}[sys.argv[1]](sys.argv[2])
