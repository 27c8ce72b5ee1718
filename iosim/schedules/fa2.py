"""FlashAttention-2 (Dao, 2023): Q blocks outer, one CTA per (query block, head, batch).

Forward: K/V tiles streamed through a `stages`-deep cp.async pipeline while the warps split
the query rows; softmax rescaled once at the end; causal blocks above the diagonal skipped;
log-sum-exp stored. Backward: one CTA per key block, S and P recomputed from Q, K and LSE,
dQ accumulated in fp32 in HBM by atomic adds, D = rowsum(dO∘O) by a preprocessing kernel.
Tiles follow the FlashAttention-2 kernels for sm80/sm90 (mma.sync, 16 query rows per warp).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from iosim.core.hardware import HardwareProfile
from iosim.core.memo import MISS, Memo
from iosim.core.plan import KernelPlan, Plan
from iosim.core.problem import Direction, Problem
from iosim.kernels import SPECS, Readers, kernel_defines, source
from iosim.schedules.base import (
    BlockMap,
    Tiles,
    check_head_dim,
    check_smem,
    gqa_reduce,
    last_first,
    mask_defines,
    uniform,
    whole_tiles_of,
    window_defines,
)
from iosim.schedules.flash import dq_convert, fa2_bwd_pre, fa2_fwd, flash_bwd

# (block_m, block_n, warps, stages) by head_dim bucket: forward as measured fastest for
# kernels/fa2.cu on H100 (FlashAttention-2's own sm80 choices), backward as FA2 picks them.
# kernels/fa2.cu measured on H100 (`git show 2baace1:reports/data/h100/dev/fa2_check.log`):
# d=128 takes 128x32 because FA2's usual 128x64 spills in this kernel; sm_80 (not measured):
# the zero-spill tiles that fit A100.
FWD_TILES = {"sm_90a": {64: (128, 128, 4, 2), 128: (128, 32, 4, 2), 256: (128, 64, 8, 2)},
             "sm_80": {64: (128, 64, 4, 2), 128: (128, 32, 4, 2), 256: (128, 64, 8, 1)}}
# kernels/fa2_bwd.cu: FA2's sm80 backward tiles on sm_90a (no spills with nvcc 13), still the
# fastest on H100 with the fused phase-1 loop (`git show 2baace1:reports/data/h100/dev/fa2_bwd/`:
# 64x64x4 at 3 CTAs/SM, 64x128x8 at 2, 3 stages, 128x64 at d=128 measured slower or no better);
# sm_80 (not measured): d=64 takes 64x128 and d=128 64x64 (FA2's 128x128 and 64x128 spill there), and
# d=256 does not fit A100's SRAM.
BWD_TILES = {"sm_90a": {64: (128, 128, 8, 2), 128: (64, 128, 8, 2), 256: (64, 64, 8, 2)},
             "sm_80": {64: (64, 128, 8, 2), 128: (64, 64, 8, 2), 256: (64, 64, 8, 2)}}
# with a sliding window (WINDOW >= 0: the mask's lower edge), d = 64's 128x128 spills 64 B on
# sm_90a (nvcc 13; tests/test_kernel_compile.py): 128x64, sm_80's tiles, does not
WINDOW_FWD_TILES = {"sm_90a": {64: (128, 64, 4, 2)}}
AUX_THREADS = 128  # backward's preprocessing and dQ conversion kernels


def bucket(table: dict[int, tuple], d: int) -> tuple:
    return next(v for k, v in sorted(table.items()) if d <= k)


_TILES = Memo()  # FlashStyle.tiles' answers: (id(style), arch, ..., id(tiles asked)) -> ((style, asked), tiles)


@dataclass(frozen=True)
class FlashStyle:
    """What distinguishes FA2 from FA3 in the shared Q-outer / K/V-outer loop nests."""

    name: str
    fwd_tiles: dict[int, tuple]
    bwd_tiles: dict[int, tuple]
    overlap: str  # timing policy
    threads_extra: int  # producer warps (FA3's TMA warpgroup)
    regs: int
    bwd_overlap: str | None = None  # the backward main kernel's timing policy (else `overlap`)
    window_tiles: dict[str, dict[int, tuple]] = field(default_factory=dict)  # forward, WINDOW >= 0

    def tiles(self, p: Problem, hw: HardwareProfile, t: Tiles, bwd: bool) -> Tiles:
        """The tiles of this style's table for the arch, direction, window and head_dim, the
        ones asked for (`t`) first; remembered (a style is kept: its id is not reused)."""
        window = not bwd and p.window is not None
        key = (id(self), hw.arch, bwd, window, p.head_dim, id(t))  # (t kept: its hash is a call)
        out = _TILES.get(key, self, t)
        if out is not MISS:
            return out
        table = self.bwd_tiles if bwd else self.fwd_tiles
        table = table[hw.arch] if hw.arch in table else next(iter(table.values()))
        if window:
            table = {**table, **self.window_tiles.get(hw.arch, {})}
        bm, bn, w, st = bucket(table, p.head_dim)
        return _TILES.put(key, (self, t), Tiles(block_m=t.block_m or bm, block_n=t.block_n or bn,
                                              warps=t.warps or w, stages=t.stages or st))

    def plan(self, p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Plan:
        check_head_dim(self.name, p)
        bwd = p.direction is Direction.bwd
        t = self.tiles(p, hw, t, bwd)
        fwd_entry, bwd_entry = f"{self.name}_fwd", f"{self.name}_bwd"
        if bwd:
            tile = dict(HEAD_DIM=p.head_dim, BLOCK_M=t.block_m, BLOCK_N=t.block_n,
                        NUM_WARPS=t.warps, STAGES=t.stages, **mask_defines(p))
            defines = kernel_defines(bwd_entry, **tile) if bwd_entry in SPECS else tile
            # a backward with no kernel (fa3's, modelled) takes fa2_bwd.cu's layout and reads
            # each operand once
            spec = SPECS.get(bwd_entry, SPECS["fa2_bwd"])
            rd = spec.bwd_readers(defines) if bwd_entry in SPECS else Readers()
            smem = spec.smem(defines, p.elem_bytes)
        else:
            defines, smem, readers = _fwd_spec(fwd_entry, t, p)
        check_smem(self.name, smem, hw, p)
        bm, bh = BlockMap.of(p, t.block_m, t.block_n), p.bh
        tm, tn = bm.tm, bm.tn
        threads = 32 * t.warps + self.threads_extra
        ks: list[KernelPlan] = []
        if not bwd:
            # query blocks launch last-first: under causal masking the longest CTAs start first
            trips = last_first(bm, "row_tiles")
            ks.append(KernelPlan(fwd_entry, (tm, p.heads, p.batch), threads, smem,
                                 self.regs, t.block_m, t.block_n,
                                 **fa2_fwd(p, bm, readers).launch(bh),
                                 trips=trips, masked=last_first(bm, "row_diag"),
                                 tile_trips=whole_tiles_of(p, bm, trips),  # ragged tiles in full
                                 stages=t.stages,
                                 reuse={"K": 1, "V": 1},  # the next query block's CTA
                                 overlap=self.overlap, source=source(fwd_entry),
                                 defines=defines))
        else:
            pre, convert = f"{self.name}_bwd_pre", f"{self.name}_bwd_convert"
            aux = dict(HEAD_DIM=p.head_dim, BLOCK_M=t.block_m, AUX_THREADS=AUX_THREADS)

            def aux_defines(entry: str) -> dict[str, int]:
                return kernel_defines(entry, **aux) if entry in SPECS else aux

            tr, w = fa2_bwd_pre(p)
            ks.append(KernelPlan(pre, (tm, p.heads, p.batch), AUX_THREADS, 0,
                                 32, t.block_m, p.head_dim, tr.scaled(bh), w.scaled(bh),
                                 trips=uniform(1), source=source(pre), defines=aux_defines(pre)))
            ks.append(KernelPlan(bwd_entry, (tn, p.heads, p.batch), threads, smem,
                                 self.regs, t.block_m, t.block_n,
                                 **flash_bwd(p, bm, fa1=False, rd=rd).launch(bh),
                                 trips=bm.col_tiles(), masked=bm.col_diag(), stages=t.stages,
                                 # Q and its rows: the next key block's CTA; K/V (GQA):
                                 # the same key block of the next query head
                                 reuse={"K": tn, "V": tn,
                                        **{n: 1 for n in ("Q", "dO", "LSE", "D", "dQacc")}},
                                 overlap=self.bwd_overlap or self.overlap,
                                 source=source(bwd_entry), defines=defines))
            tr, w = dq_convert(p, scaled=True)
            ks.append(KernelPlan(convert, (tm, p.heads, p.batch), AUX_THREADS,
                                 0, 32, t.block_m, p.head_dim, tr.scaled(bh), w.scaled(bh),
                                 trips=uniform(1), source=source(convert),
                                 defines=aux_defines(convert)))
            if p.group > 1:
                ks.append(gqa_reduce(p, ("dK", "dV")))
        notes = f"{t.block_m}x{t.block_n} tiles, {t.warps} warps, {t.stages}-stage K/V pipeline"
        return Plan(self.name, p, hw.name, tuple(ks), notes)


_FWD_SPEC = Memo()  # (entry, id(its spec), id(tiles), head_dim, mask, window, bytes) -> (spec, tiles, facts)


def _fwd_spec(entry: str, t: Tiles, p: Problem) -> tuple[dict, int, int]:
    """A forward kernel's (defines, shared memory, K/V readers) from its KernelSpec: functions
    of the spec, its tiles, head_dim, mask, window and element bytes alone, remembered (the
    spec and tiles by identity, both kept: FlashStyle.tiles gives one Tiles a set of values;
    a test may put another spec in its place)."""
    spec = SPECS[entry]
    key = (entry, id(spec), id(t), p.head_dim, p.causal, p.causal_align, p.window, p.elem_bytes)
    out = _FWD_SPEC.get(key, spec, t)
    if out is not MISS:
        return out
    defines = kernel_defines(entry, HEAD_DIM_PAD=spec.head_dim_pad(p.head_dim), HEAD_DIM=p.head_dim,
                             BLOCK_M=t.block_m, BLOCK_N=t.block_n, NUM_WARPS=t.warps,
                             STAGES=t.stages, **mask_defines(p), **window_defines(p))
    return _FWD_SPEC.put(key, (spec, t),
                         (defines, spec.smem(defines, p.elem_bytes), spec.kv_readers(defines)))


FA2 = FlashStyle("fa2", FWD_TILES, BWD_TILES, overlap="async", threads_extra=0, regs=255,
                 bwd_overlap="lockstep", window_tiles=WINDOW_FWD_TILES)


def plan(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Plan:
    return FA2.plan(p, hw, t)
