"""fa3's fp8_e4m3 path emulated in torch: the yardstick its check holds it to, and the
quantisation schemes the accuracy experiment compares (experiments/fp8/).

`emulate` computes, in float32 from the caller's bf16 Q, K, V, what kernels/fp8_quant.cu and
fa3.cu's FP8 entry compute: Q and K rotated by the random-sign Hadamard transform (if the
problem asks), Q, K, V rounded to e4m3 with the kernel's scales (amax / 448 per tile of rows per
head at the attention kernel's tiles, or per tensor), P = e4m3(exp(S - rowmax)) with l summed
from the unrounded P. It differs from the kernel only in the order of sums and in the running
row maximum (the kernel rounds exp(S - m_running) for each tile), so a kernel within a small
multiple of the emulation's error (against float32 attention on the bf16 inputs) has its
layouts, masks and factors right: a wrong one costs O(1).
"""

from __future__ import annotations

from iosim.core.problem import Fp8Scaling, Problem
from iosim.kernels import hadamard_matrix

E4M3_MAX = 448.0  # the largest finite e4m3


def quantise(torch, x, rows: int, per_tensor: bool):
    """x (B, h, N, d) float32 rounded to e4m3 with one scale per tile of `rows` rows per head
    (or one for the tensor) and multiplied back: what the kernels compute with."""
    b, h, n, d = x.shape
    t = -(-n // rows)
    tiles = torch.zeros(b, h, t * rows, d, dtype=torch.float32, device=x.device)
    tiles[:, :, :n] = x
    tiles = tiles.view(b, h, t, rows, d)
    amax = x.abs().amax() if per_tensor else tiles.abs().amax(dim=(-1, -2), keepdim=True)
    s = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax))
    inv = 1.0 / s  # the kernel multiplies by the reciprocal
    deq = (tiles * inv).to(torch.float8_e4m3fn).float() * s
    return deq.view(b, h, t * rows, d)[:, :, :n]


def rotate(torch, q, k, p: Problem):
    """Q and K times the kernel's random-sign Hadamard matrix (float32)."""
    m = torch.tensor(hadamard_matrix(p.head_dim), dtype=torch.float32, device=q.device)
    return q @ m, k @ m


def quantised_inputs(torch, q, k, v, p: Problem, bm: int, bn: int):
    """The dequantised float32 Q, K, V that the fp8 kernels compute with."""
    q, k, v = q.float(), k.float(), v.float()
    if p.hadamard:
        q, k = rotate(torch, q, k, p)
    # `given`: the launcher quantised the inputs per tensor (iosim.gpu.launch)
    tensor = p.fp8_scaling in (Fp8Scaling.tensor, Fp8Scaling.given)
    return quantise(torch, q, bm, tensor), quantise(torch, k, bn, tensor), quantise(torch, v, bn, tensor)


def emulate(torch, q, k, v, p: Problem, bm: int, bn: int, chunk_bytes: int = 1 << 30):
    """float32 O and natural-log LSE of the fp8 path (see the module docstring), a block of
    (heads, query rows) at a time like iosim.gpu.bench.reference_chunks."""
    from iosim.gpu.bench import blocks

    qd, kd, vd = quantised_inputs(torch, q, k, v, p, bm, bn)
    o = torch.empty(p.batch, p.heads, p.seqlen_q, p.head_dim, dtype=torch.float32, device=q.device)
    lse = torch.empty(p.batch, p.heads, p.seqlen_q, dtype=torch.float32, device=q.device)
    cols = torch.arange(p.seqlen_k, device=q.device)
    for bi, hs, _, kf, vf, rs in blocks(torch, kd, vd, p, p.seqlen_k * 4 * 3, chunk_bytes):
        s = torch.matmul(qd[bi, hs, rs], kf.transpose(-1, -2)) * p.scale
        if p.causal:
            seen = cols[None, :] <= (torch.arange(rs.start, rs.stop, device=q.device)
                                     + p.causal_offset)[:, None]
            s = s.masked_fill(~seen, float("-inf"))
        mx = s.amax(-1, keepdim=True)
        mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
        e = torch.exp(s - mx)
        del s
        tot = e.sum(-1, keepdim=True)
        pe = e.to(torch.float8_e4m3fn).float()
        del e
        o[bi, hs, rs] = torch.matmul(pe, vf) / torch.where(tot > 0, tot, torch.ones_like(tot))
        lse[bi, hs, rs] = (mx + torch.log(tot))[..., 0]
        del pe
    return o, lse
