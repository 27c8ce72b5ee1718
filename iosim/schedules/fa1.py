"""FlashAttention-1 (Dao et al., 2022), Algorithm 1 forward and Algorithm 4 backward.

Block sizes from the paper: Bc = ⌈M/4d⌉, Br = min(Bc, d), M = SRAM per block in elements;
Bc is then rounded down to a multiple of 16 (the MMA's k) and capped by what the kernel's
registers hold. One CTA per (batch, head); K/V blocks outer, Q blocks inner; O (in fp32, so
Tc roundings do not accumulate), ℓ and m are read from and written to HBM at every inner step.
Causal: blocks entirely above the diagonal are skipped.
"""

from __future__ import annotations

from ..hardware import HardwareProfile
from ..plan import KernelPlan, Plan
from ..problem import Direction, Problem
from ..traffic import Traffic, Work
from .base import (
    F32,
    BlockMap,
    Tiles,
    check_head_dim,
    check_smem,
    gqa_reduce,
    mask_defines,
    uniform,
)
from .flash import dq_convert, fa1_fwd, fa1_init, flash_bwd

# Largest Bc whose S tile (16 rows x Bc fp32 per warp) and O fragment fit the kernel's
# registers without spilling, by head_dim.
BC_REGISTER_CAP = {64: 128, 128: 128, 256: 64}
# One CTA per head: K/V of a KV head are read again by the next query head's CTA (GQA); the
# CTA itself comes back to Q, O, l and m at every outer step (reuse 0, the default).
GQA_REUSE = {"K": 1, "V": 1}


def tiles(p: Problem, hw: HardwareProfile, t: Tiles) -> Tiles:
    d = p.head_dim
    m_elems = hw.smem_per_block_optin_bytes // p.elem_bytes
    bc = -(-m_elems // (4 * d))
    cap = next(v for k, v in sorted(BC_REGISTER_CAP.items()) if d <= k)
    bc = t.block_n or max(16, min(bc // 16 * 16, cap))
    br = t.block_m or max(16, min(bc, d) // 16 * 16)  # warps own 16-row MMA tiles
    return Tiles(block_m=br, block_n=bc, warps=t.warps or max(1, br // 16), stages=1)


def head_dim_pad(d: int) -> int:
    """Shared-memory row length of kernels/fa1.cu's tiles: d rounded up to a multiple of 64 (its
    XOR swizzle needs rows of a multiple of 8 16-byte chunks; the padding is never loaded)."""
    return -(-d // 64) * 64


def smem_bytes(p: Problem, t: Tiles) -> int:
    """Q_i, K_j, V_j tiles in the input dtype, rows padded as the kernel lays them out."""
    return (t.block_m + 2 * t.block_n) * head_dim_pad(p.head_dim) * p.elem_bytes


def plan(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Plan:
    check_head_dim("fa1", p)
    t = tiles(p, hw, t)
    smem = smem_bytes(p, t)
    check_smem("fa1", smem, hw, p)
    bm, bh = BlockMap.of(p, t.block_m, t.block_n), p.bh
    common = dict(HEAD_DIM=p.head_dim, HEAD_DIM_PAD=head_dim_pad(p.head_dim),
                  BLOCK_M=t.block_m, BLOCK_N=t.block_n, NUM_WARPS=t.warps, **mask_defines(p))
    pairs, diag = uniform(bm.pairs), uniform(bm.diag_pairs())  # one CTA per head
    ks: list[KernelPlan] = []
    if p.direction is Direction.fwd:
        tm = bm.tm
        ks.append(KernelPlan("fa1_init", (tm, p.heads, p.batch), 128, 0, 32, t.block_m,
                             p.head_dim, fa1_init(p).scaled(bh), Work(),
                             trips=uniform(1), source="fa1.cu",
                             defines={**common, "FA1_INIT": 1}))
        ks.append(KernelPlan("fa1_fwd", (1, p.heads, p.batch), 32 * t.warps, smem, 255,
                             t.block_m, t.block_n, **fa1_fwd(p, bm).launch(bh), trips=pairs,
                             masked=diag, reuse=GQA_REUSE, overlap="none", source="fa1.cu", defines={**common, "FA1_FWD": 1}))
    else:
        n = p.seqlen_q * p.head_dim
        init = Traffic(writes={"dQacc": n * F32})
        ks.append(KernelPlan("fa1_bwd_init", (bm.tm, p.heads, p.batch), 128, 0, 32,
                             t.block_m, p.head_dim, init.scaled(bh), Work(),
                             trips=uniform(1)))
        ks.append(KernelPlan("fa1_bwd", (1, p.heads, p.batch), 32 * t.warps,
                             smem + 2 * t.block_m * t.block_n * p.elem_bytes, 255, t.block_m,
                             t.block_n, **flash_bwd(p, bm, fa1=True).launch(bh), trips=pairs,
                             masked=diag, reuse=GQA_REUSE))
        tr, w = dq_convert(p, scaled=False)
        ks.append(KernelPlan("fa1_bwd_convert", (bm.tm, p.heads, p.batch), 128, 0, 32,
                             t.block_m, p.head_dim, tr.scaled(bh), w.scaled(bh),
                             trips=uniform(1)))
        if p.group > 1:
            ks.append(gqa_reduce(p, ("dK", "dV")))
    paper = -(-(hw.smem_per_block_optin_bytes // p.elem_bytes) // (4 * p.head_dim))
    notes = (f"Algorithm 1's loop order with this kernel's tiles Bc={t.block_n}, Br={t.block_m}"
             + (f" (the paper's Bc = ceil(M/4d) = {paper} for M={hw.smem_per_block_optin_bytes} B"
                " exceeds the kernel's registers)" if paper > t.block_n else ""))
    return Plan("fa1", p, hw.name, tuple(ks), notes)
