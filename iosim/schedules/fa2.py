"""FlashAttention-2 (Dao, 2023): Q blocks outer, one CTA per (query block, head, batch).

Forward: K/V tiles streamed through a `stages`-deep cp.async pipeline while the warps split
the query rows; softmax rescaled once at the end; causal blocks above the diagonal skipped;
log-sum-exp stored. Backward: one CTA per key block, S and P recomputed from Q, K and LSE,
dQ accumulated in fp32 in HBM by atomic adds, D = rowsum(dO∘O) by a preprocessing kernel.
Tiles follow the FlashAttention-2 kernels for sm80/sm90 (mma.sync, 16 query rows per warp).
"""

from __future__ import annotations

from dataclasses import dataclass

from iosim.core.hardware import HardwareProfile
from iosim.core.plan import KernelPlan, Plan
from iosim.core.problem import Direction, Problem
from iosim.schedules.base import (
    F32,
    BlockMap,
    Tiles,
    check_head_dim,
    check_smem,
    gqa_reduce,
    mask_defines,
    pow2_at_least,
    uniform,
)
from iosim.schedules.flash import Readers, dq_convert, fa2_bwd_pre, fa2_fwd, flash_bwd

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
AUX_THREADS = 128  # backward's preprocessing and dQ conversion kernels


def bucket(table: dict[int, tuple], d: int) -> tuple:
    return next(v for k, v in sorted(table.items()) if d <= k)


def bwd_readers(block_m: int, block_n: int, d: int, warps: int) -> Readers:
    """kernels/fa2_bwd.cu's warp grids (its constexprs W1K ... NT3P, 32-row warp tiles): the
    warps along one side of a product each read the whole of the other side's operand; dQ
    runs in passes of at most 32 columns of d, each re-reading its dS fragments."""
    w1k = max(1, min(warps, block_n // 32))  # (tiles below 32 rows: not the kernel's, model only)
    w3q = max(1, min(warps, block_m // 32))
    w3d = max(1, warps // w3q)
    nt3 = max(1, d // w3d // 8)
    return Readers(qdo_s=w1k, kv_s=max(1, warps // w1k), qdo_kv=w1k,
                   pds_kv=max(1, warps // w1k),
                   k_dq=w3q, ds_dq=w3d * (nt3 // min(nt3, 4)))


@dataclass(frozen=True)
class FlashStyle:
    """What distinguishes FA2 from FA3 in the shared Q-outer / K/V-outer loop nests."""

    name: str
    fwd_tiles: dict[int, tuple]
    bwd_tiles: dict[int, tuple]
    overlap: str  # timing policy
    threads_extra: int  # producer warps (FA3's TMA warpgroup)
    regs: int
    source: str | None
    smem_pad: int = 0  # forward: bytes the kernel adds to align its tiles (fa3: 1024)
    warps_per_reader: int = 1  # warps that share one read of K_j/V_j from smem (wgmma: 4)
    bwd_source: str | None = None  # kernels/<bwd_source>: the backward's three kernels
    bwd_overlap: str | None = None  # the backward main kernel's timing policy (else `overlap`)

    def tiles(self, p: Problem, hw: HardwareProfile, t: Tiles, bwd: bool) -> Tiles:
        table = self.bwd_tiles if bwd else self.fwd_tiles
        table = table[hw.arch] if hw.arch in table else next(iter(table.values()))
        bm, bn, w, st = bucket(table, p.head_dim)
        return Tiles(block_m=t.block_m or bm, block_n=t.block_n or bn, warps=t.warps or w,
                     stages=t.stages or st)

    def readers(self, warps: int) -> int:
        """Reads of each K_j/V_j tile from shared memory per trip (kernels/fa2.cu: every warp
        ldmatrix-reads all of them; fa3.cu: every consumer warpgroup's wgmma)."""
        return max(1, warps // self.warps_per_reader)

    def fwd_smem(self, p: Problem, t: Tiles) -> int:
        """Q tile + `stages` K/V tile pairs, input dtype, rows padded as the kernel lays them out."""
        tiles = (t.block_m + 2 * t.stages * t.block_n) * self.head_dim_pad(p) * p.elem_bytes
        return tiles + self.smem_pad

    def head_dim_pad(self, p: Problem) -> int:
        """Shared-memory row length of the real kernel's tiles (kernels/fa2.cu: the power of two
        >= d and >= 64, so that its swizzled rows hold 8, 16 or 32 16-byte chunks and one pass
        of the CTA's threads covers whole rows; the padding is never loaded). Others: d."""
        return pow2_at_least(p.head_dim, 64) if self.source == "fa2.cu" else p.head_dim

    def bwd_readers(self, p: Problem, t: Tiles) -> Readers:
        """Shared-memory reads of the backward's GEMM operands (kernels/fa2_bwd.cu's warp
        grids, Pᵀ kept in registers for dS; a schedule without a backward kernel: each
        operand once, P read back)."""
        if self.bwd_source != "fa2_bwd.cu":
            return Readers()
        return bwd_readers(t.block_m, t.block_n, p.head_dim, t.warps)._replace(p_back=0)

    def bwd_smem(self, p: Problem, t: Tiles) -> int:
        """K, V (per key block) + a `stages`-deep ring of Q, dO (input dtype) and LSE, D
        (fp32) per query block + the Pᵀ and dSᵀ tiles (kernels/fa2_bwd.cu's layout)."""
        e, d, st = p.elem_bytes, p.head_dim, t.stages
        tiles = 2 * t.block_n * d + 2 * st * t.block_m * d + 2 * t.block_m * t.block_n
        return tiles * e + 2 * st * t.block_m * F32

    def plan(self, p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Plan:
        check_head_dim(self.name, p)
        bwd = p.direction is Direction.bwd
        t = self.tiles(p, hw, t, bwd)
        smem = self.bwd_smem(p, t) if bwd else self.fwd_smem(p, t)
        check_smem(self.name, smem, hw, p)
        bm, bh = BlockMap.of(p, t.block_m, t.block_n), p.bh
        tm, tn = bm.tm, bm.tn
        threads = 32 * t.warps + self.threads_extra
        ks: list[KernelPlan] = []
        if not bwd:
            defines = dict(HEAD_DIM=p.head_dim, HEAD_DIM_PAD=self.head_dim_pad(p),
                           BLOCK_M=t.block_m, BLOCK_N=t.block_n, NUM_WARPS=t.warps,
                           STAGES=t.stages, **mask_defines(p),
                           **{f"{self.name.upper()}_FWD": 1})
            ks.append(KernelPlan(f"{self.name}_fwd", (tm, p.heads, p.batch), threads, smem,
                                 self.regs, t.block_m, t.block_n,
                                 **fa2_fwd(p, bm, self.readers(t.warps)).launch(bh),
                                 # query blocks launch last-first: under causal
                                 # masking the longest CTAs start first
                                 trips=bm.row_tiles()[::-1], masked=bm.row_diag()[::-1],
                                 stages=t.stages,
                                 reuse={"K": 1, "V": 1},  # the next query block's CTA
                                 overlap=self.overlap, source=self.source, defines=defines))
        else:
            src = self.bwd_source
            aux = dict(HEAD_DIM=p.head_dim, BLOCK_M=t.block_m, AUX_THREADS=AUX_THREADS)
            tr, w = fa2_bwd_pre(p)
            ks.append(KernelPlan(f"{self.name}_bwd_pre", (tm, p.heads, p.batch), AUX_THREADS, 0,
                                 32, t.block_m, p.head_dim, tr.scaled(bh), w.scaled(bh),
                                 trips=uniform(1), source=src,
                                 defines={**aux, f"{self.name.upper()}_BWD_PRE": 1}))
            rd = self.bwd_readers(p, t)
            # the kernel checks at compile time that these are its warp grids' reads
            model = dict(MODEL_W1K=rd.qdo_s, MODEL_W3Q=rd.k_dq, MODEL_DS_DQ=rd.ds_dq) \
                if src == "fa2_bwd.cu" else {}
            ks.append(KernelPlan(f"{self.name}_bwd", (tn, p.heads, p.batch), threads, smem,
                                 self.regs, t.block_m, t.block_n,
                                 **flash_bwd(p, bm, fa1=False, rd=rd).launch(bh),
                                 trips=bm.col_tiles(), masked=bm.col_diag(), stages=t.stages,
                                 # Q and its rows: the next key block's CTA; K/V (GQA):
                                 # the same key block of the next query head
                                 reuse={"K": tn, "V": tn,
                                        **{n: 1 for n in ("Q", "dO", "LSE", "D", "dQacc")}},
                                 overlap=self.bwd_overlap or self.overlap, source=src,
                                 defines=dict(HEAD_DIM=p.head_dim, BLOCK_M=t.block_m,
                                              BLOCK_N=t.block_n, NUM_WARPS=t.warps,
                                              STAGES=t.stages, **mask_defines(p), **model,
                                              **{f"{self.name.upper()}_BWD": 1})))
            tr, w = dq_convert(p, scaled=True)
            ks.append(KernelPlan(f"{self.name}_bwd_convert", (tm, p.heads, p.batch), AUX_THREADS,
                                 0, 32, t.block_m, p.head_dim, tr.scaled(bh), w.scaled(bh),
                                 trips=uniform(1), source=src,
                                 defines={**aux, f"{self.name.upper()}_BWD_CONVERT": 1}))
            if p.group > 1:
                ks.append(gqa_reduce(p, ("dK", "dV")))
        notes = f"{t.block_m}x{t.block_n} tiles, {t.warps} warps, {t.stages}-stage K/V pipeline"
        return Plan(self.name, p, hw.name, tuple(ks), notes)


FA2 = FlashStyle("fa2", FWD_TILES, BWD_TILES, overlap="async",
                 threads_extra=0, regs=255, source="fa2.cu", bwd_source="fa2_bwd.cu",
                 bwd_overlap="lockstep")


def plan(p: Problem, hw: HardwareProfile, t: Tiles = Tiles()) -> Plan:
    return FA2.plan(p, hw, t)
