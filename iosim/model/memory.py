"""L2-aware estimate of the bytes DRAM really sees (what Nsight Compute's dram__bytes_read.sum
and dram__bytes_write.sum report), from a Plan's two-level counts.

The specification is docs/model.md, "DRAM". In short, per kernel, starting from a cold L2:
compulsory reads once; a re-read of a tile loaded Δ CTAs earlier (`KernelPlan.reuse`; a
persistent grid's CTAs run several tiles each: Δ counts tiles, KernelPlan.units) hits
when both ran in the same wave or the bytes loaded in between fit in the usable L2
(`l2_bytes` x `efficiency.l2_capacity`), else with probability L2 / those bytes; writes reach
DRAM less the dirty lines the L2 still holds at the end. A kernel that prefetches a tensor's
lines into L2 a trip before loading them (its KernelSpec's `prefetch`: FA1's backward) reads
again those the L2 evicted meanwhile (`refetched`). Reads never fall below the compulsory bytes;
neither reads nor writes exceed the two-level count, but for the prefetched lines (read twice
at most).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from iosim.core.hardware import HardwareProfile
from iosim.core.plan import KernelPlan, Plan
from iosim.core.problem import Problem
from iosim.kernels import SPECS, kv_splits, tensor_sizes
from iosim.model.occupancy import ctas_per_sm


def tensor_bytes(p: Problem, name: str) -> int:
    """Size of a named tensor in HBM."""
    return sizes(p)[name]


def sizes(p: Problem, splits: int = 1) -> dict[str, int]:
    """Sizes of all named tensors of a problem in HBM (iosim.kernels.TENSORS; cached); `splits`:
    a split-KV Plan's (iosim.kernels.kv_splits), the partials' S."""
    return _sizes(p, splits)


@lru_cache(maxsize=4096)
def _sizes(p: Problem, splits: int) -> dict[str, int]:
    return tensor_sizes(p, splits)


# the share of the usable L2 (l2_bytes x efficiency.l2_capacity) that the bytes moved between
# a prefetch and its load may fill before the prefetched lines are evicted: measured, the least
# squares fit to Nsight Compute's DRAM reads of fa1's backward at eight points where the
# resident CTAs move 11-30 MB meanwhile (`python tools/fa1_sass.py --share
# experiments/ncu_mechanism/h100/sass13/ncu_sass13.csv
# experiments/ncu_mechanism/h100/prefetch14/ncu_prefetch14.csv`): about 16 MB of an H100's
# 50 MB, which ncu finds whether the bytes grow by head_dim or by resident CTAs
PREFETCH_L2_SHARE = 0.435


@dataclass(frozen=True)
class Dram:
    read: int
    write: int


def hit_fraction(reuse, per_cta, wave, l2):
    """Share of a tensor's re-read (and re-written) bytes that L2 serves, when the CTAs that
    touch a tile again are `reuse` apart in launch order, each CTA brings `per_cta` bytes,
    `wave` CTAs run at once and `l2` bytes of L2 are usable (see the module docstring);
    elementwise over arrays."""
    alone = np.minimum(_ONE, l2 / np.maximum(per_cta * wave, _ONE))
    same_wave = np.maximum(_ZERO, _ONE - reuse / wave)
    apart = same_wave + (_ONE - same_wave) * np.minimum(_ONE, l2 / np.maximum(per_cta * reuse, _ONE))
    return np.where(reuse <= 0, alone, apart)


# 0 and 1 as 0-d arrays (also timing's): numpy 2 takes a Python number operand slower than an
# array of the other operand's dtype (float64 here)
_ZERO, _ONE = np.array(0.0), np.array(1.0)


def same_cta_rereads(plan: Plan) -> bool:
    """Does a kernel read a tensor again from the same CTA (reuse 0: FA1's Q, O, ℓ, m at every
    outer step; a softmax row too long for shared memory, read twice)? Then more CTAs at once
    put more bytes between the two reads, and more SMs can mean more DRAM reads (L2 thrash):
    the one way in which this model lets a bigger GPU move more bytes."""
    size = sizes(plan.problem, kv_splits(plan))
    return any(v > size[n] and k.reuse.get(n, 0) == 0
               for k in plan.kernels for n, v in k.traffic.reads.items())


def kernel_dram(k: KernelPlan, hw: HardwareProfile, size: dict[str, int], elem: int) -> Dram:
    """DRAM bytes of one kernel, starting from a cold L2 (see the module docstring)."""
    return _dram([(k, hw, size, elem)])[0]


def prefetch_ahead(k: KernelPlan, elem: int) -> dict[str, int]:
    """Tensor -> the bytes one CTA's loop trip moves through the L2 between prefetching that
    tensor's lines and loading them (iosim.kernels: its spec's `prefetch`); {} without."""
    spec = SPECS.get(k.name)
    if spec is None or spec.prefetch is None:
        return {}
    tensors, trip = spec.prefetch(k.defines, elem)
    return dict.fromkeys(tensors, trip)


def _dram(jobs: list[tuple[KernelPlan, HardwareProfile, dict[str, int], int]]) -> list[Dram]:
    """kernel_dram of many kernels: one numpy pass over every (kernel, tensor) access."""
    kin, count, size, reuse, write, ahead = [], [], [], [], [], []
    ctas, slots, l2s = [], [], []
    for i, (k, hw, sz, elem) in enumerate(jobs):
        pre = prefetch_ahead(k, elem)
        for is_write, tensors in ((0, k.traffic.reads), (1, k.traffic.writes)):
            for n, v in tensors.items():
                kin.append(i)
                count.append(v)
                size.append(sz[n])
                reuse.append(k.reuse.get(n, 0))
                write.append(is_write)
                ahead.append(0 if is_write else pre.get(n, 0))
        ctas.append(k.units)  # a persistent grid's tiles: what `reuse` counts
        slots.append(ctas_per_sm(k, hw) * hw.sm_count)
        l2s.append(hw.l2_bytes * hw.efficiency.l2_capacity)
    read, written = dram_arrays(np.array(kin, np.int64), np.array(count, np.float64),
                                np.array(size, np.float64), np.array(reuse, np.float64),
                                np.array(write, bool), np.array(ctas, np.float64),
                                np.array(slots, np.float64), np.array(l2s, np.float64),
                                np.array(ahead, np.float64))
    return [Dram(int(r), int(x)) for r, x in zip(read, written)]


def refetched(count, ahead, resident, l2):
    """Bytes of prefetched lines read again from DRAM: a read of `count` bytes whose lines a CTA
    prefetched into L2 one trip before loading them, while each of the `resident` CTAs moved
    `ahead` bytes through the L2 (0: not prefetched), finds a line still there with probability
    PREFETCH_L2_SHARE x l2 / (resident x ahead), capped at 1; elementwise."""
    moved = ahead * resident
    kept = np.minimum(_ONE, PREFETCH_L2_SHARE * l2 / np.maximum(moved, _ONE))
    return np.where(ahead > 0, count * (_ONE - kept), _ZERO)


def dram_arrays(kin, count, size, reuse, write, ctas, slots, l2, ahead=None
                ) -> tuple[np.ndarray, np.ndarray]:
    """(read, written) DRAM bytes, rounded to whole bytes, of kernels whose accesses are given
    as arrays: access i of kernel kin[i] moves count[i] two-level bytes of a tensor of size[i]
    bytes that CTAs `reuse[i]` apart touch again, a write where write[i], and whose lines were
    prefetched a trip ahead (`ahead[i]` bytes a CTA's trip, `refetched`); per kernel its CTAs,
    resident CTA slots and usable L2 bytes."""
    nk = len(ctas)
    wr, rd = write, ~write
    kw = kin[wr]
    distinct = np.minimum(count, size)
    per_cta = np.bincount(kin, distinct, nk) / ctas
    w = np.minimum(ctas, slots)  # a full wave (occupancy.wave)
    wk, l2k = w[kin], l2[kin]  # each access's kernel's
    # the bytes of the repeated accesses that miss the L2
    hit = hit_fraction(reuse, per_cta[kin], wk, l2k)
    missed = np.where(count > distinct, (count - distinct) * (_ONE - hit), _ZERO)
    if ahead is not None and not np.count_nonzero(ahead):  # (no line prefetched: none read
        ahead = None  # again, refetched's zeros not computed)
    again = 0.0 if ahead is None else refetched(count, ahead, wk, l2k)
    got = distinct + missed
    if ahead is not None:  # (the prefetched lines read again: none without)
        got += again
    read = np.bincount(kin[rd], got[rd], nk)
    written = np.bincount(kw, distinct[wr], nk)
    some = written > 0
    retained = np.zeros(nk)  # (none where nothing is written)
    np.divide(l2 * written, written + read, out=retained, where=some)
    write_b = written - np.minimum(written, retained) + np.bincount(kw, missed[wr], nk)
    return np.rint(read), np.rint(write_b)  # (np.round's, to whole bytes)


def estimate(plan: Plan, hw: HardwareProfile) -> list[Dram]:
    """DRAM bytes per kernel of the Plan, in launch order."""
    return estimate_many([(plan, hw)])[0]


def estimate_many(items: list[tuple[Plan, HardwareProfile]]) -> list[list[Dram]]:
    """estimate() of many Plans in one numpy pass (_dram)."""
    jobs = []
    for pl, hw in items:
        size = sizes(pl.problem, kv_splits(pl))
        jobs += [(k, hw, size, pl.problem.elem_bytes) for k in pl.kernels]
    out, at = _dram(jobs), 0
    per_plan = []
    for pl, _ in items:
        per_plan.append(out[at:at + len(pl.kernels)])
        at += len(pl.kernels)
    return per_plan
