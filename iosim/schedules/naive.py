"""Standard attention: S and P materialised in HBM, in the input dtype.

Forward, three kernels: S = scale·QKᵀ (tensor-core GEMM), P = softmax(S) row by row with the
causal mask (fp32 math), O = PV (tensor-core GEMM). GEMMs are tiled BM×BN with BK-deep chunks;
a tile re-read across output tiles is counted each time (ideal GEMMs: one tile covers all).
Backward reads the stored P: dV = PᵀdO, dP = dO·Vᵀ, dS = P∘(dP − rowsum(P∘dP)),
dQ = scale·dS·K, dK = scale·dSᵀQ (then a GQA sum when kv_heads < heads).
Nothing is skipped for causal: the GEMMs compute the full N×N; only the softmax masks.
"""

from __future__ import annotations

from iosim.core.hardware import HardwareProfile
from iosim.core.memo import MISS, Memo
from iosim.core.plan import KernelPlan, Plan
from iosim.core.problem import Direction, Problem
from iosim.core.traffic import Work, copies
from iosim.kernels import SPECS, kernel_defines, source
from iosim.schedules.base import Tiles, causal_valid, gemm, gqa_reduce, mask_defines, pow2_at_least, uniform

# (block_m, block_n, block_k, stages, warps) by head_dim bucket, fastest found on H100/H200.
QK_TILES = {64: (128, 128, 64, 1, 8), 128: (128, 128, 64, 2, 8), 256: (128, 128, 64, 3, 8)}
PV_TILES = {64: (128, 64, 64, 4, 8), 128: (128, 128, 64, 3, 8), 256: (128, 128, 64, 3, 8)}


def softmax_threads(nk: int) -> int:
    """One thread per 32 elements of the row, a power of two in [64, 256] (more threads per
    row ran slower on H100: fewer rows in flight)."""
    return min(256, max(64, 1 << max(0, (max(1, nk // 32) - 1).bit_length())))


_GEMM_TILES = Memo()  # (id(table), head_dim, id(tiles asked for)) -> (table, tiles, gemm_tiles')


def gemm_tiles(table: dict, p: Problem, t: Tiles) -> Tiles:
    # the bucket of the next head_dim up (the largest one beyond it: naive has no limit on d).
    # A d below the bucket's BLOCK_K takes the power of two >= d (>= 16, the MMA's k): the
    # kernel's swizzle needs tile rows of 2, 4 or a multiple of 8 16-byte chunks, and zero-fills
    # the ragged end of k. Remembered (the table is kept, so its id is not reused; Tiles are
    # frozen): a function of the table, head_dim and the tiles asked for alone (these by
    # identity, kept: a frozen dataclass hashes all its fields through a call each time).
    key = (id(table), p.head_dim, id(t))
    out = _GEMM_TILES.get(key, table, t)
    if out is not MISS:
        return out
    bm, bn, bk, st, w = next((v for k, v in sorted(table.items()) if p.head_dim <= k),
                             table[max(table)])
    out = Tiles(block_m=t.block_m or bm, block_n=t.block_n or bn,
                block_k=t.block_k or min(bk, pow2_at_least(p.head_dim, 16)), warps=t.warps or w,
                stages=t.stages or st)
    return _GEMM_TILES.put(key, (table, t), out)


def row_reads(p: Problem) -> int:
    """Elements of S the softmax reads per head: whole rows, or with the causal mask only the
    visible keys (Problem.visible_keys), rounded up to 8 (16-byte vectors) when rows are 16-byte
    aligned. Closed form (no per-row array): rows [a, b) see v = i+1+offset keys, 0 < v < Nk,
    rows before a none, rows from b all Nk."""
    nq, nk = p.seqlen_q, p.seqlen_k
    if not p.causal:
        return nq * nk
    off = p.causal_offset
    a = min(max(-off, 0), nq)
    b = min(max(nk - 1 - off, a), nq)
    v0, v1 = a + 1 + off, b + off  # keys seen by the first and last partial row
    if nk % 8:
        partial = (v0 + v1) * (b - a) // 2
    else:  # Σ ceil8(v) for v in [v0, v1]; ceil8(v) <= Nk since v < Nk and 8 | Nk
        partial = _sum_ceil8(v1) - _sum_ceil8(v0 - 1)
    return partial + (nq - b) * nk


def _sum_ceil8(n: int) -> int:
    """Σ_{v=1..n} 8·ceil(v/8): q full groups of 8 values (8k each), then n%8 values of 8(q+1)."""
    q, rem = divmod(max(n, 0), 8)
    return 32 * q * (q + 1) + 8 * rem * (q + 1)


def row_merges(threads: int) -> int:
    """Merges one row's block reduction does, all threads together: five shuffle steps in every
    warp, then (more than one warp) every thread folds the warps' partials from shared memory.
    At short rows they are as many instructions as the row's elements (experiments/
    naive_kernels: naive_softmax issue-bound at N = 512)."""
    warps = threads // 32
    return threads * (5 + (warps if warps > 1 else 0))


def row_kernel(name: str, p: Problem, hw: HardwareProfile, ins: tuple[str, ...], out: str,
               alu_per_row: int, exp_total: int, alu_total: int, read: int,
               mask_alu: int = 0, ours: bool = True) -> KernelPlan:
    """A kernel with one CTA per row of the N×N matrices: reads `ins`, writes `out`.

    The rows stay in SRAM when they fit, so each input row is read once (stored to and read
    back from shared memory); otherwise each input is read twice (a reduce pass, then an
    elementwise pass). `read`: elements of each input read per head (one pass); `mask_alu`:
    the part of `alu_total` that applies the causal mask (every row has its diagonal). A row's
    loads are its one trip's (`streamed`): the CTA waits for them, then reduces and writes, and
    the CTAs resident beside it (many: one row each) overlap those phases as a fluid
    (`spread`), as Nsight Compute shows (experiments/naive_kernels: long rows at 88-89% of the
    DRAM peak while issuing at 53-62%). `ours`: kernels/naive.cu's; PyTorch's softmax backward
    (standard's) keeps the reduction and phases of a generic elementwise kernel.
    """
    e, bh, nk = p.elem_bytes, p.bh, p.seqlen_k
    rows = bh * p.seqlen_q
    row_bytes = nk * e * len(ins)
    in_smem = row_bytes <= hw.smem_per_block_optin_bytes
    passes = 1 if in_smem else 2
    reads = {}  # (a loop: a comprehension is a function built and called, for one or two)
    for x in ins:
        reads[x] = passes * bh * read * e
    t = copies(reads, {out: rows * nk * e}, 2 * bh * read * e * len(ins) if in_smem else 0, 1)
    threads = softmax_threads(nk)
    spec = SPECS[name]
    merge_alu, merge_exp = spec.row_merge if ours else (0, 0)
    merges = rows * row_merges(threads)
    return KernelPlan(
        name=name, grid=(p.seqlen_q, p.bh, 1), threads=threads,
        smem_bytes=row_bytes if in_smem else 0, regs_per_thread=32, block_m=1, block_n=nk,
        traffic=t, work=Work(exp_ops=exp_total + merge_exp * merges,
                             alu_flops=alu_total + alu_per_row * rows + merge_alu * merges),
        trips=uniform(passes), masked=uniform(1 if mask_alu else 0), mask_alu=mask_alu,
        overlap="spread" if ours else "async", source=source(name), streamed=ins if ours else (),
        defines=_row_defines(name, spec, threads, in_smem, p),
    )


_ROW_DEFINES = Memo()  # (name, id(its spec), threads, in SRAM, mask, head_dim) -> (spec, defines)


def _row_defines(name: str, spec, threads: int, in_smem: bool, p: Problem) -> dict[str, int]:
    """A row kernel's kernel_defines, remembered: a function of its spec (by identity, kept: a
    test may put another in its place), threads, whether the row fits in SRAM, the mask and
    head_dim alone (kernel_defines' own memo builds its key from keyword arguments)."""
    key = (name, id(spec), threads, in_smem, p.causal, p.causal_align, p.head_dim)
    out = _ROW_DEFINES.get(key, spec)
    if out is not MISS:
        return out
    return _ROW_DEFINES.put(key, (spec,), kernel_defines(
        name, SOFTMAX_THREADS=threads, ROW_IN_SMEM=int(in_smem), **mask_defines(p),
        HEAD_DIM=p.head_dim))


_NARROWED = Memo()  # (id(tiles), block_n) -> (tiles, those tiles block_n wide)


def _narrowed(t: Tiles, bn: int) -> Tiles:
    """Tiles(t.block_m, bn, t.block_k, t.warps, t.stages), remembered (t by identity: gemm_tiles
    gives one Tiles a set of values, kept here; a Tiles costs microseconds to build)."""
    key = (id(t), bn)
    out = _NARROWED.get(key, t)
    if out is not MISS:
        return out
    return _NARROWED.put(key, (t,), Tiles(t.block_m, bn, t.block_k, t.warps, t.stages))


def _pv_tiles(pv: Tiles, d: int) -> Tiles:
    """O = PV has d columns: a tile no wider than the power of two >= d (the swizzle's rows);
    when d is not a multiple of the tile, half as wide (the ragged edge's bounds checks cost
    the registers of the wider tile: 128 columns spilled on H100)."""
    bn = min(pv.block_n, pow2_at_least(d, 16))
    if d % bn and bn > 16:
        bn //= 2
    return _narrowed(pv, bn)


def plan(p: Problem, hw: HardwareProfile, t: Tiles = Tiles(), ours: bool = True) -> Plan:
    """Standard attention as kernels/naive.cu runs it (`ours`), or its passes as PyTorch's
    autograd runs them (standard.backward: the GEMMs alike, the row kernels not ours)."""
    qk, pv = gemm_tiles(QK_TILES, p, t), _pv_tiles(gemm_tiles(PV_TILES, p, t), p.head_dim)
    e, nq, nk, d = p.elem_bytes, p.seqlen_q, p.seqlen_k, p.head_dim
    ks: list[KernelPlan] = []
    if p.direction is Direction.fwd:
        valid = causal_valid(p) * p.bh
        rows = p.bh * nq
        # softmax per row: mask (causal), max, subtract, sum, scale over valid elements; 1/ℓ.
        mask = rows * nk if p.causal else 0
        ks += [
            gemm("naive_qk", p, nq, nk, d, qk, "Q", "K", "S", e, 1, hw),
            row_kernel("naive_softmax", p, hw, ("S",), "P", 1, valid, 4 * valid + mask,
                       row_reads(p), mask),
            gemm("naive_pv", p, nq, d, nk, pv, "P", "V", "O", e, 0, hw),
        ]
    else:
        x = "_expanded" if p.group > 1 else ""
        rows = p.bh * nq
        # dV = PᵀdO and dK = dSᵀQ read their A operand transposed (ldmatrix.trans): at 128
        # columns that path spills on H100 (nvcc 13, 128 registers), so at most 64 columns
        pt = _narrowed(pv, min(pv.block_n, 64))
        ks += [
            gemm("naive_bwd_dv", p, nk, d, nq, pt, "P", "dO", "dV" + x, e, 0, hw),
            gemm("naive_bwd_dp", p, nq, nk, d, qk, "dO", "V", "dP", e, 0, hw),
            # dS = P∘(dP − Σ P∘dP): 2 ops for the dot, 2 for the update, per element.
            row_kernel("naive_bwd_softmax", p, hw, ("P", "dP"), "dS", 0, 0, 4 * rows * nk,
                       nq * nk, ours=ours),
            gemm("naive_bwd_dq", p, nq, d, nk, pv, "dS", "K", "dQ", e, 1, hw),
            gemm("naive_bwd_dk", p, nk, d, nq, pt, "dS", "Q", "dK" + x, e, 1, hw),
        ]
        if p.group > 1:
            ks.append(gqa_reduce(p, ("dK", "dV")))
    return Plan("naive", p, hw.name, tuple(ks), _notes(qk, pv, p.dtype))


_NOTES = Memo()  # (id(QK tiles), id(PV tiles), dtype) -> (the tiles, the Plan's notes)


def _notes(qk: Tiles, pv: Tiles, dtype) -> str:
    """The Plan's notes, remembered (the tiles by identity, kept: gemm_tiles and _narrowed give
    one Tiles a set of values): six ints and an enum's value formatted a Plan otherwise."""
    key = (id(qk), id(pv), dtype)
    out = _NOTES.get(key, qk, pv)
    if out is not MISS:
        return out
    return _NOTES.put(key, (qk, pv), f"GEMMs tiled QK {qk.block_m}x{qk.block_n}x{qk.block_k}, "
                      f"PV {pv.block_m}x{pv.block_n}x{pv.block_k}, S and P stored in {dtype.value}")
