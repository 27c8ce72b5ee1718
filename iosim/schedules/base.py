"""What the schedules share: block geometry, the causal block map, GEMM counts, the registry.

Counts are closed form: sums over the (query block, key block) pairs a schedule visits, taken
with numpy over block sizes, so ragged last blocks and causal skipping are exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import NamedTuple

import numpy as np

from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.memo import MISS, Memo
from iosim.core.plan import KernelPlan, Plan, read_only
from iosim.core.problem import CausalAlign, Direction, Problem
from iosim.core.traffic import Traffic, Work, copies
from iosim.kernels import SPECS, kernel_defines, source

F32 = 4  # bytes of the fp32 statistics (ℓ, m, LSE, D) and fp32 accumulators kept in HBM


@dataclass(frozen=True)
class Tiles:
    """A schedule's tiling. `None` fields are chosen by the schedule for the hardware."""

    block_m: int | None = None
    block_n: int | None = None
    block_k: int | None = None  # GEMM reduction chunk (naive)
    warps: int | None = None
    stages: int | None = None
    # fa1's forward: query rows per CTA (a multiple of block_m; None: the Plan's split, which
    # fills the GPU). Not a tuning knob: it replays a measured row's kernel (`measured_split`).
    split_rows: int | None = None
    # fa1's backward: key rows per CTA (a multiple of block_n; None: the Plan's split), as
    # split_rows: it replays a measured row's kernel (`measured_split_cols`).
    split_cols: int | None = None
    # decode's K/V splits (None: the Plan's heuristic, which fills the GPU). A count forced to
    # measure the heuristic's choice against the others (`iosim bench --kv-splits`).
    kv_splits: int | None = None
    # fa3's backward with the FA3 paper's dQ-writer warp (its Algorithm 3: the consumers leave dQ
    # in shared memory for a warp that adds it to global memory), which kernels/fa3_bwd.cu does
    # not have: modelled only. Not a tuning knob: it replays the published FA3 backward bars
    # (`ran_tiles` "bwd dq-writer" in experiments/papers/published.csv).
    dq_writer: bool | None = None
    # decode's paged gather: the block table read a tile ahead (None: today's kernel) or, False,
    # per row as each load issues (decode.cu PAGE_AHEAD=0, the kernel before). Not a tuning
    # knob: it replays a measured row's kernel (`measured_page_ahead`).
    page_ahead: bool | None = None
    # fa3's backward dQ reduction (fa3_bwd.cu DQ_BULK: 0 vector atomics, 2 the dQ warp's tensor
    # reduce-adds, ...; None: the Plan's). Not a tuning knob: it replays a measured row's kernel
    # (`measured_dq_bulk`).
    dq_bulk: int | None = None
    # fa3's fp8 forward with the lazy rescale (fa3.cu LAZY_RESCALE; None: the Plan's, by
    # head_dim). Not a tuning knob: it replays a measured row's kernel (`measured_lazy_rescale`).
    lazy_rescale: bool | None = None
    # fa3's fp8 forward on a persistent grid (fa3.cu PERSISTENT; None: the Plan's, by head_dim,
    # non-causal). Not a tuning knob: it replays a measured row's kernel (`measured_persistent`).
    persistent: bool | None = None


def blocks(n: int, b: int) -> np.ndarray:
    """Sizes of the blocks that cover n rows with blocks of b (the last one ragged)."""
    t = -(-n // b)
    sizes = np.full(t, b, dtype=np.int64)
    sizes[-1] = n - b * (t - 1)
    return sizes


MANY_CTAS = 4096  # CTAs along x beyond which one ragged block's shorter loop is not modelled


class BlockMap:
    """Which (query block i, key block j) pairs a flash schedule visits, with their sizes.

    Query block i visits the key blocks j in [0, hi_i) (all of them when not causal), and of
    those, [lo_i, hi_i) are partly masked (diagonal tiles). The sums the counts use are closed
    forms in Python integers (exact at any N, no array as long as N/block: `_Rows`); the per-block
    arrays the timing model and the executor walk (`r`, `c`, `hi`, `lo`, and the (Tm, Tn) boolean
    matrices `visit` and `diag`) are built on first use. BlockMaps are cached and shared: arrays
    are read-only.
    """

    def __init__(self, nq: int, nk: int, bm: int, bn: int, causal: bool, offset: int = 0) -> None:
        self.nq, self.nk, self.bm, self.bn = nq, nk, bm, bn
        self.causal, self.offset = causal, offset  # row i sees columns j <= i + offset
        self.tm, self.tn = -(-nq // bm), -(-nk // bn)
        self.r_last = nq - bm * (self.tm - 1)  # rows of the ragged last query block
        self._memo: dict = {}

    @classmethod
    def of(cls, p: Problem, bm: int, bn: int) -> BlockMap:
        """The block map of a problem (cached: it depends only on the lengths, the mask and the
        block sizes, not on batch, heads or dtype)."""
        off = p.causal_offset if p.causal else 0
        if p.window is not None:
            return _window_map(p.seqlen_q, p.seqlen_k, off, p.window, bm, bn)
        return _block_map(p.seqlen_q, p.seqlen_k, p.causal, off, bm, bn)

    def _once(self, key, fn):
        v = self._memo.get(key, self._memo)  # the memo itself: not made yet (a value may be None)
        if v is self._memo:
            v = self._memo[key] = fn()
        return v

    # ------------------------------------------------ per-block arrays (built on first use)
    @property
    def r(self) -> np.ndarray:
        """Rows per query block (Tm,)."""
        return self._once("r_arr", lambda: read_only(blocks(self.nq, self.bm)))

    @property
    def c(self) -> np.ndarray:
        """Columns per key block (Tn,)."""
        return self._once("c_arr", lambda: read_only(blocks(self.nk, self.bn)))

    @property
    def hi(self) -> np.ndarray:
        """Key blocks query block i visits: [0, hi_i)."""
        def hi():
            if not self.causal:
                return read_only(np.full(self.tm, self.tn, dtype=np.int64))
            # each block's last row, i·bm + r_i - 1 (+ offset: its last key), in place
            h = np.arange(self.bm - 1 + self.offset, self.bm * self.tm + self.offset, self.bm)
            h[-1] = self.nq - 1 + self.offset
            h //= self.bn
            h += 1
            return read_only(np.minimum(np.maximum(h, 0, out=h), self.tn, out=h))  # clip's
        return self._once("hi_arr", hi)

    @property
    def lo(self) -> np.ndarray:
        """Key blocks fully visible to query block i's first row: [0, lo_i); [lo_i, hi_i) are
        partly masked."""
        def lo():
            if not self.causal:
                return self.hi
            y = np.arange(self.offset, self.bm * self.tm + self.offset, self.bm)  # first row's last key
            full = y + 1
            full //= self.bn
            np.minimum(np.maximum(full, 0, out=full), self.tn - 1, out=full)  # clip's, in place
            full += y >= self.nk - 1
            return read_only(np.minimum(full, self.hi, out=full))
        return self._once("lo_arr", lo)

    @property
    def visit(self) -> np.ndarray:
        """bool (Tm, Tn): computed (not entirely above the causal diagonal)."""
        j = np.arange(self.tn)[None, :]
        return self._once("visit", lambda: read_only(j < self.hi[:, None]))

    @property
    def diag(self) -> np.ndarray:
        """bool (Tm, Tn): computed and partly masked (needs the mask)."""
        j = np.arange(self.tn)[None, :]
        return self._once("diag", lambda: read_only((j >= self.lo[:, None]) & (j < self.hi[:, None])))

    def row_visits(self) -> np.ndarray:
        """Key blocks visited per query block (read-only)."""
        return self.hi

    def col_visits(self) -> np.ndarray:
        """Query blocks visiting each key block (read-only)."""
        def cols():
            # query block i visits j < hi_i: count of i with hi_i > j (hi is non-decreasing)
            j = np.arange(self.tn)
            return read_only(self.tm - np.searchsorted(self.hi, j, side="right"))
        return self._once("cols", cols)

    def row_tiles(self) -> np.ndarray:
        """Tiles visited per query block, in full bm x bn tiles (ragged ones as fractions)."""
        def rows():  # cc(hi) = hi·bn, or Nk for every key block (no array as long as Tn)
            if not self.causal and self.tm > MANY_CTAS:
                # so many CTAs alike that the ragged last one is noise: their mean (one number,
                # the total exact), not an array as long as N / block_m
                return uniform_float(self.nq * self.nk / (self.tm * self.bm * self.bn))
            # hi·bn at most Nk: Nk exactly where hi = Tn ((Tn - 1)·bn < Nk <= Tn·bn)
            cc = self.hi * self.bn
            np.minimum(cc, self.nk, out=cc)
            return read_only(self.r * cc / (self.bm * self.bn))
        return self._once("row_tiles", rows)

    def col_tiles(self) -> np.ndarray:
        """Tiles visited per key block, in full bm x bn tiles (ragged ones as fractions)."""
        def cols():
            if not self.causal and self.tn > MANY_CTAS:
                return uniform_float(self.nq * self.nk / (self.tn * self.bm * self.bn))
            cum_r = np.concatenate(([0], np.cumsum(self.r)))
            first = np.searchsorted(self.hi, np.arange(self.tn), side="right")
            return read_only(self.c * (cum_r[-1] - cum_r[first]) / (self.bm * self.bn))
        return self._once("col_tiles", cols)

    def row_diag(self) -> np.ndarray:
        """Partly masked (diagonal) key blocks per query block (read-only)."""
        if not self.causal and self.tm > MANY_CTAS:
            return uniform(0)
        return self._once("row_diag", lambda: read_only(self.hi - self.lo))

    def col_diag(self) -> np.ndarray:
        """Query blocks for which each key block is partly masked (read-only)."""
        if not self.causal and self.tn > MANY_CTAS:
            return uniform(0)

        def cols():
            # i has j in [lo_i, hi_i): lo and hi are non-decreasing in i
            j = np.arange(self.tn)
            return read_only(np.searchsorted(self.lo, j, side="right")
                           - np.searchsorted(self.hi, j, side="right"))
        return self._once("col_diag", cols)

    # ------------------------------------------------ sums: closed forms, Python integers
    def _cc(self, h: int) -> int:
        """Σ c_j for j < h: key rows in the first h key blocks."""
        return self.nk if h >= self.tn else h * self.bn

    def _hi_of(self, i: int) -> int:
        last = min(i * self.bm + self.bm, self.nq) - 1 + self.offset
        return self.tn if not self.causal else min(max(last // self.bn + 1, 0), self.tn)

    def _lo_of(self, i: int) -> int:
        if not self.causal:
            return self.tn
        y = i * self.bm + self.offset
        full = min(max((y + 1) // self.bn, 0), self.tn - 1) + (y >= self.nk - 1)
        return min(full, self._hi_of(i))

    def _hi_rows(self) -> _Rows:
        """hi_i of the full query blocks i < Tm-1: clip(floor((bm·i + bm-1+offset+bn)/bn), 0, Tn)."""
        return self._once("hi_rows", lambda: _Rows.of(
            self.tm - 1, self.bm, self.bm - 1 + self.offset + self.bn, self.bn, self.tn,
            self.tn if not self.causal else None))

    def _lo_rows(self) -> _Rows:
        """lo_i of the full query blocks: clip(floor((bm·i + offset+1)/bn), 0, Tn-1), + 1 where the
        first row sees every key (then lo = Tn; cc(lo) = Nk)."""
        return self._once("lo_rows", lambda: _Rows.of(
            self.tm - 1, self.bm, self.offset + 1, self.bn, self.tn - 1,
            self.tn if not self.causal else None))

    def _lo_full_rows(self) -> int:
        """Full query blocks i < Tm-1 whose first row sees every key (i·bm + offset >= Nk-1)."""
        n = self.tm - 1
        if not self.causal:
            return n
        return n - min(max(_ceil_div(self.nk - 1 - self.offset, self.bm), 0), n)

    def sum_hi(self) -> int:
        """Σ hi_i: (query block, key block) pairs visited."""
        return self._once("pairs", lambda: self._hi_rows().total + self._hi_of(self.tm - 1))

    def sum_lo(self) -> int:
        def lo():
            if not self.causal:
                return self.sum_hi()
            return self._lo_rows().total + self._lo_full_rows() + self._lo_of(self.tm - 1)
        return self._once("sum_lo", lo)

    def _sum_cc_hi(self) -> int:
        """Σ_i cc(hi_i) over the full query blocks."""
        h = self._hi_rows()
        return self.bn * h.middle + h.top_rows * self.nk

    def _sum_cc_lo(self) -> int:
        """Σ_i cc(lo_i) over the full query blocks (lo = Tn exactly where the first row sees all)."""
        if not self.causal:
            return self._sum_cc_hi()
        lo, full = self._lo_rows(), self._lo_full_rows()
        # rows where lo < Tn: lo·bn; at the clip Tn-1 (no full view) (Tn-1)·bn; full: Nk
        return self.bn * (lo.middle + (lo.top_rows - full) * (self.tn - 1)) + full * self.nk

    def sum_rc(self, mask: np.ndarray | None = None) -> int:
        """Σ r_i·c_j over visited (or masked) pairs: elements of S computed."""
        if mask is not None and mask is self._memo.get("diag"):
            return self.sum_rc_diag()
        if mask is not None and mask is not self._memo.get("visit"):
            return int(self.r @ mask.astype(np.int64) @ self.c)
        return self._once("rc", lambda: self.bm * self._sum_cc_hi()
                          + self.r_last * self._cc(self._hi_of(self.tm - 1)))

    def sum_rc_diag(self) -> int:
        """Σ r_i·c_j over partly masked pairs."""
        def rc():
            lo = self.bm * self._sum_cc_lo() + self.r_last * self._cc(self._lo_of(self.tm - 1))
            return self.sum_rc() - lo
        return self._once("rc_diag", rc)

    def diag_pairs(self) -> int:
        """Σ (hi_i - lo_i): partly masked (diagonal) pairs."""
        return self.sum_hi() - self.sum_lo()

    def sum_r(self) -> int:
        """Σ r_i over visited pairs: query-block rows loaded, once per visited pair."""
        return self._once("r", lambda: self.bm * self._hi_rows().total
                          + self.r_last * self._hi_of(self.tm - 1))

    def sum_c(self) -> int:
        """Σ c_j over visited pairs: key-block rows loaded, once per visited pair."""
        return self._once("c", lambda: self._sum_cc_hi() + self._cc(self._hi_of(self.tm - 1)))

    def kv_rows_loaded(self, qb: int | None = None) -> int:
        """Σ c_j over key blocks that some query block visits (hi is largest for the last);
        with `qb`, summed over splits of qb query blocks, each loading the key blocks that its
        own last block visits (fa1's query-row splits)."""
        if qb is None or qb >= self.tm:
            return self._cc(self._hi_of(self.tm - 1))
        def loaded():  # the splits' last blocks' hi at once (hi_i: _hi_of(i) of every i)
            h = self.hi[np.minimum(np.arange(qb, self.tm + qb, qb), self.tm) - 1]
            return int(np.minimum(h * self.bn, self.nk).sum())  # cc(h): Nk where h = Tn
        return self._once(("kv_rows_loaded", qb), loaded)

    def split_pairs(self, qb: int) -> np.ndarray:
        """Visited pairs of each split of qb query blocks, in launch order (KernelPlan.trips)."""
        return self._once(("split_pairs", qb), lambda: read_only(
            np.add.reduceat(self.hi, np.arange(0, self.tm, qb))))

    def split_diag(self, qb: int) -> np.ndarray:
        """Partly masked pairs of each split of qb query blocks (KernelPlan.masked)."""
        return self._once(("split_diag", qb), lambda: read_only(
            np.add.reduceat(self.hi - self.lo, np.arange(0, self.tm, qb))))

    def col_split_pairs(self, kb: int) -> np.ndarray:
        """Visited pairs of each split of kb key blocks (fa1's backward), in launch order."""
        return self._once(("col_split_pairs", kb), lambda: read_only(
            np.add.reduceat(self.col_visits(), np.arange(0, self.tn, kb))))

    def col_split_diag(self, kb: int) -> np.ndarray:
        """Partly masked pairs of each split of kb key blocks (fa1's backward)."""
        def diag():
            d = self.col_diag()
            if len(d) == 1 and self.tn > 1:  # uniform (no mask): every split alike
                return d
            return read_only(np.add.reduceat(d, np.arange(0, self.tn, kb)))
        return self._once(("col_split_diag", kb), diag)

    def rows_visited(self) -> int:
        """Σ r_i over query blocks that visit some key block (all of them but, under a
        bottom-right causal mask with Nq > Nk, the first blocks, which see no key)."""
        n = self.tm - 1  # full blocks; hi_i >= 1 from the first i with bm·i + bm-1+offset >= 0
        seen = n if not self.causal else n - min(max(_ceil_div(1 - self.bm - self.offset, self.bm), 0), n)
        return self.bm * seen + self.r_last * (self._hi_of(self.tm - 1) > 0)

    @property
    def pairs(self) -> int:
        return self.sum_hi()


class WindowMap:
    """The block map of a causal sliding-window mask (Problem.window = W: row i sees keys
    [i + offset - W, i + offset]), for the Q-outer forward (fa2, fa3, decode): query block i
    visits the key blocks [wlo_i, hi_i), of which [full_lo_i, lo_i) are fully visible and the
    others are partly masked (the window's lower edge, the diagonal, or both in one tile).
    Its sums are over arrays as long as the query blocks (Tm), the causal map's row arrays;
    the K/V-outer maps (fa1, backward) take no window (refused in their Plans)."""

    def __init__(self, nq: int, nk: int, bm: int, bn: int, offset: int, window: int) -> None:
        self.nq, self.nk, self.bm, self.bn = nq, nk, bm, bn
        self.causal, self.offset, self.window = True, offset, window
        self.tm, self.tn = -(-nq // bm), -(-nk // bn)
        self.r = read_only(blocks(nq, bm))
        self.c = read_only(blocks(nk, bn))
        first = np.arange(self.tm, dtype=np.int64) * bm + offset  # the first row's diagonal
        last = first + self.r - 1
        self.hi = read_only(np.clip(last // bn + 1, 0, self.tn))
        self.wlo = read_only(np.minimum(np.clip((first - window) // bn, 0, self.tn), self.hi))
        # lo: blocks whose every key the first row sees below its diagonal (as BlockMap.lo)
        full = np.clip((first + 1) // bn, 0, self.tn - 1) + (first >= nk - 1)
        self.lo = read_only(np.minimum(full, self.hi))
        # full_lo: the first block whose first key the last row's window still reaches
        self.full_lo = read_only(np.maximum(np.clip(-((window - last) // bn), 0, self.tn), self.wlo))
        self._full = np.maximum(self.lo - self.full_lo, 0)  # fully visible blocks

    def _cc(self, h: np.ndarray) -> np.ndarray:
        """Σ c_j for j < h, per query block."""
        return np.minimum(h * self.bn, self.nk)

    @cached_property
    def visit(self) -> np.ndarray:
        j = np.arange(self.tn)[None, :]
        return read_only((j >= self.wlo[:, None]) & (j < self.hi[:, None]))

    @cached_property
    def diag(self) -> np.ndarray:
        j = np.arange(self.tn)[None, :]
        full = (j >= self.full_lo[:, None]) & (j < self.lo[:, None])
        return read_only(self.visit & ~full)

    def row_visits(self) -> np.ndarray:
        return read_only(self.hi - self.wlo)

    def row_tiles(self) -> np.ndarray:
        return read_only(self.r * (self._cc(self.hi) - self._cc(self.wlo)) / (self.bm * self.bn))

    def row_diag(self) -> np.ndarray:
        return read_only(self.hi - self.wlo - self._full)

    def sum_hi(self) -> int:
        """(query block, key block) pairs visited."""
        return int((self.hi - self.wlo).sum())

    pairs = property(sum_hi)

    def diag_pairs(self) -> int:
        return int(self.row_diag().sum())

    def sum_r(self) -> int:
        return int((self.r * (self.hi - self.wlo)).sum())

    def sum_c(self) -> int:
        return int((self._cc(self.hi) - self._cc(self.wlo)).sum())

    def sum_rc(self) -> int:
        return int((self.r * (self._cc(self.hi) - self._cc(self.wlo))).sum())

    def sum_rc_diag(self) -> int:
        full = np.where(self._full > 0, self._cc(self.lo) - self._cc(self.full_lo), 0)
        return self.sum_rc() - int((self.r * full).sum())


@lru_cache(maxsize=256)
def _window_map(nq: int, nk: int, offset: int, window: int, bm: int, bn: int) -> WindowMap:
    return WindowMap(nq, nk, bm, bn, offset, window)


class _Rows(NamedTuple):
    """Σ_{i<n} clip(floor((a·i + b)/c), 0, top) in closed form (floor_sum), split as the sum
    over the rows below the top clip (`middle`) and how many rows sit at the top (a NamedTuple:
    a new block map makes a few, a frozen dataclass costs a call a field)."""

    total: int
    middle: int
    top_rows: int

    @classmethod
    def of(cls, n: int, a: int, b: int, c: int, top: int, constant: int | None = None) -> _Rows:
        if n <= 0:
            return cls(0, 0, 0)
        if constant is not None:  # not causal: every row at the top
            return cls(n * constant, 0, n)
        i0 = min(max(_ceil_div(-b, a), 0), n)  # first row with a·i + b >= 0
        i1 = min(max(_ceil_div(top * c - b, a), i0), n)  # first row at the top
        middle = _floor_sum(i1 - i0, c, a, a * i0 + b)
        return cls(middle + (n - i1) * top, middle, n - i1)


def _ceil_div(x: int, y: int) -> int:
    return -(-x // y)


def _floor_sum(n: int, m: int, a: int, b: int) -> int:
    """Σ_{i=0}^{n-1} floor((a·i + b) / m) for a, b >= 0, m > 0, in O(log) steps (the
    Euclid-like reduction of the AtCoder Library's floor_sum)."""
    total = 0
    while n > 0:
        if a >= m:
            total += n * (n - 1) // 2 * (a // m)
            a %= m
        if b >= m:
            total += n * (b // m)
            b %= m
        y = a * n + b
        if y < m:
            break
        n, b, m, a = y // m, y % m, a, m
    return total


@lru_cache(maxsize=1024)
def _block_map(nq: int, nk: int, causal: bool, offset: int, bm: int, bn: int) -> BlockMap:
    return BlockMap(nq, nk, bm, bn, causal, offset)


def last_first(bm: BlockMap | WindowMap, name: str, dtype=None) -> np.ndarray:
    """The map's per-query-block array `name` in launch order, the last query block first (a
    causal grid's longest CTAs first), as `dtype`; a BlockMap's is made once, the same array at
    every call (timing remembers a kernel's CTA period by its arrays)."""
    if isinstance(bm, BlockMap):  # made already: no closure to build
        held = bm._memo.get(("last_first", name, dtype))
        if held is not None:
            return held

    def make():
        out = getattr(bm, name)()[::-1]
        return read_only(out if dtype is None else out.astype(dtype))
    return bm._once(("last_first", name, dtype), make) if isinstance(bm, BlockMap) else make()


@lru_cache(maxsize=1024)
def uniform_float(value: float) -> np.ndarray:
    """Trip counts (in full tiles) of a kernel whose CTAs all run `value` tiles."""
    return read_only(np.array([value], dtype=np.float64))


def whole_tiles(p: Problem, k: KernelPlan) -> np.ndarray:
    """A forward's trips in whole tiles (KernelPlan.tile_trips): a query tile's key tiles, each
    in full, the ragged last query tile's and the ragged last key tile included: what lies
    past the end is zero-filled (fa3.cu's TMA, fa2.cu's cp.async) and the warps compute on it."""
    return whole_tiles_of(p, BlockMap.of(p, k.block_m, k.block_n), k.trips)


def whole_tiles_of(p: Problem, bm: BlockMap, trips: np.ndarray) -> np.ndarray:
    """whole_tiles of a kernel with this block map and these trips, before it is built."""
    if len(trips) == 1:  # every CTA alike (or so many that the ragged one is noise)
        return uniform_float(float(bm.tn if not p.causal else bm.row_visits().max()))
    return last_first(bm, "row_visits", np.float64)


@lru_cache(maxsize=256)
def uniform(value: int) -> np.ndarray:
    """Trip counts of a kernel whose CTAs all run `value` trips (KernelPlan.trips)."""
    return read_only(np.array([value], dtype=np.int64))


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
    rm, cn = -(-M // t.block_m), -(-N // t.block_n)  # row and column blocks
    a_bytes = M * K * e * cn  # each A row block read once per column block
    b_bytes = N * K * e * rm
    bh = p.bh
    # per head, bh copies: its reads and writes, the MMAs, and the epilogue's ALU work once per
    # CTA, on its C tile (Work(tensor_flops=2MNK) + epilogue, scaled: the same ints)
    traffic = copies({a: a_bytes, b: b_bytes}, {c: M * N * c_bytes}, 2 * (a_bytes + b_bytes), bh)
    epilogue = epilogue_alu * M * N * bh
    chunks = -(-K // t.block_k)
    trips = uniform(chunks)
    return KernelPlan(
        name=name, grid=(cn, rm, bh), threads=32 * t.warps,
        regs_per_thread=128, block_m=t.block_m, block_n=t.block_n,
        traffic=traffic, work=Work(2 * M * N * K * bh, 0, epilogue), once=Work(0, 0, epilogue),
        trips=trips, stages=t.stages,
        # an A row block serves the CTAs along x, a B column block every grid[0]-th CTA
        reuse={a: 1, b: cn},
        overlap="async", source=source(name),
        # A and B go through the k loop's ring, never a prologue; with k in one chunk there is
        # no loop for the C tile's stores to follow: the CTA loads, multiplies and stores in its
        # one trip, and the CTAs beside it overlap those phases
        streamed=(a, b, c) if chunks == 1 else (a, b),
        **_gemm_spec(name, t, p.head_dim, p.causal, p.causal_align, e),
    )


_GEMM_SPEC = Memo()  # (name, id(its spec), id(tiles), head_dim, mask, element bytes) -> (spec, tiles, fields)


def _gemm_spec(name: str, t: Tiles, head_dim: int, causal: bool, align: CausalAlign, e: int) -> dict:
    """A GEMM kernel's KernelPlan fields from its KernelSpec (defines, shared memory, the loop's
    instructions): functions of the spec, its tiles, head_dim, mask and element bytes alone,
    remembered (a Plan's two to four GEMMs ask each time; the spec by identity: a test may put
    another in its place; the tiles too, kept: gemm_tiles gives one Tiles a set of values, and
    a frozen dataclass hashes its fields through a call)."""
    spec = SPECS[name]
    key = (name, id(spec), id(t), head_dim, causal, align, e)
    out = _GEMM_SPEC.get(key, spec, t)
    if out is not MISS:
        return out
    defines = kernel_defines(name, BLOCK_M=t.block_m, BLOCK_N=t.block_n, BLOCK_K=t.block_k,
                             NUM_WARPS=t.warps, STAGES=t.stages, HEAD_DIM=head_dim,
                             **_mask_defines(causal, align))
    return _GEMM_SPEC.put(key, (spec, t), dict(
        defines=defines,
        # the cp.async ring, re-used by the epilogue to stage the C tile for 16-byte stores
        smem_bytes=SPECS[name].smem(defines, e),
        loop_issue=SPECS[name].loop_issue(defines, e) if SPECS[name].loop_issue else 0.0,
    ))


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
                      source=source("gqa_reduce"),
                      defines=kernel_defines("gqa_reduce", HEAD_DIM=p.head_dim,
                                             REDUCE_THREADS=threads))


# A split count within this fraction of the best wave efficiency is as good as the best
# (the FlashAttention-1 library's num_splits_heuristic_fwd: fewer splits re-read K/V less).
SPLIT_EFFICIENCY = 0.95
# fa1's outer step loads K_j and V_j (2·Bc·d) before its query blocks' trips (each Br·d of Q and
# Br·d fp32 of O read and written): about half a trip's HBM traffic at Bc = 2·Br
KV_LOAD_TRIPS = 0.5


def split_blocks(bh: int, tm: int, slots: int, hi: np.ndarray | None = None,
                 outer: str = "max") -> int:
    """split_blocks_many of one batch x heads count, remembered (a sweep asks again for every
    profile and batch)."""
    return _split_blocks_cached(bh, tm, slots, None if hi is None else _array_key(hi), outer)


_KEYS = Memo()  # id(array) -> (array, _array_key's answer)


def _array_key(a: np.ndarray) -> tuple[str, bytes]:
    """(dtype, bytes) of an array, the same bytes object for the same array (a BlockMap's are
    made once, read-only): its hash, which a bytes object keeps, is not computed again."""
    key = _KEYS.get(id(a), a)
    if key is not MISS and not a.flags.writeable:
        return key
    return _KEYS.put(id(a), (a,), (a.dtype.str, a.tobytes()))


@lru_cache(maxsize=4096)
def _split_blocks_cached(bh: int, tm: int, slots: int, hi: tuple[str, bytes] | None,
                         outer: str) -> int:
    return split_blocks_many(np.array([bh], np.int64), tm, slots,
                             None if hi is None else np.frombuffer(hi[1], hi[0]), outer)[0]


def split_blocks_many(bh: np.ndarray, tm: int, slots: int, hi: np.ndarray | None = None,
                      outer: str = "max") -> list[int]:
    """Query blocks per split of a head's tm query blocks at each batch x heads count of `bh`
    (int64; each count's answer a row of one numpy pass: a grid's shape asks it of all its
    batch and head counts at once, a Plan of one), chosen as the FlashAttention-1 library chose
    its forward's split count: of the counts that even splits produce (ceil(tm / qb)), the
    fewest whose bh·splits CTAs fill `slots` (SMs × CTAs per SM) waves within SPLIT_EFFICIENCY
    of the best (wave efficiency = waves / ceil(waves)).

    Causal (`hi`: the key blocks each query block visits, rising along the rows): splits are
    not alike, a head's last split has the most key blocks to visit, so the count is judged by
    the makespan it implies instead: the longest split, or the waves of the average one, in
    trips, each split's outer steps (a K/V load each) counted as KV_LOAD_TRIPS of a trip.

    The backward splits key blocks instead (`hi`: the query blocks each key block visits, and
    `outer="count"`: a split's outer steps are its key blocks that some query block visits;
    the forward's, "max", are the K/V blocks its last query block visits)."""
    bh = bh[:, None]
    if hi is None or (hi == hi[0]).all():  # the wave efficiency of every count
        counts = np.array(_even_counts(tm))
        w = bh * counts / slots
        eff = w / np.ceil(w)
        at = np.argmax(eff >= SPLIT_EFFICIENCY * eff.max(axis=1, keepdims=True), axis=1)
    else:  # the makespans, in trips
        counts, longest, mean, n = _split_work(tm, (hi.dtype.str, hi.tobytes()), outer)
        spans = np.maximum(longest, np.ceil(bh * n / slots) * mean)
        at = np.argmax(spans * SPLIT_EFFICIENCY <= spans.min(axis=1, keepdims=True), axis=1)
    return (-(-tm // counts[at])).tolist()


@lru_cache(maxsize=1024)
def _even_counts(tm: int) -> tuple[int, ...]:
    """The split counts that even splits of tm blocks produce, ceil(tm / qb), rising (a head's
    blocks are the same for every batch and head count a sweep asks about): those of the
    few qb < k = isqrt(tm) + 1, and every count up to ceil(tm / k) (past k, ceil(tm / qb)
    falls by at most 1 as qb grows by 1, qb(qb + 1) > tm, down to 1 at qb = tm)."""
    k = math.isqrt(tm) + 1
    return tuple(sorted({-(-tm // qb) for qb in range(1, k)}.union(range(1, -(-tm // k) + 1))))


@lru_cache(maxsize=4096)
def _split_work(tm: int, hi_key: tuple[str, bytes], outer: str) -> tuple[np.ndarray, ...]:
    """Per split count of a head's tm blocks (those even splits produce, rising): the count,
    the longest split's work and the mean split's, in trips, and the splits (what the makespan
    takes from the blocks, whatever batch x heads). Every count's splits at once: a split's
    sums from the running sums of `hi`, its largest from the splits of `hi` repeated once a
    count; the work is whole and half trips, so its sums are exact in any order (the mean as
    numpy's of each count's splits)."""
    hi = np.frombuffer(hi_key[1], hi_key[0])
    counts = np.array(_even_counts(tm))
    qb = -(-tm // counts)  # blocks a split, per count
    n = -(-tm // qb)  # its splits
    first = np.cumsum(n) - n  # each count's first split among all
    size = np.repeat(qb, n)
    start = (np.arange(n.sum()) - np.repeat(first, n)) * size  # each split's first block
    end = np.minimum(start + size, tm)
    if outer == "max":  # the largest hi of each split: its last where hi rises (the forward's
        # rows), else of hi repeated, a count's copy each
        steps = (hi[end - 1] if (hi[1:] >= hi[:-1]).all() else
                 np.maximum.reduceat(np.tile(hi, len(counts)), start + np.repeat(np.arange(len(counts)) * tm, n)))
    else:  # the blocks of a split with hi > 0
        run = np.concatenate(([0], np.cumsum(hi > 0)))
        steps = run[end] - run[start]
    run = np.concatenate(([0], np.cumsum(hi)))
    work = (run[end] - run[start]) + KV_LOAD_TRIPS * steps
    return (counts, np.maximum.reduceat(work, first), np.add.reduceat(work, first) / n,
            n.astype(np.float64))


def mask_defines(p: Problem) -> dict[str, int]:
    """The kernels' causal-mask defines: IS_CAUSAL and, when causal, the diagonal's alignment
    (CAUSAL_BOTTOM_RIGHT: row i sees keys j <= i + Nk - Nq; else j <= i)."""
    return _mask_defines(p.causal, p.causal_align)


def _mask_defines(causal: bool, align: CausalAlign) -> dict[str, int]:
    return {"IS_CAUSAL": int(causal),
            "CAUSAL_BOTTOM_RIGHT": int(causal and align is CausalAlign.bottom_right)}


def window_defines(p: Problem) -> dict[str, int]:
    """The forward kernels' sliding-window define: WINDOW = W (row i sees keys back to
    i + offset - W), -1 for none."""
    return {"WINDOW": -1 if p.window is None else p.window}


# the schedules that model a sliding window (Problem.window), forward only
WINDOWED = ("fa2", "fa3", "decode")


def check_window(schedule: str, p: Problem) -> None:
    """Refuse, in one line, a sliding window or a paged cache that the schedule does not model."""
    if p.seqlens_k is not None and schedule != "decode":
        raise InputError(f"--seqlens-k: a ragged batch is modelled by the decode schedule only "
                         f"(allowed: --schedule decode; {schedule} takes one length)")
    if p.page_size is not None and schedule != "decode":
        raise InputError(f"--page-size: a paged K/V cache is modelled by the decode schedule only "
                         f"(allowed: --schedule decode; {schedule} reads contiguous K/V)")
    if p.window is None:
        return
    if p.direction is not Direction.fwd:
        raise InputError("--window: the forward pass only (allowed: --direction fwd)")
    if schedule not in WINDOWED:
        raise InputError(f"{schedule} does not model a sliding window "
                         f"(allowed with --window: {', '.join(WINDOWED)})")


# backward schedules whose dQ partial sums meet in whatever order the CTAs arrive, with no mode
# that fixes it (fa3's: DETERMINISTIC; fa1's: unsplit; naive's and standard's add in a fixed
# order)
NO_DETERMINISTIC_BWD = {"fa2": "adds dQ with fp32 atomics in whatever order its key-block CTAs "
                               "arrive"}


def check_deterministic(schedule: str, p: Problem) -> None:
    """Refuse, in one line, a deterministic backward that the schedule has no mode for."""
    if p.deterministic and p.direction is Direction.bwd and schedule in NO_DETERMINISTIC_BWD:
        raise InputError(f"--deterministic: {schedule}'s backward {NO_DETERMINISTIC_BWD[schedule]} "
                         "and has no deterministic mode (allowed: fa3 and fa1, which have one; "
                         "naive, standard, which add in a fixed order)")


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
