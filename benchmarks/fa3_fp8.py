"""FP8 (e4m3) forward of kernels/fa3.cu on a Hopper GPU: check, then time (dev script, device machine).

    PYTHONUNBUFFERED=1 python3 benchmarks/fa3_fp8.py [--out FILE.csv]

Inputs: bf16 randn Q, K, V (iosim bench's `inputs`), quantised per tensor: s_x = amax|x| / 448,
x8 = e4m3(x / s_x). V goes to the kernel K-major, as 8-bit wgmma needs: Vt = V^T, (B, KVH, d, Nk16)
with keys permuted within each 16 (kernels/fa3.cu's header says why); the Plan of a fp8_e4m3
Problem gives the tiles and defines (FP8_E4M3=1). O and LSE are NaN-poisoned before each run.
Errors, max|O - ref| / max|ref|: against float32 attention on the dequantised inputs (the kernel's
own arithmetic: P rounded to e4m3, fp8 wgmma accumulation) and against float32 attention on the
bf16 inputs (what a user of FP8 sees, quantisation included); LSE against the dequantised one.
Check, on every head of the small shapes and on head 0 of the timed ones (S materialised): the
first error at most 3x that of an emulated kernel (P = e4m3(exp(S - rowmax)), l from unrounded
P, against the same reference) plus 2^-10, and the LSE error at most 2^-10 (fp8 wgmma does not
accumulate in full fp32; a mask or layout error costs O(1) in both).
Timing (only after a passing check): the fp8 kernel, the bf16 fa3 kernel of the same shape and
torch's cuDNN SDPA on bf16 (bench's timer: L2 flushed, median), and torch SDPA on e4m3 inputs if
it takes them. The quantisation and V's transpose are timed apart (prep_ms), not in the kernel's.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from iosim.core.hardware import load  # noqa: E402
from iosim.core.problem import Problem  # noqa: E402
from iosim.gpu import bench  # noqa: E402
from iosim.gpu.compile import compile_kernel, launch  # noqa: E402
from iosim.gpu.launch import Launcher  # noqa: E402
from iosim.gpu.tma import tensor_map  # noqa: E402
from iosim.schedules import plan  # noqa: E402

E4M3_MAX = 448.0
SIGMA = [0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15]  # Vt slot -> key, within 16
CHECKS = [  # (batch, heads, kv_heads, N_q, N_k, d, causal): ragged N, GQA, Nq != Nk
    (1, 2, 2, 256, 256, 128, False), (1, 4, 2, 1000, 1000, 128, True),
    (2, 2, 2, 777, 777, 256, False), (1, 2, 2, 2048, 2048, 256, True),
    (1, 2, 2, 300, 700, 128, False), (1, 2, 1, 700, 300, 256, True),
]
TIMED = [(n, d, c) for d in (128, 256) for c in (False, True) for n in (4096, 8192, 16384)]


def quantise(x):
    s = x.float().abs().amax().item() / E4M3_MAX
    return (x.float() / s).to(torch.float8_e4m3fn), s


def vt_layout(v8):
    """(B, KVH, Nk, d) e4m3 -> (B, KVH, d, Nk16) e4m3, keys permuted within each 16."""
    b, h, n, d = v8.shape
    n16 = -(-n // 16) * 16
    vt = torch.zeros(b, h, d, n16, dtype=torch.uint8, device=v8.device)
    vt[..., :n] = v8.view(torch.uint8).transpose(-1, -2)
    j = torch.arange(n16, device=v8.device)
    idx = (j // 16) * 16 + torch.tensor(SIGMA, device=v8.device)[j % 16]
    return vt[..., idx].contiguous().view(torch.float8_e4m3fn)


class Fp8Run:
    """The Plan's fa3 kernel with FP8_E4M3=1 bound to quantised inputs."""

    def __init__(self, hw, p: Problem, q, k, v):
        self.p = p
        (self.q8, sq), (self.k8, sk), (v8, self.sv) = quantise(q), quantise(k), quantise(v)
        self.v8 = v8
        self.vt = vt_layout(v8)
        self.kp = plan("fa3", p, hw).kernels[0]
        assert self.kp.defines["FP8_E4M3"] == 1
        self.fn = compile_kernel(self.kp.source, self.kp.name, self.kp.defines, p.dtype.value)
        self.o = torch.empty(p.batch, p.heads, p.seqlen_q, p.head_dim, dtype=torch.bfloat16,
                             device="cuda")
        self.lse = torch.empty(p.batch, p.heads, p.seqlen_q, dtype=torch.float32, device="cuda")
        maps = (tensor_map(self.q8, self.kp.block_m), tensor_map(self.k8, self.kp.block_n),
                tensor_map(self.vt, p.head_dim))
        self.args = (*maps, np.uint64(self.o.data_ptr()), np.uint64(self.lse.data_ptr()),
                     np.int32(p.seqlen_q), np.int32(p.seqlen_k), np.int32(p.heads),
                     np.int32(p.kv_heads), np.float32(p.scale * sq * sk), np.float32(self.sv))
        self.deq = (self.q8.float() * sq, self.k8.float() * sk, v8.float() * self.sv)

    def __call__(self):
        k = self.kp
        launch(self.fn, k.grid, k.threads, k.smem_bytes, self.args)

    def poison(self):
        self.o.fill_(float("nan"))
        self.lse.fill_(float("nan"))


def sdpa32(p: Problem, q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=p.causal, scale=p.scale,
                                          enable_gqa=p.group > 1)


def scores(p: Problem, q, k, heads=None):
    kx = k.repeat_interleave(p.group, dim=1)
    if heads is not None:
        q, kx = q[:, heads], kx[:, heads]
    s = torch.einsum("bhid,bhjd->bhij", q, kx) * p.scale
    if p.causal:
        i = torch.arange(p.seqlen_q, device="cuda")[:, None]
        s = s.masked_fill(torch.arange(p.seqlen_k, device="cuda")[None, :] > i, float("-inf"))
    return s


def rel(a, b) -> float:
    d = (a.float() - b).abs().max().item()
    return float("inf") if math.isnan(d) else d / max(b.abs().max().item(), 1e-30)


def check(run: Fp8Run, q, k, v, small: bool) -> dict:
    p = run.p
    run.poison()
    run()
    torch.cuda.synchronize()
    qd, kd, vd = run.deq
    ref_deq = sdpa32(p, qd, kd, vd)
    ref_in = sdpa32(p, q.float(), k.float(), v.float())
    hs = slice(None) if small else slice(0, 1)  # the heads the check holds to the emulation
    s = scores(p, qd, kd, hs)
    lse_ref = torch.logsumexp(s, dim=-1)
    r = {"err_vs_dequant": rel(run.o, ref_deq), "err_vs_input": rel(run.o, ref_in),
         "lse_err": rel(run.lse[:, hs], lse_ref), "nan_O": int(torch.isnan(run.o).sum())}
    # the emulated kernel: P rounded to e4m3 against the exact softmax, l from unrounded P
    m = s.amax(dim=-1, keepdim=True)
    e = torch.exp(s - m)
    del s
    o_emul = (e.to(torch.float8_e4m3fn).float() @ vd.repeat_interleave(p.group, dim=1)[:, hs]) \
        / e.sum(dim=-1, keepdim=True)
    del e
    r["emul_err"] = rel(o_emul, ref_deq[:, hs])
    r["err_checked"] = rel(run.o[:, hs], ref_deq[:, hs])
    r["bound"] = 3 * r["emul_err"] + 2.0**-10
    r["ok"] = r["err_checked"] <= r["bound"] and r["lse_err"] <= 2.0**-10 and r["nan_O"] == 0
    return r


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=None)
    a = ap.parse_args()
    hw = load(bench.profile_for(torch.cuda.get_device_name()))
    seed = int.from_bytes(os.urandom(4), "little") >> 1
    ok_all = True
    for i, (b, h, kvh, nq, nk, d, causal) in enumerate(CHECKS):
        kw = dict(batch=b, heads=h, kv_heads=kvh, seqlen_q=nq, seqlen_k=nk, head_dim=d,
                  causal=causal)
        p = Problem(dtype="fp8_e4m3", **kw)
        q, k, v = bench.inputs(torch, Problem(dtype="bf16", **kw), seed + i)  # bf16 randn
        r = check(Fp8Run(hw, p, q, k, v), q, k, v, small=True)
        ok_all &= r["ok"]
        print(f"{'ok  ' if r['ok'] else 'FAIL'} fp8 B{b} H{h}/{kvh} Nq{nq} Nk{nk} d{d} "
              f"{'causal' if causal else 'full'}: O err {r['err_vs_dequant']:.2e} vs dequantised "
              f"(emulated kernel {r['emul_err']:.2e}, bound {r['bound']:.2e}), "
              f"{r['err_vs_input']:.2e} vs bf16 inputs, LSE err {r['lse_err']:.1e}, NaN {r['nan_O']}")
    if not ok_all:
        print("fp8 check failed: not timed")
        return 1
    timer = bench.Timer(torch, hw.l2_bytes)
    rows = []
    for i, (n, d, causal) in enumerate(TIMED):
        kw = dict(batch=max(1, 16384 // n), heads=2048 // d, seqlen_q=n, head_dim=d, causal=causal)
        p, pb = Problem(dtype="fp8_e4m3", **kw), Problem(dtype="bf16", **kw)
        q, k, v = bench.inputs(torch, pb, seed + 100 + i)
        run = Fp8Run(hw, p, q, k, v)
        r = check(run, q, k, v, small=False)
        row = {"seqlen_q": n, "head_dim": d, "causal": causal, "batch": kw["batch"],
               "heads": kw["heads"], **{x: r[x] for x in ("err_vs_dequant", "err_vs_input",
                                                          "err_checked", "emul_err", "lse_err",
                                                          "bound", "ok")}}
        if r["ok"]:
            fl = p.fa_flops()
            row["fp8_ms"] = timer(run)
            row["prep_ms"] = timer(lambda q=q, k=k, v=v: (quantise(q), quantise(k),
                                                          vt_layout(quantise(v)[0])))
            bf = Launcher(plan("fa3", pb, hw), q, k, v)
            row["bf16_ms"] = timer(bf)
            row["cudnn_bf16_ms"] = timer(lambda q=q, k=k, v=v, pb=pb: bench.sdpa(
                torch, q, k, v, pb, "CUDNN_ATTENTION"))
            for name in ("fp8", "bf16", "cudnn_bf16"):
                row[f"{name}_tflops"] = fl / (row[f"{name}_ms"] * 1e-3) / 1e12
            try:
                bench.sdpa(torch, run.q8, run.k8, run.v8, pb)
                row["torch_fp8"] = "accepted"
            except Exception as e:  # torch's SDPA on e4m3 tensors
                row["torch_fp8"] = f"refused: {str(e).splitlines()[0][:90]}"
            del bf
        rows.append(row)
        print(f"fp8 N={n} d={d} {'causal' if causal else 'full  '}: err {r['err_vs_dequant']:.2e} "
              f"(head 0 {r['err_checked']:.2e}, emulated {r['emul_err']:.2e}, LSE {r['lse_err']:.1e}; "
              f"vs bf16 inputs {r['err_vs_input']:.2e}) {'ok' if r['ok'] else 'FAIL'}"
              + (f", {row['fp8_tflops']:.1f} TFLOP/s vs bf16 fa3 {row['bf16_tflops']:.1f} "
                 f"({row['fp8_tflops'] / row['bf16_tflops']:.2f}x), cuDNN bf16 "
                 f"{row['cudnn_bf16_tflops']:.1f}; prep {row['prep_ms']:.3f} ms vs kernel "
                 f"{row['fp8_ms']:.3f} ms" if r["ok"] else ""))
        del run, q, k, v
        torch.cuda.empty_cache()
    if rows and "torch_fp8" in rows[0]:
        print("torch SDPA on e4m3 inputs:", rows[0]["torch_fp8"])
    if a.out:
        pd.DataFrame(rows).assign(gpu_name=torch.cuda.get_device_name(), seed=seed).to_csv(
            a.out, index=False)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
