"""Counted quantities: bytes moved per memory level (per tensor) and work per functional unit.

Both are values that add (never changed once built), so a kernel's total is the sum of its
parts and a Plan's total the sum of its kernels. `Traffic` keeps HBM bytes per tensor (the
papers' two-level view: every tile a schedule loads from or stores to off-chip memory) apart
from SRAM bytes (shared-memory tile stores and operand reads), as tinygrad's Estimates keeps
`lds` apart from `mem`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType


def _merge(a: Mapping[str, int], b: Mapping[str, int]) -> Mapping[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return MappingProxyType({k: v for k, v in out.items() if v})


_EMPTY: Mapping[str, int] = MappingProxyType({})  # read-only: one shared by every Traffic without


def _clean(m: Mapping[str, int]) -> Mapping[str, int]:
    """Python ints, zero entries dropped (they carry no information), read-only."""
    return MappingProxyType({k: int(v) for k, v in m.items() if v})


# not frozen (as KernelPlan, iosim.core.plan): a frozen dataclass sets each field through a
# call, and every Plan builds a few of these; neither is changed once built (sums and
# scalings build new ones). Traffic holds mappings and is not hashable; Work keeps the hash
# it had frozen.
@dataclass
class Traffic:
    reads: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    writes: Mapping[str, int] = field(default_factory=lambda: _EMPTY)
    sram: int = 0

    def __post_init__(self) -> None:
        # A read-only mapping is already clean: Traffic's own results (sums, scalings) pass
        # it on; anything else is cleaned here.
        if type(self.reads) is not MappingProxyType:
            self.reads = _clean(self.reads)
        if type(self.writes) is not MappingProxyType:
            self.writes = _clean(self.writes)

    def scaled(self, k: int) -> Traffic:
        """k copies (k >= 1), e.g. one per (batch, head)."""
        return copies(self.reads, self.writes, self.sram, k)

    def __add__(self, o: Traffic) -> Traffic:
        return _made(_merge(self.reads, o.reads), _merge(self.writes, o.writes), self.sram + o.sram)

    @staticmethod
    def total(parts: Sequence[Traffic]) -> Traffic:
        """Σ parts in one pass (a Plan's kernels), the same as adding them one by one."""
        reads: dict[str, int] = {}
        writes: dict[str, int] = {}
        for t in parts:
            for n, v in t.reads.items():
                reads[n] = reads.get(n, 0) + v
            for n, v in t.writes.items():
                writes[n] = writes.get(n, 0) + v
        return _made(MappingProxyType({n: v for n, v in reads.items() if v}),
                     MappingProxyType({n: v for n, v in writes.items() if v}),
                     sum(t.sram for t in parts))

    @property
    def hbm_read(self) -> int:
        return sum(self.reads.values())

    @property
    def hbm_write(self) -> int:
        return sum(self.writes.values())

    def __eq__(self, o: object) -> bool:
        return (
            isinstance(o, Traffic)
            and dict(self.reads) == dict(o.reads)
            and dict(self.writes) == dict(o.writes)
            and self.sram == o.sram
        )

    __hash__ = None  # type: ignore[assignment]


def _made(reads: MappingProxyType, writes: MappingProxyType, sram: int) -> Traffic:
    """Traffic(reads, writes, sram) of mappings already clean (read-only, no zero entries), as
    its scalings make them, without the calls of its __init__ and __post_init__ (a Plan scales
    a few a kernel)."""
    out = object.__new__(Traffic)
    out.reads, out.writes, out.sram = reads, writes, sram
    return out


@dataclass(unsafe_hash=True)
class Work:
    tensor_flops: int = 0  # 2·m·n·k per matrix product, on the valid extents of each tile
    exp_ops: int = 0  # exponentials (the SFU)
    alu_flops: int = 0  # other fp32 operations: scale, max, sum, rescale, masks

    def __add__(self, o: Work) -> Work:
        return Work(
            self.tensor_flops + o.tensor_flops, self.exp_ops + o.exp_ops, self.alu_flops + o.alu_flops
        )

    def scaled(self, k: int) -> Work:
        return Work(self.tensor_flops * k, self.exp_ops * k, self.alu_flops * k)

    @staticmethod
    def total(parts: Sequence[Work]) -> Work:
        """Σ parts in one pass."""
        return Work(sum(w.tensor_flops for w in parts), sum(w.exp_ops for w in parts),
                    sum(w.alu_flops for w in parts))


def copies(reads: Mapping[str, int], writes: Mapping[str, int], sram: int, k: int) -> Traffic:
    """Traffic(reads, writes, sram).scaled(k) in one pass (k copies, e.g. one per (batch,
    head)): the counts as Python ints times k, zero entries dropped, without the per-copy
    Traffic a Plan's kernel would build only to scale it. (Loops, not comprehensions: a
    comprehension is a function built and called, more than its few entries cost; every
    kernel of every Plan comes through here.)"""
    r: dict[str, int] = {}
    for n, v in reads.items():
        if v:
            r[n] = int(v) * k
    w: dict[str, int] = {}
    for n, v in writes.items():
        if v:
            w[n] = int(v) * k
    out = object.__new__(Traffic)  # (as _made)
    out.reads, out.writes, out.sram = MappingProxyType(r), MappingProxyType(w), sram * k
    return out


def reads(sram: bool = True, **tensors: int) -> Traffic:
    """HBM reads of the given tensors; each tile read lands in SRAM once when `sram`."""
    return _made(_clean(tensors), _EMPTY, sum(tensors.values()) if sram else 0)


def writes(sram: bool = True, **tensors: int) -> Traffic:
    """HBM writes of the given tensors; each tile is staged through SRAM once when `sram`."""
    return _made(_EMPTY, _clean(tensors), sum(tensors.values()) if sram else 0)
