"""Dev check for kernels/naive.cu and kernels/fa1.cu on a GPU (cupy + torch).

Runs on the device machine:  PYTHONUNBUFFERED=1 python3 dev/naive_fa1_check.py [--quick]

1. Correctness: fresh random inputs per case, every output NaN-poisoned before the run, compared
   with a float32 torch reference; the bound is tied to the error of a same-dtype torch
   reference (max|out - ref32| <= 3 * max|same_dtype - ref32| + 1e-4), plus fa1's l and m.
   Cases: ragged N (1000, 3000, Nq != Nk, Nk % 8 != 0), GQA (H=8, KVH=2), d 64/128/256,
   causal both, bf16 and fp16.
2. Only if every case passes: timing (CUDA events, warm-up, L2 flushed before each rep, median
   of >= 10) of the naive 3-kernel forward and of fa1 (init + fwd) on the benchmark shapes
   (bf16, batch = 16384/N, heads = 2048/d), with TFLOP/s (4 B H N^2 d / t, halved if causal),
   the naive forward's HBM-floor ratio, and the cuBLAS (torch.bmm) ratio of its two GEMMs.

The tile choices below are the kernels' recommended ones (see the .cu headers); in the package
the Plan owns them.
"""
from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time

import cupy as cp
import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KDIR = os.path.join(ROOT, "kernels")
ELEM = 2  # bytes per bf16/fp16 element

# ------------------------------------------------------------------ tiles (recommended)
QK_TILES = {64: (128, 128, 64, 1, 8), 128: (128, 128, 64, 2, 8), 256: (128, 128, 64, 3, 8)}
PV_TILES = {64: (128, 64, 64, 4, 8), 128: (128, 128, 64, 3, 8), 256: (128, 128, 64, 3, 8)}
FA1_TILES = {64: (64, 128, 4), 128: (128, 128, 8), 256: (64, 64, 4)}  # (Br, Bc, warps)


def softmax_threads(nk: int) -> int:
    t = 1 << max(0, math.ceil(math.log2(max(1, nk // 32))))
    return min(256, max(64, t))


def gemm_smem(bm, bn, bk, st):
    return max(st * (bm + bn) * bk, bm * bn) * ELEM


def fa1_smem(br, bc, d):
    return (2 * bc + br) * d * ELEM


# ------------------------------------------------------------------ compile (the package's path)
# Loaded by path: the iosim package's own __init__ needs pydantic, which the device image lacks.
import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location("iosim_gpu_compile", os.path.join(ROOT, "iosim", "gpu", "compile.py"))
_compile = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_compile)
compile_kernel, launch = _compile.compile_kernel, _compile.launch


def kernel(source: str, entry: str, defines: dict, dtype: str):
    """The entry macro goes in the defines, as the Plan puts it there (docs/kernel-contract.md)."""
    return compile_kernel(source, entry, {entry.upper(): 1, **defines}, dtype)


def cpv(t: torch.Tensor):
    """torch tensor -> cupy array on the same memory (16-bit dtypes viewed as int16)."""
    if t.dtype in (torch.bfloat16, torch.float16):
        t = t.view(torch.int16)
    return cp.from_dlpack(t)


TDT = {"bf16": torch.bfloat16, "fp16": torch.float16}
i32, f32 = np.int32, np.float32


# ------------------------------------------------------------------ the two forwards
class Naive:
    def __init__(self, B, H, KVH, Nq, Nk, d, causal, dtype, row_in_smem=1, sm_threads=None, qk=None, pv=None):
        self.shape = (B, H, KVH, Nq, Nk, d)
        bm, bn, bk, st, nw = qk or QK_TILES[d]
        self.qk = (kernel("naive.cu", "naive_qk", dict(HEAD_DIM=d, IS_CAUSAL=int(causal), BLOCK_M=bm, BLOCK_N=bn,
                                                         BLOCK_K=bk, STAGES=st, NUM_WARPS=nw), dtype),
                   (math.ceil(Nk / bn), math.ceil(Nq / bm), B * H), nw * 32, gemm_smem(bm, bn, bk, st))
        self.qk_tiles = (bm, bn)
        T = sm_threads or softmax_threads(Nk)
        self.sm = (kernel("naive.cu", "naive_softmax", dict(HEAD_DIM=d, IS_CAUSAL=int(causal), SOFTMAX_THREADS=T,
                                                              ROW_IN_SMEM=row_in_smem), dtype),
                   (Nq, B * H, 1), T, Nk * ELEM if row_in_smem else 0)
        bm, bn, bk, st, nw = pv or PV_TILES[d]
        self.pv = (kernel("naive.cu", "naive_pv", dict(HEAD_DIM=d, IS_CAUSAL=int(causal), BLOCK_M=bm, BLOCK_N=bn,
                                                         BLOCK_K=bk, STAGES=st, NUM_WARPS=nw), dtype),
                   (math.ceil(d / bn), math.ceil(Nq / bm), B * H), nw * 32, gemm_smem(bm, bn, bk, st))
        self.pv_tiles = (bm, bn)
        self.causal, self.row_in_smem = causal, row_in_smem
        self.S = torch.empty((B, H, Nq, Nk), dtype=TDT[dtype], device="cuda")
        self.P = torch.empty_like(self.S)

    def bind(self, q, k, v, o, scale):
        B, H, KVH, Nq, Nk, d = self.shape
        S, P = cpv(self.S), cpv(self.P)
        self.a_qk = (cpv(q), cpv(k), S, i32(Nq), i32(Nk), i32(H), i32(KVH), f32(scale))
        self.a_sm = (S, P, i32(Nq), i32(Nk))
        self.a_pv = (P, cpv(v), cpv(o), i32(Nq), i32(Nk), i32(H), i32(KVH))

    def run_qk(self):
        fn, g, t, s = self.qk; launch(fn, g, t, s, self.a_qk)

    def run_sm(self):
        fn, g, t, s = self.sm; launch(fn, g, t, s, self.a_sm)

    def run_pv(self):
        fn, g, t, s = self.pv; launch(fn, g, t, s, self.a_pv)

    def __call__(self):
        self.run_qk(); self.run_sm(); self.run_pv()

    def hbm_bytes(self):
        """Two-level bytes: every tile load/store, GEMM tile re-reads included."""
        B, H, KVH, Nq, Nk, d = self.shape
        bh = B * H
        bm, bn = self.qk_tiles
        qk = bh * (Nq * d * math.ceil(Nk / bn) + Nk * d * math.ceil(Nq / bm) + Nq * Nk) * ELEM
        if self.causal and Nk % 8 == 0:
            nread = sum(min(Nk, (i + 1 + 7) // 8 * 8) for i in range(Nq))
        elif self.causal:
            nread = sum(min(Nk, i + 1) for i in range(Nq))
        else:
            nread = Nq * Nk
        sm = bh * (nread * (1 if self.row_in_smem else 2) + Nq * Nk) * ELEM
        bm, bn = self.pv_tiles
        pv = bh * (Nq * Nk * math.ceil(d / bn) + Nk * d * math.ceil(Nq / bm) + Nq * d) * ELEM
        return qk, sm, pv

    def unique_bytes(self):
        """Each tensor once: Q, K, V read, O written, S written, S read (the causal prefix only),
        P written, P read."""
        B, H, KVH, Nq, Nk, d = self.shape
        s_read = self.hbm_bytes()[1] // (B * H * ELEM) - Nq * Nk
        if not self.row_in_smem:
            s_read //= 2
        return B * H * (2 * Nq * d + 2 * Nk * d + 3 * Nq * Nk + s_read) * ELEM


class FA1:
    def __init__(self, B, H, KVH, Nq, Nk, d, causal, dtype):
        self.shape = (B, H, KVH, Nq, Nk, d)
        br, bc, nw = FA1_TILES[d]
        self.init = (kernel("fa1.cu", "fa1_init", dict(HEAD_DIM=d, IS_CAUSAL=int(causal), BLOCK_M=br, BLOCK_N=bc,
                                                         NUM_WARPS=nw), dtype),
                     (math.ceil(Nq / br), H, B), nw * 32, 0)
        self.fwd = (kernel("fa1.cu", "fa1_fwd", dict(HEAD_DIM=d, IS_CAUSAL=int(causal), BLOCK_M=br, BLOCK_N=bc,
                                                       NUM_WARPS=nw), dtype),
                    (1, H, B), nw * 32, fa1_smem(br, bc, d))
        self.Oacc = torch.empty((B, H, Nq, d), dtype=torch.float32, device="cuda")
        self.L = torch.empty((B, H, Nq), dtype=torch.float32, device="cuda")
        self.M = torch.empty_like(self.L)

    def bind(self, q, k, v, o, scale):
        B, H, KVH, Nq, Nk, d = self.shape
        oa, L, M = cpv(self.Oacc), cpv(self.L), cpv(self.M)
        self.a_init = (oa, L, M, i32(Nq))
        self.a_fwd = (cpv(q), cpv(k), cpv(v), oa, cpv(o), L, M, i32(Nq), i32(Nk), i32(H), i32(KVH), f32(scale))

    def __call__(self):
        fn, g, t, s = self.init; launch(fn, g, t, s, self.a_init)
        fn, g, t, s = self.fwd; launch(fn, g, t, s, self.a_fwd)


# ------------------------------------------------------------------ reference
def reference(q, k, v, causal, scale, compute_dtype):
    H, KVH = q.shape[1], k.shape[1]
    k = k.repeat_interleave(H // KVH, dim=1)
    v = v.repeat_interleave(H // KVH, dim=1)
    q, k, v = q.to(compute_dtype), k.to(compute_dtype), v.to(compute_dtype)
    s = (q @ k.transpose(-1, -2)) * scale
    Nq, Nk = s.shape[-2:]
    if causal:
        s = s.masked_fill(torch.ones(Nq, Nk, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    if compute_dtype == torch.float32:
        m = s.amax(-1, keepdim=True)
        p = torch.exp(s - m)
        l = p.sum(-1, keepdim=True)
        return (p / l) @ v, m.squeeze(-1), l.squeeze(-1)
    p = torch.softmax(s, dim=-1)  # same-dtype reference: S, P rounded to the input dtype
    return p @ v, None, None


CASES = [  # B, H, KVH, Nq, Nk, d, causal, dtype
    (2, 4, 4, 256, 256, 64, False, "bf16"),
    (2, 4, 4, 256, 256, 64, True, "bf16"),
    (1, 8, 2, 1000, 1000, 64, True, "bf16"),
    (1, 8, 2, 1000, 1000, 128, False, "bf16"),
    (1, 8, 2, 3000, 3000, 128, True, "fp16"),
    (1, 2, 2, 3000, 3000, 256, False, "bf16"),
    (1, 4, 2, 1000, 1000, 256, True, "fp16"),
    (1, 8, 2, 1000, 3000, 64, False, "fp16"),
    (1, 4, 4, 3000, 1000, 128, True, "bf16"),
    (1, 4, 2, 300, 1001, 64, True, "bf16"),   # Nk % 8 != 0: element-wise paths
    (1, 2, 1, 301, 777, 256, False, "bf16"),
]


def check(verbose=True):
    ok_all = True
    torch.manual_seed(int(time.time()) & 0xFFFF)
    for (B, H, KVH, Nq, Nk, d, causal, dt) in CASES:
        T = TDT[dt]
        q = torch.randn(B, H, Nq, d, device="cuda", dtype=T)
        k = torch.randn(B, KVH, Nk, d, device="cuda", dtype=T)
        v = torch.randn(B, KVH, Nk, d, device="cuda", dtype=T)
        scale = 1.0 / math.sqrt(d)
        ref, mref, lref = reference(q, k, v, causal, scale, torch.float32)
        same, _, _ = reference(q, k, v, causal, scale, T)
        ref_err = (same.float() - ref).abs().max().item()
        bound = 3 * ref_err + 1e-4
        for name, cls in (("naive", Naive), ("naive/rowx2", None), ("fa1", FA1)):
            if name == "naive/rowx2":
                obj = Naive(B, H, KVH, Nq, Nk, d, causal, dt, row_in_smem=0)
            else:
                obj = cls(B, H, KVH, Nq, Nk, d, causal, dt)
            o = torch.full((B, H, Nq, d), float("nan"), device="cuda", dtype=T)
            if isinstance(obj, Naive):
                obj.S.fill_(float("nan")); obj.P.fill_(float("nan"))
            else:
                obj.Oacc.fill_(float("nan")); obj.L.fill_(float("nan")); obj.M.fill_(float("nan"))
            obj.bind(q, k, v, o, scale)
            obj()
            torch.cuda.synchronize()
            err = (o.float() - ref).abs().max().item()
            good = math.isfinite(err) and err <= bound
            extra = ""
            if isinstance(obj, FA1):
                merr = (obj.M - mref).abs().max().item()
                lerr = ((obj.L - lref).abs() / lref).max().item()
                extra = f" m_err={merr:.2e} l_relerr={lerr:.2e}"
                good = good and merr <= 1e-3 * (1 + mref.abs().max().item()) and lerr <= 1e-3
            ok_all &= good
            print(f"{'PASS' if good else 'FAIL'} {name:12s} B={B} H={H} KVH={KVH} Nq={Nq} Nk={Nk} d={d} "
                  f"causal={int(causal)} {dt}: max_err={err:.3e} same_dtype_ref_err={ref_err:.3e} "
                  f"bound={bound:.3e}{extra}")
            del obj
        torch.cuda.empty_cache()
    return ok_all


# ------------------------------------------------------------------ timing
_flush = None


def bench(fn, reps=10, warm=2):
    global _flush
    if _flush is None:
        _flush = torch.empty(256 * 1024 * 1024, dtype=torch.int8, device="cuda")
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        _flush.zero_()
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(); fn(); e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1))
    return statistics.median(ts)


def copy_bw():
    n = 2 * 1024 ** 3
    a = torch.empty(n, dtype=torch.int8, device="cuda").random_()
    b = torch.empty_like(a)
    t = bench(lambda: b.copy_(a), reps=10)
    del a, b
    torch.cuda.empty_cache()
    return 2 * n / (t * 1e-3)


def timing(Ns, ds, causals, reps):
    bw = copy_bw()
    name = torch.cuda.get_device_name()
    print(f"\n# {name}: device copy bandwidth {bw / 1e12:.2f} TB/s (read+write)")
    hdr = (f"{'N':>6} {'d':>4} {'c':>1} {'B':>3} {'H':>3} | {'qk_ms':>7} {'sm_ms':>7} {'pv_ms':>7} {'naive_ms':>8} "
           f"{'TF/s':>6} {'floor%':>6} {'uniq%':>6} {'cublasQK':>8} {'cublasPV':>8} | {'fa1_ms':>8} {'fa1TF/s':>7}")
    rows = [hdr]
    print(hdr)
    for d in ds:
        for N in Ns:
            for causal in causals:
                B, H = 16384 // N, 2048 // d
                T = torch.bfloat16
                q = torch.randn(B, H, N, d, device="cuda", dtype=T)
                k = torch.randn(B, H, N, d, device="cuda", dtype=T)
                v = torch.randn(B, H, N, d, device="cuda", dtype=T)
                o = torch.empty_like(q)
                scale = 1.0 / math.sqrt(d)
                flops = 4 * B * H * N * N * d / (2 if causal else 1)
                nv = Naive(B, H, H, N, N, d, causal, "bf16")
                nv.bind(q, k, v, o, scale)
                t_qk, t_sm, t_pv = bench(nv.run_qk, reps), bench(nv.run_sm, reps), bench(nv.run_pv, reps)
                t_nv = bench(nv, reps)
                floor = sum(nv.hbm_bytes()) / bw * 1e3
                ufloor = nv.unique_bytes() / bw * 1e3
                # cuBLAS (torch.bmm, bf16) on the same GEMM shapes
                qf, kf, Sf = q.view(B * H, N, d), k.view(B * H, N, d), nv.S.view(B * H, N, N)
                c_qk = bench(lambda: torch.bmm(qf, kf.transpose(1, 2), out=Sf), reps)
                vf, Pf, of = v.view(B * H, N, d), nv.P.view(B * H, N, N), o.view(B * H, N, d)
                c_pv = bench(lambda: torch.bmm(Pf, vf, out=of), reps)
                del nv, qf, kf, Sf, vf, Pf, of
                torch.cuda.empty_cache()
                f1 = FA1(B, H, H, N, N, d, causal, "bf16")
                f1.bind(q, k, v, o, scale)
                t_f1 = bench(f1, reps, warm=1)
                del f1
                torch.cuda.empty_cache()
                row = (f"{N:6d} {d:4d} {int(causal):1d} {B:3d} {H:3d} | {t_qk:7.3f} {t_sm:7.3f} {t_pv:7.3f} {t_nv:8.3f} "
                       f"{flops / t_nv / 1e9:6.1f} {100 * floor / t_nv:6.1f} {100 * ufloor / t_nv:6.1f} "
                       f"{c_qk / t_qk:8.2f} {c_pv / t_pv:8.2f} | {t_f1:8.3f} {flops / t_f1 / 1e9:7.1f}")
                rows.append(row)
                print(row)
                del q, k, v, o
                torch.cuda.empty_cache()
    return rows


def softmax_variants(reps):
    """ROW_IN_SMEM 1 vs 0 and thread counts, three row lengths (bf16, B*H*N = 2^21 rows x N)."""
    print("\n# softmax variants (bf16, B=16384/N, H=16, non-causal): ms and GB/s counted")
    for N in (512, 4096, 16384):
        B, H = 16384 // N, 16
        line = f"N={N:6d} rule T={softmax_threads(N):4d}:"
        for ris in (1, 0):
            for T in (64, 128, 256, 512):
                nv = Naive(B, H, H, N, N, 128, False, "bf16", row_in_smem=ris, sm_threads=T)
                q = torch.randn(B, H, N, 128, device="cuda", dtype=torch.bfloat16)
                nv.bind(q, q, q, q.clone(), 0.1)
                nv.run_qk()
                t = bench(nv.run_sm, reps)
                gbs = (B * H * N * N * ELEM * (2 + (1 - ris))) / (t * 1e-3) / 1e9
                line += f"  smem{ris}/T{T} {t:.3f}ms {gbs:.0f}GB/s"
                del nv, q
                torch.cuda.empty_cache()
        print(line)


GEMM_VARIANTS = {
    "qk": {128: [(128, 128, 64, 2, 8), (128, 128, 32, 3, 8), (64, 128, 64, 2, 4), (128, 64, 64, 2, 4)],
           256: [(128, 128, 64, 3, 8), (128, 128, 32, 4, 8), (64, 128, 64, 3, 4), (128, 64, 64, 3, 4)]},
    "pv": {128: [(128, 128, 64, 3, 8), (128, 128, 32, 4, 8), (64, 128, 64, 3, 4), (64, 128, 32, 4, 4)],
           256: [(128, 128, 64, 3, 8), (128, 128, 32, 4, 8), (64, 256, 32, 4, 8), (64, 256, 32, 3, 8)]},
}


def gemm_variants(reps):
    """A few GEMM tiles at N=4096 (bf16, B=4, H=2048/d): which is fastest."""
    print("\n# GEMM tile variants (bf16, N=4096, B=4, H=2048/d): ms (TFLOP/s)")
    for d in (128, 256):
        B, H, N = 4, 2048 // d, 4096
        q = torch.randn(B, H, N, d, device="cuda", dtype=torch.bfloat16)
        o = torch.empty_like(q)
        for which in ("qk", "pv"):
            line = f"d={d} {which}:"
            for tl in GEMM_VARIANTS[which][d]:
                nv = Naive(B, H, H, N, N, d, False, "bf16", **{which: tl})
                nv.bind(q, q, q, o, 0.1)
                nv.run_qk(); nv.run_sm()
                t = bench(nv.run_qk if which == "qk" else nv.run_pv, reps)
                line += f"  {tl}: {t:.3f} ({2 * B * H * N * N * d / t / 1e9:.0f})"
                del nv
                torch.cuda.empty_cache()
            print(line)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--skip-variants", action="store_true", help="skip the softmax / GEMM tile sweeps")
    a = ap.parse_args()
    print(torch.cuda.get_device_name(), "cupy", cp.__version__, "torch", torch.__version__)
    t0 = time.time()
    ok = check()
    print(f"correctness {'PASSED' if ok else 'FAILED'} ({time.time() - t0:.1f} s)")
    if not ok:
        sys.exit(1)
    if a.no_timing:
        sys.exit(0)
    reps = 10
    if a.quick:
        rows = timing([1024, 4096], [64, 128], [False], reps)
    else:
        if not a.skip_variants:
            softmax_variants(reps)
            gemm_variants(reps)
        rows = timing([512, 1024, 2048, 4096, 8192, 16384], [64, 128, 256], [False, True], reps)
    print(f"\n# summary ({torch.cuda.get_device_name()}, {time.time() - t0:.0f} s)")
    print("\n".join(rows))
