"""Counted quantities: bytes moved per memory level (per tensor) and work per functional unit.

Both are frozen values that add, so a kernel's total is the sum of its parts and a Plan's total
the sum of its kernels. `Traffic` keeps HBM bytes per tensor (the papers' two-level view: every
tile a schedule loads from or stores to off-chip memory) apart from SRAM bytes (shared-memory
tile stores and operand reads), as tinygrad's Estimates keeps `lds` apart from `mem`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType


def _merge(a: Mapping[str, int], b: Mapping[str, int]) -> Mapping[str, int]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return MappingProxyType({k: v for k, v in out.items() if v})


@dataclass(frozen=True)
class Traffic:
    reads: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    writes: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    sram: int = 0

    def __post_init__(self) -> None:  # zero entries carry no information: drop them
        for name in ("reads", "writes"):
            m = getattr(self, name)
            object.__setattr__(self, name, MappingProxyType({k: int(v) for k, v in m.items() if v}))

    def __add__(self, o: Traffic) -> Traffic:
        return Traffic(_merge(self.reads, o.reads), _merge(self.writes, o.writes), self.sram + o.sram)

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


@dataclass(frozen=True)
class Work:
    tensor_flops: int = 0  # 2·m·n·k per matrix product, on the valid extents of each tile
    exp_ops: int = 0  # exponentials (the SFU)
    alu_flops: int = 0  # other fp32 operations: scale, max, sum, rescale, masks

    def __add__(self, o: Work) -> Work:
        return Work(
            self.tensor_flops + o.tensor_flops, self.exp_ops + o.exp_ops, self.alu_flops + o.alu_flops
        )


def reads(sram: bool = True, **tensors: int) -> Traffic:
    """HBM reads of the given tensors; each tile read lands in SRAM once when `sram`."""
    return Traffic(reads=MappingProxyType({k: v for k, v in tensors.items() if v}),
                   sram=sum(tensors.values()) if sram else 0)


def writes(sram: bool = True, **tensors: int) -> Traffic:
    """HBM writes of the given tensors; each tile is staged through SRAM once when `sram`."""
    return Traffic(writes=MappingProxyType({k: v for k, v in tensors.items() if v}),
                   sram=sum(tensors.values()) if sram else 0)
