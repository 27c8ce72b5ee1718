"""A Plan: what a schedule launches for one (problem, hardware), and what each launch does.

The Plan is the one source of truth for tiling. Its consumers: the closed-form counts (stored
on each KernelPlan), the numpy executor (which re-runs the loops and must count the same), the
timing model, and the CuPy launcher, which compiles `kernels/<source>` with `defines` and
launches it with `grid`, `threads` and `smem_bytes`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from iosim.core.hardware import HardwareProfile
from iosim.core.problem import Problem
from iosim.core.traffic import Traffic, Work


class cached:
    """functools.cached_property without its lock (Python 3.11's takes one on every first
    read: a batch reads a few properties of each of hundreds of fresh Plans, the timing model
    of its Batch); the properties are pure, so two threads computing one at once store the
    same value."""

    def __init__(self, f) -> None:
        self.f, self.name, self.__doc__ = f, f.__name__, f.__doc__

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        v = obj.__dict__[self.name] = self.f(obj)
        return v


def read_only(a: np.ndarray) -> np.ndarray:
    """The array, made read-only (shared and remembered by identity: nothing may change it)."""
    a.setflags(write=False)
    return a


# KernelPlan's default trips (every CTA one trip) and masked trips (none): one read-only array
# each, shared, as the schedules' own (base.uniform): the timing model remembers a kernel's
# period by its arrays (timing._period), so a fresh array a kernel would be a new period each
ONE_TRIP = read_only(np.ones(1, np.int64))
NO_TRIP = read_only(np.zeros(1, np.int64))


# not frozen: every Plan builds a few, and a frozen dataclass sets each of its fields through a
# call (5x the time of its __init__); a KernelPlan is never changed once built (a schedule that
# adjusts one builds another, dataclasses.replace), and, holding dicts, it was never hashable
@dataclass
class KernelPlan:
    name: str  # e.g. "fa2_fwd", "naive_softmax"
    grid: tuple[int, int, int]  # CTAs along x, y, z (launch order: x fastest)
    threads: int  # per CTA
    smem_bytes: int  # per CTA: tiles, pipeline stages and staging buffers
    regs_per_thread: int  # modelled register budget (the kernel's __launch_bounds__ target)
    block_m: int  # query rows (or output rows) per tile
    block_n: int  # key columns (or output columns) per tile
    traffic: Traffic  # closed-form counts, whole launch
    work: Work
    # Inner-loop trips of the CTAs along grid x, in launch order (len == grid[0], or 1 when
    # they are all equal), in full tiles (a ragged tile counts as its share of one). Every
    # (y, z) of the grid, i.e. every (batch, head), runs the same loops, so this one period
    # describes the launch: the timing model sees causal imbalance and tail waves without an
    # array as long as the grid.
    trips: np.ndarray = field(repr=False, compare=False, default_factory=lambda: ONE_TRIP)
    # The same trips in whole tiles, for a kernel that computes a ragged tile in full (fa3.cu:
    # TMA zero-fills the rows and keys past the end, and every consumer warpgroup runs its whole
    # tile on them): the timing model's CTA durations take these, each trip a whole tile's
    # work; None: `trips`
    tile_trips: np.ndarray | None = field(repr=False, compare=False, default=None)
    # For each tensor a kernel reads (or writes) more than once: how far apart in launch order
    # two CTAs that touch the same tile are (1: neighbours, e.g. the query blocks of one head
    # sharing K/V; 0: the same CTA comes back to it, e.g. FA1's O at every outer step). Tells
    # the L2 model (iosim.memory) how long a tile must survive in L2 to be hit again.
    reuse: dict[str, int] = field(default_factory=dict)
    # Partly masked (diagonal) trips of the CTAs along x, like `trips`, and the ALU work of the
    # mask (part of work.alu_flops) that they alone carry: the longest causal CTA does not pay
    # for the other CTAs' diagonals.
    masked: np.ndarray = field(repr=False, compare=False, default_factory=lambda: NO_TRIP)
    mask_alu: int = 0
    once: Work = Work()  # part of `work` each CTA does once, after its loop (e.g. O = acc/ℓ)
    stages: int = 1  # SRAM pipeline depth for the streamed operand
    overlap: str = "none"  # timing policy: "none" | "drift" | "prefetch" | "async" | "lockstep" | "warpspecialized" | "spread"
    source: str | None = None  # kernels/<source> when a real CUDA kernel exists
    defines: dict[str, int] = field(default_factory=dict)  # compile-time parameters
    # warp instructions per 32 counted element operations where the kernel's own mix is known
    # and differs from the profile's `pipeline.inst_per_op` (fitted to this project's kernels):
    # cuBLAS's SGEMM issues one FFMA per 32 FMAs, its loads amortised over register tiles
    inst_per_op: float | None = None
    # tensors the loop trips stream even when each byte is read once (a split-KV decode's K and
    # V): the timing model puts them in the trips, not in the CTA's once-only prologue
    streamed: tuple[str, ...] = ()
    # dependent memory round trips after the last CTA's loop that nothing overlaps (a split-KV
    # decode's fused combine: the count's atomic, then the partial LSEs, then the partial Os,
    # each waiting for the one before), each a synchronous load's latency in the timing model
    tail_round_trips: int = 0
    # dependent memory round trips each loop trip waits for, for a kernel no KernelSpec describes
    # (PyTorch's non-vectorised elementwise kernel: a thread's elements one after another, each
    # loaded after the last one's store), each a synchronous load's latency in the timing model
    round_trips: int = 0
    # warp instructions one CTA's loop trip issues beyond those its work implies, from its
    # KernelSpec's loop_issue (naive's GEMMs: the address arithmetic of the copies into the
    # ring and of the ldmatrix), in the issue and dispatch terms of the timing model
    loop_issue: float = 0.0
    # units of work in launch order where each CTA runs several (fa3.cu PERSISTENT: the tiles
    # of the one-tile grid, handed to grid[0] CTAs round-robin); 0: one a CTA. The L2 model
    # (iosim.model.memory) counts `reuse` and the bytes a unit brings in these
    tiles: int = 0
    # ... and those it issues between dependent MMAs, in their shadow (KernelSpec's loop_shadow:
    # fa1_bwd's ldmatrix address arithmetic): in the issue and dispatch terms only
    loop_shadow: float = 0.0

    @property
    def ctas(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def units(self) -> int:
        """Units of work in launch order: `tiles`, else the CTAs."""
        return self.tiles or self.ctas


_KERNEL_FIELDS = frozenset(KernelPlan.__dataclass_fields__)


def revised(k: KernelPlan, **changes) -> KernelPlan:
    """dataclasses.replace(k, **changes) at a quarter of its cost: a KernelPlan is a record
    (every field set by __init__, as given, and nothing after it), so a copy of its fields
    with these changed is the KernelPlan replace builds."""
    if not _KERNEL_FIELDS.issuperset(changes):
        raise TypeError(f"KernelPlan has no field {sorted(set(changes) - _KERNEL_FIELDS)}")
    out = object.__new__(KernelPlan)
    out.__dict__.update(k.__dict__, **changes)
    return out


def ctas_per_sm(k: KernelPlan, hw: HardwareProfile) -> int:
    """Resident CTAs per SM, limited by shared memory, registers, threads and the CTA cap."""
    limits = [hw.max_ctas_per_sm, hw.max_threads_per_sm // k.threads,
              hw.registers_per_sm // (min(k.regs_per_thread, hw.max_registers_per_thread)
                                      * k.threads)]
    if k.smem_bytes:
        limits.append(hw.smem_per_sm_bytes // k.smem_bytes)
    return max(1, min(limits))


def _tensor_flops(k: KernelPlan) -> int:
    return k.work.tensor_flops


@dataclass(frozen=True)
class Plan:
    schedule: str
    problem: Problem
    hw: str
    kernels: tuple[KernelPlan, ...]
    notes: str = ""  # what this schedule models, e.g. the GEMM tiling and intermediate dtype

    @cached
    def traffic(self) -> Traffic:
        return Traffic.total([k.traffic for k in self.kernels])

    @cached
    def work(self) -> Work:
        return Work.total([k.work for k in self.kernels])

    @property
    def block_m(self) -> int:
        return self.main.block_m

    @property
    def block_n(self) -> int:
        return self.main.block_n

    @cached
    def main(self) -> KernelPlan:
        """The kernel whose tiles name the schedule (the attention kernel; naive: the QK^T GEMM)."""
        ks = self.kernels
        return ks[0] if len(ks) == 1 else max(ks, key=_tensor_flops)  # the first of equals
