"""The papers' standard attention: PyTorch's unfused attention, pass by pass.

`plan` (schedule `standard`) is the baseline of the FlashAttention papers' benchmarks,
`attention_pytorch` in flash-attention's benchmarks/benchmark_flash_attention.py (read at
Dao-AILab/flash-attention 0251105a; the FA3 paper's hopper/benchmark_flash_attention.py of
2024-07-23 has the same function): one launch per PyTorch call, every intermediate in HBM in the
input dtype. Its input is one packed tensor, qkv (batch, seqlen, 3, heads, d); `qkv.unbind(2)`
gives Q, K and V as strided views of it (here `Qp`, `Kp`, `Vp`):

1. `rearrange(q, 'b t h d -> (b h) t d')`: not a view of the packed q, so a copy (Qp -> Q);
2. `rearrange(k, 'b s h d -> (b h) d s')`: a transposing copy (Kp -> K, d x N per head). The
   copy walks its output in order (TensorIterator orders dimensions by the output's strides),
   so consecutive threads read K at a stride of 3·H·d elements: every element read moves a
   32-byte sector from L2 (`SECTOR`), whose other elements the CTAs writing the next output
   rows read again (from L2: `reuse`);
3. S = scale·QKᵀ (`torch.baddbmm`, a cuBLAS tensor-core GEMM; S in the input dtype);
4. causal: the mask is built in fp32 (`torch.full((N, N), -10000.0)`, `torch.triu(.., 1)`),
   cast to the input dtype, and *added* to all of S (the benchmark adds, "faster than
   masked_fill_"), one full-size pass: nothing is skipped above the diagonal; the mask is
   broadcast over batch and heads, so PyTorch runs the add on its non-vectorised elementwise
   kernel, a memory round trip per element a thread (`_mask_add`);
5. P = softmax(S) over whole rows (every row read and written in full);
6. dropout: the benchmark passes dropout_p = 0.0, for which F.dropout returns its input
   without a kernel (ATen's dropout returns the input when p == 0; FA1's paper timed dropout
   too: one more N x N read and write, not modelled);
7. O = PV (`torch.einsum('bhts,bshd->bthd', ..)`: einsum reshapes the packed v to
   (b h) s d for bmm, not a view of it, so a copy (Vp -> V), then a cuBLAS GEMM; the result is
   returned as a permuted view, and `.to(qkv.dtype)` is a no-op).

The GEMMs are modelled with naive's tiles (iosim.schedules.naive): cuBLAS's own are not known
here. The backward is autograd's (`backward`): naive's GEMMs and softmax backward over the
stored P, baddbmm's scale as separate multiplies, and the packed gradient assembled by
`qkv.unbind`'s backward (a stack: one copy per slice).

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
LEGACY_THREADS = 128  # ... and its non-vectorised kernel for operands that are not contiguous
SOFTMAX_THREADS = 1024  # its softmax (cunn_SoftMaxForward): one CTA a row, up to 1024 threads
# bytes an L2 -> SM read moves for one element read at a large stride (one sector)
SECTOR = 32


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
    # naive.cu's loop (its KernelSpec's loop_issue, its operands and one-chunk C streamed
    # through the trips, as Nsight Compute shows naive.cu's) is not cuBLAS's code
    return replace(like, name=name, source=None, defines={}, loop_issue=0.0, streamed=())


def _mask_add(name: str, p: Problem, s_in: str, s_out: str, mask: str, eb: int) -> KernelPlan:
    """S + mask over all B·H·Nq·Nk elements; the one Nq x Nk mask is read again by every head
    (a head's elements are Nq·Nk / per-CTA elements CTAs apart). The mask is broadcast (stride
    0 over batch and heads), so the operands are not contiguous and PyTorch runs its
    non-vectorised elementwise kernel (ATen gpu_kernel_impl: launch_legacy_kernel<128, vt>,
    vt = 4 elements a thread for a 2-byte result, 2 for a 4-byte one): a thread computes its
    elements one after another, each element's loads issued after the previous element's store
    (through plain pointers that may alias), so each waits a memory round trip: vt trips a CTA
    of one element a thread, one round trip each (KernelPlan.round_trips)."""
    n = p.bh * p.seqlen_q * p.seqlen_k
    vt = 2 if eb >= 4 else 4
    per_cta = LEGACY_THREADS * vt
    per_head = max(1, p.seqlen_q * p.seqlen_k // per_cta)
    return KernelPlan(name, (max(1, -(-n // per_cta)), 1, 1), LEGACY_THREADS, 0, 32, 1, per_cta,
                      Traffic(reads={s_in: n * eb, mask: n * eb}, writes={s_out: n * eb}),
                      Work(alu_flops=n), trips=uniform(vt), reuse={mask: per_head},
                      overlap="async", round_trips=1)


def copy(name: str, n: int, src: str, dst: str, e: int, stride_run: int = 0) -> KernelPlan:
    """One PyTorch copy kernel (TensorIterator's direct copy) of n elements, src -> dst. With
    `stride_run` the source is read at a large stride, the output walked in order: one sector
    an element (`SECTOR`), its other elements read again by the CTAs that write the next output
    rows, `stride_run` elements later (from L2)."""
    if not stride_run:
        return stream(name, n, {src: n * e}, {dst: n * e})
    return stream(name, n, {src: n * max(e, SECTOR)}, {dst: n * e},
                  reuse={src: max(1, stride_run // PER_CTA)})


def scale(name: str, n: int, x: str, e: int) -> KernelPlan:
    """`maybe_multiply(t, alpha)` of autograd's baddbmm backward: t * alpha, a new tensor."""
    return stream(name, n, {x: n * e}, {x: n * e}, Work(alu_flops=n))


def layout(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> tuple:
    """What of the Plan depends on batch x heads besides counts affine in batch x kv_heads:
    an elementwise launch's CTAs, ceil(elements / PER_CTA), are affine only when one (batch,
    K/V head) pair's elements fill whole CTAs (else the pairs are part of the layout), and
    backward, dK's strided copy runs kv_heads x d elements."""
    g, nq, nk, d = p.group, p.seqlen_q, p.seqlen_k, p.head_dim
    whole = all(x % PER_CTA == 0 for x in (g * nq * d, nk * d, g * nq * nk, g * nk * d))
    return (p.kv_heads if p.direction is Direction.bwd else None,
            None if whole else (p.batch, p.kv_heads))


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
    nqd, nkd = p.bh * nq * d, p.batch * p.kv_heads * nk * d
    # q = rearrange(q, 'b t h d -> (b h) t d'): a copy of the packed q, d-contiguous runs
    ks = [copy("standard_rearrange_q", nqd, "Qp", "Q", e),
          # k = rearrange(k, 'b s h d -> (b h) d s'): the transposing copy (module docstring)
          copy("standard_rearrange_k", nkd, "Kp", "K", e, stride_run=nk),
          # torch.baddbmm(scores, q, k, beta=0, alpha=softmax_scale)
          cublas("standard_qk", gemm("naive_qk", p, nq, nk, d, qk, "Q", "K", "S", e, 1, hw))]
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
    # torch.einsum('bhts,bshd->bthd', attention_drop, v): v reshaped to (b h) s d (a copy),
    # then bmm
    ks.append(copy("standard_einsum_v", nkd, "Vp", "V", e))
    ks.append(cublas("standard_pv", gemm("naive_pv", p, nq, d, nk, pv, "P", "V", "O", e, 0, hw)))
    notes = (f"PyTorch standard attention as the FA papers benchmark it: S, P in {p.dtype.value}"
             + (", a full-size additive mask pass" if p.causal else "")
             + ", Q, K (transposed) and V copied out of the packed qkv, no dropout pass")
    return Plan("standard", p, hw.name, tuple(ks), notes)


def backward(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Plan:
    """Autograd over the benchmark's forward, in its order: einsum's two GEMMs (dV = Pᵀ·dO,
    dP = dO·Vᵀ), softmax's backward over whole rows of the stored P (dS = P∘(dP −
    rowsum(P∘dP))), baddbmm's two (dQ = dS·K, dK = Qᵀ·dS: K's copy is d x N), each followed by
    its `maybe_multiply(.., alpha)` (a separate multiply by the scale), then `qkv.unbind`'s
    backward, `torch.stack` of dQ, dK, dV into the packed gradient: its 5-dimensional inputs
    are not contiguous, so one copy a slice, dK's read at a stride (K's copy was transposed).
    The mask add passes its gradient through (no kernel), dropout_p = 0 has none, and the
    rearranges' and einsum's copies have view backwards (no kernel). The GEMMs and the softmax
    backward are naive's passes, by the same model."""
    e, nq, nk, d = p.elem_bytes, p.seqlen_q, p.seqlen_k, p.head_dim
    nqd, nkd = p.bh * nq * d, p.batch * p.kv_heads * nk * d
    out = []
    for k in naive.plan(p, hw, t, ours=False).kernels:
        if k.name.startswith("naive_"):  # cuBLAS's GEMMs: not naive.cu's loop (cublas())
            k = replace(k, name=k.name.replace("naive_", "standard_"), source=None,
                        **({"loop_issue": 0.0, "streamed": ()} if "BLOCK_K" in k.defines else {}))
        if k.name in ("standard_bwd_dq", "standard_bwd_dk"):  # bmm alone: alpha comes after
            k = replace(k, work=Work(tensor_flops=k.work.tensor_flops), once=Work())
        out.append(k)
        if k.name == "standard_bwd_dq":
            out.append(scale("standard_bwd_scale_dq", nqd, "dQ", e))
    at = len(out) - (p.group > 1)  # after dK's GEMM (and before a GQA sum of dK, dV)
    dk = "dK_expanded" if p.group > 1 else "dK"
    out[at:at] = [scale("standard_bwd_scale_dk", p.bh * nk * d, dk, e)]
    out += [copy("standard_bwd_stack_q", nqd, "dQ", "dQp", e),
            # dK is d x N per head: read at a stride of N, the packed output walked in order
            copy("standard_bwd_stack_k", nkd, "dK", "dKp", e, stride_run=p.kv_heads * d),
            copy("standard_bwd_stack_v", nkd, "dV", "dVp", e)]
    return Plan("standard", p, hw.name, tuple(out),
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
