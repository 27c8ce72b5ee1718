"""FlashAttention-3 (Shah et al., 2024): FA2's loop order, warp-specialised on Hopper.

As kernels/fa3.cu runs it (forward): one producer warpgroup (128 threads) issues TMA copies of
the Q tile once and of K/V tiles into a `stages`-deep shared-memory ring (mbarriers); consumer
warpgroups of 64 query rows each (block_m / 64 of them, `warps` = block_m / 16) run
S = QKᵀ and O += PV with wgmma, Q and K/V read from shared memory, P from registers, the next
tile's QKᵀ issued with this tile's PV (intra-warpgroup overlap). Two consumer warpgroups
ping-pong (PINGPONG: named barriers give them turns at the tensor cores); three (d = 64) do
not. setmaxnreg moves registers from the producer to the consumers; the CTA launches with
`__launch_bounds__(threads, 1)`, so its register budget at entry is the file over the threads.
Tiles: d=64 192x128 (three consumers), d=128 128x128, d=256 128x80, two stages (the paper's
H100 choices, but 128 rather than 176 key rows at d=128 non-causal).

Backward (kernels/fa3_bwd.cu): one CTA per key block of 128 rows, two consumer
warpgroups of 64 key rows each and the producer warpgroup, query blocks of 128 (d = 64) or 64
(d = 128) rows streamed through a two-stage TMA ring; Sᵀ, dPᵀ, dV, dK and dQ with wgmma, dQ added to fp32 dQacc by
the copy engine (d = 128, 256: the consumers stage it in shared memory, a dQ warp of the producer
warpgroup issues TMA reduce-adds) or with vector atomics (d = 64, where two staged units do not
fit); fa2_bwd.cu's preprocessing and conversion kernels around it. d = 256: key
blocks of 64 and query blocks of 64 (dK and dV of 64 keys x 256 do not fit one warpgroup's
registers), the two consumer warpgroups splitting head_dim (128 columns of dK, dV and two
64-column dQ units each) and the step's queries for Sᵀ, dPᵀ (32 each), Pᵀ and dSᵀ exchanged
through shared memory, no ping-pong (the kernel's SPLIT_D), dQ staged in each consumer's own
panels of the step's Q/dO ring slot, which the dQ warp frees once it read them. Needs
Hopper (wgmma, TMA, setmaxnreg). Problem.deterministic: the same kernel with DETERMINISTIC=1
(`fa3_bwd_det`), which adds each dQ_i in a fixed order of key blocks, taking turns through an
int32 flag per query block and consumer in global memory (dQsem); the Plan counts one read
and one write of the flag per consumer and (query block, key block) visit.

fp8_e4m3 forward (FA3 Sec. 3.3): the caller's bf16 Q, K, V are first quantised by
kernels/fp8_quant.cu (`fp8_quant`; with per-tensor scaling `fp8_amax` before it), one scale per
tile of rows per head at the attention kernel's tiles (or per tensor), V written transposed
(Vt8: 8-bit wgmma takes B K-major only, so the transpose is done here, in the pass that
quantises V anyway: it costs only its shared-memory staging), Q and K optionally rotated by a
random-sign Hadamard transform; then `fa3_fwd_fp8` reads Q8, K8, Vt8 and the factors and writes
bf16 O; at d = 256 with the lazy rescale (fa3.cu LAZY_RESCALE: O rescaled only where a row's max
jumps by more than 2^8; FP8_LAZY_RESCALE) and, non-causal, on a persistent grid (fa3.cu
PERSISTENT: as many CTAs as the GPU holds, each taking tiles round-robin; FP8_PERSISTENT,
persistent_grid). fp8_scaling `given`: the inputs arrive in e4m3, the
Plan is the attention kernel alone.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.memo import MISS, Memo
from iosim.core.plan import KernelPlan, Plan, ctas_per_sm, revised
from iosim.core.problem import Direction, Dtype, Fp8Scaling, Problem
from iosim.core.traffic import Traffic, Work
from iosim.kernels import DQ_WRITER, FA3_BWD_STATIC_SMEM, SPECS, fa3_bwd_consumers, kernel_defines, source
from iosim.schedules.base import F32, BlockMap, Tiles, uniform, uniform_float, whole_tiles
from iosim.schedules.fa2 import FlashStyle, bucket

# (block_m, block_n, consumer warps, stages) by head_dim bucket
FWD_TILES = {64: (192, 128, 12, 2), 128: (128, 128, 8, 2), 256: (128, 80, 8, 2)}
# fp8 e4m3: key tiles of 128, 192 at d = 128 (the kernel takes multiples of 32, V's transposed
# panels then of 64 or 32 keys; 192 measured faster beside 128 in interleaved rounds:
# experiments/fp8/h100/speed11)
FWD_TILES_FP8 = {64: (192, 128, 12, 2), 128: (128, 192, 8, 2), 256: (128, 128, 8, 2)}
# fp8 e4m3: fa3.cu's lazy rescale (LAZY_RESCALE: a stale running max within 2^8, so O is
# rescaled only where a row's max jumps) by head_dim: at d = 256, where O's rescale is 2
# multiplies per S element, measured faster at N = 4096, 8192, 16384 in interleaved rounds
# (experiments/fp8/h100/speed12/round1); at d = 128 not (0.99 at each N)
FP8_LAZY_RESCALE = {64: 0, 128: 0, 256: 1}
# fp8 e4m3, non-causal: fa3.cu's persistent grid (PERSISTENT: a CTA per resident slot, each
# taking tiles round-robin; the next tile's Q and K/V load under this one's last trip and
# epilogue) by head_dim: beside the session-12 kernel in interleaved rounds, faster at d = 256
# (N = 4096, 8192; even at 16384), slower at d = 128 and d = 64 (experiments/fp8/h100/speed13/round1)
FP8_PERSISTENT = {64: 0, 128: 0, 256: 1}
# fp8 e4m3: fa3.cu's PV_WAIT_TOP (the wait for P_{j-1} V_{j-1} at the next trip's top, so the
# softmax of S_j runs under that GEMM: ptxas hoists it above the softmax otherwise,
# experiments/fp8/speed14c/sass_same.log) by head_dim: beside main's kernel in interleaved
# rounds, faster in every round at every N at d = 128, slower at d = 64 and 256
# (experiments/fp8/h100/speed14c/c1). The timing model: KernelSpec.softmax_under_pv, PV_OVERLAP.
FP8_PV_WAIT_TOP = {64: 0, 128: 1, 256: 0}
BWD_TILES = {64: (128, 128, 8, 2), 128: (64, 128, 8, 2), 256: (64, 64, 8, 2)}
# fa3_bwd.cu's dQ warp modes the Plan takes, the first whose staging fits: DQ_BULK 2 (a staged
# unit a consumer; d = 256: two, in the ring slot). Not 3 (one unit shared in turn, d = 64):
# measured faster than the atomics (experiments/fa3_bwd/h100/speed10/run2/run.log) when
# compute-sanitizer racecheck reported hazards on the ragged d = 64 case (run2/sanitize.log);
# its hand-over now goes through mbarriers and racecheck is clean
# (experiments/fa3_bwd/h100/dq256/run2/sanitize_dq3_d64.log), but it has not been timed since
DQ_BULK_MODES = (2,)
PRODUCER_THREADS = 128  # one warpgroup issues TMA loads
QUANT_THREADS = 512  # kernels/fp8_quant.cu: a warp per row, 16 warps a tile
# registers per thread of fp8_quant.cu as ptxas allocates them (nvcc 13, sm_90a, the most over
# its variants), by head_dim: the model's occupancy
QUANT_REGS = {64: 40, 128: 64, 256: 104}

FA3 = FlashStyle("fa3", {"sm_90a": FWD_TILES}, {"sm_90a": BWD_TILES}, overlap="warpspecialized",
                 threads_extra=PRODUCER_THREADS, regs=240)
FA3_FP8 = replace(FA3, fwd_tiles={"sm_90a": FWD_TILES_FP8})


def plan(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Plan:
    if not hw.has_wgmma:
        raise InputError(f"fa3 needs a Hopper GPU (wgmma, TMA); {hw.name} is {hw.arch} "
                         "(allowed: naive, fa1, fa2)")
    fp8 = p.dtype is Dtype.fp8_e4m3
    pl = (FA3_FP8 if fp8 else FA3).plan(p, hw, t)

    def budget(threads: int) -> int:  # __launch_bounds__(threads, 1): the file over the threads
        return min(hw.max_registers_per_thread, hw.registers_per_sm // threads // 8 * 8)

    if p.direction is not Direction.fwd:  # the warp-specialised main kernel: two consumers
        # (128 key rows) take turns at the tensor cores
        def bwd(k):
            values = {n: v for n, v in k.defines.items() if n in SPECS[k.name].defines}
            values.update(PINGPONG=int(k.block_n == 128), DQ_BULK=0)
            if t.dq_writer:  # the FA3 paper's dQ-writer warp (iosim.kernels.DQ_WRITER)
                values[DQ_WRITER] = 1
            k = replace(k, regs_per_thread=budget(k.threads), tile_trips=whole_tiles_bwd(p, k))
            if p.deterministic:
                return deterministic(p, k, values)
            if t.dq_bulk is not None:  # the reduction a measured row's kernel ran
                return with_dq(p, k, values | {"DETERMINISTIC": 0, "DQ_BULK": t.dq_bulk})
            return dq_reduction(p, hw, k, values | {"DETERMINISTIC": 0})

        return replace(pl, kernels=tuple(bwd(k) if k.name == "fa3_bwd" else k for k in pl.kernels))
    # the forward kernel: one consumer warpgroup per 64 query rows (smaller tiles, which only
    # the model takes, keep the table's warps)
    ks = []
    for k in pl.kernels:
        warps = k.block_m // 16 if k.block_m % 64 == 0 else k.threads // 32 - 4
        threads = 32 * warps + PRODUCER_THREADS
        k = revised(k, threads=threads, regs_per_thread=budget(threads),
                    defines=_fwd_defines(k.name, k.defines, warps), tile_trips=whole_tiles(p, k))
        ks.append(fp8_attention(p, k, t.lazy_rescale, t.persistent, hw) if fp8 else k)
    if fp8 and p.fp8_scaling is not Fp8Scaling.given:
        ks[:0] = quant_kernels(p, ks[0].block_m, ks[0].block_n)
    # replace(pl, kernels=...) without its field walk: pl is new, none of its properties asked
    return Plan(pl.schedule, pl.problem, pl.hw, tuple(ks), pl.notes)


_FWD_DEFINES = Memo()  # (entry, id(its spec), id(FlashStyle's defines), warps) -> (spec, defines, fa3's)


def _fwd_defines(entry: str, defines: dict, warps: int) -> dict:
    """fa3.cu's forward defines from the FlashStyle kernel's (those its spec takes) with its
    warps: a function of the spec, those defines and the warps alone, remembered (kernel_defines
    gives one dict a set of values, kept here; the spec by identity: a test may put another in
    its place)."""
    spec = SPECS[entry]
    key = (entry, id(spec), id(defines), warps)
    out = _FWD_DEFINES.get(key, spec, defines)
    if out is not MISS:
        return out
    values = {n: v for n, v in defines.items() if n in spec.defines}
    values.update(NUM_WARPS=warps, PINGPONG=int(warps == 8), FP8_E4M3=0)
    return _FWD_DEFINES.put(key, (spec, defines), kernel_defines(entry, **values))


def layout(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> tuple[int, ...]:
    """What of fa3's Plan depends on batch x heads besides the counts that grow with it: the
    persistent fp8 forward's grid (fp8_persistent: as many CTAs as the GPU holds, at most the
    tiles, each its share of them), so each (batch, heads) is its own shape; () otherwise."""
    return (p.batch, p.heads) if fp8_persistent(p, t.persistent) else ()


def whole_tiles_bwd(p: Problem, k: KernelPlan) -> np.ndarray:
    """fa3_bwd.cu's trips in whole tiles (KernelPlan.tile_trips): a key tile's query tiles, each
    in full, the ragged last query tile and a ragged key tile included (TMA zero-fills what
    lies past the end; the consumers compute on it), as fa3.cu's forward (whole_tiles)."""
    bm = BlockMap.of(p, k.block_m, k.block_n)
    if len(k.trips) == 1:  # every CTA alike (or so many that the ragged one is noise)
        return uniform_float(float(bm.tm if not p.causal else bm.col_visits().max()))
    return bm.col_visits().astype(np.float64)


def dq_reduction(p: Problem, hw: HardwareProfile, k: KernelPlan, values: dict[str, int]) -> KernelPlan:
    """fa3_bwd.cu's dQ reduction: DQ_BULK 2 where the kernel's rules allow it and its staging
    fits in shared memory (d = 128: the consumers stage their dQ units in shared memory, one
    buffer each, and a dQ warp adds them with the copy engine's tensor reduce-adds, so the
    consumers never wait for the memory system; d = 256: in their panels of the step's Q/dO
    ring slot); else vector atomics (DQ_BULK 0; d = 64, where two staged units do not fit).
    The bytes that reach L2 are the same either way (experiments/fa3_bwd/h100/speed10/); the
    L2's work is not (iosim.kernels FA3_ATOMIC_L2)."""
    for mode in DQ_BULK_MODES:
        bulk = with_dq(p, k, values | {"DQ_BULK": mode})
        fits = bulk.smem_bytes + FA3_BWD_STATIC_SMEM <= hw.smem_per_block_optin_bytes
        if all(ok for ok, _ in SPECS[k.name].rules(bulk.defines)) and fits:
            return bulk
    return replace(k, defines=kernel_defines(k.name, **values))  # DQ_BULK 0: atomics


def with_dq(p: Problem, k: KernelPlan, values: dict[str, int]) -> KernelPlan:
    """fa3_bwd with these defines (a DQ_BULK among them) and the shared memory they take."""
    return replace(k, smem_bytes=SPECS[k.name].smem(values, p.elem_bytes),
                   defines=kernel_defines(k.name, **values))


def deterministic(p: Problem, k: KernelPlan, values: dict[str, int]) -> KernelPlan:
    """fa3_bwd.cu's deterministic entry: each consumer warpgroup (block_n / 64 of them; two at
    head_dim 256) reads its flag once at each (query block, key block) visit, to find its turn
    at dQ_i, and writes it once, to pass the turn on (the re-reads of a waiting thread are not
    counted: how many depends on the timing, not on the Plan)."""
    flags = BlockMap.of(p, k.block_m, k.block_n).pairs * p.bh * fa3_bwd_consumers(values) * 4
    return replace(k, name="fa3_bwd_det", source=source("fa3_bwd_det"),
                   traffic=k.traffic + Traffic({"dQsem": flags}, {"dQsem": flags}),
                   defines=kernel_defines("fa3_bwd_det", **values))


def fp8_attention(p: Problem, k: KernelPlan, lazy: bool | None = None,
                  persistent: bool | None = None, hw: HardwareProfile | None = None) -> KernelPlan:
    """fa3.cu's FP8 entry: the e4m3 copies read where the bf16 kernel reads Q, K, V (its counts
    at 1 byte an element), O written in bf16 (2 bytes), the descale factors read (a Q factor a
    CTA, K_j's and V_j's a trip, by the producer; counted once per CTA and tile). `lazy`: the
    lazy rescale (None: FP8_LAZY_RESCALE's): O is rescaled on a row's first trip only (its max
    then moves from -inf; later jumps past 2^8 are taken to be rare, as on random inputs), each
    trip tests alpha and scales the row sum back (2 a row); the producer's warp reads the V
    factors once more for their largest. `persistent` (None: FP8_PERSISTENT's, non-causal
    only; needs `hw`): persistent_grid."""
    d = k.defines["HEAD_DIM"]
    lazy = bucket(FP8_LAZY_RESCALE, d) if lazy is None else int(lazy)
    persistent = fp8_persistent(p, persistent)
    values = {n: v for n, v in k.defines.items() if n in SPECS["fa3_fwd_fp8"].defines}
    values.update(LAZY_RESCALE=lazy, PERSISTENT=int(persistent), PV_WAIT_TOP=bucket(FP8_PV_WAIT_TOP, d))
    t = k.traffic
    bm = BlockMap.of(p, k.block_m, k.block_n)
    tq, trips = k.ctas, bm.pairs * p.bh
    reads = {"Q8": t.reads["Q"], "K8": t.reads["K"], "Vt8": t.reads["V"], "Qs": tq * F32,
             "Ks": trips * F32, "Vs": trips * (1 + lazy) * F32}
    writes = {n: v * (2 if n == "O" else 1) for n, v in t.writes.items()}
    work = k.work
    if lazy:  # the per-trip rescale of O (d a row a trip, fa2_fwd) left to each row's first
        sr = bm.sum_r() * p.bh
        work = replace(work, alu_flops=work.alu_flops - (sr - p.seqlen_q * p.bh) * d + 2 * sr)
    k = replace(k, name="fa3_fwd_fp8", traffic=Traffic(reads, writes, t.sram), work=work,
                source=source("fa3_fwd_fp8"), defines=kernel_defines("fa3_fwd_fp8", **values))
    return persistent_grid(k, hw) if persistent else k


def fp8_persistent(p: Problem, persistent: bool | None = None) -> bool:
    """Whether fa3's Plan for `p` runs the fp8 forward on a persistent grid: `persistent` as
    given (a measured row's), else FP8_PERSISTENT's by head_dim, non-causal only. Its CTAs do
    not grow with batch x heads (schedules.shape: such a Plan is a shape of its own)."""
    if p.dtype is not Dtype.fp8_e4m3 or p.direction is not Direction.fwd:
        return False
    if persistent is not None:
        return bool(persistent)
    return not p.causal and p.head_dim <= max(FP8_PERSISTENT) and bool(bucket(FP8_PERSISTENT, p.head_dim))


def persistent_grid(k: KernelPlan, hw: HardwareProfile | None) -> KernelPlan:
    """fa3.cu PERSISTENT: grid (G, 1, 1), G = the resident CTAs of the whole GPU (at most the
    tiles); CTA c runs tiles c, c + G, ... of the launch order the one-tile grid has (query
    tile fastest, then head, then batch), so each CTA's trips (and masked trips, whole tiles)
    are the sum of its tiles'. Its tiles' Q and O go through the loop (`streamed`): the producer
    loads a tile's Q while the tile before runs, and O is stored as the next tile starts, so
    neither is a once-per-CTA phase; the pipeline fills once per CTA. The L2 model counts
    tiles (KernelPlan.tiles): G of them run at once, in the one-tile grid's order."""
    if hw is None:
        raise InputError("fa3's persistent fp8 kernel needs the hardware profile (its SM count)")
    n_tiles, tq = k.ctas, k.grid[0]
    g = min(n_tiles, hw.sm_count * ctas_per_sm(k, hw))
    x = np.arange(n_tiles) % tq  # each tile's CTA along x in the one-tile grid

    def per_cta(a: np.ndarray | None) -> np.ndarray | None:
        if a is None:
            return None
        a = np.asarray(a)
        vals = a[x] if len(a) == tq else np.full(n_tiles, a[0])
        out = np.bincount(np.arange(n_tiles) % g, weights=vals.astype(np.float64), minlength=g)
        out = out.astype(a.dtype) if np.issubdtype(a.dtype, np.integer) else out
        return out[:1] if np.all(out == out[0]) else out

    return replace(k, grid=(g, 1, 1), trips=per_cta(k.trips), tile_trips=per_cta(k.tile_trips),
                   masked=per_cta(k.masked), streamed=(*k.streamed, "Q8", "Qs", "O", "LSE"),
                   tiles=n_tiles)


def quant_counts(p: Problem, bm: int, bn: int, per_tensor_pass: bool | None) -> tuple[Traffic, Work]:
    """kernels/fp8_quant.cu: `per_tensor_pass` None: fp8_amax (reads Q, K, V, writes a max per
    tile); else fp8_quant (reads them again, writes the e4m3 copies and a factor per tile, V
    transposed through shared memory; True: also reads every tile's max of its tensor, in each
    CTA). Work per element: |x| max (and for fp8_quant the scaling); the Hadamard transform per
    row of Q and K: signs, log2(d) butterfly stages and the 1/sqrt(d) scaling."""
    d, b = p.head_dim, p.batch
    tq, tk = b * p.heads * -(-p.seqlen_q // bm), b * p.kv_heads * -(-p.seqlen_k // bn)
    nq, nk = b * p.heads * p.seqlen_q * d, b * p.kv_heads * p.seqlen_k * d
    # Vt8 keys written: each key tile's up to Nk rounded up to 16 (nk16 when bn is a multiple
    # of 16, as the kernel requires; the model also takes others)
    tkk = -(-p.seqlen_k // bn)
    nk16 = (tkk - 1) * bn + min(bn, -(-p.seqlen_k // 16) * 16 - (tkk - 1) * bn)
    rows_qk = b * (p.heads * p.seqlen_q + p.kv_heads * p.seqlen_k)
    had = rows_qk * d * ((d.bit_length() - 1) + 2) if p.hadamard else 0
    reads = {"Q": 2 * nq, "K": 2 * nk, "V": 2 * nk}
    if per_tensor_pass is None:
        return (Traffic(reads, {"Qa": tq * F32, "Ka": tk * F32, "Va": tk * F32}),
                Work(alu_flops=nq + 2 * nk + had))
    if per_tensor_pass:
        reads.update(Qa=tq * tq * F32, Ka=tk * tk * F32, Va=tk * tk * F32)
    writes = {"Q8": nq, "K8": nk, "Vt8": b * p.kv_heads * d * nk16, "Qs": tq * F32,
              "Ks": tk * F32, "Vs": tk * F32}
    sram = b * p.kv_heads * d * (tkk * bn + nk16)  # V's tile stored, read back
    return Traffic(reads, writes, sram), Work(alu_flops=2 * (nq + 2 * nk) + had)


def quant_kernels(p: Problem, bm: int, bn: int) -> list[KernelPlan]:
    """The quantisation pass(es) before fa3_fwd_fp8, at its tiles: grid (tiles, heads, 3 x batch)."""
    tensor = p.fp8_scaling is Fp8Scaling.tensor
    defines = dict(HEAD_DIM=p.head_dim, BLOCK_M=bm, BLOCK_N=bn, QUANT_THREADS=QUANT_THREADS,
                   PER_TENSOR=int(tensor), HADAMARD=int(p.hadamard))
    grid = (max(-(-p.seqlen_q // bm), -(-p.seqlen_k // bn)), p.heads, 3 * p.batch)
    regs = next(r for dd, r in sorted(QUANT_REGS.items()) if p.head_dim <= dd) \
        if p.head_dim <= 256 else max(QUANT_REGS.values())
    out = []
    for entry, mode in (("fp8_amax", None), ("fp8_quant", tensor)):
        if entry == "fp8_amax" and not tensor:
            continue
        t, w = quant_counts(p, bm, bn, mode)
        out.append(KernelPlan(entry, grid, QUANT_THREADS, 0, regs, bm, p.head_dim, t, w,
                              trips=uniform(1), source=source(entry),
                              defines=kernel_defines(entry, **defines)))
    return out
