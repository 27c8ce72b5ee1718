"""Kernel specs: what each real CUDA entry (kernels/*.cu) is, in one place.

A `KernelSpec` per `extern "C"` entry says where it lives (source file, the selector macro that
compiles it), how it is launched (arguments in order, which it writes, TMA descriptors), which
-D defines it requires and which model facts (MODEL_*) it checks at compile time, the tile rules
its static_asserts enforce (as readable refusals), its shared-memory and reader formulas, and
what it runs (head_dims, causal alignments, dtypes, architectures). A KernelPlan names its
entry (`KernelPlan.name`); `SPECS[name]` is its spec. Schedules choose kernels and tiles; the
model, the launcher and the knob checks read the facts here instead of matching file names.
`TENSORS` is the one table of the named tensors' shapes and dtypes.

Layer: above iosim.core, below iosim.schedules; pure Python (no CuPy, no environment).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from iosim.core.hardware import InputError
from iosim.core.memo import MISS, Memo
from iosim.core.plan import KernelPlan, Plan
from iosim.core.problem import CausalAlign, Direction, Dtype, Problem

F32 = 4
Defines = Mapping[str, int]
Rule = tuple[bool, str]  # (holds, what the kernel requires, as a user's options)
MAX_HEAD_DIM = 256  # every kernel's rows: a multiple of 8 elements (16 bytes) up to this
BASE_HEAD_DIMS = (64, 128, 256)
ELEM_DTYPES = ("fp16", "bf16")
BOTH_ALIGNS = frozenset(CausalAlign)


# ----- tensors ------------------------------------------------------------------------------

@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[str, ...]  # dims: B, H (query heads), KVH, Nq, Nk, d
    f32: bool = False  # else the problem's element dtype (bf16 for fp8_e4m3: the caller's)
    nbytes: int = 0  # bytes an element, when neither (1: torch's bool masks, e4m3)
    e4m3: bool = False  # an e4m3 copy (1 byte; the launcher holds it as uint8)


_Q, _KV, _NN, _ROWS = ("B", "H", "Nq", "d"), ("B", "KVH", "Nk", "d"), ("B", "H", "Nq", "Nk"), ("B", "H", "Nq")
TENSORS = {
    "Q": TensorSpec(_Q), "O": TensorSpec(_Q), "dO": TensorSpec(_Q), "dQ": TensorSpec(_Q),
    "K": TensorSpec(_KV), "V": TensorSpec(_KV), "dK": TensorSpec(_KV), "dV": TensorSpec(_KV),
    "S": TensorSpec(_NN), "P": TensorSpec(_NN), "dP": TensorSpec(_NN), "dS": TensorSpec(_NN),
    "L": TensorSpec(_ROWS, True), "M": TensorSpec(_ROWS, True), "LSE": TensorSpec(_ROWS, True),
    "D": TensorSpec(_ROWS, True), "Oacc": TensorSpec(_Q, True), "dQacc": TensorSpec(_Q, True),
    # per-query-head dK, dV that gqa_reduce sums (the model's counts call them dK_expanded)
    "dKx": TensorSpec(("B", "H", "Nk", "d")), "dVx": TensorSpec(("B", "H", "Nk", "d")),
    # PyTorch's unfused attention (iosim.schedules.standard): S + mask, the additive causal mask
    # (one Nq x Nk for every head, fp32, then in the input dtype), and the math backend's fp32
    # copies, its -inf test (bool) and rows that see no key (bool)
    "Sm": TensorSpec(_NN), "Mask32": TensorSpec(("Nq", "Nk"), True), "Mask": TensorSpec(("Nq", "Nk")),
    # the slices of the benchmark's packed qkv (qkv.unbind(2): strided views) and of its gradient
    "Qp": TensorSpec(_Q), "Kp": TensorSpec(_KV), "Vp": TensorSpec(_KV),
    "dQp": TensorSpec(_Q), "dKp": TensorSpec(_KV), "dVp": TensorSpec(_KV),
    "MaskB": TensorSpec(("Nq", "Nk"), nbytes=1), "Q32": TensorSpec(_Q, True),
    "K32": TensorSpec(_KV, True), "V32": TensorSpec(_KV, True), "O32": TensorSpec(_Q, True),
    "S32": TensorSpec(_NN, True), "P32": TensorSpec(_NN, True), "W32": TensorSpec(_NN, True),
    "NegInf": TensorSpec(_NN, nbytes=1), "Dead": TensorSpec(_ROWS, nbytes=1),
    # fp8_e4m3 (kernels/fp8_quant.cu -> fa3.cu): the e4m3 copies of Q, K and of V transposed
    # (d rows of Nk16 = Nk rounded up to 16 keys), their descale factors (one per tile of rows
    # per head: as many as Nq / Nk rows at most) and per-tensor scaling's per-tile maxima
    "Q8": TensorSpec(_Q, nbytes=1, e4m3=True), "K8": TensorSpec(_KV, nbytes=1, e4m3=True),
    "Vt8": TensorSpec(("B", "KVH", "d", "Nk16"), nbytes=1, e4m3=True),
    "Qs": TensorSpec(_ROWS, True), "Ks": TensorSpec(("B", "KVH", "Nk"), True),
    "Vs": TensorSpec(("B", "KVH", "Nk"), True), "Qa": TensorSpec(_ROWS, True),
    "Ka": TensorSpec(("B", "KVH", "Nk"), True), "Va": TensorSpec(("B", "KVH", "Nk"), True),
    # split-KV decode (iosim.schedules.decode): each of S splits' partial O (normalised over its
    # keys) and natural-log LSE, fp32, that the last CTA of a (batch, head chunk) merges, found
    # by an int32 count of the finished splits per (batch, grid row) (zero before a launch and
    # left zero by it; H rows, of which KVH x chunks used)
    "Opart": TensorSpec(("B", "H", "Nq", "S", "d"), True), "LSEpart": TensorSpec(("B", "H", "Nq", "S"), True),
    "Counter": TensorSpec(("B", "H"), nbytes=4),
    # a paged K/V cache (Problem.page_size): pages (B·NP of them, NP = ceil(Nk / page), each
    # page x KVH x d) and the int32 block table of each sequence's pages
    "Kc": TensorSpec(("NPG", "PG", "KVH", "d")), "Vc": TensorSpec(("NPG", "PG", "KVH", "d")),
    "BlockTable": TensorSpec(("B", "NP"), nbytes=4),
    # fa3's deterministic backward (fa3_bwd_det): an int32 flag per 64-row query block (the
    # smallest block_m; at 128 half stand unused) and consumer warpgroup (two at most), zero
    # before a launch and left zero by it
    "dQsem": TensorSpec(("B", "H", "QB", "C"), nbytes=4),
}
MODEL_NAMES = {"dKx": "dK_expanded", "dVx": "dV_expanded"}  # launcher name -> the counts' name
F32_TENSORS = frozenset(n for n, t in TENSORS.items() if t.f32)
INDEX_TENSORS = frozenset({"BlockTable", "dQsem", "Counter"})  # int32: 4 bytes an element
ZEROED_TENSORS = frozenset({"dQsem", "Counter"})  # allocated zero: flags the kernel leaves as it found them


def _dims(p: Problem, splits: int) -> dict[str, int]:
    pages = -(-p.seqlen_k // p.page_size) if p.page_size else 0
    return {"B": p.batch, "H": p.heads, "KVH": p.kv_heads, "Nq": p.seqlen_q, "Nk": p.seqlen_k,
            "d": p.head_dim, "Nk16": -(-p.seqlen_k // 16) * 16, "S": splits, "NP": pages,
            "NPG": p.batch * pages, "PG": p.page_size or 0, "QB": -(-p.seqlen_q // 64), "C": 2}


def tensor_shape(p: Problem, name: str, splits: int = 1) -> tuple[int, ...]:
    """`splits`: the KV splits of a split-KV Plan (`kv_splits`), the partials' S."""
    dims = _dims(p, splits)
    return tuple(dims[x] for x in TENSORS[name].shape)


# tensor_sizes' table: TENSORS' distinct shapes, and per tensor (the counts' name, its shape's
# index among them, its bytes an element or 0: fp32's or the dtype's, fp32 or not); a problem
# multiplies out each shape once (the 55 tensors have 14)
_SHAPES = tuple(dict.fromkeys(t.shape for t in TENSORS.values()))
_SIZED = tuple((MODEL_NAMES.get(n, n), _SHAPES.index(t.shape), t.nbytes, t.f32) for n, t in TENSORS.items())


def tensor_sizes(p: Problem, splits: int = 1) -> dict[str, int]:
    """Bytes of every named tensor in HBM, under the launcher's and the counts' names."""
    e, dims, elems = io_bytes(p), _dims(p, splits), []
    for shape in _SHAPES:
        n = 1
        for x in shape:
            n *= dims[x]
        elems.append(n)
    return {name: elems[i] * (nb or (F32 if f32 else e)) for name, i, nb, f32 in _SIZED}


def io_bytes(p: Problem) -> int:
    """Bytes an element of the caller's tensors (Q, K, V, O, ...): the dtype's, but bf16 for
    fp8_e4m3, whose e4m3 copies are the schedule's own (Q8, K8, Vt8)."""
    return 2 if p.dtype is Dtype.fp8_e4m3 else p.elem_bytes


# ----- fp8: kernels/fp8_quant.cu's incoherent processing --------------------------------------

# the random signs of its Hadamard transform: bit c of these words (its SIGNS)
HADAMARD_SIGNS = (0x9E3779B9, 0x7F4A7C15, 0xF39CC060, 0x5CEDC834, 0x2545F491, 0x4F6CDD1D,
                  0xB5297A4D, 0x68E31DA4)


def hadamard_matrix(d: int) -> np.ndarray:
    """M = diag(signs) H / sqrt(d), H the Sylvester Hadamard matrix (d a power of two, at most
    256), the signs fp8_quant.cu's: orthogonal, so (Q M)(K M)ᵀ = Q Kᵀ; the kernel computes
    x M for each row x of Q and K."""
    h = np.ones((1, 1))
    while h.shape[0] < d:
        h = np.block([[h, h], [h, -h]])
    signs = np.array([-1.0 if (HADAMARD_SIGNS[c >> 5] >> (c & 31)) & 1 else 1.0 for c in range(d)])
    return signs[:, None] * h / np.sqrt(d)


# ----- reader formulas ----------------------------------------------------------------------

class Readers(NamedTuple):
    """How many times a backward kernel reads each GEMM operand tile from shared memory per
    (query block, key block) step: once per warp that needs it (warps that split a product's
    rows each read all of its other operand). 1 each: every operand read once."""

    qdo_s: int = 1  # Q_i, dO_i by S = Q Kᵀ and dP = dO Vᵀ
    kv_s: int = 1  # K_j, V_j by S and dP
    qdo_kv: int = 1  # dO_i, Q_i by dV = Pᵀ dO and dK = dSᵀ Q
    pds_kv: int = 1  # Pᵀ, dSᵀ by dV and dK
    k_dq: int = 1  # K_j by dQ = dS K
    ds_dq: int = 1  # dS by dQ
    p_back: int = 1  # P read back for dS (kernels/fa2_bwd.cu: 0, P stays in registers)
    p_smem: int = 1  # P stored to shared memory (kernels/fa3_bwd.cu: 0, dV takes it from registers)


def warp_grid_readers(bm: int, bn: int, d: int, warps: int, nt3p: Callable[[int], int]) -> Readers:
    """The backward warp grids of kernels/fa2_bwd.cu and fa1.cu (constexprs W1K ... NT3P, 32-row
    warp tiles): the warps along one side of a product each read the whole of the other side's
    operand; dQ runs in passes of NT3P n8 tiles of d, each re-reading its dS fragments.
    `d`: the shared rows' length; `nt3p`: the kernel's pass width from NT3."""
    w1k = max(1, min(warps, bn // 32))  # (tiles below 32 rows: not the kernels', model only)
    w3q = max(1, min(warps, bm // 32))
    w3d = max(1, warps // w3q)
    nt3 = max(1, d // w3d // 8)
    return Readers(qdo_s=w1k, kv_s=max(1, warps // w1k), qdo_kv=w1k, pds_kv=max(1, warps // w1k),
                   k_dq=w3q, ds_dq=w3d * (nt3 // nt3p(nt3)))


def _fa2_bwd_readers(d: Defines) -> Readers:  # fa2_bwd.cu: NT3P = min(NT3, 4); Pᵀ in registers
    return warp_grid_readers(d["BLOCK_M"], d["BLOCK_N"], d["HEAD_DIM"], d["NUM_WARPS"],
                             lambda nt3: min(nt3, 4))._replace(p_back=0)


def _fa1_bwd_readers(d: Defines) -> Readers:  # fa1.cu: padded rows, NT3P = 4 or 2
    return warp_grid_readers(d["BLOCK_M"], d["BLOCK_N"], d["HEAD_DIM_PAD"], d["NUM_WARPS"],
                             lambda nt3: 2 if nt3 % 4 else 4)


def fa3_bwd_split_d(d: Defines) -> bool:
    """fa3_bwd.cu's SPLIT_D: at head_dim 256 its two consumer warpgroups split head_dim (dK, dV
    columns) of one block of keys instead of splitting the keys."""
    return d["HEAD_DIM"] == 256


def fa3_bwd_consumers(d: Defines) -> int:
    """fa3_bwd.cu's consumer warpgroups: one per 64 keys, two at head_dim 256 (SPLIT_D)."""
    return 2 if fa3_bwd_split_d(d) else max(1, d["BLOCK_N"] // 64)


def _fa3_bwd_readers(d: Defines) -> Readers:
    """fa3_bwd.cu: each consumer warpgroup (64 key rows) reads all of Q_i and dO_i (Sᵀ, dPᵀ as
    wgmma B; dK, dV as wgmma B), its own K/V rows once; Pᵀ and dSᵀ feed dV and dK from
    registers, dSᵀ is stored once and read whole by each 64-column dQ panel's wgmmas, K once
    by each 64-query panel's. SPLIT_D (head_dim 256, two consumers): each reads all of K_j and
    V_j and its half of Q_i's and dO_i's rows (Sᵀ, dPᵀ) and columns (dK, dV); Pᵀ is stored and
    both read all of Pᵀ and dSᵀ (dV, dK from shared memory)."""
    nc, panels = max(1, d["BLOCK_N"] // 64), max(1, d["HEAD_DIM"] // 64)
    if fa3_bwd_split_d(d):
        return Readers(qdo_s=1, kv_s=2, qdo_kv=1, pds_kv=2, k_dq=max(1, d["BLOCK_M"] // 64),
                       ds_dq=panels, p_back=0, p_smem=1)
    return Readers(qdo_s=nc, kv_s=1, qdo_kv=nc, pds_kv=0, k_dq=max(1, d["BLOCK_M"] // 64),
                   ds_dq=panels, p_back=0, p_smem=0)


# fa3's backward with a dQ-writer warp (DQ_WRITER = 1): the FA3 paper's Algorithm 3 (App. B.1),
# where the consumers write dQ_i(local) to shared memory and notify a warp of its own that adds
# it to global memory; a Plan with it is modelled only (`modelled_only`): it replays the
# published FA3 backward bars. kernels/fa3_bwd.cu's dQ warp (DQ_BULK 2, 3: DQ_WARP) is such a
# warp of its own; rows record which reduction they ran (`dq_bulk`, core/rows.py).
DQ_WRITER = "DQ_WRITER"


DQ_WARP = (2, 3)  # fa3_bwd.cu's DQ_BULK modes in which a dQ warp adds the consumers' staged dQ


def _always(d: Defines) -> bool:
    return True


def _fa3_bwd_waits(d: Defines) -> int:
    """Memory round trips one step of an fa3_bwd.cu consumer waits for with nothing else to
    issue (L2 round trips, the timing model's `pipeline.l2_latency_cycles` each, added to the
    warpgroup's chain): the release of its own dQ reduction (the vector atomics' registers, which the
    load/store unit takes toward L2: Nsight Compute's largest stall site, about one round trip
    a step in experiments/fa3_bwd/h100/ncu_source_d128.csv; DQ_BULK 1: its staging buffer's
    read-out) unless a dQ warp adds the staged dQ (DQ_BULK 2, 3: DQ_WARP; the FA3 paper's
    dQ-writer warp, DQ_WRITER: the atomics' stall sites gone in
    experiments/fa3_bwd/h100/speed10/run2/ncu_source_d128.csv), and, DETERMINISTIC, its turn's
    flag in global memory (polled until the key block before it released it). Its two GEMM
    turns' waits are not memory round trips: _fa3_bwd_turn_waits."""
    return (0 if d.get(DQ_WRITER) or d.get("DQ_BULK") in DQ_WARP else 1) + (1 if d.get("DETERMINISTIC") else 0)


def _fa3_bwd_turn_waits(d: Defines) -> int:
    """GEMM turns one step of an fa3_bwd.cu consumer waits out with nothing else to issue (the
    timing model's `pipeline.wgmma_wait_cycles` each, added to the warpgroup's chain): two,
    wgmma.wait_group after Sᵀ, dPᵀ and after dV, dK, dQ (unlike the forward's, no GEMM of the
    next step is issued before the wait), each followed by what hands the tensor cores on (the
    turn's named barrier; after turn A the stats' barrier, the dSᵀ stores and their proxy
    fence, Nsight Compute's WARPGROUP.DEPBAR, BAR and FENCE.VIEW.ASYNC sites in
    experiments/fa3_bwd/h100/speed10/run2/ncu_source_d128.csv). A wait on the tensor pipe and
    the SM's barriers, not on L2 or DRAM: a round trip's cycles (fitted to the other kernels'
    synchronous loads) do not price it."""
    return 2


# The L2's work per byte of fa3_bwd.cu's dQ reduction, on the Plan's count of dQacc (read and
# written: 2 bytes a reduced byte), the loads' weight 1; Nsight Compute at d = 256, N = 8192, not
# causal, where the L2 binds (88% busy) with either reduction (tests/test_validation.py derives
# both from the files):
# - FA3_RED_L2: a reduction moves 1.5 L2 sectors a sector of dQ (lts__t_sectors_op_red against
#   dQacc's bytes; the same for vector atomics, bulk and tensor reduce-adds: dq/ncu_dq_*_d128.txt,
#   dq256/ncu_d256_dq{0,2}.txt), not the 2 of a read and a write: 1.5 / 2;
# - FA3_ATOMIC_L2: the consumers' vector atomics (red.global.add.v2.f32, a request a 32-byte
#   sector; DQ_BULK 0, the deterministic mode too) keep the L2 busy 1.53 times as long as the
#   dQ warp's tensor reduce-adds (four sectors a request; DQ_BULK 2) in the same kernel
#   (lts__throughput x duration, dq256/ncu_d256_dq0.txt against ncu_d256_dq2.txt): the weight
#   that gives that ratio with the loads at 1
FA3_RED_L2 = 0.75
FA3_ATOMIC_L2 = 1.41


def _fa3_bwd_l2_weights(d: Defines) -> dict[str, float]:
    """fa3_bwd.cu: dQacc's weight in the L2, by who adds dQ: the consumers' vector atomics
    (DQ_BULK 0), or the copy engine (DQ_BULK 1-3; the paper's dQ-writer warp, DQ_WRITER)."""
    return {"dQacc": FA3_RED_L2 if d.get("DQ_BULK") or d.get(DQ_WRITER) else FA3_ATOMIC_L2}


def modelled_only(k) -> bool:
    """A KernelPlan that names a kernel entry but describes a variant no kernel file has (fa3's
    backward with the FA3 paper's dQ-writer warp)."""
    return bool(k.defines.get(DQ_WRITER))


def _fa1_bwd_sync_loads(d: Defines) -> int:
    """fa1.cu's backward step consumes plain global loads in the step that issues them: O_i
    (into registers, for D_i) and, without atomics (DQ_ATOMIC = 0), once per dQ pass this
    thread's dQacc_i fragment (into the product's accumulators): 1 + NT3 / NT3P round trips
    the warps wait for; with atomics, 1 (the reductions are not waited for)."""
    if d["DQ_ATOMIC"]:
        return 1
    warps = d["NUM_WARPS"]
    w3q = max(1, min(warps, d["BLOCK_M"] // 32))
    nt3 = max(1, d["HEAD_DIM_PAD"] // max(1, warps // w3q) // 8)
    return 1 + nt3 // (2 if nt3 % 4 else 4)


# fa1.cu's backward issues about twice the instructions its counts imply (Nsight Compute's
# inst_executed at one wave, experiments/ncu_mechanism/h100/wave12: 1.9-2.4x): its inner loop's
# SASS (experiments/fa1_sass/sass_trip.csv, made by tools/fa1_sass.py) holds integer, address,
# global memory, barrier and branch instructions the counts have no term for, per warp and trip
# (least squares over 15 builds, head_dim 32-256, dQ read-modified-written or reduced, each
# within 20%: python tools/fa1_sass.py --fit experiments/fa1_sass/sass_trip.csv):
# - between the products, on the warps' chain (KernelPlan.loop_issue): FA1_TRIP_INT a trip (loop
#   control, the three barriers, branches, the softmax's and dS's index and mask arithmetic),
#   FA1_COPY_INT a 16-byte copy, load or L2 prefetch (Q_i, dO_i, ℓ_i, m_i cp.async; O_i into
#   registers; the next step's O_i, dQacc_i lines), the instruction with its address, bounds and
#   predicate; one a dQacc_i fragment load, store or reduction (immediate offsets: the
#   instruction alone); one a bf16 element of O_i, dO_i widened for D_i;
# - inside the products, between the warp's dependent MMAs (KernelPlan.loop_shadow: issue slots
#   only, the MMA chain's cycles hold them): FA1_KSTEP_INT a k step of phase 1's Sᵀ and dPᵀ
#   (unrolled twice only, for registers: the swizzled ldmatrix addresses are recomputed every
#   16 columns) and FA1_MMA_INT an MMA of the unrolled dV, dK and dQ.
FA1_TRIP_INT = 218.4
FA1_COPY_INT = 7.93
FA1_KSTEP_INT = 18.1
FA1_MMA_INT = 0.385


def fa1_bwd_trip_terms(d: Defines) -> dict[str, float]:
    """Per warp and trip of fa1.cu's fa1_bwd (its fa1b constexprs): 16-byte copies, loads and
    prefetches (`copies`), dQacc fragment accesses (`dq`), bf16 elements widened for D_i
    (`unpack`), phase 1's k steps (`ksteps`), MMAs of the unrolled products (`mma_unrolled`)."""
    nw, bm, bn, dp, dg = d["NUM_WARPS"], d["BLOCK_M"], d["BLOCK_N"], d["HEAD_DIM_PAD"], d["HEAD_DIM"]
    threads, atomic = 32 * nw, d["DQ_ATOMIC"]
    # (tiles below 32 rows, e.g. tune's candidates: not the kernel's, model only)
    w2k, w3q = max(1, min(nw, bn // 32)), max(1, min(nw, bm // 32))
    nt3 = dp // max(1, nw // w3q) // 8
    lines = -(-dg * 2 // 128) + (0 if atomic else -(-dg * 4 // 128))  # a row of O, of dQacc
    copies = 2 * bm * dp // 8 + 2 * bm + bm * dg // 8 + bm * lines  # Q, dO; ℓ, m; O; prefetch
    mma = (2 * (bn // w2k // 16) * (dp // max(1, nw // w2k) // 8) * (bm // 16)  # dV, dK
           + (bm // w3q // 16) * nt3 * (bn // 16) * dg / dp)  # dQ, its passes over HEAD_DIM
    return {"copies": copies / threads, "dq": bm * dg / 2 * (1 if atomic else 2) / threads,
            "unpack": 2 * bm * dg / threads, "ksteps": 2 * -(-dg // 16), "mma_unrolled": mma}


def _fa1_bwd_prefetch(d: Defines, e: int) -> tuple[frozenset[str], int]:
    """fa1.cu's prefetch_rows: the next trip's O_i and, unsplit (DQ_ATOMIC = 0), dQacc_i lines,
    a trip ahead of their plain loads; in between the CTA's trip moves Q_i, dO_i (the cp.async
    ring), O_i (elements), ℓ_i, m_i (fp32) and dQacc_i (fp32, read and written; with atomics,
    reduced once)."""
    bm, dg, atomic = d["BLOCK_M"], d["HEAD_DIM"], d["DQ_ATOMIC"]
    tensors = frozenset({"O"} if atomic else {"O", "dQacc"})
    return tensors, bm * dg * (3 * e + (4 if atomic else 8)) + 2 * 4 * bm


def _fa1_bwd_issue(d: Defines, e: int) -> float:
    t = fa1_bwd_trip_terms(d)
    return d["NUM_WARPS"] * (FA1_TRIP_INT + FA1_COPY_INT * t["copies"] + t["dq"] + t["unpack"])


def _fa1_bwd_shadow(d: Defines, e: int) -> float:
    t = fa1_bwd_trip_terms(d)
    return d["NUM_WARPS"] * (FA1_KSTEP_INT * t["ksteps"] + FA1_MMA_INT * t["mma_unrolled"])


def model_defines(entry: str, d: Defines) -> dict[str, int]:
    """The MODEL_* facts the model assumed for this kernel, passed as defines so that the kernel
    static_asserts them (the spec's `checks`)."""
    s, out = SPECS[entry], {}
    if s.bwd_readers is not None:
        rd = s.bwd_readers(d)
        out.update(MODEL_W1K=rd.qdo_s, MODEL_W3Q=rd.k_dq, MODEL_DS_DQ=rd.ds_dq)
    if s.kv_readers is not None:
        out["MODEL_KV_READERS"] = s.kv_readers(d)
    assert set(out) == set(s.checks), entry
    return out


# ----- tile rules (Python mirrors of the static_asserts, as options) -------------------------

def _no_rules(d: Defines) -> list[Rule]:
    return []


def _fa1_fwd_kv_wait(d: Defines) -> float:
    """fa1.cu's forward loads K_j, V_j through one cp.async stage and waits for them
    (cp_async_wait<0>, then the CTA's barrier) before its inner loop over the split's QB =
    SPLIT_ROWS / BLOCK_M query blocks, one trip each: a round trip per outer step that nothing
    on the SM fills (one CTA an SM), 1 / QB of one a trip. Large problems run unsplit (QB = Nq /
    BLOCK_M: the wait amortised); small ones split the rows to fill the GPU (QB = 1: a round
    trip every trip)."""
    return 1.0 / max(1, d["SPLIT_ROWS"] // d["BLOCK_M"])


def _fa1_fwd_barrier(d: Defines) -> float:
    """fa1.cu's forward meets at a CTA barrier once an outer step (K_j, V_j landed: the
    cp_async_wait<0> and __syncthreads before the inner loop over its QB query blocks), so 1 / QB
    of its trips begin with every warp released at once; within the step they drift."""
    return _fa1_fwd_kv_wait(d)


def _fa1_fwd_rules(d: Defines) -> list[Rule]:  # fa1.cu fa1_fwd's static_asserts
    bm, w, sr = d["BLOCK_M"], d["NUM_WARPS"], d["SPLIT_ROWS"]
    return [(bm % w == 0 and (bm // w) % 16 == 0, "--block-m / --warps a multiple of 16"),
            (sr > 0 and sr % bm == 0, "query rows per split a multiple of --block-m")]


def _fa1_bwd_rules(d: Defines) -> list[Rule]:  # fa1.cu fa1_bwd
    bm, bn, w, st, dp = d["BLOCK_M"], d["BLOCK_N"], d["NUM_WARPS"], d["STAGES"], d["HEAD_DIM_PAD"]
    w1k = min(w, max(1, bn // 32))
    w1q, w3q = w // w1k, min(w, max(1, bm // 32))
    return [(bm % 64 == 0 and 32 * w >= 2 * bm, "--block-m a multiple of 64, at most --warps x 16"),
            (w % w1k == 0 and bn % (16 * w1k) == 0 and bm % (8 * w1q) == 0 and bm % (4 * w) == 0,
             "--warps splitting --block-n by 32 rows, then --block-m by 8"),
            (dp % (16 * (w // w1k)) == 0 and w % w3q == 0 and dp % (16 * (w // w3q)) == 0,
             "--warps splitting the padded head_dim in 16 columns"),
            (st >= 2, "--stages >= 2 (the Q/dO cp.async ring)"),
            (d["SPLIT_COLS"] > 0 and d["SPLIT_COLS"] % bn == 0,
             "key rows per split a multiple of --block-n")]


def _fa2_fwd_rules(d: Defines) -> list[Rule]:  # fa2.cu:112-132
    bm, bn, w, st = d["BLOCK_M"], d["BLOCK_N"], d["NUM_WARPS"], d["STAGES"]
    chunks = d["HEAD_DIM_PAD"] // 8  # one pass of the threads covers RSTEP rows
    rstep = 32 * w // chunks if (32 * w) % chunks == 0 else 0
    return [(bm % (16 * w) == 0, f"--block-m a multiple of 16 x --warps ({16 * w})"),
            (rstep > 0 and rstep % 8 == 0,
             f"--warps x 32 threads covering >= 8 rows of {chunks} 16-byte chunks a pass "
             f"(--warps >= {max(1, 8 * chunks // 32)})"),
            (rstep > 0 and bm % max(rstep, 1) == 0 and bn % max(rstep, 1) == 0,
             f"--block-m and --block-n multiples of the {rstep} rows one pass copies"),
            (st >= 1, "--stages >= 1")]


def _fa2_bwd_rules(d: Defines) -> list[Rule]:  # fa2_bwd.cu:173-180
    bm, bn, w, st, dd = d["BLOCK_M"], d["BLOCK_N"], d["NUM_WARPS"], d["STAGES"], d["HEAD_DIM"]
    w1k = min(w, bn // 32)
    w1q, w3q = w // max(w1k, 1), min(w, bm // 32)
    threads, dch = 32 * w, dd // 8
    rstep = threads // dch if threads % dch == 0 else 0
    return [(bm % 64 == 0 and 32 * w >= 2 * bm, "--block-m a multiple of 64, at most --warps x 16"),
            (w1k >= 1 and w % w1k == 0 and bn % (16 * w1k) == 0 and bm % (16 * w1q) == 0,
             "--block-n >= 32 and --warps splitting --block-n by 32 rows, then --block-m by 16"),
            (w3q >= 1 and w % w3q == 0 and dd % (16 * (w // w3q)) == 0
             and dd % (16 * (w // max(w1k, 1))) == 0,
             "--warps splitting head_dim in 16 columns"),
            (bn * dch % threads == 0 and rstep > 0 and rstep % 8 == 0 and bm % rstep == 0
             and bn % rstep == 0, "--warps x 32 threads copying whole 8-row groups of the tiles"),
            (st >= 2, "--stages >= 2 (the Q/dO cp.async ring)")]


def _fa3_fwd_rules(d: Defines) -> list[Rule]:  # fa3.cu's static_asserts
    bm, bn, w = d["BLOCK_M"], d["BLOCK_N"], d["NUM_WARPS"]
    return [(bm % 64 == 0 and bm <= 192, "--block-m 64, 128 or 192 (one warpgroup per 64 rows)"),
            (w == bm // 16, f"--warps {bm // 16} (block_m / 16: four per warpgroup)"),
            (bn <= 256, "--block-n at most 256"),
            (not d["FP8_E4M3"] or bn % 32 == 0, "--block-n a multiple of 32 with fp8"),
            (not d.get("PERSISTENT") or not d["IS_CAUSAL"], "a persistent grid without --causal")]


def _fa3_fwd_apart(d: Defines) -> bool:
    """fa3.cu: two or more consumer warpgroups without PINGPONG's named barriers (three at
    d = 64) drift apart, so the softmax phases of their warps on a sub-partition overlap (Nsight
    Compute at d = 64: warps stalled on the full MUFU queue and not selected, where the
    ping-pong kernels show almost none: experiments/fa3_ncu)."""
    return not d["PINGPONG"] and d["NUM_WARPS"] // 4 > 1


def _fa3_bwd_rules(d: Defines) -> list[Rule]:  # fa3_bwd.cu's static_asserts
    bm, bn, w, st, dd = d["BLOCK_M"], d["BLOCK_N"], d["NUM_WARPS"], d["STAGES"], d["HEAD_DIM"]
    split = fa3_bwd_split_d(d)
    nc, units = fa3_bwd_consumers(d), (bm // 64) * (dd // 64)
    return [(bm == 64 or (bm == 128 and dd == 64),
             "--block-m 64, or 128 at head_dim 64 (Sᵀ, dPᵀ, dK, dV in registers)"),
            (bn in (64, 128), "--block-n 64 or 128 (one consumer warpgroup per 64 keys)"),
            (not split or (bm == 64 and bn == 64 and not d["PINGPONG"]),
             "head_dim 256: --block-m 64 and --block-n 64 (two consumers split head_dim), "
             "no ping-pong"),
            (w == 4 * nc, f"--warps {4 * nc} (four per consumer warpgroup: one per 64 keys, "
             "two at head_dim 256)"),
            (nc >= 1 and units % nc == 0,
             "64x64 dQ units (block_m/64 x head_dim/64) shared out evenly over block_n/64"),
            (not d["PINGPONG"] or bn == 128, "ping-pong with two consumers (--block-n 128)"),
            (d.get("DQ_BULK", 0) in (0, 1, 2, 3), "DQ_BULK 0 (atomics), 1, 2 or 3 (bulk reduce-adds)"),
            (not d.get("DQ_BULK") or (nc == 2 and not d.get("DETERMINISTIC") and (
                d["DQ_BULK"] == 2 if split else
                units == nc and (dd == 128 or (dd == 64 and d["DQ_BULK"] == 3)))),
             "dQ by bulk reduce-add: not deterministic; one dQ unit a consumer at head_dim 128, "
             "or 64 with DQ_BULK 3; head_dim 256: DQ_BULK 2 (staged in the Q/dO ring slot)"),
            (st >= 1, "--stages >= 1")]


def _fp8_quant_rules(d: Defines) -> list[Rule]:  # fp8_quant.cu's static_asserts
    return [(d["BLOCK_N"] % 16 == 0, "--block-n a multiple of 16 (whole 16-key groups of Vt)")]


def _gemm_warp_grid(bm: int, bn: int, nw: int) -> bool:
    """naive.cu's nv_pick_warps_m finds a grid: warps_m (a power of two dividing the warps) with
    16-row warp tiles down BLOCK_M and 16-column ones across BLOCK_N."""
    return any(nw % wm == 0 and bm % (wm * 16) == 0 and bn % (nw // wm * 16) == 0
               for wm in (1 << i for i in range(nw.bit_length())))


def _gemm_rules(d: Defines) -> list[Rule]:  # naive.cu's gemm namespace static_asserts
    return [(d["BLOCK_K"] % 16 == 0, "a k tile that is a multiple of 16"),
            (d["STAGES"] >= 1, "--stages >= 1"),
            (_gemm_warp_grid(d["BLOCK_M"], d["BLOCK_N"], d["NUM_WARPS"]),
             "a warp grid of 16x16-multiple warp tiles: --block-m and --block-n multiples of 16 "
             "that --warps divides")]


# ----- the specs ----------------------------------------------------------------------------

def _same(d: int) -> int:
    return d


def pad_pow2_64(d: int) -> int:
    """kernels/fa2.cu: rows of 64, 128 or 256 (its swizzle holds 8, 16 or 32 chunks a row and
    one pass of the threads covers whole rows)."""
    return 1 << (max(d, 64) - 1).bit_length()


def pad_ceil_64(d: int) -> int:
    """kernels/fa1.cu: d rounded up to a multiple of 64 (whole 8-chunk swizzle rows)."""
    return -(-d // 64) * 64


@dataclass(frozen=True)
class KernelSpec:
    entry: str  # the extern "C" name; KernelPlan.name
    source: str  # kernels/<source>
    select: str | None  # the selector macro that compiles this entry (None: the file's only one)
    args: tuple[str, ...]  # launch order; tensors by TENSORS name, scalars Nq Nk H KVH scale
    writes: frozenset[str]  # the tensors it writes (NaN-poisoned before a check)
    defines: frozenset[str]  # the -D values it requires (the file #errors without them)
    checks: tuple[str, ...] = ()  # MODEL_* facts the Plan passes and the kernel static_asserts
    head_dims: tuple[int, ...] | None = None  # None: any multiple of 8 up to MAX_HEAD_DIM
    head_dim_pad: Callable[[int], int] = _same  # shared-memory row length for a head_dim
    aligns: frozenset[CausalAlign] = BOTH_ALIGNS  # causal diagonals it masks
    dtypes: tuple[str, ...] = ELEM_DTYPES  # what the launcher runs it with
    archs: frozenset[str] = frozenset({"sm_80", "sm_90a"})
    rules: Callable[[Defines], list[Rule]] = _no_rules
    # dynamic shared memory in bytes from (defines, element bytes); None: none
    smem: Callable[[Defines, int], int] | None = None
    kv_readers: Callable[[Defines], int] | None = None  # forward: smem reads of K_j, V_j a trip
    bwd_readers: Callable[[Defines], Readers] | None = None
    # memory round trips a trip waits for: plain (not cp.async) global loads that the same trip
    # consumes, or, warp-specialised, the asynchronous results a consumer waits for with nothing
    # else to issue (a round trip each: `sync_in_l2` says to which level; a fraction: one
    # wait shared by several trips); None: none
    sync_loads: Callable[[Defines], float] | None = None
    # whether those round trips are to lines the L2 holds (the step before prefetched them, the
    # kernel's own atomics and flags: `pipeline.l2_latency_cycles` each), not first reads from
    # DRAM (`pipeline.load_latency_cycles`); None: DRAM
    sync_in_l2: Callable[[Defines], bool] | None = None
    # warp-specialised: the waits a consumer step spends on its own wgmma groups and the turns'
    # hand-over, with nothing else to issue (`pipeline.wgmma_wait_cycles` each); None: none
    turn_waits: Callable[[Defines], int] | None = None
    # dependent round trips to L2 after the last trip, the CTA that finishes a row's splits
    # combining them (KernelPlan.tail_round_trips); None: none
    tail_round_trips: Callable[[Defines], int] | None = None
    # the L2's work per byte of a tensor's traffic where it is not that of a plain byte (the
    # timing model's L2 share and limit; bytes, IO and the SM's port unchanged): tensor -> weight
    l2_weights: Callable[[Defines], Mapping[str, float]] | None = None
    # arg: (tensor, box rows: a define's name, or a number)
    tensor_maps: Mapping[str, tuple[str, str | int]] = field(default_factory=dict)
    # a row kernel's block reduction: (ALU ops, exp2s) of one thread's merge of two partial
    # results (iosim.schedules.naive.row_merges counts the merges); None: not a row kernel
    row_merge: tuple[int, int] | None = None
    # warp instructions a CTA's loop trip issues besides its MMAs and counted work, from
    # (defines, element bytes); None: none beyond the counts
    loop_issue: Callable[[Defines, int], float] | None = None
    # ... of which a trip issues between dependent MMAs, in their shadow (the address arithmetic
    # of an MMA loop): issue slots only, not the warps' chain; None: none
    loop_shadow: Callable[[Defines, int], float] | None = None
    # whether its loop_issue instructions are each a step of one dependent
    # chain a warp (address, bound, predicate, copy: each from the one before), on its warp's
    # chain at pipeline.chain_inst_cycles each, not inst_cycles; None: no (independent enough
    # that the warp's other instructions hide their latency)
    loop_chain: Callable[[Defines], bool] | None = None
    # warp-specialised: whether consumer warps of one SM sub-partition run their softmax at the
    # same time (no turns at the tensor cores), so one warp's FP32 work issues while another's
    # exp2 holds the MUFU; None: never (one consumer warp's softmax at a time, its exp2 and
    # FP32 instructions one dependent chain)
    softmax_apart: Callable[[Defines], bool] | None = None
    # wgmma consumers: whether a warpgroup's softmax runs under its own previous P·V GEMM (the
    # wait for it placed after the softmax in the SASS)
    softmax_under_pv: Callable[[Defines], bool] | None = None
    # warp-specialised: whether the consumer warpgroups run each step in step (a barrier
    # between them every step, no turns): their GEMMs issue together and share the tensor
    # cores, and their softmax runs while no GEMM does; None: never
    consumers_in_step: Callable[[Defines], bool] | None = None
    # tensors the kernel adds into in L2 by reductions (red.global, a bulk reduce-add): the L2
    # reads and writes them (the Plan counts both), but their bytes cross the SM's own load/store
    # path once, out (the timing model's port); None: none
    l2_reductions: Callable[[Defines], frozenset[str]] | None = None
    # mma.sync kernels: the share of loop trips that begin at a CTA barrier that releases all
    # its warps at once (fa1's forward: the wait for K_j, V_j before its QB inner trips); the
    # warps of one sub-partition then reach their MMAs together and each queues behind the
    # others' at its tensor core; None: none (warps drift)
    barrier_trips: Callable[[Defines], float] | None = None
    symbol: str | None = None  # the extern "C" name, where another schedule's kernel is reused
    # the tensors its loads write into shared memory by cp.async (or TMA): they reach the banks
    # through the L1's fill path, not the shared-memory data pipe (the timing model's
    # shared-memory term leaves their bytes out; Nsight Compute's data-pipe wavefronts do too)
    smem_fills: frozenset[str] = frozenset()
    # lines it prefetches into L2 (prefetch.global.L2) one loop trip before it loads them:
    # (defines, element bytes) -> (those tensors, the bytes one CTA's trip moves through the L2
    # between the prefetch and the load); the L2 model (iosim.model.memory) reads a line the
    # L2 evicted meanwhile twice from DRAM; None: no prefetch
    prefetch: Callable[[Defines, int], tuple[frozenset[str], int]] | None = None

    @property
    def function(self) -> str:
        """The name of the compiled function (the entry's own unless it reuses another)."""
        return self.symbol or self.entry


_MASK = frozenset({"HEAD_DIM", "IS_CAUSAL", "CAUSAL_BOTTOM_RIGHT"})
_QKV = frozenset({"Q", "K", "V"})  # fa2.cu's cp.async copies into shared memory
_DQACC = frozenset({"dQacc"})  # the backward kernels' dQ, added by reductions in L2
_GEMM = _MASK | {"BLOCK_M", "BLOCK_N", "BLOCK_K", "STAGES", "NUM_WARPS"}
_SOFTMAX = _MASK | {"SOFTMAX_THREADS", "ROW_IN_SMEM"}
_TILE = frozenset({"HEAD_DIM", "HEAD_DIM_PAD", "BLOCK_M", "BLOCK_N", "NUM_WARPS", "IS_CAUSAL",
                   "CAUSAL_BOTTOM_RIGHT"})
_DIMS = ("Nq", "Nk", "H", "KVH")
_FP8_QUANT = frozenset({"HEAD_DIM", "BLOCK_M", "BLOCK_N", "QUANT_THREADS", "PER_TENSOR", "HADAMARD"})


def _gemm_smem(d: Defines, e: int) -> int:  # naive.cu: the k-tile ring, reused for the output
    return max(d["STAGES"] * (d["BLOCK_M"] + d["BLOCK_N"]) * d["BLOCK_K"], d["BLOCK_M"] * d["BLOCK_N"]) * e


# naive.cu's GEMMs issue far more than their MMAs, ldmatrix and cp.async: every 16-byte copy
# into the ring computes its swizzled address, bounds and predicate, and every ldmatrix its
# address. Nsight Compute's inst_executed of the backward's GEMMs (16 kernels, 4 points of
# experiments/naive_kernels) less the model's own count, per CTA, fit (least squares, within 17%
# each) as warp instructions per 512 bytes a loop trip stages (one warp's 16-byte copies) plus
# some per element of the C tile (the epilogue's packing and copy-out); the loop's are counted,
# the epilogue's are not: they issue while the SM's other CTA runs its loop (the kernel keeps two
# resident for that; counted, the few-trip GEMMs naive_qk and naive_bwd_dp come out slower than
# ncu measures them):  python tools/naive_kernels.py experiments/naive_kernels/h100/naive_kernels.csv --inst
GEMM_INST_STAGED = 28.9


def _gemm_issue(d: Defines, e: int) -> float:
    return GEMM_INST_STAGED * (d["BLOCK_M"] + d["BLOCK_N"]) * d["BLOCK_K"] * e / 512


def _naive(entry: str, args: tuple[str, ...], writes: set[str], defines: frozenset[str],
           bwd: bool, row_merge: tuple[int, int] | None = None) -> KernelSpec:
    gemm = defines is _GEMM
    return KernelSpec(entry, "naive.cu", entry.upper(), args, frozenset(writes), defines,
                      head_dims=BASE_HEAD_DIMS if bwd else None,
                      rules=_gemm_rules if gemm else _no_rules, smem=_gemm_smem if gemm else None,
                      row_merge=row_merge, loop_issue=_gemm_issue if gemm else None,
                      loop_chain=_always if gemm else None,
                      smem_fills=frozenset(args[:2]) if gemm else frozenset())  # A, B: cp.async


def _fa1_fwd_smem(d: Defines, e: int) -> int:  # Q_i, K_j, V_j
    return (d["BLOCK_M"] + 2 * d["BLOCK_N"]) * d["HEAD_DIM_PAD"] * e


def _fa1_bwd_smem(d: Defines, e: int) -> int:  # K_j, V_j; Q_i, dO_i ring; Pᵀ, dSᵀ; ℓ, m ring and D
    bm, bn, dp, st = d["BLOCK_M"], d["BLOCK_N"], d["HEAD_DIM_PAD"], d["STAGES"]
    return (2 * bn * dp + 2 * st * bm * dp + 2 * bm * bn) * e + (2 * st + 1) * bm * F32


def _fa2_fwd_smem(d: Defines, e: int) -> int:  # Q + STAGES K/V tile pairs, padded rows
    return (d["BLOCK_M"] + 2 * d["STAGES"] * d["BLOCK_N"]) * d["HEAD_DIM_PAD"] * e


def _fa2_bwd_smem(d: Defines, e: int) -> int:  # K, V; Q, dO ring; Pᵀ, dSᵀ; LSE, D ring
    bm, bn, dd, st = d["BLOCK_M"], d["BLOCK_N"], d["HEAD_DIM"], d["STAGES"]
    return (2 * bn * dd + 2 * st * bm * dd + 2 * bm * bn) * e + 2 * st * bm * F32


FA3_SMEM_ALIGN = 1024  # fa3.cu and fa3_bwd.cu align their swizzled tiles to 1024 bytes
FA3_BWD_STATIC_SMEM = 1024  # fa3_bwd.cu's static shared memory (its mbarriers), as ptxas reports it
SWIZZLE_BYTES = 128  # fa3.cu / fa3_bwd.cu's TMA boxes: one 128-byte swizzled row


def tma_box_bytes(rows: str | int, defines: Defines, elem_bytes: int) -> int:
    """Bytes of one row of a TMA box (KernelSpec.tensor_maps: `rows` is the define of its row
    count): fa3.cu's SW. A map whose rows hold head_dim elements is swizzled over its row where
    that is under 128 bytes (e4m3 at d = 64: 64); Vt8's rows (rows define HEAD_DIM) are keys,
    in panels of fa3.cu's VT_KEYS (fp8_vt_keys)."""
    if rows == "HEAD_DIM":
        return fp8_vt_keys(defines["BLOCK_N"])
    return min(SWIZZLE_BYTES, defines["HEAD_DIM"] * elem_bytes)


def fp8_vt_keys(block_n: int) -> int:
    """fa3.cu's VT_KEYS: keys (e4m3 bytes) per row of a Vt8 panel, the span of its swizzle: 128,
    or 64 / 32 where block_n is no multiple of 128 (192: 64, 224: 32)."""
    return next(w for w in (SWIZZLE_BYTES, 64, 32) if block_n % w == 0)


def _fa3_fwd_smem(d: Defines, e: int) -> int:  # Q + STAGES K/V tile pairs + alignment
    return (d["BLOCK_M"] + 2 * d["STAGES"] * d["BLOCK_N"]) * d["HEAD_DIM"] * e + FA3_SMEM_ALIGN


FA3_BULK_ROW = 288  # fa3_bwd.cu DQ_BULK 1: a staged 64-column fp32 dQ row (+ 32 bytes)
FA3_DQ_BOXES = 64 * 64 * F32  # fa3_bwd.cu DQ_BULK 2, 3: a dQ unit as two swizzled 32-column boxes


def fa3_dq_staging(d: Defines) -> int:
    """fa3_bwd.cu's shared memory for staged dQ units (64 queries x 64 fp32 columns), by DQ_BULK:
    none (atomics); 64 padded rows a consumer (a bulk reduce-add a row); two 128-byte-swizzled
    boxes a consumer (the dQ warp's two TMA reduce-adds); one such unit, the consumers in turn.
    Head_dim 256 (SPLIT_D) with the dQ warp: none of its own, each consumer's two units go to its
    panels of the step's Q/dO ring slot (DQ_IN_RING)."""
    nc = fa3_bwd_consumers(d)
    if fa3_bwd_split_d(d) and d.get("DQ_BULK") in DQ_WARP:
        return 0
    return {0: 0, 1: nc * 64 * FA3_BULK_ROW, 2: nc * FA3_DQ_BOXES, 3: FA3_DQ_BOXES}[d.get("DQ_BULK", 0)]


def _fa3_bwd_smem(d: Defines, e: int) -> int:  # K, V; Q, dO ring; 3 dSᵀ; LSE, D x 2 a consumer
    bm, bn, dd, st = d["BLOCK_M"], d["BLOCK_N"], d["HEAD_DIM"], d["STAGES"]  # (DQ_BULK: + a
    # staged dQ unit a consumer); SPLIT_D: two dSᵀ and two Pᵀ buffers, each consumer the stats
    # of its half of the queries
    nc = fa3_bwd_consumers(d)
    bufs, rows = (4, bm // nc) if fa3_bwd_split_d(d) else (3, bm)
    return (2 * bn * dd + 2 * st * bm * dd + bufs * bn * bm) * e + 4 * nc * rows * F32 \
        + fa3_dq_staging(d) + FA3_SMEM_ALIGN


def _decode_smem(d: Defines, e: int) -> int:  # Q rows + STAGES K/V tile pairs; reused at the end
    # for the warps' fp32 partial O, m and ℓ (decode.cu: the larger of the two)
    ring = (d["BLOCK_M"] + 2 * d["STAGES"] * d["BLOCK_N"]) * d["HEAD_DIM"] * e
    return max(ring, d["NUM_WARPS"] * d["BLOCK_M"] * (d["HEAD_DIM"] + 2) * F32)


# the fused combine (decode.cu combine_last) after the last split's loop: five dependent round
# trips to L2, each waiting for the one before: the fence that makes its partial's stores
# visible, the count (atomicAdd), the fence after the count's reset (atomicExch), the partial
# LSEs, then the partial Os (ld.cg: other SMs wrote them)
COMBINE_ROUND_TRIPS = 5


def _decode_combine(d: Defines) -> int:
    """decode.cu's combine runs only where a row's keys are split over several CTAs."""
    return COMBINE_ROUND_TRIPS if d["NUM_SPLITS"] > 1 else 0


def _decode_paged_sync_loads(d: Defines) -> int:
    """decode.cu's paged gather: with PAGE_AHEAD=0 the loads of each K and each V tile wait
    for the table entries they read as they issue (plain loads through the SM's load path,
    behind the tile loads in flight there): two round trips a trip, which a second CTA on the
    SM hides and a deeper ring does not (experiments/decode/h100/pages10/pages_probe.csv,
    pages_ncu.txt; the trips measured at one CTA an SM against the round trips:
    tests/test_decode_measured.py); PAGE_AHEAD=1 reads them a tile ahead, into registers: none."""
    return 0 if d.get("PAGE_AHEAD", 1) else 2


def _decode_rules(d: Defines) -> list[Rule]:  # decode.cu's static_asserts
    bm, bn, w, dd = d["BLOCK_M"], d["BLOCK_N"], d["NUM_WARPS"], d["HEAD_DIM"]
    return [(bm % 16 == 0 and bm <= 32 and bm // 16 * dd <= 256,
             "packed query rows a CTA (heads x Nq, rounded up to 16): 16 or 32, and "
             "rows / 16 x head_dim <= 256"),
            (bn % (16 * w) == 0, f"--block-n a multiple of 16 x --warps ({16 * w})"),
            (d["STAGES"] >= 1, "--stages >= 1"),
            # the fused combine's weights and 1/Σ (fp32, rows x (splits + 1)) in the K/V ring
            (4 * bm * (d.get("NUM_SPLITS", 1) + 1) <= 2 * (bm + 2 * d["STAGES"] * bn) * dd,
             "--kv-splits: the combine's weights must fit the K/V ring (fewer splits, or more "
             "--stages or a larger --block-n)")]


_SPECS = [
    _naive("naive_qk", ("Q", "K", "S", *_DIMS, "scale"), {"S"}, _GEMM, False),
    # sm_merge: two shuffles (or shared-memory reads), fmax, compare, two subtractions, a
    # multiply and an FMA; two exp2
    _naive("naive_softmax", ("S", "P", "Nq", "Nk"), {"P"}, _SOFTMAX, False, row_merge=(8, 2)),
    _naive("naive_pv", ("P", "V", "O", *_DIMS), {"O"}, _GEMM, False),
    # naive's dP re-uses the forward's S; dKx, dVx are dK, dV themselves when kv_heads == heads
    _naive("naive_bwd_dv", ("P", "dO", "dVx", *_DIMS), {"dVx"}, _GEMM, True),
    _naive("naive_bwd_dp", ("dO", "V", "dP", *_DIMS), {"dP"}, _GEMM, True),
    # warp_sum: a shuffle and an add
    _naive("naive_bwd_softmax", ("P", "dP", "dS", "Nq", "Nk"), {"dS"}, _SOFTMAX, True,
           row_merge=(2, 0)),
    _naive("naive_bwd_dq", ("dS", "K", "dQ", *_DIMS, "scale"), {"dQ"}, _GEMM, True),
    _naive("naive_bwd_dk", ("dS", "Q", "dKx", *_DIMS, "scale"), {"dKx"}, _GEMM, True),
    KernelSpec("fa1_init", "fa1.cu", "FA1_INIT", ("Oacc", "L", "M", "Nq"),
               frozenset({"Oacc", "L", "M"}), frozenset({"HEAD_DIM", "BLOCK_M"})),
    KernelSpec("fa1_fwd", "fa1.cu", "FA1_FWD",
               ("Q", "K", "V", "Oacc", "O", "L", "M", *_DIMS, "scale"),
               frozenset({"Oacc", "O", "L", "M"}), _TILE | {"SPLIT_ROWS"}, checks=("MODEL_KV_READERS",),
               head_dim_pad=pad_ceil_64, rules=_fa1_fwd_rules, smem=_fa1_fwd_smem,
               # each warp's S and P̃V read all of K_j, V_j. Its Q, K, V copies are cp.async
               # too, but smem_fills is left empty: ncu's wavefronts are within 3% either way
               # (experiments/fwd_ncu), and with them the small fa1 forwards, whose miss lies
               # elsewhere, move from 8.6% to 9.0% (validate-small-queued; branch acc13)
               kv_readers=lambda d: d["NUM_WARPS"], sync_loads=_fa1_fwd_kv_wait,
               barrier_trips=_fa1_fwd_barrier),
    KernelSpec("fa1_bwd_init", "fa1.cu", "FA1_BWD_INIT", ("dQacc", "Nq"), frozenset({"dQacc"}),
               frozenset({"HEAD_DIM", "BLOCK_M"})),
    KernelSpec("fa1_bwd", "fa1.cu", "FA1_BWD",
               ("Q", "K", "V", "O", "dO", "L", "M", "dQacc", "dKx", "dVx", *_DIMS, "scale"),
               frozenset({"dQacc", "dKx", "dVx"}), _TILE | {"STAGES", "SPLIT_COLS", "DQ_ATOMIC"},
               checks=("MODEL_W1K", "MODEL_W3Q", "MODEL_DS_DQ"), head_dim_pad=pad_ceil_64,
               rules=_fa1_bwd_rules, smem=_fa1_bwd_smem, bwd_readers=_fa1_bwd_readers,
               # O_i and dQacc_i: prefetched into L2 by the step before (`prefetch`)
               sync_loads=_fa1_bwd_sync_loads, sync_in_l2=_always, loop_issue=_fa1_bwd_issue,
               loop_shadow=_fa1_bwd_shadow, prefetch=_fa1_bwd_prefetch),
    KernelSpec("fa1_bwd_convert", "fa1.cu", "FA1_BWD_CONVERT", ("dQacc", "dQ", "Nq"),
               frozenset({"dQ"}), frozenset({"HEAD_DIM", "BLOCK_M"})),
    # every warp ldmatrix-reads all of K_j and V_j
    KernelSpec("fa2_fwd", "fa2.cu", None, ("Q", "K", "V", "O", "LSE", *_DIMS, "scale"),
               frozenset({"O", "LSE"}), _TILE | {"STAGES", "WINDOW"}, checks=("MODEL_KV_READERS",),
               head_dim_pad=pad_pow2_64, rules=_fa2_fwd_rules, smem=_fa2_fwd_smem,
               kv_readers=lambda d: max(1, d["NUM_WARPS"]), smem_fills=_QKV),
    KernelSpec("fa2_bwd_pre", "fa2_bwd.cu", "FA2_BWD_PRE", ("O", "dO", "D", "dQacc", "Nq", "H"),
               frozenset({"D", "dQacc"}), frozenset({"HEAD_DIM", "BLOCK_M", "AUX_THREADS"}),
               head_dims=BASE_HEAD_DIMS),
    KernelSpec("fa2_bwd", "fa2_bwd.cu", "FA2_BWD",
               ("Q", "K", "V", "dO", "LSE", "D", "dQacc", "dKx", "dVx", *_DIMS, "scale"),
               frozenset({"dQacc", "dKx", "dVx"}), _GEMM - {"BLOCK_K"},
               checks=("MODEL_W1K", "MODEL_W3Q", "MODEL_DS_DQ"), head_dims=BASE_HEAD_DIMS,
               rules=_fa2_bwd_rules, smem=_fa2_bwd_smem, bwd_readers=_fa2_bwd_readers,
               l2_reductions=lambda d: _DQACC),
    KernelSpec("fa2_bwd_convert", "fa2_bwd.cu", "FA2_BWD_CONVERT",
               ("dQacc", "dQ", "Nq", "H", "scale"), frozenset({"dQ"}),
               frozenset({"HEAD_DIM", "BLOCK_M", "AUX_THREADS"}), head_dims=BASE_HEAD_DIMS),
    # every consumer warpgroup's wgmma reads all of K_j and V_j
    KernelSpec("fa3_fwd", "fa3.cu", None, ("TmQ", "TmK", "TmV", "O", "LSE", *_DIMS, "scale"),
               frozenset({"O", "LSE"}),
               _GEMM - {"BLOCK_K"} | {"HEAD_DIM_PAD", "PINGPONG", "FP8_E4M3", "WINDOW"},
               checks=("MODEL_KV_READERS",), head_dims=BASE_HEAD_DIMS,
               archs=frozenset({"sm_90a"}), rules=_fa3_fwd_rules, smem=_fa3_fwd_smem, kv_readers=lambda d: max(1, d["NUM_WARPS"] // 4),
               softmax_apart=_fa3_fwd_apart,
               tensor_maps={"TmQ": ("Q", "BLOCK_M"), "TmK": ("K", "BLOCK_N"),
                            "TmV": ("V", "BLOCK_N")}),
    # FA3's backward: fa2_bwd.cu's preprocessing and conversion around the wgmma main kernel
    KernelSpec("fa3_bwd", "fa3_bwd.cu", None,
               ("TmQ", "TmK", "TmV", "TmdO", "TmdQ", "LSE", "D", "dQacc", "dKx", "dVx", *_DIMS,
                "scale"),
               frozenset({"dQacc", "dKx", "dVx"}),
               _GEMM - {"BLOCK_K"} | {"PINGPONG", "DETERMINISTIC", "DQ_BULK"},
               checks=("MODEL_W1K", "MODEL_W3Q", "MODEL_DS_DQ"), head_dims=BASE_HEAD_DIMS,
               archs=frozenset({"sm_90a"}), rules=_fa3_bwd_rules, smem=_fa3_bwd_smem,
               # its dQ atomics' release and its turn's flag: L2 round trips
               bwd_readers=_fa3_bwd_readers, sync_loads=_fa3_bwd_waits, sync_in_l2=_always,
               turn_waits=_fa3_bwd_turn_waits, consumers_in_step=fa3_bwd_split_d,
               l2_reductions=lambda d: _DQACC,
               l2_weights=_fa3_bwd_l2_weights,
               # TmdQ: dQacc (fp32) in boxes of 32 columns x 64 rows, a dQ unit's (DQ_BULK 2, 3
               # reduce into it; the other variants take it unused)
               tensor_maps={"TmQ": ("Q", "BLOCK_M"), "TmK": ("K", "BLOCK_N"),
                            "TmV": ("V", "BLOCK_N"), "TmdO": ("dO", "BLOCK_M"),
                            "TmdQ": ("dQacc", 64)}),
    # fa3.cu with FP8_E4M3=1: e4m3 Q8, K8 (128-byte swizzled panels; 64-byte at d = 64) and
    # Vt8 (panels of 128 keys; 64 or 32 where BLOCK_N is no multiple of 128), per-tile descale
    # factors, bf16 O
    # PERSISTENT: grid (CTAs, 1, 1), each CTA its tiles round-robin (B: the batch, their count)
    # PV_WAIT_TOP: the wait for P_{j-1} V_{j-1} at the next trip's top (after the softmax of S_j)
    KernelSpec("fa3_fwd_fp8", "fa3.cu", "FP8_E4M3",
               ("TmQ", "TmK", "TmV", "O", "LSE", *_DIMS, "scale", "Qs", "Ks", "Vs", "B"),
               frozenset({"O", "LSE"}),
               _GEMM - {"BLOCK_K"} | {"HEAD_DIM_PAD", "PINGPONG", "WINDOW", "LAZY_RESCALE",
                                       "PERSISTENT", "PV_WAIT_TOP"},
               checks=("MODEL_KV_READERS",), head_dims=(64, 128, 256),
               dtypes=("fp8_e4m3",),
               archs=frozenset({"sm_90a"}), rules=_fa3_fwd_rules, smem=_fa3_fwd_smem,
               kv_readers=lambda d: max(1, d["NUM_WARPS"] // 4),
               softmax_apart=_fa3_fwd_apart,
               softmax_under_pv=lambda d: bool(d["PV_WAIT_TOP"]),
               tensor_maps={"TmQ": ("Q8", "BLOCK_M"), "TmK": ("K8", "BLOCK_N"),
                            "TmV": ("Vt8", "HEAD_DIM")}),
    # kernels/fp8_quant.cu: bf16 Q, K, V to e4m3 (per-tensor scaling: fp8_amax first)
    KernelSpec("fp8_amax", "fp8_quant.cu", "FP8_AMAX", ("Q", "K", "V", "Qa", "Ka", "Va", *_DIMS),
               frozenset({"Qa", "Ka", "Va"}), _FP8_QUANT, head_dims=BASE_HEAD_DIMS,
               dtypes=("fp8_e4m3",), archs=frozenset({"sm_90a"}), rules=_fp8_quant_rules),
    KernelSpec("fp8_quant", "fp8_quant.cu", "FP8_QUANT",
               ("Q", "K", "V", "Q8", "K8", "Vt8", "Qs", "Ks", "Vs", "Qa", "Ka", "Va", *_DIMS),
               frozenset({"Q8", "K8", "Vt8", "Qs", "Ks", "Vs"}), _FP8_QUANT,
               head_dims=BASE_HEAD_DIMS, dtypes=("fp8_e4m3",), archs=frozenset({"sm_90a"}),
               rules=_fp8_quant_rules),
    # split-KV decode: grid (splits, KV heads x head chunks, B); each warp its slice of a K/V
    # tile (K_j, V_j read once from shared memory), every warp all of the packed Q rows
    KernelSpec("decode_fwd", "decode.cu", "DECODE_FWD",
               ("Q", "K", "V", "O", "LSE", "Opart", "LSEpart", "Counter", *_DIMS, "scale"),
               frozenset({"O", "LSE", "Opart", "LSEpart"}),
               frozenset({"HEAD_DIM", "BLOCK_M", "BLOCK_N", "NUM_WARPS", "STAGES", "IS_CAUSAL",
                          "WINDOW", "HEADS_PER_CTA", "NUM_SPLITS"}),
               head_dims=BASE_HEAD_DIMS, aligns=frozenset({CausalAlign.bottom_right}),
               rules=_decode_rules, smem=_decode_smem, tail_round_trips=_decode_combine),
    # the same loop over a paged cache: each K/V row gathered through the block table
    KernelSpec("decode_paged_fwd", "decode.cu", "DECODE_PAGED_FWD",
               ("Q", "Kc", "Vc", "BlockTable", "O", "LSE", "Opart", "LSEpart", "Counter", *_DIMS,
                "scale"),
               frozenset({"O", "LSE", "Opart", "LSEpart"}),
               frozenset({"HEAD_DIM", "BLOCK_M", "BLOCK_N", "NUM_WARPS", "STAGES", "IS_CAUSAL",
                          "WINDOW", "HEADS_PER_CTA", "NUM_SPLITS", "PAGE_SIZE", "PAGE_AHEAD"}),
               head_dims=BASE_HEAD_DIMS, aligns=frozenset({CausalAlign.bottom_right}),
               rules=_decode_rules, smem=_decode_smem, sync_loads=_decode_paged_sync_loads,
               tail_round_trips=_decode_combine),
    KernelSpec("gqa_reduce", "gqa_reduce.cu", None, ("dKx", "dVx", "dK", "dV", "Nk", "H", "KVH"),
               frozenset({"dK", "dV"}), frozenset({"HEAD_DIM", "REDUCE_THREADS"})),
]
SPECS: dict[str, KernelSpec] = {s.entry: s for s in _SPECS}
# fa3_bwd.cu with DETERMINISTIC=1: dQ added in a fixed order, turns kept in dQsem (not
# poisoned: the kernel needs it zero)
SPECS["fa3_bwd_det"] = replace(SPECS["fa3_bwd"], entry="fa3_bwd_det", select="DETERMINISTIC",
                               args=(*SPECS["fa3_bwd"].args, "dQsem"),
                               defines=SPECS["fa3_bwd"].defines - {"DETERMINISTIC"})
for _s in ("pre", "convert"):  # fa3's backward runs fa2_bwd.cu's, under its own entry names
    SPECS[f"fa3_bwd_{_s}"] = replace(SPECS[f"fa2_bwd_{_s}"], entry=f"fa3_bwd_{_s}",
                                     symbol=f"fa2_bwd_{_s}")


def kernel_splits(k: KernelPlan) -> int:
    """The KV splits of a split-KV kernel (its NUM_SPLITS), 1 for the others: the S of the
    partial tensors."""
    d = k.defines
    if "NUM_SPLITS" not in d:  # 1 either way (most kernels: asked first, at a lookup's cost)
        return 1
    return d["NUM_SPLITS"] if k.name in SPECS and "NUM_SPLITS" in SPECS[k.name].defines else 1


def kv_splits(plan: Plan) -> int:
    return max(kernel_splits(k) for k in plan.kernels)


_DEFINES = Memo()  # (entry, id(its spec), the values given) -> (the spec, kernel_defines' dict)


def kernel_defines(entry: str, **values: int) -> dict[str, int]:
    """A Plan's defines for `entry`: the values given (its required defines), the MODEL_* facts
    it checks and its selector macro. The same dict for the same values, shared by every
    KernelPlan that asks (nothing changes a Plan's defines): what the timing model derives
    from a kernel's spec at its defines is remembered by the dict (timing._spec_facts)."""
    spec = SPECS[entry]  # its rules, by identity (a test may put another spec in its place)
    key = (entry, id(spec), *values.items())
    out = _DEFINES.get(key, spec)
    if out is not MISS:
        return out
    out = dict(values)
    out.update(model_defines(entry, out))
    if spec.select:
        out[spec.select] = 1
    return _DEFINES.put(key, (spec,), out)


def source(entry: str) -> str | None:
    """kernels/<source> of an entry; None: modelled only (no kernel)."""
    return SPECS[entry].source if entry in SPECS else None


def kernel_rules(plan: Plan) -> list[tuple[str, bool, str]]:
    """(source, holds, what it requires) for the static_asserts of every kernel of a Plan."""
    return [(SPECS[k.name].source, ok, rule) for k in plan.kernels if k.name in SPECS
            for ok, rule in SPECS[k.name].rules(k.defines)]


def supported(plan: Plan) -> None:
    """Refuse, in one line, a Plan that no real kernel runs (an entry with no spec is modelled
    only), or whose problem its kernels' specs do not take."""
    # every rule below at once, in one pass (backing asks it of every predicted row); where one
    # fails, _refuse says which, in the rules' order
    p, specs = plan.problem, []
    for k in plan.kernels:
        s = SPECS.get(k.name)
        if s is None or k.defines.get(DQ_WRITER):
            return _refused(plan)
        specs.append(s)
    d, dtype = p.head_dim, p.dtype._value_  # (an enum's value: a descriptor's call each read)
    for s in specs:
        if (s.head_dims is not None and d not in s.head_dims) or dtype not in s.dtypes:
            return _refused(plan)
    if (d % 8 or d > MAX_HEAD_DIM
            or (p.direction is Direction.bwd and d not in BASE_HEAD_DIMS
                and any(s.head_dims is not None for s in specs))
            or (p.causal and p.causal_offset and any(p.causal_align not in s.aligns for s in specs))):
        return _refused(plan)


def _refused(plan: Plan) -> None:
    _refuse(plan)  # raises the first rule that fails
    raise AssertionError(f"supported: no rule of {plan.schedule}'s Plan fails, yet its one pass refused it")


def _refuse(plan: Plan) -> None:
    """supported's rules one by one: raises the first that fails (none: returns)."""
    schedule, p = plan.schedule, plan.problem
    specs = [SPECS.get(k.name) for k in plan.kernels]
    bwd = p.direction is Direction.bwd
    if any(map(modelled_only, plan.kernels)):
        raise InputError(f"no real kernel for {schedule} with the FA3 paper's dQ-writer warp "
                         "(modelled only; allowed: the Plan's own kernel)")
    if not all(specs):  # (a spec's truth, not ==: a dataclass's __eq__ is a Python call a spec)
        if bwd:
            raise InputError(f"no real backward kernel for schedule {schedule} "
                             "(allowed with --direction bwd: naive, fa1, fa2, fa3)")
        raise InputError(f"no real kernel for schedule {schedule} (allowed: naive, fa1, fa2, fa3)")
    if bwd and p.head_dim not in BASE_HEAD_DIMS and any(s.head_dims is not None for s in specs):
        raise InputError(f"head_dim={p.head_dim} has no real backward kernel for {schedule} "
                         f"(allowed: {', '.join(map(str, BASE_HEAD_DIMS))}; any multiple of 8 "
                         f"up to {MAX_HEAD_DIM} with fa1)")
    if p.head_dim % 8 or p.head_dim > MAX_HEAD_DIM:
        raise InputError(f"head_dim={p.head_dim} has no real kernel "
                         f"(allowed: a multiple of 8 up to {MAX_HEAD_DIM})")
    for s in specs:
        if s.head_dims is not None and p.head_dim not in s.head_dims:
            raise InputError(f"head_dim={p.head_dim} has no real {schedule} kernel "
                             f"(allowed: {', '.join(map(str, s.head_dims))})")
    if p.causal and p.causal_offset and any(p.causal_align not in s.aligns for s in specs):
        raise InputError(f"the real {schedule} kernel masks top-left only "
                         "(allowed: --causal-align top-left, or Nq = Nk)")
    dtype = p.dtype.value  # an enum's value: a descriptor's call each time it is read
    for s in specs:
        if dtype not in s.dtypes:
            raise InputError(f"dtype {dtype} has no real kernel (allowed: {', '.join(s.dtypes)})")
