"""Split-KV decode (Flash-Decoding: Dao, Haziza, Massa and Sizov, "Flash-Decoding for
long-context inference", 2023; FlashAttention's num_splits path): few query rows (Nq = 1..16 a
sequence) against a long K/V cache.

One CTA per (KV split, K/V head, head chunk, batch) runs `decode_fwd`: the query heads of a GQA
group are packed into the CTA's rows (heads x Nq rows, padded to the MMA's 16), so each K/V tile
is read from HBM once per group, not once per query head. The K/V tiles of the CTA's split stream
through a `stages`-deep cp.async ring; each warp takes its own slice of every tile (the keys are
split across warps, the rows are not: a handful of rows gives no work to split) and keeps its
own online-softmax state, merged across warps through shared memory at the end. With one split the
kernel writes O and LSE; with S splits each writes a partial O (normalised over its keys) and its
LSE in fp32, counts itself done in an int32 counter of its (batch, head chunk), and the CTA that
counts last merges the S partials of its rows (O = Σ_s e^(LSE_s - LSE) O_s) and sets the count
back to zero: the combine is fused, one launch a step (the separate combine kernel of earlier
runs cost its own launch: other_kernels_ms in experiments/decode/h100/bench.csv and
experiments/decode/h200/bench.csv). The split count fills the GPU as FlashAttention's
num_splits_heuristic does. Causal decode rows are bottom-right
aligned (the last query row sees every key); a sliding window skips the tiles before the first
row's window.

Paged K/V (`page_size`): the same loop over pages of the cache (FlashAttention's and vLLM's
layout: a page is page_size tokens x KV heads x d, so one token of one head, d elements, is
the contiguous unit a gather moves), each key row found through the block table:
`decode_paged_fwd` reads each tile's distinct table entries (int32) once a CTA, a tile ahead
(PAGE_AHEAD=1: into registers while the tile before computes, so no load waits on a table
read). `Tiles.page_ahead=False` plans the earlier kernel (each row's entry read as its load
issues: two round trips a trip, KernelSpec.sync_loads), which rows measured before it ran.

A ragged batch (`seqlens_k`: each sequence its own cached length, as a serving batch has):
one split count for the batch, from its longest sequence (as FlashAttention's kvcache path
chooses it), each sequence's tiles cut into that many runs (a short sequence's last runs may be
empty: such a CTA writes a partial that the combine weighs 0); the CTAs of a sequence's splits
are adjacent in launch order, so the timing model sees each CTA's own trips. Modelled only: no
kernel of this project runs a ragged batch (FlashAttention's flash_attn_with_kvcache does).
"""

from __future__ import annotations

import math

import numpy as np

from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.plan import KernelPlan, Plan
from iosim.core.problem import CausalAlign, Direction, Problem
from iosim.core.traffic import Traffic, Work
from iosim.kernels import SPECS, kernel_defines, source
from iosim.schedules.base import F32, Tiles, check_head_dim, check_smem

# (block_n, warps, stages) by head_dim bucket: a 16-key slice a warp (4 warps), a ring of about
# 96 KB (two CTAs an SM on H100; three stages, two at d = 256, where a stage is 64 KB)
TILES = {64: (128, 4, 3), 128: (64, 4, 3), 256: (64, 4, 2)}
MAX_QUERY_ROWS = 16  # Nq a sequence: decode and speculative decoding; longer: fa2, fa3
# a warp holds every packed row's fp32 O: m16 row tiles MT with MT·d <= 256 (MT·d/2 registers)
# and MT <= 2 (more spills at d = 64, where S and P of 32-key slices add 96 registers)
ROW_DIM, MAX_ROWS = 256, 32
MAX_SPLITS = 128
# A split count within this fraction of the best wave efficiency is taken, the smallest such.
# FlashAttention 2's num_splits_heuristic (csrc/flash_attn/flash_api.cpp) takes 0.85 over twice
# the SMs; here waves are counted in SMs (one CTA each: decode_fwd streams K/V at what one SM
# sustains, and a second CTA on an SM shares it) and 0.95. Measured split sweeps
# (experiments/decode/h200/bench.csv and splits.csv, experiments/decode/h100/decode.csv): 16
# splits best at batch 1 and 2 at batch 8 (32k and 128k keys); FlashAttention's rule took 29 and
# 4: 5-8% and up to 2% slower.
SPLIT_EFFICIENCY = 0.95
REGS = 255  # __launch_bounds__(threads): the register file over the threads


def bucket(d: int) -> tuple[int, int, int]:
    return next(v for k, v in sorted(TILES.items()) if d <= k)


def packing(p: Problem) -> int:
    """Query heads a CTA packs: the largest divisor of the group whose rows (heads x Nq, padded
    to 16) the accumulators hold (ROW_DIM)."""
    def rows(h: int) -> int:
        return 16 * -(-h * p.seqlen_q // 16)

    fits = [h for h in range(1, p.group + 1) if p.group % h == 0 and rows(h) <= MAX_ROWS
            and rows(h) // 16 * p.head_dim <= max(ROW_DIM, p.head_dim)]
    return max(fits)


def key_tiles(p: Problem, bn: int) -> tuple[int, int]:
    """[t0, t1): the key tiles some query row sees. Rows are bottom-right aligned: row i's
    diagonal is Nk - Nq + i, so the last row sees every key; a window starts the first row's
    view at Nk - Nq - W."""
    k0 = max(0, p.seqlen_k - p.seqlen_q - p.window) if p.window is not None else 0
    return k0 // bn, -(-p.seqlen_k // bn)


def masked_tile(p: Problem, j: int, bn: int) -> bool:
    """Does key tile j need the mask: the ragged end of K, the first row's diagonal (causal) or
    the last row's window edge."""
    nk, nq = p.seqlen_k, p.seqlen_q
    return ((j + 1) * bn > nk or (p.causal and (j + 1) * bn - 1 > nk - nq)
            or (p.window is not None and j * bn < nk - 1 - p.window))


def num_splits(ctas: int, slots: int, tiles: int) -> int:
    """FlashAttention 2's num_splits_heuristic (with `slots` the SM count and SPLIT_EFFICIENCY
    0.95: see there): one split when the CTAs nearly fill the GPU
    (>= 80% of its slots), else of the split counts up to min(slots, tiles, MAX_SPLITS) that
    change the tiles a split (ceil(tiles / s)), the fewest whose wave efficiency
    (waves / ceil(waves)) is within SPLIT_EFFICIENCY of the best."""
    if ctas >= 0.8 * slots:
        return 1
    top = max(1, min(slots, tiles, MAX_SPLITS))

    def eff(s: int) -> float:
        w = ctas * s / slots
        return w / math.ceil(w)

    counts = [s for s in range(1, top + 1) if s == 1 or -(-tiles // s) != -(-tiles // (s - 1))]
    best = max(eff(s) for s in counts)
    return next(s for s in counts if eff(s) >= SPLIT_EFFICIENCY * best)


def takes(p: Problem) -> bool:
    """A decode problem: a few query rows, forward."""
    return p.seqlen_q <= MAX_QUERY_ROWS and p.direction is Direction.fwd


def check(p: Problem) -> None:
    check_head_dim("decode", p)
    if p.direction is not Direction.fwd:
        raise InputError("decode: the forward pass only (allowed: --direction fwd)")
    if p.seqlen_q > MAX_QUERY_ROWS:
        raise InputError(f"decode: seqlen {p.seqlen_q} query rows a sequence (allowed: 1 to "
                         f"{MAX_QUERY_ROWS}; longer queries: fa2, fa3)")
    if p.causal and p.seqlen_q != p.seqlen_k and p.causal_align is not CausalAlign.bottom_right:
        raise InputError("decode: causal rows are the cache's last (allowed: --causal-align "
                         "bottom-right, or causal false)")


def check_splits(p: Problem, t0: int, t1: int, bn: int, s: int) -> None:
    """A forced split count (`Tiles.kv_splits`) must leave no split empty: `s` runs of
    ceil(tiles / s) cover the key tiles exactly."""
    ok = [n for n in range(1, min(MAX_SPLITS, t1 - t0) + 1) if len(splits_of(p, t0, t1, bn, n)) == n]
    if s not in ok:
        shown = ", ".join(map(str, ok if len(ok) <= 12 else [*ok[:10], "...", ok[-1]]))
        raise InputError(f"decode: --kv-splits {s} at seqlen_k={p.seqlen_k} ({t1 - t0} key tiles "
                         f"of {bn}) leaves a split empty (allowed here: {shown})")


def splits_of(p: Problem, t0: int, t1: int, bn: int, s: int) -> list[range]:
    """The key tiles of each split: `s` runs of ceil(tiles / s), the last one shorter."""
    per = -(-(t1 - t0) // s)
    return [range(a, min(t1, a + per)) for a in range(t0, t1, per)]


def runs_of(q: Problem, bn: int, s: int) -> list[range]:
    """A sequence's key tiles in exactly `s` runs of ceil(tiles / s) (the last ones empty when
    the sequence has fewer tiles than that takes): what split i of the kernel runs."""
    t0, t1 = key_tiles(q, bn)
    per = -(-(t1 - t0) // s)
    return [range(min(t1, t0 + i * per), min(t1, t0 + (i + 1) * per)) for i in range(s)]


def layout(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> int:
    """What of decode's Plan depends on batch x heads besides the counts that grow with it:
    the KV splits (plan's rule, from the CTAs one split launches)."""
    check(p)
    bn = t.block_n or bucket(p.head_dim)[0]
    t0, t1 = key_tiles(p, bn)
    return t.kv_splits or num_splits(p.batch * p.kv_heads * (p.group // packing(p)), hw.sm_count,
                                     t1 - t0)


def shape_layout(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> tuple:
    """What a decode shape (iosim.schedules.shape) holds besides the problem's fields: the KV
    splits (layout) and, paged, the K/V heads: the block table has a row per sequence, so its
    size grows with batch alone, not with batch x kv_heads as the template's counts do."""
    return layout(p, hw, t), p.kv_heads if p.page_size is not None else None


def plan(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Plan:
    check(p)
    bn0, w0, st0 = bucket(p.head_dim)
    bn, warps, stages = t.block_n or bn0, t.warps or w0, t.stages or st0
    hp = packing(p)
    chunks = p.group // hp
    rows = 16 * -(-hp * p.seqlen_q // 16)  # block_m: packed rows, padded to the MMA's 16
    if t.block_m is not None and t.block_m != rows:
        raise InputError(f"decode: --block-m is the packed query rows, {rows} here "
                         "(allowed: leave it out)")
    t0, t1 = key_tiles(p, bn)  # the cache's (a ragged batch: its longest sequence's)
    base = dict(HEAD_DIM=p.head_dim, BLOCK_M=rows, BLOCK_N=bn, NUM_WARPS=warps, STAGES=stages,
                IS_CAUSAL=int(p.causal), WINDOW=-1 if p.window is None else p.window,
                HEADS_PER_CTA=hp)
    entry = "decode_fwd"
    if p.page_size is not None:  # the table read a tile ahead (today's kernel) or per row
        entry, base["PAGE_SIZE"] = "decode_paged_fwd", p.page_size
        base["PAGE_AHEAD"] = int(t.page_ahead is not False)
    smem = SPECS[entry].smem(base, p.elem_bytes)
    check_smem("decode", smem, hw, p)
    s = layout(p, hw, t)
    if t.kv_splits is not None:
        check_splits(p, t0, t1, bn, s)
    if p.seqlens_k is None:
        s = len(splits_of(p, t0, t1, bn, s))  # no empty split: the count the runs make
        seqs = [(p, runs_of(p, bn, s), p.batch)]  # every sequence alike
        defines = kernel_defines(entry, **base, NUM_SPLITS=s)
    else:  # modelled only (no KernelSpec): the Plan's own defines, decode_fwd's combine
        seqs = [(q, runs_of(q, bn, s), 1) for q in p.sequences()]
        entry, defines = "decode_ragged_fwd", dict(base, NUM_SPLITS=s)
    ks = [_decode_kernel(p, entry, seqs, s, rows, bn, warps, stages, chunks, smem, defines)]
    notes = (f"{hp} query head(s) x {p.seqlen_q} row(s) a CTA ({rows} padded), {bn}-key tiles, "
             f"{warps} warps, {stages}-stage K/V pipeline, {s} KV split(s)")
    if p.seqlens_k is not None:
        notes += f"; ragged batch, cached lengths {min(p.seqlens_k)}-{max(p.seqlens_k)}"
    if p.page_size is not None:
        notes += (f"; paged K/V: {p.page_size}-token pages, gathers of one token's head row "
                  f"({p.head_dim * p.elem_bytes} B) through the block table, "
                  + ("read a tile ahead" if base["PAGE_AHEAD"] else "read per row as it issues"))
    return Plan("decode", p, hw.name, tuple(ks), notes)


def table_entries(p: Problem, j: int, bn: int) -> int:
    """Block-table entries key tile j reads: the pages its keys [j·bn, min(Nk, (j+1)·bn)) touch
    (0 for a contiguous cache)."""
    if p.page_size is None:
        return 0
    first, last = j * bn, min(p.seqlen_k, (j + 1) * bn) - 1
    return last // p.page_size - first // p.page_size + 1


def _decode_kernel(p: Problem, entry: str, seqs: list[tuple[Problem, list[range], int]], s: int,
                   rows: int, bn: int, warps: int, stages: int, chunks: int, smem: int,
                   defines: dict[str, int]) -> KernelPlan:
    """Counts of decode_fwd (the executor's decode loops, tile by tile): per split, Q once,
    each key tile's K and V once (and its block-table entries, paged); see the module
    docstring. `seqs`: (a sequence's problem, its s runs of tiles, how many sequences alike)."""
    d, e = p.head_dim, p.elem_bytes
    heads = p.kv_heads * chunks  # CTAs of one sequence and split

    def keys(q: Problem, j: int) -> int:
        return min(q.seqlen_k, (j + 1) * bn) - j * bn

    def total(fn) -> int:  # Σ over sequences (with their multiplicity) and their tiles
        return sum(n * sum(fn(q, j) for r in runs for j in r) for q, runs, n in seqs)

    trips = np.concatenate([np.array([sum(keys(q, j) for j in r) for r in runs], dtype=np.int64)
                            for q, runs, _ in seqs])
    masked = np.concatenate([np.array([sum(masked_tile(q, j, bn) for j in r) for r in runs],
                                      dtype=np.int64) for q, runs, _ in seqs])
    kv, tiles = total(keys), total(lambda q, j: 1)
    mask_keys = total(lambda q, j: keys(q, j) * masked_tile(q, j, bn))
    n_rows = p.bh * p.seqlen_q
    out = {"O": n_rows * d * e, "LSE": n_rows * F32}
    ctas = p.batch * heads * s
    # smem: Q stored once (padded rows); per tile K, V stored and read once (each warp its
    # slice), Q read by every warp; at the end the warps' fp32 O, m and ℓ stored and read back
    sram = ctas * (rows * d * e + 2 * warps * rows * (d + 2) * F32) \
        + heads * (4 * kv * d * e + tiles * warps * rows * d * e)
    reads = {"Q": s * n_rows * d * e, "K": heads * kv * d * e, "V": heads * kv * d * e}
    if p.page_size is not None:  # int32 entries, each tile's distinct pages
        reads["BlockTable"] = heads * 4 * total(lambda q, j: table_entries(q, j, bn))
    comb = Work()
    if s > 1:  # the partials, each CTA's count, and the last CTA's combine of its rows
        part = {"Opart": n_rows * s * d * F32, "LSEpart": n_rows * s * F32}
        out |= {**part, "Counter": 4 * (ctas + p.batch * heads)}  # counted, then reset
        reads |= {**part, "Counter": 4 * ctas}
        # per row: S weights and 1/Σ stored, read by each 8-column pass; max, Σ (S each), 1/Σ,
        # LSE; per element S FMAs and the 1/Σ scale
        sram += n_rows * (s + 1) * F32 * (1 + d // 8)
        comb = Work(exp_ops=n_rows * (s + 1), alu_flops=n_rows * (2 * s + 2 + d * (2 * s + 1)))
    t = Traffic(reads=reads, writes=out, sram=sram)
    # per tile of c keys: S and PV (4·rows·c·d); P per element and α per row per warp; per
    # element rowmax, the scale-and-subtract FMA, rowsum (+ the mask on masked tiles); per row
    # per warp the statistics (6) and acc *= α (d). At the end, across the warps: m* (max),
    # their weights (exp), ℓ and O (FMAs), 1/ℓ, O·1/ℓ, log ℓ and LSE.
    mask = heads * rows * mask_keys
    once = Work(exp_ops=rows * (warps + 1),
                alu_flops=rows * (3 * warps + 2) + rows * d * (2 * warps + 1)).scaled(ctas) + comb
    w = Work(tensor_flops=heads * 4 * rows * kv * d,
             exp_ops=heads * (rows * kv + warps * rows * tiles),
             alu_flops=heads * (3 * rows * kv + warps * rows * (6 + d) * tiles) + mask) + once
    # a ragged batch: the sequences' splits along x (each CTA its own trips); else (s, heads, B)
    grid = (s, heads, p.batch) if p.seqlens_k is None else (s * p.batch, heads, 1)
    # K/V of a head chunk are read again by the next chunk's CTA, a row of the grid later
    reuse = {"K": grid[0], "V": grid[0]} if chunks > 1 else {}
    return KernelPlan(entry, grid, 32 * warps, smem, REGS, rows, bn, t, w, trips=trips / bn,
                      reuse=reuse, masked=masked, mask_alu=mask, once=once, stages=stages,
                      overlap="async", source=source(entry), defines=defines,
                      streamed=("K", "V"), tail_round_trips=SPECS.get(entry, SPECS["decode_fwd"]).tail_round_trips(defines))
