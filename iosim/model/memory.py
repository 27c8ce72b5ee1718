"""L2-aware estimate of the bytes DRAM really sees (what Nsight Compute's dram__bytes_read.sum
and dram__bytes_write.sum report), from a Plan's two-level counts.

Each kernel is estimated as Nsight Compute measures it: its default `--cache-control all`
flushes and invalidates the L2 before every kernel, so a kernel starts cold, and its own dirty
lines still in L2 when it ends are not in its count. Assumptions, per kernel:
- Compulsory: each tensor's distinct bytes are read from DRAM once (at most the tensor's size).
- Re-reads (two-level reads beyond the distinct bytes) come from a tile that several CTAs, or
  several steps of one CTA, load again. How far apart in launch order the two loads are is
  the Plan's `KernelPlan.reuse` for the tensor, Δ CTAs:
  - Δ >= 1 (another CTA): when both CTAs are in the same wave (a share 1 - Δ/wave of the
    pairs) they run side by side and the second load hits. Otherwise the block scheduler has
    launched Δ CTAs in between, which brought about Δ x (distinct bytes / CTAs) into L2: the
    load hits when that fits in the L2, else with probability L2 / those bytes (LRU-like
    thrash). The model never depends on the wave size except through the same-wave share,
    which only grows with it: more SMs never lose a hit.
  - Δ = 0 (the same CTA comes back, e.g. FA1's O, ℓ, m at every outer step): in between, every
    resident CTA touches its own footprint, wave x (distinct bytes / CTAs); the same rule.
  This ignores the tiles in flight (stages x tile x resident CTAs, a few MB) and set conflicts.
- Writes: every distinct byte written reaches DRAM, less the dirty lines the L2 still holds
  at the end. The L2 then holds the kernel's most recent lines in the proportion in which they
  arrived: written (dirty) against read from DRAM (clean), so retained = usable L2 x written /
  (written + DRAM reads), at most what was written. (On H100 and H200 this gives the measured
  retention: about one L2 of S/P/O over naive's three kernels, a few MB of O for FA2.)
  Repeated writes to one location (FA1's O/ℓ/m, dQ's fp32 accumulator) merge in L2 with the
  tensor's hit fraction. So reads never fall below the compulsory bytes, and neither reads
  nor writes exceed the two-level count.
- The usable L2 is `l2_bytes` x the profile's `efficiency.l2_capacity` (sets, the other partition's
  copy on Hopper's split L2, other data).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from iosim.core.hardware import HardwareProfile
from iosim.core.plan import KernelPlan, Plan
from iosim.core.problem import Problem
from iosim.model.occupancy import wave
from iosim.schedules.base import F32, F32_TENSORS


def tensor_bytes(p: Problem, name: str) -> int:
    """Size of a named tensor in HBM."""
    return sizes(p)[name]


def sizes(p: Problem) -> dict[str, int]:
    """Sizes of all named tensors of a problem in HBM (cached)."""
    return _sizes(p.batch, p.heads, p.kv_heads, p.seqlen_q, p.seqlen_k, p.head_dim,
                  p.dtype.bytes)


@lru_cache(maxsize=4096)
def _sizes(batch: int, heads: int, kv_heads: int, nq: int, nk: int, d: int, e: int) -> dict:
    bh = batch * heads
    q, kv, rows, nn = bh * nq * d, batch * kv_heads * nk * d, bh * nq, bh * nq * nk
    sizes = {"Q": q, "O": q, "dO": q, "dQ": q, "Oacc": q, "dQacc": q, "K": kv, "V": kv,
             "dK": kv, "dV": kv, "L": rows, "M": rows, "LSE": rows, "D": rows,
             "S": nn, "P": nn, "dP": nn, "dS": nn}
    out = {n: v * (F32 if n in F32_TENSORS else e) for n, v in sizes.items()}
    for n in ("dK", "dV"):  # per-query-head buffers summed by the GQA reduction
        out[f"{n}_expanded"] = bh * nk * d * e
    return out


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
    size = sizes(plan.problem)
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
    size = sizes(plan.problem)
    return [kernel_dram(k, hw, size) for k in plan.kernels]
