"""L2-aware estimate of the bytes DRAM really sees (what Nsight Compute's dram__bytes_read.sum
and dram__bytes_write.sum report), from a Plan's two-level counts.

Assumptions, per kernel, in launch order:
- Compulsory: each tensor's distinct bytes are read from DRAM once (at most the tensor's size),
  less what the previous kernel of the Plan left in L2 of that tensor (written or read there).
- Re-reads (two-level reads beyond the distinct bytes) come from tiles that several CTAs, or
  several steps of one CTA, load again. They hit L2 when the bytes that the CTAs resident at
  the same time touch (their share of the kernel's distinct bytes) fit in the L2; when that
  working set exceeds the L2, the hit fraction falls as L2 / working set (LRU-like thrash).
- Writes: repeated writes to one location (FA1's O/ℓ/m, dQ's fp32 accumulator) merge in L2 with
  the same hit fraction; a kernel's last dirty lines, up to the L2 size, are still in L2 when it
  ends, so they are not in that kernel's DRAM writes: they leave during the next kernel of the
  Plan (counted there) or, after the last one, outside the measured kernels. So reads never
  fall below the compulsory bytes, and neither reads nor writes exceed the two-level count.
- The usable L2 is `l2_bytes` x the profile's `efficiency.l2` (sets, the other partition's
  copy on Hopper's split L2, other data).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from .hardware import HardwareProfile
from .occupancy import wave
from .plan import KernelPlan, Plan
from .problem import Problem
from .schedules.base import F32, F32_TENSORS


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


def hit_fraction(k: KernelPlan, hw: HardwareProfile, distinct: int) -> float:
    """Share of re-read (and re-written) bytes that L2 serves."""
    working_set = distinct * wave(k, hw) / k.ctas
    return min(1.0, hw.l2_bytes * hw.efficiency.l2 / max(working_set, 1))


def estimate(plan: Plan, hw: HardwareProfile) -> list[Dram]:
    """DRAM bytes per kernel of the Plan, in launch order."""
    p, l2 = plan.problem, hw.l2_bytes * hw.efficiency.l2
    size = sizes(p)
    left: dict[str, int] = {}  # bytes of each tensor the previous kernel left in L2
    dirty = 0  # the previous kernel's dirty lines: evicted, so written, during this one
    out = []
    for k in plan.kernels:
        t = k.traffic
        distinct_r = {n: min(v, size[n]) for n, v in t.reads.items()}
        distinct_w = {n: min(v, size[n]) for n, v in t.writes.items()}
        hit = hit_fraction(k, hw, sum(distinct_r.values()) + sum(distinct_w.values()))
        read = 0.0
        for n, v in t.reads.items():
            cold = max(0, distinct_r[n] - left.get(n, 0))
            read += cold + (v - distinct_r[n]) * (1 - hit)
        written = sum(distinct_w.values())
        rewrites = sum(t.writes.values()) - written
        still_dirty = min(written, l2)
        write = written - still_dirty + rewrites * (1 - hit) + dirty
        dirty = still_dirty
        # What this kernel leaves in L2 for the next: its most recent bytes, written first.
        left, room = {}, l2
        for n, v in list(distinct_w.items()) + list(distinct_r.items()):
            keep = min(v, room)
            left[n] = left.get(n, 0) + keep
            room -= keep
        out.append(Dram(int(round(read)), int(round(write))))
    return out
