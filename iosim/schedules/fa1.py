"""FlashAttention-1 (Dao et al., 2022), Algorithm 1 forward and Algorithm 4 backward.

Forward block sizes from the paper: Bc = ⌈M/4d⌉, Br = min(Bc, d), M = SRAM per block in
elements; Bc is then rounded down to a multiple of 16 (the MMA's k) and capped by what the
kernel's registers hold. K/V blocks outer, Q blocks inner; O (in fp32, so Tc roundings do not
accumulate), ℓ and m are read from and written to HBM at every inner step. Causal: blocks
entirely above the diagonal are skipped. One CTA per (query-row split, head, batch): as the
FlashAttention-1 library did when batch·heads could not fill the GPU, a head's query blocks are
split in runs of SPLIT_ROWS rows (`base.split_blocks`: the fewest splits that fill the GPU's
CTA slots, waves within 95% of the best); each split runs the loops over its own rows and
re-reads the K/V blocks they see. Each warp owns 16 query rows and reads all of K_j and V_j
from shared memory at every inner step (SPECS kv_readers); with no CTA barrier inside the outer
step the warps drift apart (timing policy `drift`, docs/model.md).

Backward (kernels/fa1.cu, FA1_BWD): Algorithm 4's loop order (K/V outer, Q inner); dK_j and
dV_j live in fp32 registers for a whole outer step, so the tiles are the register file's
(BWD_TILES), not the paper's: O_i, ℓ_i, m_i, dO_i, Q_i and dQacc_i (fp32) move at every inner
step, D_i = rowsum(dO_i∘O_i) is formed there. One CTA per (key-block split, head, batch): as
the FlashAttention-1 library's backward did, a head's key blocks are split in runs of
SPLIT_COLS rows when batch·heads cannot fill the GPU (`base.split_blocks` over the key blocks,
the forward's rule); each split runs the loops over its own key blocks (K_j, V_j still loaded
once each) and adds its dQ_i contributions into dQacc with fp32 atomics (DQ_ATOMIC). Unsplit
(one CTA per head), dQacc_i is read-modify-written as before; a deterministic backward
(Problem.deterministic) is always planned so. The HBM bytes are the same either
way (the model counts an atomic add as a read and a write, as fa2_bwd's); the grid, the trips
per CTA, the L2 reuse distance of K/V (GQA) and the loads a step waits for are not. Timing:
the step prefetches the next step's O_i and dQacc_i into L2 (and Q_i, dO_i through the ring), so
DRAM overlaps the warps' chain (timing policy `prefetch`); its SASS issues integer, address,
global, barrier and branch instructions the counts have no term for (the spec's `loop_issue`
and `loop_shadow`, iosim.kernels FA1_*, from tools/fa1_sass.py).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from iosim.core.hardware import HardwareProfile
from iosim.core.memo import MISS, Memo
from iosim.core.plan import KernelPlan, Plan, ctas_per_sm
from iosim.core.problem import Direction, Problem
from iosim.core.traffic import Traffic, Work
from iosim.kernels import SPECS, kernel_defines, source
from iosim.schedules.base import (
    F32,
    BlockMap,
    Tiles,
    check_head_dim,
    check_smem,
    gqa_reduce,
    mask_defines,
    split_blocks,
    split_blocks_many,
    uniform,
)
from iosim.schedules.flash import dq_convert, fa1_fwd, fa1_init, flash_bwd

# Largest Bc whose S tile (16 rows x Bc fp32 per warp) and O fragment fit the kernel's
# registers without spilling, by head_dim.
BC_REGISTER_CAP = {64: 128, 128: 128, 256: 64}
# Backward (block_m, block_n, warps, stages) by the padded head_dim (HEAD_DIM_PAD) of
# kernels/fa1.cu's fa1_bwd: dK_j and dV_j take 2·Bc·d_pad/(32·warps) fp32 registers a thread,
# and at 128 of them (Bc = 128 at d = 128, Bc = 64 at d = 256) nvcc 13 spills for some masks
# and head_dims; these tiles keep them at 64-96 with no spills for every head_dim, mask and
# dtype (Br = 128 at d <= 64 spills too, for padded head_dims: its Sᵀ fragment doubles). Br = 64
# (the Pᵀ/dSᵀ rows are swizzled 64 wide). STAGES: the Q_i/dO_i/ℓ_i/m_i cp.async ring's depth.
BWD_TILES = {64: (64, 128, 8, 2), 128: (64, 64, 8, 2), 192: (64, 64, 8, 2), 256: (64, 32, 8, 2)}
AUX_THREADS = 128  # the backward's dQacc = 0 and dQ conversion kernels
# K/V of a head are read again by the head's next split, the next CTA along x (and by the next
# query head's CTAs, GQA); a CTA itself comes back to Q, O, l and m at every outer step (reuse
# 0, the default).
GQA_REUSE = {"K": 1, "V": 1}


def tiles(p: Problem, hw: HardwareProfile, t: Tiles) -> Tiles:
    """The kernel's tiles for the problem's direction (the forward's from the paper's formula
    capped by registers; the backward's from BWD_TILES); fields of `t` that are set win."""
    d = p.head_dim
    if p.direction is Direction.bwd:
        dp = SPECS["fa1_bwd"].head_dim_pad(d)
        bm, bn, w, st = next(v for k, v in sorted(BWD_TILES.items()) if dp <= k)
        return Tiles(block_m=t.block_m or bm, block_n=t.block_n or bn, warps=t.warps or w,
                     stages=t.stages or st, split_cols=t.split_cols)
    m_elems = hw.smem_per_block_optin_bytes // p.elem_bytes
    bc = -(-m_elems // (4 * d))
    cap = next(v for k, v in sorted(BC_REGISTER_CAP.items()) if d <= k)
    bc = t.block_n or max(16, min(bc // 16 * 16, cap))
    br = t.block_m or max(16, min(bc, d) // 16 * 16)  # warps own 16-row MMA tiles
    return Tiles(block_m=br, block_n=bc, warps=t.warps or max(1, br // 16), stages=1,
                 split_rows=t.split_rows)


REGS = 255  # the kernels' __launch_bounds__(THREADS, 1): the register budget the model assumes


def _setup(p: Problem, hw: HardwareProfile, t: Tiles) -> tuple:
    """(tiles, main entry, aux and tile defines, shared memory a CTA, block map, query blocks a
    CTA, key blocks a CTA): the forward's query-row split and the backward's key-block split
    fill the CTA slots one head's CTAs share with the others."""
    t, main, aux, tile, smem, bm, slots = _fixed(p, hw, t)
    fixed = _fixed_split(p, t, bm)
    if p.direction is Direction.fwd:
        qb = split_blocks(p.bh, bm.tm, slots, bm.hi) if fixed is None else fixed
        return t, main, aux, tile, smem, bm, qb, bm.tn
    kb = split_blocks(p.bh, bm.tn, slots, bm.col_visits(), outer="count") if fixed is None else fixed
    return t, main, aux, tile, smem, bm, bm.tm, kb


def _fixed_split(p: Problem, t: Tiles, bm: BlockMap) -> int | None:
    """The blocks a CTA takes whatever batch x heads: at least split_rows query rows (forward)
    or split_cols keys (backward) a CTA where asked, and a deterministic backward unsplit
    (dQacc_i read-modify-written in key-block order, not added by atomics in whatever order the
    splits arrive); None: the split fills the CTA slots (split_blocks)."""
    if p.direction is Direction.fwd:
        return min(bm.tm, -(-t.split_rows // t.block_m)) if t.split_rows else None
    if p.deterministic:
        return bm.tn
    return min(bm.tn, -(-t.split_cols // t.block_n)) if t.split_cols else None


# (direction, head_dim, dtype, mask, id(profile), id(tiles)) -> ((profile, tiles), _fixed's
# answer less the block map)
_FIXED = Memo()


def _fixed(p: Problem, hw: HardwareProfile, t: Tiles) -> tuple:
    """What _setup takes from the problem's shape alone (not from batch x heads): tiles,
    entry, defines, shared memory, block map, CTA slots; all but the block map (BlockMap.of's,
    of the lengths) functions of the direction, head_dim, dtype and mask, remembered (a sweep
    asks for every batch and head count of a shape, and every length; one set of defines
    dicts, so the memos keyed by their identity serve every length)."""
    # (the enums by their values, the tiles by identity, kept: an Enum's and a frozen
    # dataclass's hash is a Python call each)
    key = (p.direction._value_, p.head_dim, p.dtype._value_, p.causal, p.causal_align._value_, id(hw), id(t))
    out = _FIXED.get(key, hw, t)
    if out is MISS:
        out = _FIXED.put(key, (hw, t), _unmapped(p, hw, t))
    t, main, aux, tile, smem, slots = out
    return t, main, aux, tile, smem, BlockMap.of(p, t.block_m, t.block_n), slots


def _unmapped(p: Problem, hw: HardwareProfile, t: Tiles) -> tuple:
    """_fixed's answer but the block map."""
    check_head_dim("fa1", p)
    t = tiles(p, hw, t)
    main = "fa1_fwd" if p.direction is Direction.fwd else "fa1_bwd"
    aux = dict(HEAD_DIM=p.head_dim, BLOCK_M=t.block_m)
    tile = dict(HEAD_DIM_PAD=SPECS[main].head_dim_pad(p.head_dim), BLOCK_N=t.block_n,
                NUM_WARPS=t.warps, **mask_defines(p))
    smem = SPECS[main].smem({**aux, **tile, "STAGES": t.stages}, p.elem_bytes)
    check_smem("fa1", smem, hw, p)
    # what ctas_per_sm reads of the kernel (a KernelPlan's threads, registers, shared memory)
    probe = SimpleNamespace(threads=32 * t.warps, regs_per_thread=REGS, smem_bytes=smem)
    return t, main, aux, tile, smem, ctas_per_sm(probe, hw) * hw.sm_count


_FWD_DEFINES = Memo()  # (ids of its specs, id(aux), id(tile), split rows) -> (spec, aux, tile, answer)


def _fwd_defines(main: str, aux: dict, tile: dict, split_rows: int) -> tuple:
    """The forward's (defines, fa1_init's defines, K/V readers): functions of the specs, _fixed's
    aux and tile defines (by identity: kept here) and the rows a CTA alone, remembered."""
    spec = (SPECS[main], SPECS["fa1_init"])  # by identity: a test may put another in its place
    key = (*map(id, spec), id(aux), id(tile), split_rows)
    out = _FWD_DEFINES.get(key, *spec, aux, tile)
    if out is not MISS:
        return out
    defines = kernel_defines(main, **aux, **tile, SPLIT_ROWS=split_rows)
    return _FWD_DEFINES.put(key, (*spec, aux, tile),
                            (defines, kernel_defines("fa1_init", **aux), spec[0].kv_readers(defines)))


def layout(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> tuple[int, int]:
    """What of fa1's Plan depends on batch x heads besides the counts that grow with it: the
    (query, key) blocks a CTA takes."""
    return _setup(p, hw, t)[-2:]


def layouts(p: Problem, hw: HardwareProfile, t: Tiles, bh: np.ndarray) -> list[tuple[int, int]]:
    """layout() of p's shape at each batch x heads of `bh` (int64), all at once (_setup's
    splits, split_blocks_many)."""
    t, _, _, _, _, bm, slots = _fixed(p, hw, t)
    fixed = _fixed_split(p, t, bm)
    if p.direction is Direction.fwd:
        qb = split_blocks_many(bh, bm.tm, slots, bm.hi) if fixed is None else [fixed] * len(bh)
        return [(q, bm.tn) for q in qb]
    kb = (split_blocks_many(bh, bm.tn, slots, bm.col_visits(), outer="count") if fixed is None
          else [fixed] * len(bh))
    return [(bm.tm, k) for k in kb]


def plan(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Plan:
    t, main, aux, tile, smem, bm, qb, kb = _setup(p, hw, t)
    fwd, bh = p.direction is Direction.fwd, p.bh
    splits = -(-bm.tn // kb)
    ks: list[KernelPlan] = []
    if p.direction is Direction.fwd:
        tm = bm.tm
        defines, init_defines, readers = _fwd_defines(main, aux, tile, qb * t.block_m)
        ks.append(KernelPlan("fa1_init", (tm, p.heads, p.batch), 128, 0, 32, t.block_m,
                             p.head_dim, fa1_init(p, bh), Work(),
                             trips=uniform(1), source=source("fa1_init"),
                             defines=init_defines))
        ks.append(KernelPlan("fa1_fwd", (-(-tm // qb), p.heads, p.batch), 32 * t.warps, smem,
                             REGS, t.block_m, t.block_n,
                             **fa1_fwd(p, bm, qb, readers).launch(bh),
                             trips=bm.split_pairs(qb), masked=bm.split_diag(qb),
                             reuse=GQA_REUSE, overlap="drift", source=source(main),
                             defines=defines))
    else:
        defines = kernel_defines(main, **aux, **tile, STAGES=t.stages, SPLIT_COLS=kb * t.block_n,
                                 DQ_ATOMIC=int(splits > 1))
        n = p.seqlen_q * p.head_dim
        init = Traffic(writes={"dQacc": n * F32})
        ks.append(KernelPlan("fa1_bwd_init", (bm.tm, p.heads, p.batch), AUX_THREADS, 0, 32,
                             t.block_m, p.head_dim, init.scaled(bh), Work(),
                             trips=uniform(1), source=source("fa1_bwd_init"),
                             defines=kernel_defines("fa1_bwd_init", **aux)))
        ks.append(KernelPlan("fa1_bwd", (splits, p.heads, p.batch), 32 * t.warps, smem, REGS,
                             t.block_m, t.block_n,
                             # fa1.cu's warp grids (fa2_bwd.cu's, over the padded rows)
                             **flash_bwd(p, bm, fa1=True,
                                         rd=SPECS[main].bwd_readers(defines)).launch(bh),
                             trips=uniform(bm.pairs) if splits == 1 else bm.col_split_pairs(kb),
                             masked=(uniform(bm.diag_pairs()) if splits == 1
                                     else bm.col_split_diag(kb)),
                             # K/V: the next query head's CTA of the same split (GQA) comes
                             # `splits` CTAs later
                             stages=t.stages, reuse={n: splits for n in GQA_REUSE},
                             # barriers split each trip into phases, as fa2_bwd's, and
                             # O_i, dQacc_i come into registers within the step
                             # (synchronous loads), from L2: the step before prefetched them
                             # (and Q_i, dO_i through the ring), so DRAM works for the next
                             # step while the warps wait (the "prefetch" policy)
                             overlap="prefetch", source=source(main), defines=defines,
                             # the SASS's instructions beyond the counts (iosim.kernels)
                             loop_issue=SPECS[main].loop_issue(defines, p.elem_bytes),
                             loop_shadow=SPECS[main].loop_shadow(defines, p.elem_bytes)))
        tr, w = dq_convert(p, scaled=False)
        ks.append(KernelPlan("fa1_bwd_convert", (bm.tm, p.heads, p.batch), AUX_THREADS, 0, 32,
                             t.block_m, p.head_dim, tr.scaled(bh), w.scaled(bh),
                             trips=uniform(1), source=source("fa1_bwd_convert"),
                             defines=kernel_defines("fa1_bwd_convert", **aux)))
        if p.group > 1:
            ks.append(gqa_reduce(p, ("dK", "dV")))
    paper = -(-(hw.smem_per_block_optin_bytes // p.elem_bytes) // (4 * p.head_dim))
    algo = "1" if p.direction is Direction.fwd else "4"
    split = (f", query rows split {-(-bm.tm // qb)} ways per head" if fwd and qb < bm.tm else
             f", key blocks split {splits} ways per head (dQ by fp32 atomics)" if splits > 1
             else "")
    notes = (f"Algorithm {algo}'s loop order with this kernel's tiles Bc={t.block_n}, Br={t.block_m}"
             + split
             + (f" (the paper's Bc = ceil(M/4d) = {paper} for M={hw.smem_per_block_optin_bytes} B"
                " exceeds the kernel's registers)" if paper > t.block_n else ""))
    return Plan("fa1", p, hw.name, tuple(ks), notes)
