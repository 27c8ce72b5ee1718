"""The papers' standard attention: PyTorch's unfused attention, pass by pass.

`plan` (schedule `standard`) is the baseline of the FlashAttention papers' benchmarks,
`attention_pytorch` in flash-attention's benchmarks/benchmark_flash_attention.py (read at
Dao-AILab/flash-attention 0469c72): one launch per PyTorch call, every intermediate N x N in
HBM in the input dtype:

1. S = scale·QKᵀ (`torch.baddbmm`, a cuBLAS tensor-core GEMM; S in the input dtype);
2. causal: the mask is built in fp32 (`torch.full((N, N), -10000.0)`, `torch.triu(.., 1)`),
   cast to the input dtype, and *added* to all of S (the benchmark adds, "faster than
   masked_fill_"), one full-size pass: nothing is skipped above the diagonal;
3. P = softmax(S) over whole rows (every row read and written in full);
4. dropout: the benchmark passes dropout_p = 0.0, for which F.dropout returns its input
   without a kernel (FA1's paper timed dropout too: one more N x N read and write);
5. O = PV (`torch.einsum`, a cuBLAS GEMM).

The GEMMs are modelled with naive's tiles (iosim.schedules.naive): cuBLAS's own are not known
here. The benchmark's rearranges of its packed qkv (O(N·d) copies) are left out: the problem's
Q, K, V are separate tensors. The backward is autograd's, naive's passes over the stored P
(`backward`).

`torch_math` models PyTorch's math backend of scaled_dot_product_attention (the `torch_math`
peer of the measured grids; ATen `_scaled_dot_product_attention_math`, torch >= 2.5): fp16 and
bf16 inputs are upcast to fp32 and every pass runs in fp32, the GEMMs on the FP32 cores (no TF32
by default); the softmax is `_safe_softmax` (softmax, an -inf test, a row `all`, a `where`),
and the probabilities are also cast back to the input dtype (the second output, which SDPA
drops). It is not a schedule of the registry: the tests hold it to the measured rows.
"""

from __future__ import annotations

from dataclasses import replace

from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.plan import KernelPlan, Plan
from iosim.core.problem import CausalAlign, Direction, Dtype, Problem
from iosim.core.traffic import Traffic, Work
from iosim.schedules import naive
from iosim.schedules.base import F32, Tiles, gemm, uniform
from iosim.schedules.naive import PV_TILES, QK_TILES, gemm_tiles

THREADS = 128  # PyTorch's elementwise kernels: 128 threads, 4 elements a thread
PER_CTA = 4 * THREADS
# cuBLAS SGEMM: one FFMA warp instruction per 32 FMAs (a lane's FMA is one counted operation);
# its shared-memory loads are counted apart (one per 512 bytes, as every kernel's)
SGEMM_INST_PER_OP = 1.0
SOFTMAX_THREADS = 1024  # its softmax (cunn_SoftMaxForward): one CTA a row, up to 1024 threads


def _fwd_only(name: str, p: Problem) -> None:
    if p.direction is not Direction.fwd:
        raise InputError(f"{name}: models the forward pass only (allowed: --direction fwd)")


def stream(name: str, elems: int, reads: dict[str, int], writes: dict[str, int],
           work: Work = Work(), reuse: dict[str, int] | None = None,
           rows: tuple[int, int] | None = None) -> KernelPlan:
    """One PyTorch elementwise (or, with `rows` = (rows, row length), row-wise) launch over
    `elems` elements: its bytes and work, one trip a CTA."""
    grid = (rows[0], 1, 1) if rows else (max(1, -(-elems // PER_CTA)), 1, 1)
    threads = min(SOFTMAX_THREADS, max(32, rows[1] // 4 // 32 * 32)) if rows else THREADS
    return KernelPlan(name, grid, threads, rows[1] * F32 if rows else 0, 32, 1,
                      rows[1] if rows else PER_CTA, Traffic(reads=reads, writes=writes), work,
                      trips=uniform(1), reuse=reuse or {}, overlap="async")


def cublas(name: str, like: KernelPlan, simt: bool = False) -> KernelPlan:
    """A GEMM that cuBLAS runs, modelled as naive's (its tiles, counts and timing). `simt`: on
    the FP32 cores (fp32 inputs without TF32): an FMA a lane instead of tensor-core FLOPs."""
    if simt:
        w, once = like.work, like.once
        like = replace(like, work=Work(alu_flops=w.tensor_flops // 2 + w.alu_flops),
                       once=once, overlap="async", inst_per_op=SGEMM_INST_PER_OP)
    return replace(like, name=name, source=None, defines={})


def _mask_add(name: str, p: Problem, s_in: str, s_out: str, mask: str, eb: int) -> KernelPlan:
    """S + mask over all B·H·Nq·Nk elements; the one Nq x Nk mask is read again by every head
    (a head's elements are Nq·Nk / PER_CTA CTAs apart)."""
    n = p.bh * p.seqlen_q * p.seqlen_k
    per_head = max(1, p.seqlen_q * p.seqlen_k // PER_CTA)
    return stream(name, n, {s_in: n * eb, mask: n * eb}, {s_out: n * eb}, Work(alu_flops=n),
                  reuse={mask: per_head})


def plan(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Plan:
    """The FA papers' benchmark baseline (module docstring)."""
    if p.causal and p.causal_offset and p.causal_align is CausalAlign.bottom_right:
        raise InputError("standard: the papers' benchmark masks top-left (torch.triu(.., 1)) "
                         "(allowed: --causal-align top-left, or Nq = Nk)")
    if p.direction is Direction.bwd:
        return backward(p, hw, t)
    e, nq, nk, d = p.elem_bytes, p.seqlen_q, p.seqlen_k, p.head_dim
    n, nn = p.bh * nq * nk, nq * nk
    qk, pv = gemm_tiles(QK_TILES, p, t), gemm_tiles(PV_TILES, p, t)
    pv = Tiles(pv.block_m, min(pv.block_n, max(16, 1 << (d - 1).bit_length())), pv.block_k,
               pv.warps, pv.stages)
    ks = [cublas("standard_qk", gemm("naive_qk", p, nq, nk, d, qk, "Q", "K", "S", e, 1, hw))]
    scores = "S"
    if p.causal:
        ks += [stream("standard_mask_full", nn, {}, {"Mask32": nn * F32}),
               stream("standard_mask_triu", nn, {"Mask32": nn * F32}, {"Mask32": nn * F32}),
               stream("standard_mask_cast", nn, {"Mask32": nn * F32}, {"Mask": nn * e}),
               _mask_add("standard_mask_add", p, "S", "Sm", "Mask", e)]
        scores = "Sm"
    # softmax over whole rows: max, subtract, exp, sum, scale; every element
    ks.append(stream("standard_softmax", n, {scores: n * e}, {"P": n * e},
                     Work(exp_ops=n, alu_flops=4 * n), rows=(p.bh * nq, nk)))
    ks.append(cublas("standard_pv", gemm("naive_pv", p, nq, d, nk, pv, "P", "V", "O", e, 0, hw)))
    notes = (f"PyTorch standard attention as the FA papers benchmark it: S, P in {p.dtype.value}"
             + (", a full-size additive mask pass" if p.causal else "") + ", no dropout pass")
    return Plan("standard", p, hw.name, tuple(ks), notes)


def backward(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Plan:
    """Autograd over the benchmark's forward: einsum's two GEMMs (dV = Pᵀ·dO, dP = dO·Vᵀ),
    softmax's backward over whole rows of the stored P (dS = P∘(dP − rowsum(P∘dP))), baddbmm's
    two (dQ = scale·dS·K, dK = scale·dSᵀ·Q); the mask add passes its gradient through (no
    kernel) and dropout_p = 0 has none. These are naive's backward passes, by the same model."""
    ks = tuple(replace(k, name=k.name.replace("naive_", "standard_"), source=None)
               if k.name.startswith("naive_") else k for k in naive.plan(p, hw, t).kernels)
    return Plan("standard", p, hw.name, ks,
                f"PyTorch autograd of the FA papers' baseline: P, dP, dS in {p.dtype.value}")


def torch_math(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Plan:
    """PyTorch's SDPA math backend (module docstring): fp32 throughout for fp16/bf16 inputs."""
    _fwd_only("torch_math", p)
    e, nq, nk, d = p.elem_bytes, p.seqlen_q, p.seqlen_k, p.head_dim
    n, nn, rows = p.bh * nq * nk, nq * nk, p.bh * nq
    nqd, nkd = p.bh * nq * d, p.batch * p.kv_heads * nk * d
    up = e < F32  # fp16, bf16: the inputs are upcast
    p32 = p.model_copy(update={"dtype": Dtype.fp32})
    f32 = gemm_tiles(QK_TILES, p32, t)
    ks: list[KernelPlan] = []
    q, k, v = ("Q32", "K32", "V32") if up else ("Q", "K", "V")
    if up:
        ks += [stream(f"torch_math_to_f32_{x}", m, {x: m * e}, {f"{x}32": m * F32})
               for x, m in (("Q", nqd), ("K", nkd), ("V", nkd))]
    # q·√scale and kᵀ·√scale, each a new fp32 tensor
    ks += [stream("torch_math_scale_q", nqd, {q: nqd * F32}, {"Q32": nqd * F32}, Work(alu_flops=nqd)),
           stream("torch_math_scale_k", nkd, {k: nkd * F32}, {"K32": nkd * F32}, Work(alu_flops=nkd))]
    if p.causal:  # ones(bool).tril(), then where(mask, 0, -inf) in fp32
        ks += [stream("torch_math_mask_ones", nn, {}, {"MaskB": nn}),
               stream("torch_math_mask_tril", nn, {"MaskB": nn}, {"MaskB": nn}),
               stream("torch_math_mask_where", nn, {"MaskB": nn}, {"Mask32": nn * F32})]
    ks.append(cublas("torch_math_qk", gemm("naive_qk", p32, nq, nk, d, f32, "Q32", "K32", "S32",
                                           F32, 0, hw), simt=True))
    if p.causal:
        ks.append(_mask_add("torch_math_mask_add", p, "S32", "S32", "Mask32", F32))
    ks += [stream("torch_math_softmax", n, {"S32": n * F32}, {"P32": n * F32},
                  Work(exp_ops=n, alu_flops=4 * n), rows=(rows, nk)),
           # _safe_softmax: rows whose scores are all -inf give 0, not NaN
           stream("torch_math_isneginf", n, {"S32": n * F32}, {"NegInf": n}, Work(alu_flops=n)),
           stream("torch_math_all", n, {"NegInf": n}, {"Dead": rows}, Work(alu_flops=n),
                  rows=(rows, nk)),
           stream("torch_math_where", n, {"Dead": n // nk, "P32": n * F32}, {"W32": n * F32}),
           cublas("torch_math_pv", gemm("naive_pv", p32, nq, d, nk, f32, "W32", "V32" if up else v,
                                        "O32", F32, 0, hw), simt=True)]
    if up:  # the output and the probabilities back to the input dtype
        ks += [stream("torch_math_out", nqd, {"O32": nqd * F32}, {"O": nqd * e}),
               stream("torch_math_attn_out", n, {"W32": n * F32}, {"P": n * e})]
    return Plan("torch_math", p, hw.name, tuple(ks),
                "PyTorch SDPA math backend: fp32 passes, fp32 GEMMs on the FP32 cores")
