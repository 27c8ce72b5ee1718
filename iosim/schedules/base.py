"""What the schedules share: block geometry, the causal block map, GEMM counts, the registry.

Counts are closed form: sums over the (query block, key block) pairs a schedule visits, taken
with numpy over block sizes, so ragged last blocks and causal skipping are exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..hardware import HardwareProfile, InputError
from ..plan import KernelPlan, Plan
from ..problem import CausalAlign, Problem
from ..traffic import Traffic, Work

F32 = 4  # bytes of the fp32 statistics (ℓ, m, LSE, D) and fp32 accumulators kept in HBM
F32_TENSORS = frozenset({"L", "M", "LSE", "D", "Oacc", "dQacc"})  # every other tensor: input dtype


@dataclass(frozen=True)
class Tiles:
    """A schedule's tiling. `None` fields are chosen by the schedule for the hardware."""

    block_m: int | None = None
    block_n: int | None = None
    block_k: int | None = None  # GEMM reduction chunk (naive)
    warps: int | None = None
    stages: int | None = None


def blocks(n: int, b: int) -> np.ndarray:
    """Sizes of the blocks that cover n rows with blocks of b (the last one ragged)."""
    t = -(-n // b)
    sizes = np.full(t, b, dtype=np.int64)
    sizes[-1] = n - b * (t - 1)
    return sizes


class BlockMap:
    """Which (query block i, key block j) pairs a flash schedule visits, with their sizes.

    Query block i visits the key blocks j in [0, hi_i) (all of them when not causal), and of
    those, [lo_i, hi_i) are partly masked (diagonal tiles). The sums below are taken from these
    per-row ranges in O(Tm); the (Tm, Tn) boolean matrices `visit` and `diag`, which the executor
    walks, are built on first use. BlockMaps are cached and shared: arrays are read-only.
    """

    def __init__(self, r: np.ndarray, c: np.ndarray, bm: int, bn: int, causal: bool,
                 offset: int = 0) -> None:
        self.r, self.c = r, c  # rows per query block (Tm,), columns per key block (Tn,)
        self.bm, self.bn = bm, bn
        tm, tn = len(r), len(c)
        row0 = np.arange(tm, dtype=np.int64) * bm + offset
        row_last = row0 + r - 1
        if causal:  # row i sees columns j <= i + offset (Problem.causal_offset); col0_j = j·bn
            hi = np.clip(row_last // bn + 1, 0, tn)
            # partly masked: col_last_j = min(j·bn + bn, Nk) − 1 > row0_i + offset
            lo = np.clip((row0 + 1) // bn, 0, hi)
            last_full = (tn - 1) * bn + c[-1] - 1 <= row0  # the ragged last block fully visible
            lo = np.where(last_full & (lo == tn - 1), hi, lo)
        else:
            hi = np.full(tm, tn, dtype=np.int64)
            lo = hi.copy()
        self.hi, self.lo = _frozen(hi), _frozen(lo)
        self._memo: dict = {}

    @classmethod
    def of(cls, p: Problem, bm: int, bn: int) -> BlockMap:
        """The block map of a problem (cached: it depends only on the lengths, the mask and the
        block sizes, not on batch, heads or dtype)."""
        off = p.causal_offset if p.causal else 0
        return _block_map(p.seqlen_q, p.seqlen_k, p.causal, off, bm, bn)

    def _once(self, key, fn):
        if key not in self._memo:
            self._memo[key] = fn()
        return self._memo[key]

    @property
    def visit(self) -> np.ndarray:
        """bool (Tm, Tn): computed (not entirely above the causal diagonal)."""
        j = np.arange(len(self.c))[None, :]
        return self._once("visit", lambda: _frozen(j < self.hi[:, None]))

    @property
    def diag(self) -> np.ndarray:
        """bool (Tm, Tn): computed and partly masked (needs the mask)."""
        j = np.arange(len(self.c))[None, :]
        return self._once("diag", lambda: _frozen((j >= self.lo[:, None]) & (j < self.hi[:, None])))

    def _cum_c(self) -> np.ndarray:
        return self._once("cum_c", lambda: np.concatenate(([0], np.cumsum(self.c))))

    def sum_rc(self, mask: np.ndarray | None = None) -> int:
        """Σ r_i·c_j over visited (or masked) pairs: elements of S computed."""
        cc = self._cum_c()
        if mask is None or mask is self._memo.get("visit"):
            return self._once("rc", lambda: int(self.r @ cc[self.hi]))
        if mask is self._memo.get("diag"):
            return self.sum_rc_diag()
        return int(self.r @ mask.astype(np.int64) @ self.c)

    def sum_rc_diag(self) -> int:
        """Σ r_i·c_j over partly masked pairs."""
        cc = self._cum_c()
        return self._once("rc_diag", lambda: int(self.r @ (cc[self.hi] - cc[self.lo])))

    def row_visits(self) -> np.ndarray:
        """Key blocks visited per query block (read-only)."""
        return self.hi

    def col_visits(self) -> np.ndarray:
        """Query blocks visiting each key block (read-only)."""
        def cols():
            # query block i visits j < hi_i: count of i with hi_i > j (hi is non-decreasing)
            j = np.arange(len(self.c))
            return _frozen(len(self.r) - np.searchsorted(self.hi, j, side="right"))
        return self._once("cols", cols)

    def row_tiles(self) -> np.ndarray:
        """Tiles visited per query block, in full bm x bn tiles (ragged ones as fractions)."""
        return self._once("row_tiles", lambda: _frozen(
            self.r * self._cum_c()[self.hi] / (self.bm * self.bn)))

    def col_tiles(self) -> np.ndarray:
        """Tiles visited per key block, in full bm x bn tiles (ragged ones as fractions)."""
        def cols():
            cum_r = np.concatenate(([0], np.cumsum(self.r)))
            first = np.searchsorted(self.hi, np.arange(len(self.c)), side="right")
            return _frozen(self.c * (cum_r[-1] - cum_r[first]) / (self.bm * self.bn))
        return self._once("col_tiles", cols)

    def row_diag(self) -> np.ndarray:
        """Partly masked (diagonal) key blocks per query block (read-only)."""
        return self._once("row_diag", lambda: _frozen(self.hi - self.lo))

    def col_diag(self) -> np.ndarray:
        """Query blocks for which each key block is partly masked (read-only)."""
        def cols():
            # i has j in [lo_i, hi_i): lo and hi are non-decreasing in i
            j = np.arange(len(self.c))
            return _frozen(np.searchsorted(self.lo, j, side="right")
                           - np.searchsorted(self.hi, j, side="right"))
        return self._once("col_diag", cols)

    def sum_r(self) -> int:
        """Σ r_i over visited pairs: query-block rows loaded, once per visited pair."""
        return self._once("r", lambda: int(self.hi @ self.r))

    def sum_c(self) -> int:
        """Σ c_j over visited pairs: key-block rows loaded, once per visited pair."""
        return self._once("c", lambda: int(self.col_visits() @ self.c))

    def rows_visited(self) -> int:
        """Σ r_i over query blocks that visit some key block (all of them but, under a
        bottom-right causal mask with Nq > Nk, the first blocks, which see no key)."""
        return self._once("rows_visited", lambda: int(self.r @ (self.hi > 0)))

    def kv_rows_loaded(self) -> int:
        """Σ c_j over key blocks that some query block visits."""
        return self._once("kv", lambda: int(self._cum_c()[self.hi.max()]))

    @property
    def pairs(self) -> int:
        return self._once("pairs", lambda: int(self.hi.sum()))


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


@lru_cache(maxsize=1024)
def _block_map(nq: int, nk: int, causal: bool, offset: int, bm: int, bn: int) -> BlockMap:
    return BlockMap(_frozen(blocks(nq, bm)), _frozen(blocks(nk, bn)), bm, bn, causal, offset)


@lru_cache(maxsize=256)
def uniform(value: int) -> np.ndarray:
    """Trip counts of a kernel whose CTAs all run `value` trips (KernelPlan.trips)."""
    return _frozen(np.array([value], dtype=np.int64))


def causal_valid(p: Problem) -> int:
    """Elements of S not masked, per head: Σ_i Problem.visible_keys(i) (all Nq·Nk when not
    causal), in closed form: rows [0, a) see no key, rows [a, b) see i+1+offset, the rest Nk."""
    if not p.causal:
        return p.seqlen_q * p.seqlen_k
    nq, nk, off = p.seqlen_q, p.seqlen_k, p.causal_offset
    a = min(max(-off, 0), nq)
    b = min(max(nk - 1 - off, a), nq)
    return (b - a) * (1 + off) + (a + b - 1) * (b - a) // 2 + (nq - b) * nk


def gemm(name: str, p: Problem, M: int, N: int, K: int, t: Tiles, a: str, b: str, c: str,
         c_bytes: int, epilogue_alu: int, hw: HardwareProfile) -> KernelPlan:
    """C[M×N] = A[M×K]·B[K×N] per query head, tiled BM×BN with BK chunks over K.

    Every output tile reads its full A rows and B columns once (two-level view: tiles re-read
    across output tiles are counted each time), stages them in SRAM and reads them once from
    there into the tensor cores; C goes from registers straight to HBM. `epilogue_alu` per
    element of C (e.g. the softmax scale).
    """
    e = p.elem_bytes
    rm, cn = blocks(M, t.block_m), blocks(N, t.block_n)
    a_bytes = M * K * e * len(cn)  # each A row block read once per column block
    b_bytes = N * K * e * len(rm)
    per_head = Traffic(reads={a: a_bytes, b: b_bytes}, writes={c: M * N * c_bytes},
                       sram=2 * (a_bytes + b_bytes))
    epilogue = Work(alu_flops=epilogue_alu * M * N)  # once per CTA, on its C tile
    work = Work(tensor_flops=2 * M * N * K) + epilogue
    bh = p.bh
    trips = uniform(-(-K // t.block_k))
    return KernelPlan(
        name=name, grid=(len(cn), len(rm), bh), threads=32 * t.warps,
        # the cp.async ring, re-used by the epilogue to stage the C tile for 16-byte stores
        smem_bytes=max(t.stages * (t.block_m + t.block_n) * t.block_k, t.block_m * t.block_n) * e,
        regs_per_thread=128, block_m=t.block_m, block_n=t.block_n,
        traffic=per_head.scaled(bh), work=work.scaled(bh), once=epilogue.scaled(bh),
        trips=trips, stages=t.stages,
        # an A row block serves the CTAs along x, a B column block every grid[0]-th CTA
        reuse={a: 1, b: len(cn)},
        overlap="async",
        defines=dict(BLOCK_M=t.block_m, BLOCK_N=t.block_n, BLOCK_K=t.block_k,
                     NUM_WARPS=t.warps, STAGES=t.stages, HEAD_DIM=p.head_dim,
                     **mask_defines(p)),
    )


def gqa_reduce(p: Problem, tensors: tuple[str, ...]) -> KernelPlan:
    """Sum per-query-head dK/dV into their K/V head (only when kv_heads < heads)."""
    e, n = p.elem_bytes, p.seqlen_k * p.head_dim
    big, small = p.bh * n * e, p.batch * p.kv_heads * n * e
    t = Traffic(reads={f"{x}_expanded": big for x in tensors}, writes={x: small for x in tensors})
    w = Work(alu_flops=len(tensors) * p.batch * p.kv_heads * (p.group - 1) * n)
    threads = 256  # kernels/gqa_reduce.cu: one 16-byte vector of each tensor per thread
    return KernelPlan(name="gqa_reduce", grid=(-(-n // (8 * threads)), p.kv_heads, p.batch),
                      threads=threads, smem_bytes=0, regs_per_thread=32, block_m=p.seqlen_k,
                      block_n=p.head_dim, traffic=t, work=w, trips=uniform(p.group),
                      source="gqa_reduce.cu",
                      defines=dict(HEAD_DIM=p.head_dim, REDUCE_THREADS=threads))


def mask_defines(p: Problem) -> dict[str, int]:
    """The kernels' causal-mask defines: IS_CAUSAL and, when causal, the diagonal's alignment
    (CAUSAL_BOTTOM_RIGHT: row i sees keys j <= i + Nk - Nq; else j <= i)."""
    br = p.causal and p.causal_align is CausalAlign.bottom_right
    return {"IS_CAUSAL": int(p.causal), "CAUSAL_BOTTOM_RIGHT": int(br)}


def pow2_at_least(n: int, lo: int) -> int:
    """The smallest power of two >= max(n, lo)."""
    return 1 << (max(n, lo) - 1).bit_length()


def check_smem(name: str, smem: int, hw: HardwareProfile, p: Problem) -> None:
    if smem > hw.smem_per_block_optin_bytes:
        raise InputError(
            f"{name}: tiles need {smem} B of shared memory per CTA for head_dim={p.head_dim} "
            f"{p.dtype.value}, over {hw.name}'s {hw.smem_per_block_optin_bytes} B "
            "(allowed: a smaller head_dim or tiles that fit)"
        )


def check_head_dim(schedule: str, p: Problem, limit: int = 256) -> None:
    if p.head_dim > limit or p.head_dim % 8:
        raise InputError(
            f"{schedule}: head_dim={p.head_dim} is not supported "
            f"(allowed: a multiple of 8 up to {limit})"
        )


PlanFn = Callable[[Problem, HardwareProfile, Tiles], Plan]
