"""FlashAttention-3 (Shah et al., 2024): FA2's loop order with Hopper tiles.

Warp specialisation: one producer warpgroup loads K/V tiles by TMA into a `stages`-deep SRAM
pipeline (its footprint counts against SRAM), two consumer warpgroups run wgmma and ping-pong
so one's softmax hides under the other's GEMMs. Q stays in SRAM as a wgmma operand (read per
tile); P feeds the second GEMM from registers. Tiles as FlashAttention-3 picks them for H100
(forward: d=64 192x128, d=128 128x176 non-causal / 128x128 causal, d=256 128x80; backward:
d=64 128x128, d=128 64x128, d=256 64x64). Needs Hopper (wgmma, TMA).
"""

from __future__ import annotations

from ..hardware import HardwareProfile, InputError
from ..plan import Plan
from ..problem import Problem
from .base import Tiles
from .fa2 import FlashStyle

# (block_m, block_n, consumer warps, stages) by head_dim bucket
FWD_TILES = {64: (192, 128, 8, 2), 128: (128, 176, 8, 2), 256: (128, 80, 8, 2)}
FWD_TILES_CAUSAL = {64: (192, 128, 8, 2), 128: (128, 128, 8, 2), 256: (128, 80, 8, 2)}
BWD_TILES = {64: (128, 128, 8, 2), 128: (64, 128, 8, 2), 256: (64, 64, 8, 2)}
PRODUCER_THREADS = 128  # one warpgroup issues TMA loads


def style(causal: bool) -> FlashStyle:
    return FlashStyle("fa3", {"sm_90a": FWD_TILES_CAUSAL if causal else FWD_TILES},
                      {"sm_90a": BWD_TILES},
                      overlap="warpspecialized",
                      threads_extra=PRODUCER_THREADS, regs=240, source=None)


def plan(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Plan:
    if not hw.has_wgmma:
        raise InputError(f"fa3 needs a Hopper GPU (wgmma, TMA); {hw.name} is {hw.arch} "
                         "(allowed: naive, fa1, fa2)")
    return style(p.causal).plan(p, hw, t)
