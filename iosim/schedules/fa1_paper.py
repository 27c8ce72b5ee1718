"""FlashAttention-1's Algorithm 1 at the paper's block sizes (Dao et al. 2022, arXiv:2205.14135,
Algorithm 1 line 1): Bc = ⌈M/4d⌉, Br = min(⌈M/4d⌉, d), M = the SRAM one CTA may use, in
elements (`smem_per_block_optin_bytes` / element bytes; a what-if on `smem_per_sm_bytes` moves
it, iosim.core.hardware.HardwareProfile.with_changes).

The loops and counts are `fa1`'s (iosim.schedules.flash.fa1_fwd: K/V outer, Q inner, O, ℓ, m
re-read and re-written every outer step), one CTA per (batch, head) with no query-row split
(the algorithm as written; fa1's kernel splits the rows to fill the GPU), with no rounding of the
tiles to the MMA shape and no register cap: Tc = ⌈N/Bc⌉ outer steps each move ~Nd of Q and O,
so the HBM accesses are Θ(N²d²/M) (Theorem 2). No kernel runs these tiles (S_ij of Br x Bc
outgrows the register file that fa1.cu keeps it in): the rows are the model's alone
(backing "hypothetical"). Forward only: Algorithm 4 (backward) is `fa1`'s.
"""

from __future__ import annotations

from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.plan import KernelPlan, Plan
from iosim.core.problem import Direction, Problem
from iosim.core.traffic import Work
from iosim.schedules.base import BlockMap, Tiles, check_head_dim, check_smem, uniform
from iosim.schedules.flash import fa1_fwd, fa1_init

INIT_THREADS = 128
# one CTA per head: the next query head's CTA reads a KV head's K, V again (as fa1's)
GQA_REUSE = {"K": 1, "V": 1}


def sram_elements(p: Problem, hw: HardwareProfile) -> int:
    """M: the shared memory one CTA may use, in elements of the problem's dtype."""
    return hw.smem_per_block_optin_bytes // p.elem_bytes


def paper_tiles(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Tiles:
    """Bc = ⌈M/4d⌉, Br = min(Bc, d); fields of `t` that are set win."""
    bc = -(-sram_elements(p, hw) // (4 * p.head_dim))
    bc = min(t.block_n or bc, p.seqlen_k)  # a block longer than the keys loads only the keys
    br = min(t.block_m or min(bc, p.head_dim), p.seqlen_q)
    return Tiles(block_m=br, block_n=bc, warps=t.warps or -(-br // 16), stages=1)


def plan(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Plan:
    check_head_dim("fa1_paper", p)
    if p.direction is not Direction.fwd:
        raise InputError("fa1_paper: Algorithm 1 is the forward pass "
                         "(allowed: --direction fwd; fa1 models Algorithm 4)")
    t = paper_tiles(p, hw, t)
    d = p.head_dim
    smem = (t.block_m + 2 * t.block_n) * d * p.elem_bytes  # Q_i, K_j, V_j (as fa1.cu)
    check_smem("fa1_paper", smem, hw, p)
    bm, bh = BlockMap.of(p, t.block_m, t.block_n), p.bh
    init = KernelPlan("fa1_paper_init", (bm.tm, p.heads, p.batch), INIT_THREADS, 0, 32,
                      t.block_m, d, fa1_init(p).scaled(bh), Work(), trips=uniform(1))
    # one CTA per (batch, head) runs all of a head's query blocks (no query-row split: the
    # algorithm as written; SPLIT_ROWS tells the executor so)
    main = KernelPlan("fa1_paper_fwd", (1, p.heads, p.batch), 32 * t.warps, smem, 255,
                      t.block_m, t.block_n, **fa1_fwd(p, bm, bm.tm).launch(bh),
                      trips=uniform(bm.pairs), masked=uniform(bm.diag_pairs()), reuse=GQA_REUSE,
                      overlap="none", defines={"SPLIT_ROWS": bm.tm * t.block_m})
    notes = (f"Algorithm 1 at the paper's tiles Bc = ceil(M/4d) = {t.block_n}, Br = {t.block_m} "
             f"for M = {hw.smem_per_block_optin_bytes} B; no kernel runs them")
    return Plan("fa1_paper", p, hw.name, (init, main), notes)
