"""L2-aware estimate of the bytes DRAM really sees (what Nsight Compute's dram__bytes_read.sum
and dram__bytes_write.sum report), from a Plan's two-level counts.

The specification is docs/model.md, "DRAM". In short, per kernel, starting from a cold L2:
compulsory reads once; a re-read of a tile loaded Δ CTAs earlier (`KernelPlan.reuse`) hits
when both ran in the same wave or the bytes loaded in between fit in the usable L2
(`l2_bytes` x `efficiency.l2_capacity`), else with probability L2 / those bytes; writes reach
DRAM less the dirty lines the L2 still holds at the end. Reads never fall below the compulsory
bytes; neither reads nor writes exceed the two-level count.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from iosim.core.hardware import HardwareProfile
from iosim.core.plan import KernelPlan, Plan
from iosim.core.problem import Problem
from iosim.kernels import kv_splits, tensor_sizes
from iosim.model.occupancy import wave


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


@dataclass(frozen=True)
class Dram:
    read: int
    write: int


def hit_fraction(reuse: int, per_cta: float, wave: int, l2: float) -> float:
    """Share of a tensor's re-read (and re-written) bytes that L2 serves, when the CTAs that
    touch a tile again are `reuse` apart in launch order, each CTA brings `per_cta` bytes,
    `wave` CTAs run at once and `l2` bytes of L2 are usable (see the module docstring)."""
    if reuse <= 0:
        return min(1.0, l2 / max(per_cta * wave, 1))
    same_wave = max(0.0, 1 - reuse / wave)
    return same_wave + (1 - same_wave) * min(1.0, l2 / max(per_cta * reuse, 1))


def same_cta_rereads(plan: Plan) -> bool:
    """Does a kernel read a tensor again from the same CTA (reuse 0: FA1's Q, O, ℓ, m at every
    outer step; a softmax row too long for shared memory, read twice)? Then more CTAs at once
    put more bytes between the two reads, and more SMs can mean more DRAM reads (L2 thrash):
    the one way in which this model lets a bigger GPU move more bytes."""
    size = sizes(plan.problem, kv_splits(plan))
    return any(v > size[n] and k.reuse.get(n, 0) == 0
               for k in plan.kernels for n, v in k.traffic.reads.items())


def kernel_dram(k: KernelPlan, hw: HardwareProfile, size: dict[str, int]) -> Dram:
    """DRAM bytes of one kernel, starting from a cold L2 (see the module docstring)."""
    t = k.traffic
    distinct_r = {n: min(v, size[n]) for n, v in t.reads.items()}
    distinct_w = {n: min(v, size[n]) for n, v in t.writes.items()}
    per_cta = (sum(distinct_r.values()) + sum(distinct_w.values())) / k.ctas
    l2, w = hw.l2_bytes * hw.efficiency.l2_capacity, wave(k, hw)

    def missed(n: str, v: int, first: int) -> float:
        """Bytes of the repeated accesses to tensor n that miss the L2."""
        if v <= first:
            return 0.0
        return (v - first) * (1 - hit_fraction(k.reuse.get(n, 0), per_cta, w, l2))

    read = sum(distinct_r[n] + missed(n, v, distinct_r[n]) for n, v in t.reads.items())
    written = sum(distinct_w.values())
    retained = l2 * written / (written + read) if written else 0.0
    write = written - min(written, retained) + sum(missed(n, v, distinct_w[n])
                                                    for n, v in t.writes.items())
    return Dram(int(round(read)), int(round(write)))


def estimate(plan: Plan, hw: HardwareProfile) -> list[Dram]:
    """DRAM bytes per kernel of the Plan, in launch order."""
    size = sizes(plan.problem, kv_splits(plan))
    return [kernel_dram(k, hw, size) for k in plan.kernels]
