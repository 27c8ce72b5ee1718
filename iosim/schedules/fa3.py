"""FlashAttention-3 (Shah et al., 2024): FA2's loop order, warp-specialised on Hopper.

As kernels/fa3.cu runs it (forward): one producer warpgroup (128 threads) issues TMA copies of
the Q tile once and of K/V tiles into a `stages`-deep shared-memory ring (mbarriers); consumer
warpgroups of 64 query rows each (block_m / 64 of them, `warps` = block_m / 16) run
S = QKᵀ and O += PV with wgmma, Q and K/V read from shared memory, P from registers, the next
tile's QKᵀ issued with this tile's PV (intra-warpgroup overlap). Two consumer warpgroups
ping-pong (PINGPONG: named barriers give them turns at the tensor cores); three (d = 64) do
not. setmaxnreg moves registers from the producer to the consumers; the CTA launches with
`__launch_bounds__(threads, 1)`, so its register budget at entry is the file over the threads.
Tiles: d=64 192x128 (three consumers), d=128 128x128, d=256 128x80, two stages (the paper's
H100 choices, but 128 rather than 176 key rows at d=128 non-causal).

Backward (kernels/fa3_bwd.cu, d = 64 and 128): one CTA per key block of 128 rows, two consumer
warpgroups of 64 key rows each and the producer warpgroup, query blocks of 128 (d = 64) or 64
(d = 128) rows streamed through a two-stage TMA ring; Sᵀ, dPᵀ, dV, dK and dQ with wgmma, dQ added to fp32 dQacc with
vector atomics; fa2_bwd.cu's preprocessing and conversion kernels around it. d = 256 (64x64:
dK and dV of 64 keys x 256 do not fit one warpgroup's registers) is modelled only. Needs
Hopper (wgmma, TMA, setmaxnreg).
"""

from __future__ import annotations

from dataclasses import replace

from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.plan import Plan
from iosim.core.problem import Direction, Dtype, Problem
from iosim.kernels import SPECS, kernel_defines
from iosim.schedules.base import Tiles
from iosim.schedules.fa2 import FlashStyle

# (block_m, block_n, consumer warps, stages) by head_dim bucket
FWD_TILES = {64: (192, 128, 12, 2), 128: (128, 128, 8, 2), 256: (128, 80, 8, 2)}
# fp8 e4m3: key tiles of 128 (the kernel's transposed V comes in 128-key panels); the kernel
# runs d = 128 and 256 (128-byte panels), d = 64 is modelled only
FWD_TILES_FP8 = {64: (192, 128, 12, 2), 128: (128, 128, 8, 2), 256: (128, 128, 8, 2)}
BWD_TILES = {64: (128, 128, 8, 2), 128: (64, 128, 8, 2), 256: (64, 64, 8, 2)}
PRODUCER_THREADS = 128  # one warpgroup issues TMA loads

FA3 = FlashStyle("fa3", {"sm_90a": FWD_TILES}, {"sm_90a": BWD_TILES}, overlap="warpspecialized",
                 threads_extra=PRODUCER_THREADS, regs=240)
FA3_FP8 = replace(FA3, fwd_tiles={"sm_90a": FWD_TILES_FP8})


def plan(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Plan:
    if not hw.has_wgmma:
        raise InputError(f"fa3 needs a Hopper GPU (wgmma, TMA); {hw.name} is {hw.arch} "
                         "(allowed: naive, fa1, fa2)")
    fp8 = p.dtype is Dtype.fp8_e4m3
    pl = (FA3_FP8 if fp8 else FA3).plan(p, hw, t)

    def budget(threads: int) -> int:  # __launch_bounds__(threads, 1): the file over the threads
        return min(hw.max_registers_per_thread, hw.registers_per_sm // threads // 8 * 8)

    if p.direction is not Direction.fwd:  # the warp-specialised main kernel
        return replace(pl, kernels=tuple(
            replace(k, regs_per_thread=budget(k.threads)) if k.name == "fa3_bwd" else k
            for k in pl.kernels))
    # the forward kernel: one consumer warpgroup per 64 query rows (smaller tiles, which only
    # the model takes, keep the table's warps)
    ks = []
    for k in pl.kernels:
        warps = k.block_m // 16 if k.block_m % 64 == 0 else k.threads // 32 - 4
        threads = 32 * warps + PRODUCER_THREADS
        values = {n: v for n, v in k.defines.items() if n in SPECS[k.name].defines}
        values.update(NUM_WARPS=warps, PINGPONG=int(warps == 8), FP8_E4M3=int(fp8))
        ks.append(replace(k, threads=threads, regs_per_thread=budget(threads),
                          defines=kernel_defines(k.name, **values)))
    return replace(pl, kernels=tuple(ks))
