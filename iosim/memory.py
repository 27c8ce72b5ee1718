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

from .hardware import HardwareProfile
from .occupancy import wave
from .plan import KernelPlan, Plan
from .problem import Problem
from .schedules.base import F32

FP32 = {"L", "M", "LSE", "D", "Oacc", "dQacc"}


def tensor_bytes(p: Problem, name: str) -> int:
    """Size of a named tensor in HBM."""
    base = name.removesuffix("_expanded")
    e = F32 if base in FP32 else p.elem_bytes
    nq, nk, d, bh = p.seqlen_q, p.seqlen_k, p.head_dim, p.bh
    kv_heads = p.heads if name.endswith("_expanded") else p.kv_heads
    sizes = {
        "Q": bh * nq * d, "O": bh * nq * d, "dO": bh * nq * d, "dQ": bh * nq * d,
        "Oacc": bh * nq * d, "dQacc": bh * nq * d,
        "K": p.batch * kv_heads * nk * d, "V": p.batch * kv_heads * nk * d,
        "dK": p.batch * kv_heads * nk * d, "dV": p.batch * kv_heads * nk * d,
        "L": bh * nq, "M": bh * nq, "LSE": bh * nq, "D": bh * nq,
        "S": bh * nq * nk, "P": bh * nq * nk, "dP": bh * nq * nk, "dS": bh * nq * nk,
    }
    return sizes[base] * e


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
    left: dict[str, int] = {}  # bytes of each tensor the previous kernel left in L2
    dirty = 0  # the previous kernel's dirty lines: evicted, so written, during this one
    out = []
    for k in plan.kernels:
        t = k.traffic
        distinct_r = {n: min(v, tensor_bytes(p, n)) for n, v in t.reads.items()}
        distinct_w = {n: min(v, tensor_bytes(p, n)) for n, v in t.writes.items()}
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
