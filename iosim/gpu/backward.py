"""The backward pass on the GPU: our kernels' dQ, dK, dV against float32 gradients, then timed;
torch's SDPA backward (flash, cuDNN, efficient, math) beside them, checked the same way.

A backward Plan's kernels read what the forward wrote (O and LSE, or naive's P): the forward
Plan of the same problem runs once, untimed, and only the backward kernels are checked and timed.
Every output and workspace the backward writes is NaN-poisoned before the check. The float32
reference is exact attention's gradient, computed a block of query rows at a time (no N x N
matrix whole); the bound is `bench.error_bound` applied to the same-dtype SDPA backward's error,
the largest over dQ, dK and dV, each relative to its own largest element.
"""

from __future__ import annotations

import numpy as np

from iosim.core.hardware import HardwareProfile
from iosim.core.plan import Plan
from iosim.core.problem import Direction, Problem
from iosim.gpu import bench
from iosim.gpu.compile import compile_kernel, launch
from iosim.gpu.launch import Launcher, buffer, scalars, tensor_maps
from iosim.kernels import SPECS, TENSORS, supported
from iosim.schedules import plan

GRADS = ("dQ", "dK", "dV")


class BackwardLauncher:
    """A backward Plan's kernels bound to device buffers, after one run of its forward."""

    def __init__(self, pl: Plan, hw: HardwareProfile, q, k, v, do) -> None:
        import torch

        supported(pl)
        p = pl.problem
        fwd = Launcher(plan(pl.schedule, p.model_copy(update={"direction": Direction.fwd}), hw),
                       q, k, v)
        fwd.poison()
        fwd()
        torch.cuda.synchronize()
        self.plan = pl
        names = {n for kp in pl.kernels for n in SPECS[kp.name].args if n in TENSORS}
        self.written = {n for kp in pl.kernels for n in SPECS[kp.name].writes} | set(GRADS)
        # what the backward reads and the forward wrote (O, LSE; fa1: ℓ, m; naive: P)
        self.buf = {"Q": q, "K": k, "V": v, "dO": do,
                    **{n: fwd.buf[n] for n in names - self.written if n in fwd.buf}}
        if "S" in fwd.buf:  # naive: S is dead once P exists; dP takes its memory
            self.buf["dP"] = fwd.buf["S"]
        del fwd
        if p.group == 1:  # no GQA reduction: the kernels write dK, dV themselves
            for g, x in (("dK", "dKx"), ("dV", "dVx")):
                self.buf[g] = self.buf[x] = buffer(torch, p, g, q.dtype, q.device)
        for n in sorted(names | set(GRADS)):
            if n not in self.buf:
                self.buf[n] = buffer(torch, p, n, q.dtype, q.device)
        self.scalars = scalars(p) | tensor_maps(pl, self.buf)
        self.kernels = [(kp, compile_kernel(kp.source, kp.name, kp.defines, p.dtype.value))
                        for kp in pl.kernels]

    def poison(self) -> None:
        for n, t in self.buf.items():
            if n in self.written:
                t.fill_(float("nan"))

    def _arg(self, name: str):
        if name in self.scalars:
            return self.scalars[name]
        return np.uint64(self.buf[name].data_ptr())

    def __call__(self) -> None:
        for kp, fn in self.kernels:
            launch(fn, kp.grid, kp.threads, kp.smem_bytes, tuple(self._arg(a) for a in SPECS[kp.name].args))

    def outputs(self) -> dict:
        return {n: self.buf[n] for n in GRADS}

    def entries(self) -> list[str]:
        return [kp.name for kp in self.plan.kernels]


def grad_output(torch, p: Problem, seed: int):
    """dO: standard normal in the input dtype, from its own stream (seed + 2**31)."""
    g = torch.Generator(device="cuda").manual_seed(seed + 2**31)
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16}[p.dtype.value]
    return torch.randn(p.batch, p.heads, p.seqlen_q, p.head_dim, device="cuda", dtype=dt,
                       generator=g)


def reference_grads(torch, q, k, v, do, p: Problem,
                    chunk_bytes: int = bench.REF_CHUNK_BYTES) -> tuple[dict, float]:
    """float32 dQ, dK, dV of exact attention, and max |S| over the visible scores.

    P = exp(S − LSE) from the float32 forward (bench.reference_chunks); D = rowsum(dO∘O);
    dS = P∘(dO·Vᵀ − D); dQ = scale·dS·K, dK = scale·dSᵀ·Q, dV = Pᵀ·dO summed over the query
    heads of each K/V head. A block of (heads, query rows) at a time."""
    o, lse, s_max = bench.reference_chunks(torch, q, k, v, p, chunk_bytes)
    b, h, nq, nk = p.batch, p.heads, p.seqlen_q, p.seqlen_k
    f32 = torch.float32
    dq = torch.zeros(b, h, nq, p.head_dim, dtype=f32, device=q.device)
    dk = torch.zeros(b, p.kv_heads, nk, p.head_dim, dtype=f32, device=q.device)
    dv = torch.zeros_like(dk)
    dsum = (do.float() * o).sum(-1)  # D, (b, h, nq)
    del o
    cols = torch.arange(nk, device=q.device)
    # per row: S/P, dP, dS and the mask, float32
    for bi, hs, kvh, kf, vf, rs in bench.blocks(torch, k, v, p, nk * 4 * 4, chunk_bytes):
        qf, dof = q[bi, hs, rs].float(), do[bi, hs, rs].float()
        lr = lse[bi, hs, rs]
        s = torch.matmul(qf, kf.transpose(-1, -2)) * p.scale - lr[..., None]
        seen = torch.isfinite(lr)[..., None]  # a row that sees no key has P = 0
        if p.causal:
            idx = torch.arange(rs.start, rs.stop, device=q.device) + p.causal_offset
            seen = seen & (cols[None, :] <= idx[:, None])
        pr = torch.where(seen, torch.exp(torch.where(seen, s, 0)), 0)
        del s
        dv[bi].index_add_(0, kvh, torch.matmul(pr.transpose(-1, -2), dof))
        ds = pr * (torch.matmul(dof, vf.transpose(-1, -2)) - dsum[bi, hs, rs][..., None])
        del pr
        dq[bi, hs, rs] = torch.matmul(ds, kf) * p.scale
        dk[bi].index_add_(0, kvh, torch.matmul(ds.transpose(-1, -2), qf) * p.scale)
        del ds
    return {"dQ": dq, "dK": dk, "dV": dv}, s_max


def sdpa_grads(torch, q, k, v, do, p: Problem, backend=None) -> dict:
    """dQ, dK, dV of torch's SDPA (one backend, or torch's own choice) in the input dtype."""
    x = [t.detach().requires_grad_() for t in (q, k, v)]
    out = bench.sdpa(torch, *x, p, backend)
    return dict(zip(GRADS, torch.autograd.grad(out, x, do)))


def grad_err(torch, got: dict, ref: dict, p: Problem) -> float:
    """The largest relative error over dQ, dK, dV (NaN counts as infinite)."""
    return max(bench.rel_err(torch, got[n], ref[n], bench.dead_rows(p) if n == "dQ" else 0)
               for n in GRADS)


def point(torch, timer, hw: HardwareProfile, s: str, p: Problem, seed: int, bw: float) -> dict:
    """One backward row: check (and, if it passes, time) schedule or peer `s` on problem `p`."""
    try:  # a point whose inputs or reference do not fit is a row saying so, never a crash
        q, k, v = bench.inputs(torch, p, seed)
        do = grad_output(torch, p, seed)
        ref, s_max = reference_grads(torch, q, k, v, do, p)
        same = grad_err(torch, sdpa_grads(torch, q, k, v, do, p), ref, p)
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        return {"status": "unchecked: inputs or float32 reference do not fit in GPU memory"}
    bound = bench.error_bound(s, p, same, s_max)
    r: dict = {"ref_err_same_dtype": same, "err_bound": bound}
    try:
        if s in bench.PEERS:
            r.update(_peer(torch, timer, q, k, v, do, p, s, ref, bound))
        else:
            pl = plan(s, p, hw)
            launcher = BackwardLauncher(pl, hw, q, k, v, do)
            launcher.poison()
            launcher()
            torch.cuda.synchronize()
            err = grad_err(torch, launcher.outputs(), ref, p)
            r.update(max_rel_err=err, status="ok" if err <= bound else "failed_check")
            if err <= bound:
                r["time_ms"] = timer(launcher)
                r.update(bench.queued_ms(timer, launcher))
                r["tflops"] = p.fa_flops() / (r["time_ms"] * 1e-3) / 1e12
                r["hbm_floor_ms"] = (pl.traffic.hbm_read + pl.traffic.hbm_write) / bw * 1e3
                r["floor_ratio"] = r["hbm_floor_ms"] / r["time_ms"]
            del launcher
    except torch.OutOfMemoryError:
        r.update(status="error: OutOfMemoryError")
    except bench.InputError:
        raise
    except Exception as e:  # a crash is a result too: recorded, never timed
        r.update(status=f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    return r


def _peer(torch, timer, q, k, v, do, p: Problem, name: str, ref: dict, bound: float) -> dict:
    backend = bench.PEERS[name]
    if name == "torch_math":  # not a peer for a fused backward, and its N x N costs the budget
        return {"status": "skipped: the math backend's backward is not timed"}
    x = [t.detach().requires_grad_() for t in (q, k, v)]
    try:
        out = bench.sdpa(torch, *x, p, backend)
        got = dict(zip(GRADS, torch.autograd.grad(out, x, do, retain_graph=True)))
    except RuntimeError as e:
        return {"status": f"unsupported: {str(e).splitlines()[0][:160]}"}
    err = grad_err(torch, got, ref, p)
    if err > bound:
        return {"max_rel_err": err, "status": "failed_check"}
    grad = lambda: torch.autograd.grad(out, x, do, retain_graph=True)  # noqa: E731
    ms = timer(grad)
    return {"max_rel_err": err, "status": "ok", "time_ms": ms,
            "tflops": p.fa_flops() / (ms * 1e-3) / 1e12, **bench.queued_ms(timer, grad)}
