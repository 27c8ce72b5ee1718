"""Closed-form counts for the tiled (flash) schedules, per (batch, head).

Each function mirrors one loop nest of `iosim.model.executor` and sums its per-tile costs over the
BlockMap with numpy: r = query rows of a block, c = key rows of a block, d = head_dim,
e = bytes per element, F32 = bytes of fp32 statistics and accumulators. The comments give
what each term counts; tests hold these sums equal to what the executor counts tile by tile.
"""

from __future__ import annotations

from typing import NamedTuple

from iosim.core.problem import Problem
from iosim.core.traffic import Traffic, Work, copies
from iosim.kernels import Readers
from iosim.schedules.base import F32, BlockMap


class Counts(NamedTuple):
    """One loop nest's totals per (batch, head), and the parts of `work` that the timing model
    places apart from the loop trips."""

    reads: dict[str, int]  # HBM bytes by tensor (`traffic`'s)
    writes: dict[str, int]
    sram: int
    work: Work
    once: Work = Work()  # done once per CTA, after its loop
    mask_alu: int = 0  # ALU work of the causal mask, on the diagonal tiles only

    @property
    def traffic(self) -> Traffic:
        """The loop nest's Traffic per (batch, head)."""
        return Traffic(self.reads, self.writes, self.sram)

    def launch(self, n: int) -> dict:
        """KernelPlan fields for `n` copies (batch x heads) of this loop nest."""
        return dict(traffic=copies(self.reads, self.writes, self.sram, n), work=self.work.scaled(n),
                    once=self.once.scaled(n), mask_alu=self.mask_alu * n)


def kv_rows_loaded(bm: BlockMap) -> int:
    """Σ c_j over key blocks that some query block visits (the others are never loaded)."""
    return bm.kv_rows_loaded()


def fa1_fwd(p: Problem, bm: BlockMap, qb: int, readers: int = 1) -> Counts:
    """Algorithm 1: K/V outer, Q inner; O (fp32 Oacc), ℓ and m round-trip HBM every step.
    The query blocks are split in runs of `qb` (one CTA each), each running the loops over its
    own blocks: every split loads the K/V blocks its rows see; the per-pair terms are the same.
    `readers`: how many times each K_j and V_j tile is read from shared memory at every inner
    step, once by each warp that splits Q_i's rows (kernels/fa1.cu: every warp)."""
    d, e, nq = p.head_dim, p.elem_bytes, p.seqlen_q
    kv, sr, sc, rc = bm.kv_rows_loaded(qb), bm.sum_r(), bm.sum_c(), bm.sum_rc()
    t = dict(  # Counts' reads, writes and sram (per (batch, head))
        reads={"K": kv * d * e, "V": kv * d * e,  # K_j, V_j once per outer step of each split
               "Q": sr * d * e, "Oacc": sr * d * F32,  # Q_i, O_i at every inner step
               "L": sr * F32, "M": sr * F32},
        # O_i back at every step but each visited row block's last, where it is written in the
        # input dtype instead (blocks that see no key, bottom-right causal: O = 0 written once)
        writes={"Oacc": (sr - bm.rows_visited()) * d * F32,
                "O": nq * d * e,
                "L": sr * F32, "M": sr * F32},
        # smem: K_j, V_j and Q_i stored; Q_i read by S = QKᵀ, each warp its own rows; K_j
        # read by S = QKᵀ and V_j by P̃V, whole, by each of the `readers`.
        sram=2 * kv * d * e + 2 * sr * d * e + 2 * readers * sc * d * e,
    )
    mask = bm.sum_rc_diag()
    w = Work(
        tensor_flops=4 * rc * d,  # QKᵀ and P̃V: 2·r·c·d each
        exp_ops=rc + 2 * sr,  # P̃ = exp(S − m̃); e^{m−m_new}, e^{m̃−m_new} per row
        # scale, rowmax, subtract, rowsum per element (+ mask on diagonal tiles);
        # per row: m_new, two subtracts, ℓ_new (3), the two O coefficients (3), -inf guard;
        # per O element: α·O + β·PV (3).
        alu_flops=4 * rc + mask + 10 * sr + 3 * sr * d,
    )
    return Counts(**t, work=w, mask_alu=mask)


def fa1_init(p: Problem, n: int = 1) -> Traffic:
    """Algorithm 1 line 2: O = 0 (fp32), ℓ = 0, m = −∞ in HBM; `n` copies (batch x heads)."""
    return copies({}, {"Oacc": p.seqlen_q * p.head_dim * F32, "L": p.seqlen_q * F32,
                       "M": p.seqlen_q * F32}, 0, n)


def fa2_fwd(p: Problem, bm: BlockMap, readers: int = 1) -> Counts:
    """Q outer (one CTA per query block), K/V inner; one rescale at the end; LSE stored.
    `readers`: how many times each K_j and V_j tile is read from shared memory, once by each
    warp that splits the query rows (mma.sync: every warp; wgmma: every consumer warpgroup)."""
    d, e, nq = p.head_dim, p.elem_bytes, p.seqlen_q
    sr, sc, rc = bm.sum_r(), bm.sum_c(), bm.sum_rc()
    t = dict(
        reads={"Q": nq * d * e, "K": sc * d * e, "V": sc * d * e},
        writes={"O": nq * d * e, "LSE": nq * F32},
        # smem: Q stored once and read (ldmatrix) by every S = QKᵀ, each warp its own rows;
        # K_j and V_j stored per tile and read whole by each of the `readers`.
        sram=nq * d * e + sr * d * e + (2 + 2 * readers) * sc * d * e,
    )
    # at the end: log ℓ per row; O = acc/ℓ per element, 1/ℓ and LSE (2) per row.
    once = Work(exp_ops=nq, alu_flops=nq * (d + 3))
    mask = bm.sum_rc_diag()
    w = Work(
        tensor_flops=4 * rc * d,
        exp_ops=rc + sr,  # P = exp2(..) per element, α per row per tile
        # per element: rowmax, the scale-and-subtract FMA, rowsum (+ mask on diagonal tiles);
        # per row per tile: m_new, m_new·scale, α's argument (2), ℓ update (2); acc *= α.
        alu_flops=3 * rc + mask + sr * (6 + d),
    ) + once
    return Counts(**t, work=w, once=once, mask_alu=mask)


def flash_bwd(p: Problem, bm: BlockMap, fa1: bool, rd: Readers = Readers()) -> Counts:
    """K/V outer (FA2/FA3: one CTA per key block; FA1: Algorithm 4, one CTA per run of key
    blocks, the Plan's split), Q inner; S and P recomputed; dQ accumulated in fp32 in HBM at
    every step, read-modify-written or added by atomics (counted alike: a read and a write).
    Every key block is loaded by one CTA, so the totals do not depend on FA1's split.

    FA1 reads O_i, ℓ_i, m_i each step and forms D_i = rowsum(dO_i∘O_i) there; FA2/FA3 read
    LSE_i and the D_i that a preprocessing kernel wrote. dK, dV go to per-query-head buffers
    (`*_expanded`) when kv_heads < heads and a reduction kernel sums them. `rd`: the kernel's
    shared-memory reads of each GEMM operand.
    """
    d, e = p.head_dim, p.elem_bytes
    kv, sr, sc, rc = kv_rows_loaded(bm), bm.sum_r(), bm.sum_c(), bm.sum_rc()
    x = "_expanded" if p.group > 1 else ""
    stats = {"O": sr * d * e, "L": sr * F32, "M": sr * F32} if fa1 else \
            {"LSE": sr * F32, "D": sr * F32}
    t = dict(
        reads={"K": kv * d * e, "V": kv * d * e, "Q": sr * d * e, "dO": sr * d * e,
               "dQacc": sr * d * F32, **stats},
        writes={"dQacc": sr * d * F32, "dK" + x: p.seqlen_k * d * e,
                "dV" + x: p.seqlen_k * d * e},
        # smem per key block: K, V stored; per step: Q, dO stored, each read by two products
        # (Q by S and dK, dO by dP and dV; FA1: dO once more, for D_i); K read by S and dQ, V
        # by dP; P stored (`rd.p_smem`: fa3_bwd.cu feeds dV from registers), read by dV and
        # read back for dS `rd.p_back` times (kernels/fa1.cu once; fa2_bwd.cu keeps it in
        # registers), dS stored and read by dK and dQ; every operand read as many times as
        # `rd` says.
        sram=2 * kv * d * e + (2 + 2 * rd.qdo_s + 2 * rd.qdo_kv + fa1) * sr * d * e
        + (2 * rd.kv_s + rd.k_dq) * sc * d * e
        + (rd.p_smem + rd.p_back + 1 + 2 * rd.pds_kv + rd.ds_dq) * rc * e,
    )
    # per pair: S, dV, dP, dK, dQ products; P = exp(S·scale − stat) (FA1 also ·1/ℓ);
    # dS = P∘(dP − D) (2); dQ add (FA2/FA3). FA1 forms D: one FMA an element (an FMA is one
    # op), and per row 1/ℓ and scale·D: its dS is stored scaled, dP·scale − scale·D in the one
    # FMA, so dK and dQ need no scaling; its dQ add is none on the SM: the dQ product
    # accumulates into the loaded dQacc_i fragments (kernels/fa1.cu), or fp32 atomics add it
    # in L2. Its SASS (experiments/fa1_sass: FP32 instructions a trip) has no more.
    per_rc = 5 if fa1 else 4
    per_rd = 1
    mask = bm.sum_rc_diag()
    once = Work() if fa1 else Work(alu_flops=kv * d)  # FA2/FA3: dK *= scale per key block
    w = Work(
        tensor_flops=10 * rc * d,
        exp_ops=rc,
        alu_flops=per_rc * rc + mask + (2 * sr if fa1 else 0) + per_rd * sr * d,
    ) + once
    return Counts(**t, work=w, once=once, mask_alu=mask)


def fa2_bwd_pre(p: Problem) -> tuple[Traffic, Work]:
    """D = rowsum(dO∘O) (fp32) and dQacc = 0."""
    n = p.seqlen_q * p.head_dim
    return (Traffic(reads={"O": n * p.elem_bytes, "dO": n * p.elem_bytes},
                    writes={"D": p.seqlen_q * F32, "dQacc": n * F32}),
            Work(alu_flops=2 * n))


def dq_convert(p: Problem, scaled: bool) -> tuple[Traffic, Work]:
    """dQ = [scale·] dQacc, fp32 -> input dtype."""
    n = p.seqlen_q * p.head_dim
    return (Traffic(reads={"dQacc": n * F32}, writes={"dQ": n * p.elem_bytes}),
            Work(alu_flops=n if scaled else 0))
