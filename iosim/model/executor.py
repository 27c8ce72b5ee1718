"""Runs a Plan's loops tile by tile on numpy arrays, counting every tile it moves.

Values are float64 whatever the problem's dtype (so the result can be held to an exact
reference); bytes are counted at the sizes the real kernels use: the problem's dtype for
Q, K, V, O and the N×N intermediates, fp32 for statistics and HBM accumulators. The counts
per kernel must equal the Plan's closed-form counts exactly (tests/test_executor.py).
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager

import numpy as np

from iosim.core.plan import Plan
from iosim.core.problem import Direction, Problem
from iosim.core.traffic import Traffic, Work
from iosim.kernels import (
    F32_TENSORS,
    INDEX_TENSORS,
    SPECS,
    Readers,
    fa3_bwd_consumers,
    hadamard_matrix,
)
from iosim.model import reference
from iosim.schedules import naive as naive_plan
from iosim.schedules.base import F32, BlockMap, blocks
from iosim.schedules.standard import SECTOR


class Meter:
    """Counts HBM, SRAM and work per kernel as the executor touches tiles."""

    def __init__(self, p: Problem, elem: dict[str, int] | None = None):
        self.e = p.elem_bytes
        self.elem = elem or {}  # bytes an element of named tensors, where not the dtype's
        self.kernel = ""
        self.rd: dict = defaultdict(lambda: defaultdict(int))
        self.wr: dict = defaultdict(lambda: defaultdict(int))
        self.sm: dict = defaultdict(int)
        self.work: dict = defaultdict(lambda: [0, 0, 0])
        self.trips: dict = defaultdict(list)  # inner-loop trips per CTA, where a loop says so

    @contextmanager
    def launch(self, name: str):
        self.kernel = name
        yield

    def nbytes(self, tensor: str, a: np.ndarray) -> int:
        if tensor in INDEX_TENSORS:  # int32 (block tables)
            return a.size * 4
        return a.size * (F32 if tensor in F32_TENSORS else self.elem.get(tensor, self.e))

    def load(self, tensor: str, a: np.ndarray, smem: bool = True, moved: int = 0) -> np.ndarray:
        """HBM -> SRAM (smem) or -> registers; `moved`: bytes a read of one element moves
        (a sector, for a read at a large stride), where more than the element's."""
        n = max(self.nbytes(tensor, a), a.size * moved)
        self.rd[self.kernel][tensor] += n
        if smem:
            self.sm[self.kernel] += n
        return np.array(a, dtype=np.float64)

    def store(self, tensor: str, dst: np.ndarray, idx, a: np.ndarray) -> None:
        """Registers -> HBM."""
        self.wr[self.kernel][tensor] += self.nbytes(tensor, a)
        dst[idx] = a

    def smem(self, *tiles: np.ndarray) -> None:
        """Shared-memory traffic in the input dtype (operand reads, staging)."""
        self.sm[self.kernel] += sum(t.size for t in tiles) * self.e

    def mma(self, a: np.ndarray, b: np.ndarray, a_smem: bool, b_smem: bool,
            b_readers: int = 1, a_readers: int = 1) -> np.ndarray:
        """a @ b; operands from shared memory are counted once per reader (the warps that
        split a's rows each read all of b, those that split b's columns all of a)."""
        self.work[self.kernel][0] += 2 * a.shape[0] * a.shape[1] * b.shape[1]
        self.smem(*([a] * a_readers if a_smem else []), *([b] * b_readers if b_smem else []))
        return a @ b

    def exp(self, x: np.ndarray) -> np.ndarray:
        self.work[self.kernel][1] += np.size(x)
        return np.exp(x)

    def exps(self, n: int) -> None:
        """n exponentials whose values the executor does not need (a reduction's rescales)."""
        self.work[self.kernel][1] += int(n)

    def log(self, x: np.ndarray) -> np.ndarray:
        self.work[self.kernel][1] += np.size(x)
        return np.log(x)

    def cta(self) -> None:
        """A CTA of the current kernel starts (its trips counted by `trip`)."""
        self.trips[self.kernel].append(0)

    def trip(self) -> None:
        self.trips[self.kernel][-1] += 1

    def alu(self, n: int) -> None:
        self.work[self.kernel][2] += int(n)

    def counts(self, kernel: str) -> tuple[Traffic, Work]:
        t = Traffic(reads={k: v for k, v in self.rd[kernel].items() if v},
                    writes={k: v for k, v in self.wr[kernel].items() if v}, sram=self.sm[kernel])
        return t, Work(*self.work[kernel])


def _mask(p: Problem, r0: int, r: int, c0: int, c: int) -> np.ndarray:
    """True where query row r0+a may not see key c0+b (causal, Problem.causal_offset; the
    sliding window: keys more than `window` back from the diagonal)."""
    col, pos = (c0 + np.arange(c))[None, :], (r0 + p.causal_offset + np.arange(r))[:, None]
    if p.window is None:
        return col > pos
    return (col > pos) | (col < pos - p.window)


def _spans(n: int, b: int) -> list[tuple[int, int]]:
    sizes = blocks(n, b)
    return [(i * b, int(s)) for i, s in enumerate(sizes)]


# ---------------------------------------------------------------- naive ----

def _gemm(m: Meter, name: str, A, B, a: str, b: str, C: np.ndarray, c: str, kp, alpha=None):
    """C = [alpha·] A·B tiled as the KernelPlan says; A, B are (M, K), (K, N) views."""
    with m.launch(name):
        for i0, mi in _spans(A.shape[0], kp.block_m):
            for j0, nj in _spans(B.shape[1], kp.block_n):
                ta = m.load(a, A[i0:i0 + mi])
                tb = m.load(b, B[:, j0:j0 + nj])
                out = m.mma(ta, tb, True, True)
                if alpha is not None:
                    out = out * alpha
                    m.alu(out.size)
                m.store(c, C, (slice(i0, i0 + mi), slice(j0, j0 + nj)), out)


def _rows(m: Meter, name: str, kp, ins: list[tuple[str, np.ndarray]], merge: tuple[int, int],
          p_vis=None):
    """Yield rows of the N×N inputs, counting one read (staged in smem) or two, and the row's
    block reduction (`merge`: ALU ops and exp2s of one merge, its KernelSpec's row_merge). With
    `p_vis` (keys visible to row i: causal) only the part up to the diagonal is read, in whole
    16-byte vectors when the rows are 16-byte aligned (the rest of the row is masked anyway)."""
    causal_vec = p_vis is not None
    in_smem = kp.defines["ROW_IN_SMEM"]
    nk = ins[0][1].shape[1]
    merges = naive_plan.row_merges(kp.defines["SOFTMAX_THREADS"])
    with m.launch(name):
        for i in range(ins[0][1].shape[0]):
            n = nk
            if causal_vec:
                n = min(nk, -(-nv // 8) * 8 if nk % 8 == 0 else nv) if (nv := p_vis(i)) else 0
            rows = [m.load(t, x[i, :n], smem=False) for t, x in ins]
            if in_smem:
                m.smem(*rows, *rows)  # stored to shared memory, read back once
            else:
                for t, x in ins:  # second pass re-reads the row from HBM
                    m.load(t, x[i, :n], smem=False)
            m.alu(merge[0] * merges)
            m.exps(merge[1] * merges)
            yield i, rows


def naive(p: Problem, plan: Plan, q, k, v, do=None):
    m, s, g = Meter(p), p.scale, p.group
    ks = {kp.name: kp for kp in plan.kernels}
    nq, nk, d = p.seqlen_q, p.seqlen_k, p.head_dim
    out: dict[str, np.ndarray] = {}
    for b in range(p.batch):
        for h in range(p.heads):
            qh, kh, vh = q[b, h], k[b, h // g], v[b, h // g]
            if p.direction is Direction.bwd:  # P is the stored output of the forward
                one = p.model_copy(update=dict(batch=1, heads=1, kv_heads=1))
                P = reference.probs(one, q[b:b + 1, h:h + 1], k[b:b + 1, h // g:h // g + 1])[0, 0]
                _naive_bwd(m, p, ks, out, b, h, qh, kh, vh, do[b, h], P, plan.schedule)
                continue
            S, P = np.empty((nq, nk)), np.empty((nq, nk))
            _gemm(m, "naive_qk", qh, kh.T, "Q", "K", S, "S", ks["naive_qk"], s)
            for i, (row,) in _rows(m, "naive_softmax", ks["naive_softmax"], [("S", S)],
                                   SPECS["naive_softmax"].row_merge,
                                   p_vis=p.visible_keys if p.causal else None):
                n = p.visible_keys(i)
                if p.causal:
                    m.alu(nk)  # the mask
                x = row[:n]
                mx = x.max(initial=-np.inf)
                e = m.exp(x - mx)
                ssum = e.sum()
                m.alu(4 * n + 1)  # max, subtract, sum, scale by 1/sum; the reciprocal
                prow = np.zeros(nk)  # a row that sees no key (bottom-right causal) is all 0
                prow[:n] = e / ssum if n else 0.0
                m.store("P", P, i, prow)
            O = out.setdefault("O", np.empty((p.batch, p.heads, nq, d)))[b, h]
            _gemm(m, "naive_pv", P, vh, "P", "V", O, "O", ks["naive_pv"])
    _gqa_reduce(m, p, out)
    return out, m


def _copy(m: Meter, name: str, src: str, dst: str, x, out: dict, moved: int = 0) -> None:
    """A PyTorch copy kernel of every head of x (B, heads, rows, d): src -> dst; `moved`: the
    bytes each element's read moves (a sector, when the copy reads at a stride)."""
    res = out.setdefault(dst, np.empty(x.shape))
    with m.launch(name):
        for b in range(x.shape[0]):
            for h in range(x.shape[1]):
                m.store(dst, res, (b, h), m.load(src, x[b, h], smem=False, moved=moved))


def standard(p: Problem, plan: Plan, q, k, v):
    """The papers' PyTorch baseline (iosim.schedules.standard): Q and K copied out of the packed
    qkv (K transposed: a sector an element read), the additive causal mask built once for every
    head, then per head S = scale·QKᵀ, S + mask, softmax over whole rows; V copied, PV."""
    m, s, g = Meter(p), p.scale, p.group
    ks = {kp.name: kp for kp in plan.kernels}
    nq, nk = p.seqlen_q, p.seqlen_k
    out = {"O": np.empty((p.batch, p.heads, nq, p.head_dim))}
    x: dict[str, np.ndarray] = {}
    _copy(m, "standard_rearrange_q", "Qp", "Q", q, x)
    _copy(m, "standard_rearrange_k", "Kp", "K", k, x, moved=max(p.elem_bytes, SECTOR))
    q, k = x["Q"], x["K"]
    mask = None
    if p.causal:  # torch.full(-10000.0), torch.triu(.., 1), .to(dtype): one N x N each
        full, tri, mask = (np.empty((nq, nk)) for _ in range(3))
        with m.launch("standard_mask_full"):
            m.store("Mask32", full, ..., np.full((nq, nk), -10000.0))
        seen = np.arange(nk)[None, :] < np.array([p.visible_keys(i) for i in range(nq)])[:, None]
        with m.launch("standard_mask_triu"):
            m.store("Mask32", tri, ..., np.where(seen, 0.0, m.load("Mask32", full, smem=False)))
        with m.launch("standard_mask_cast"):
            m.store("Mask", mask, ..., m.load("Mask32", tri, smem=False))
    Ps = []
    for b in range(p.batch):
        for h in range(p.heads):
            S, name = np.empty((nq, nk)), "S"
            _gemm(m, "standard_qk", q[b, h], k[b, h // g].T, "Q", "K", S, "S", ks["standard_qk"], s)
            if mask is not None:  # added to every element: nothing above the diagonal skipped
                Sm = np.empty((nq, nk))
                with m.launch("standard_mask_add"):
                    m.store("Sm", Sm, ..., m.load("S", S, smem=False) + m.load("Mask", mask, smem=False))
                    m.alu(S.size)
                S, name = Sm, "Sm"
            P = np.empty((nq, nk))
            with m.launch("standard_softmax"):
                for i in range(nq):  # the whole row: max, subtract, exp, sum, scale
                    row = m.load(name, S[i], smem=False)
                    e = m.exp(row - row.max())
                    m.alu(4 * nk)
                    m.store("P", P, i, e / e.sum())
            Ps.append(P)
    _copy(m, "standard_einsum_v", "Vp", "V", v, x)  # einsum reshapes v for bmm: a copy
    for i, P in enumerate(Ps):
        b, h = divmod(i, p.heads)
        _gemm(m, "standard_pv", P, x["V"][b, h // g], "P", "V", out["O"][b, h], "O", ks["standard_pv"])
    return out, m


def standard_bwd(p: Problem, plan: Plan, q, k, v, do):
    """Autograd over the benchmark's forward (iosim.schedules.standard.backward): naive's
    passes with baddbmm's scale as separate multiplies of dQ and dK, then the stack of dQ, dK
    (read at a stride: a sector an element), dV into the packed gradient."""
    m, ks = Meter(p), {kp.name: kp for kp in plan.kernels}
    out: dict[str, np.ndarray] = {}
    for b in range(p.batch):
        for h in range(p.heads):
            one = p.model_copy(update=dict(batch=1, heads=1, kv_heads=1))
            g = h // p.group
            P = reference.probs(one, q[b:b + 1, h:h + 1], k[b:b + 1, g:g + 1])[0, 0]
            _naive_bwd(m, p, ks, out, b, h, q[b, h], k[b, g], v[b, g], do[b, h], P, "standard",
                       scaled=False)
    x = "_expanded" if p.group > 1 else ""
    for name, t in (("standard_bwd_scale_dq", "dQ"), ("standard_bwd_scale_dk", "dK" + x)):
        with m.launch(name):  # maybe_multiply(grad, alpha): a new tensor, t * alpha
            m.store(t, out[t], ..., m.load(t, out[t], smem=False) * p.scale)
            m.alu(out[t].size)
    _gqa_reduce(m, p, out)
    packed: dict[str, np.ndarray] = {}
    _copy(m, "standard_bwd_stack_q", "dQ", "dQp", out["dQ"], packed)
    _copy(m, "standard_bwd_stack_k", "dK", "dKp", out["dK"], packed,
          moved=max(p.elem_bytes, SECTOR))
    _copy(m, "standard_bwd_stack_v", "dV", "dVp", out["dV"], packed)
    return {"dQ": packed["dQp"], "dK": packed["dKp"], "dV": packed["dVp"]}, m


def _naive_bwd(m: Meter, p: Problem, ks: dict, out: dict, b, h, qh, kh, vh, doh, P,
               pre: str = "naive", scaled: bool = True) -> None:
    """The backward over the stored P; `pre`: the kernels' names (standard's are autograd's
    same passes); `scaled`: dQ's and dK's GEMMs apply the softmax scale (standard's: not, a
    multiply follows them)."""
    nq, nk, d = p.seqlen_q, p.seqlen_k, p.head_dim
    s = p.scale if scaled else None
    x = "_expanded" if p.group > 1 else ""
    dQ = out.setdefault("dQ", np.empty((p.batch, p.heads, nq, d)))[b, h]
    dKe = out.setdefault("dK" + x, np.empty((p.batch, p.heads, nk, d)))[b, h]
    dVe = out.setdefault("dV" + x, np.empty((p.batch, p.heads, nk, d)))[b, h]
    dP, dS = np.empty((nq, nk)), np.empty((nq, nk))
    _gemm(m, f"{pre}_bwd_dv", P.T, doh, "P", "dO", dVe, "dV" + x, ks[f"{pre}_bwd_dv"])
    _gemm(m, f"{pre}_bwd_dp", doh, vh.T, "dO", "V", dP, "dP", ks[f"{pre}_bwd_dp"])
    # PyTorch's softmax backward (standard's): its reduction is not counted (naive.row_kernel)
    merge = SPECS["naive_bwd_softmax"].row_merge if pre == "naive" else (0, 0)
    rows = _rows(m, f"{pre}_bwd_softmax", ks[f"{pre}_bwd_softmax"], [("P", P), ("dP", dP)], merge)
    for i, (prow, dprow) in rows:
        di = (prow * dprow).sum()
        m.alu(4 * nk)  # product and sum for D_i; subtract and product for dS
        m.store("dS", dS, i, prow * (dprow - di))
    _gemm(m, f"{pre}_bwd_dq", dS, kh, "dS", "K", dQ, "dQ", ks[f"{pre}_bwd_dq"], s)
    _gemm(m, f"{pre}_bwd_dk", dS.T, qh, "dS", "Q", dKe, "dK" + x, ks[f"{pre}_bwd_dk"], s)


def _gqa_reduce(m: Meter, p: Problem, out: dict) -> None:
    if p.direction is Direction.fwd or p.group == 1:
        return
    g, nk, d = p.group, p.seqlen_k, p.head_dim
    with m.launch("gqa_reduce"):
        for t in ("dK", "dV"):
            big = out.pop(t + "_expanded")
            res = out.setdefault(t, np.empty((p.batch, p.kv_heads, nk, d)))
            for b in range(p.batch):
                for kh in range(p.kv_heads):
                    acc = m.load(t + "_expanded", big[b, kh * g], smem=False)
                    for j in range(1, g):
                        acc = acc + m.load(t + "_expanded", big[b, kh * g + j], smem=False)
                        m.alu(acc.size)
                    m.store(t, res, (b, kh), acc)


# ------------------------------------------------------------ FA1 fwd ----

def fa1_fwd(p: Problem, plan: Plan, q, k, v):
    m = Meter(p)
    kp, init = plan.main, plan.kernels[0].name  # fa1's kernels, or fa1_paper's (same loops)
    bm = BlockMap.of(p, kp.block_m, kp.block_n)
    nq, d = p.seqlen_q, p.head_dim
    Oacc = np.empty((p.batch, p.heads, nq, d))
    L, M = np.empty((p.batch, p.heads, nq)), np.empty((p.batch, p.heads, nq))
    O = np.empty((p.batch, p.heads, nq, d))
    with m.launch(init):
        for b in range(p.batch):
            for h in range(p.heads):
                for r0, r in _spans(nq, kp.block_m):
                    m.store("Oacc", Oacc, (b, h, slice(r0, r0 + r)), np.zeros((r, d)))
                    m.store("L", L, (b, h, slice(r0, r0 + r)), np.zeros(r))
                    m.store("M", M, (b, h, slice(r0, r0 + r)), np.full(r, -np.inf))
    rows, cols = _spans(nq, kp.block_m), _spans(p.seqlen_k, kp.block_n)
    last_j = [int(np.flatnonzero(bm.visit[i]).max(initial=-1)) for i in range(len(rows))]
    qb = kp.defines["SPLIT_ROWS"] // kp.block_m  # query blocks per CTA (the kernel's split)
    # reads of K_j and V_j from shared memory a step (the kernel's spec: every warp; fa1_paper's
    # loops, which no kernel runs: once)
    spec = SPECS.get(kp.name)
    readers = spec.kv_readers(kp.defines) if spec is not None and spec.kv_readers else 1
    splits = [range(i0, min(i0 + qb, len(rows))) for i0 in range(0, len(rows), qb)]
    assert len(splits) == kp.grid[0], (len(splits), kp.grid)
    with m.launch(kp.name):
        for b in range(p.batch):
            for h in range(p.heads):
                for split in splits:  # one CTA: Algorithm 1's loops over this split's rows
                    _fa1_split(m, p, bm, split, rows, cols, last_j, q, k, v, Oacc, O, L, M, b, h,
                               readers)
    with np.errstate(divide="ignore"):  # ℓ = 0: a row that sees no key, LSE = -inf
        return {"O": O, "LSE": M + np.log(L)}, m


def _fa1_split(m: Meter, p: Problem, bm: BlockMap, split: range, rows, cols, last_j, q, k, v,
               Oacc, O, L, M, b: int, h: int, readers: int) -> None:
    s, g, d = p.scale, p.group, p.head_dim
    for i in split:  # blocks that see no key (bottom-right): O = 0
        r0, r = rows[i]
        if last_j[i] < 0:
            m.store("O", O, (b, h, slice(r0, r0 + r)), np.zeros((r, d)))
    for j, (c0, c) in enumerate(cols):
        if not bm.visit[split.start:split.stop, j].any():
            continue
        Kj = m.load("K", k[b, h // g, c0:c0 + c])
        Vj = m.load("V", v[b, h // g, c0:c0 + c])
        for i in split:
            r0, r = rows[i]
            if not bm.visit[i, j]:
                continue
            rs = (b, h, slice(r0, r0 + r))
            Qi = m.load("Q", q[rs])
            Oi = m.load("Oacc", Oacc[rs], smem=False)
            li = m.load("L", L[rs], smem=False)
            mi = m.load("M", M[rs], smem=False)
            S = m.mma(Qi, Kj.T, True, True, readers) * s
            m.alu(S.size)
            if bm.diag[i, j]:
                S[_mask(p, r0, r, c0, c)] = -np.inf
                m.alu(S.size)
            mt = S.max(1)
            live = mt > -np.inf  # rows with no visible key in this block
            mts = np.where(live, mt, 0.0)
            m.alu(r)  # the guard
            Pt = m.exp(S - mts[:, None])
            lt = Pt.sum(1)
            m.alu(3 * S.size)  # rowmax, subtract, rowsum
            mnew = np.maximum(mi, mt)
            mnu = np.where(mnew > -np.inf, mnew, 0.0)  # no visible key so far
            a = m.exp(mi - mnu)
            bb = m.exp(mt - mnu)
            lnew = a * li + bb * lt
            m.alu(6 * r)  # m_new, two subtracts, ℓ_new (3)
            PV = m.mma(Pt, Vj, False, True, readers)
            with np.errstate(divide="ignore"):
                inv = np.where(lnew > 0, 1.0 / lnew, 0.0)
            alpha, beta = a * li * inv, bb * inv
            m.alu(3 * r)
            On = alpha[:, None] * Oi + beta[:, None] * PV
            m.alu(3 * On.size)
            if j == last_j[i]:
                m.store("O", O, rs, On)
            else:
                m.store("Oacc", Oacc, rs, On)
            m.store("L", L, rs, lnew)
            m.store("M", M, rs, mnew)


# ----------------------------------------------------- FA2/FA3 forward ----

def fa2_fwd(p: Problem, plan: Plan, q, k, v, m: Meter | None = None, fp8: bool = False):
    """FA2's (and FA3's) forward loops; `fp8`: fa3_fwd_fp8, which reads the e4m3 copies Q8,
    K8, Vt8 and a descale factor per query tile and per K and V tile (`m`: the Meter that
    counted the quantisation before it)."""
    m, s, g = m or Meter(p), p.scale, p.group
    nq_, nk_, nv_ = ("Q8", "K8", "Vt8") if fp8 else ("Q", "K", "V")
    kp = plan.main
    bm = BlockMap.of(p, kp.block_m, kp.block_n)
    nq, d = p.seqlen_q, p.head_dim
    # reads of K_j and V_j from shared memory a trip (the kernel's spec: every warp, fa3 every
    # consumer warpgroup)
    readers = SPECS[kp.name].kv_readers(kp.defines)
    O, LSE = np.empty((p.batch, p.heads, nq, d)), np.empty((p.batch, p.heads, nq))
    cols = _spans(p.seqlen_k, kp.block_n)
    with m.launch(kp.name):
        for b in range(p.batch):
            for h in range(p.heads):
                for i, (r0, r) in enumerate(_spans(nq, kp.block_m)):
                    rs = (b, h, slice(r0, r0 + r))
                    Qi = m.load(nq_, q[rs])
                    if fp8:
                        m.load("Qs", np.ones(1), smem=False)
                    mi, li, acc = np.full(r, -np.inf), np.zeros(r), np.zeros((r, d))
                    for j, (c0, c) in enumerate(cols):
                        if not bm.visit[i, j]:
                            continue
                        Kj = m.load(nk_, k[b, h // g, c0:c0 + c])
                        Vj = m.load(nv_, v[b, h // g, c0:c0 + c])
                        if fp8:
                            m.load("Ks", np.ones(1), smem=False)
                            m.load("Vs", np.ones(1), smem=False)
                        S = m.mma(Qi, Kj.T, True, True, readers)
                        if bm.diag[i, j]:
                            S[_mask(p, r0, r, c0, c)] = -np.inf
                            m.alu(S.size)
                        mnew = np.maximum(mi, S.max(1))
                        muse = np.where(mnew > -np.inf, mnew, 0.0)  # rows that saw no key yet
                        P = m.exp(s * S - (s * muse)[:, None])
                        alpha = m.exp(s * (mi - muse))
                        li = alpha * li + P.sum(1)
                        m.alu(3 * S.size + 6 * r)
                        acc = alpha[:, None] * acc
                        m.alu(acc.size)
                        acc = acc + m.mma(P, Vj, False, True, readers)
                        mi = mnew
                    with np.errstate(divide="ignore"):  # ℓ = 0: a row that sees no key
                        inv = np.where(li > 0, 1.0 / li, 0.0)
                        m.store("O", O, rs, acc * inv[:, None])
                        m.alu(acc.size + r)
                        m.store("LSE", LSE, rs, np.where(li > 0, s * mi + m.log(li), -np.inf))
                    m.alu(2 * r)
    return {"O": O, "LSE": LSE}, m


# ------------------------------------------------ flash backward (all) ----

def flash_bwd(p: Problem, plan: Plan, q, k, v, o, do, lse, fa1: bool):
    """Algorithm 4 (fa1) or FA2/FA3's backward; `lse` is the forward's natural-log LSE."""
    m, s, g = Meter(p), p.scale, p.group
    name = plan.schedule
    main = plan.main
    bm = BlockMap.of(p, main.block_m, main.block_n)
    nq, nk, d = p.seqlen_q, p.seqlen_k, p.head_dim
    rows, cols = _spans(nq, main.block_m), _spans(nk, main.block_n)
    x = "_expanded" if g > 1 else ""
    dQacc = np.empty((p.batch, p.heads, nq, d))
    Dst = np.empty((p.batch, p.heads, nq))
    # FA1 keeps ℓ and m; LSE = m + log ℓ, so m = LSE and ℓ = 1 is an equivalent pair.
    Mst, Lst = lse, np.ones_like(lse)
    out = {t: np.empty((p.batch, p.heads, n, d)) for t, n in (("dQ", nq), ("dK" + x, nk),
                                                              ("dV" + x, nk))}
    spec = SPECS.get(main.name)  # no spec (fa3's backward, modelled): each operand read once
    rd = spec.bwd_readers(main.defines) if spec else Readers()
    # fa3_bwd_det: each consumer warpgroup reads and writes its turn flag once a visit
    flags = fa3_bwd_consumers(main.defines) if spec and "dQsem" in spec.args else 0
    sem = np.zeros((p.batch, p.heads, -(-nq // 64), 2))
    first = f"{name}_bwd_init" if fa1 else f"{name}_bwd_pre"
    with m.launch(first):
        for b in range(p.batch):
            for h in range(p.heads):
                for r0, r in rows:
                    rs = (b, h, slice(r0, r0 + r))
                    if not fa1:
                        Oi, dOi = m.load("O", o[rs], smem=False), m.load("dO", do[rs], smem=False)
                        m.store("D", Dst, rs, (Oi * dOi).sum(1))
                        m.alu(2 * Oi.size)
                    m.store("dQacc", dQacc, rs, np.zeros((r, d)))
    # the CTAs along x: FA2/FA3 one per key block; FA1 one per run of SPLIT_COLS key rows (the
    # Plan's split), each running Algorithm 4's loops over its own key blocks
    kb = main.defines["SPLIT_COLS"] // main.block_n if fa1 else 1
    ctas = [cols[j0:j0 + kb] for j0 in range(0, len(cols), kb)]
    with m.launch(main.name):
        for b in range(p.batch):
            for h in range(p.heads):
                for n, cta in enumerate(ctas):
                    m.cta()
                    for j, (c0, c) in enumerate(cta, start=kb * n):
                        cs = (b, h, slice(c0, c0 + c))
                        if not bm.visit[:, j].any():
                            m.store("dK" + x, out["dK" + x], cs, np.zeros((c, d)))
                            m.store("dV" + x, out["dV" + x], cs, np.zeros((c, d)))
                            continue
                        Kj = m.load("K", k[b, h // g, c0:c0 + c])
                        Vj = m.load("V", v[b, h // g, c0:c0 + c])
                        dK, dV = np.zeros((c, d)), np.zeros((c, d))
                        for i, (r0, r) in enumerate(rows):
                            if not bm.visit[i, j]:
                                continue
                            rs = (b, h, slice(r0, r0 + r))
                            m.trip()
                            Qi = m.load("Q", q[rs])
                            if fa1:
                                Oi = m.load("O", o[rs], smem=False)
                            dOi = m.load("dO", do[rs])
                            if fa1:
                                li = m.load("L", Lst[rs], smem=False)
                                mi = m.load("M", Mst[rs], smem=False)
                            else:
                                lsei = m.load("LSE", lse[rs], smem=False)
                                Di = m.load("D", Dst[rs], smem=False)
                            S = m.mma(Qi, Kj.T, True, True, rd.kv_s, rd.qdo_s)
                            if bm.diag[i, j]:
                                S[_mask(p, r0, r, c0, c)] = -np.inf
                                m.alu(S.size)
                            if fa1:
                                P = m.exp(s * S - np.where(mi > -np.inf, mi, 0.0)[:, None]) \
                                    * (1.0 / li)[:, None]
                                m.alu(3 * S.size + r)
                            else:  # LSE = -inf: a row that sees no key, P = 0
                                P = m.exp(s * S - np.where(lsei > -np.inf, lsei, 0.0)[:, None])
                                m.alu(2 * S.size)
                            # staged in shared memory for the transposed product (rd.p_smem) and
                            # (rd.p_back) read back for dS, which uses the P that dV used
                            m.smem(*[P] * (rd.p_smem + rd.p_back))
                            dV += m.mma(P.T, dOi, True, True, rd.qdo_kv, rd.pds_kv)
                            dP = m.mma(dOi, Vj.T, True, True, rd.kv_s, rd.qdo_s)
                            if fa1:  # O_i from registers, dO_i read again from shared memory
                                m.smem(dOi)
                                Di = (dOi * Oi).sum(1)
                                # one FMA an element (fa1.cu's D_i; an FMA is one op), and
                                # scale·D_i per row
                                m.alu(Oi.size + r)
                            dS = P * (dP - Di[:, None])
                            m.alu(2 * S.size)
                            if fa1:  # stored scaled (the FMA dP·scale − scale·D_i): dK, dQ unscaled
                                dS = s * dS
                            m.smem(dS)  # stored, then read by the dK and dQ products
                            dK += m.mma(dS.T, Qi, True, True, rd.qdo_kv, rd.pds_kv)
                            dq = m.mma(dS, Kj, True, True, rd.k_dq, rd.ds_dq)
                            if flags:  # wait for the turn, add, pass it on
                                fs = (b, h, i * main.block_m // 64, slice(0, flags))
                                m.store("dQsem", sem, fs,
                                        m.load("dQsem", sem[fs], smem=False) + 1)
                            # read-modify-written, or added by fp32 atomics (FA1 split, FA2,
                            # FA3): counted alike, a read and a write
                            acc = m.load("dQacc", dQacc[rs], smem=False) + dq
                            if not fa1:
                                m.alu(dq.size)
                            m.store("dQacc", dQacc, rs, acc)
                        if not fa1:
                            dK = s * dK
                            m.alu(dK.size)
                        m.store("dK" + x, out["dK" + x], cs, dK)
                        m.store("dV" + x, out["dV" + x], cs, dV)
    with m.launch(f"{name}_bwd_convert"):
        for b in range(p.batch):
            for h in range(p.heads):
                for r0, r in rows:
                    rs = (b, h, slice(r0, r0 + r))
                    acc = m.load("dQacc", dQacc[rs], smem=False)
                    if not fa1:
                        acc = s * acc
                        m.alu(acc.size)
                    m.store("dQ", out["dQ"], rs, acc)
    _gqa_reduce(m, p, out)
    return out, m


# ------------------------------------------------ fp8 e4m3 (fa3) ----

def _quant_pass(m: Meter, p: Problem, xs: dict, bm: int, bn: int, amax: bool,
                per_tensor: bool) -> None:
    """One pass of kernels/fp8_quant.cu over every tile of Q (bm rows), K and V (bn rows) of
    every head: fp8_amax (`amax`) writes the tile's max, fp8_quant its e4m3 copy and factor
    (with `per_tensor`, after reading every tile's max of the tensor); V goes out transposed
    through shared memory, d rows of its keys up to Nk rounded up to 16."""
    d, nk16 = p.head_dim, -(-p.seqlen_k // 16) * 16
    had = d * ((d.bit_length() - 1) + 2) if p.hadamard else 0
    for name, x, heads, n, rows in (("Q", xs["q"], p.heads, p.seqlen_q, bm),
                                    ("K", xs["k"], p.kv_heads, p.seqlen_k, bn),
                                    ("V", xs["v"], p.kv_heads, p.seqlen_k, bn)):
        spans = _spans(n, rows)
        tiles = p.batch * heads * len(spans)
        for b in range(p.batch):
            for h in range(heads):
                for r0, r in spans:
                    tile = m.load(name, x[b, h, r0:r0 + r], smem=False)
                    m.alu(tile.size * (1 if amax else 2) + (r * had if name != "V" else 0))
                    if amax:
                        m.store(name[0] + "a", np.empty(1), ..., np.abs(tile).max(initial=0.0))
                        continue
                    if per_tensor:
                        m.load(name[0] + "a", np.zeros(tiles), smem=False)
                    m.store(name[0] + "s", np.empty(1), ..., np.ones(1))
                    if name != "V":
                        m.store(name + "8", np.empty(tile.shape), ..., tile)
                        continue
                    cols = min(rows, nk16 - r0)
                    vt = np.zeros((d, cols))
                    m.smem(np.zeros((rows, d)), vt)  # the tile stored transposed, read back
                    m.store("Vt8", vt, ..., vt)


def fp8_fwd(p: Problem, plan: Plan, q, k, v):
    """fa3's fp8_e4m3 forward: the quantisation pass(es) on the bf16 inputs, then the attention
    loops on the e4m3 copies. Values stay float64 (the model counts, it does not round): the
    Hadamard transform is applied for real, exact in exact arithmetic."""
    m = Meter(p, elem={"Q": 2, "K": 2, "V": 2, "O": 2})  # the caller's tensors are bf16
    if p.hadamard:
        mh = hadamard_matrix(p.head_dim)
        q, k = q @ mh, k @ mh
    kp, names = plan.main, [x.name for x in plan.kernels]
    for entry in names[:-1]:
        with m.launch(entry):
            _quant_pass(m, p, {"q": q, "k": k, "v": v}, kp.block_m, kp.block_n,
                        entry == "fp8_amax", "fp8_amax" in names)
    return fa2_fwd(p, plan, q, k, v, m=m, fp8=True)


# ------------------------------------------------------------ decode ----

def decode(p: Problem, plan: Plan, q, k, v):
    """Split-KV decode (iosim.schedules.decode): per (batch, K/V head, head chunk, split) one
    CTA; its packed query rows (zero-padded to block_m) against its split's key tiles, each
    warp an online softmax over its own slice of every tile, merged across warps at the end;
    then, with several splits, the partials, and the combine by the last CTA of each
    (batch, head chunk) to count itself done. A paged cache: K and V scattered over pages
    in a random order, every row gathered through the block table. A ragged batch: each
    sequence its own length, its tiles in the same number of runs (some maybe empty)."""
    from iosim.schedules.decode import masked_tile, runs_of

    m, sc, g = Meter(p), p.scale, p.group
    kp = plan.kernels[0]
    D = kp.defines
    rows, bn, nw, hp, ns = (D[x] for x in ("BLOCK_M", "BLOCK_N", "NUM_WARPS", "HEADS_PER_CTA",
                                           "NUM_SPLITS"))
    nq, d = p.seqlen_q, p.head_dim
    kw = bn // nw  # keys of a tile each warp takes
    seqs = p.sequences() if p.seqlens_k is not None else [p] * p.batch
    assert ns * p.batch == kp.grid[0] * kp.grid[2], kp.grid
    O, LSE = np.zeros((p.batch, p.heads, nq, d)), np.empty((p.batch, p.heads, nq))
    Op, Lp = np.empty((p.batch, p.heads, nq, ns, d)), np.empty((p.batch, p.heads, nq, ns))
    cnt = np.zeros((p.batch, p.heads))  # finished splits per (batch, grid row)
    gather = _paged(p, k, v, np.random.default_rng(0)) if p.page_size else None
    with m.launch(kp.name):
        for b, sq in enumerate(seqs):
            nk, runs = sq.seqlen_k, runs_of(sq, bn, ns)
            pos = np.tile(np.arange(nq), hp) + nk - nq  # each packed row's diagonal (bottom-right)
            pos = np.concatenate([pos, np.full(rows - hp * nq, nk - 1)])  # padding: never stored
            for kvh in range(p.kv_heads):
                for c in range(g // hp):
                    heads = [kvh * g + c * hp + i for i in range(hp)]
                    for s, run in enumerate(runs):
                        Qc = np.zeros((rows, d))
                        Qc[:hp * nq] = m.load("Q", q[b, heads].reshape(hp * nq, d), smem=False)
                        m.smem(Qc)  # stored with its zero rows
                        mw, lw = np.full((nw, rows), -np.inf), np.zeros((nw, rows))
                        acc = np.zeros((nw, rows, d))
                        for j in run:
                            c0, c1 = j * bn, min(nk, (j + 1) * bn)
                            if gather is None:
                                Kj, Vj = m.load("K", k[b, kvh, c0:c1]), m.load("V", v[b, kvh, c0:c1])
                            else:
                                Kj, Vj = gather(m, b, kvh, c0, c1)
                            m.smem(Kj, Vj)  # each warp reads its own slice: once in all
                            for w in range(nw):
                                a, z = min(c1, c0 + w * kw), min(c1, c0 + (w + 1) * kw)
                                S = m.mma(Qc, Kj[a - c0:z - c0].T, True, False)
                                if masked_tile(sq, j, bn):
                                    col = np.arange(a, z)[None, :]
                                    hide = col > pos[:, None] if p.causal else np.zeros(S.shape, bool)
                                    if p.window is not None:
                                        hide |= col < pos[:, None] - p.window
                                    S[hide] = -np.inf
                                    m.alu(S.size)
                                mnew = np.maximum(mw[w], S.max(1, initial=-np.inf))
                                muse = np.where(mnew > -np.inf, mnew, 0.0)
                                P = m.exp(sc * S - (sc * muse)[:, None])
                                alpha = m.exp(sc * (mw[w] - muse))
                                lw[w] = alpha * lw[w] + P.sum(1)
                                m.alu(3 * S.size + 6 * rows)
                                acc[w] = alpha[:, None] * acc[w] + m.mma(P, Vj[a - c0:z - c0], False, False)
                                m.alu(rows * d)
                                mw[w] = mnew
                        # across the warps, through shared memory (fp32 O, m, ℓ stored, read back)
                        m.sm[m.kernel] += 2 * nw * rows * (d + 2) * F32
                        top = mw.max(0)
                        tuse = np.where(top > -np.inf, top, 0.0)
                        wt = m.exp(sc * (mw - tuse))
                        tot = (wt * lw).sum(0)
                        o = (wt[:, :, None] * acc).sum(0)
                        with np.errstate(divide="ignore"):
                            inv = np.where(tot > 0, 1.0 / tot, 0.0)
                            lse = np.where(tot > 0, sc * tuse + m.log(tot), -np.inf)
                        o = o * inv[:, None]
                        m.alu(rows * (3 * nw + 2) + rows * d * (2 * nw + 1))
                        for i, h in enumerate(heads):
                            r = slice(i * nq, (i + 1) * nq)
                            if ns == 1:
                                m.store("O", O, (b, h), o[r])
                                m.store("LSE", LSE, (b, h), lse[r])
                            else:
                                m.store("Opart", Op, (b, h, slice(None), s), o[r])
                                m.store("LSEpart", Lp, (b, h, slice(None), s), lse[r])
                        if ns > 1:  # counted done; the last to count combines the rows
                            at = (b, kvh * (g // hp) + c)
                            m.store("Counter", cnt, at, m.load("Counter", cnt[at], smem=False) + 1)
                            if cnt[at] == ns:
                                m.store("Counter", cnt, at, np.zeros(()))
                                for h in heads:
                                    for i in range(nq):
                                        _combine_row(m, Op, Lp, O, LSE, (b, h, i), ns, d)
    return {"O": O, "LSE": LSE}, m


def _combine_row(m: Meter, Op, Lp, O, LSE, at: tuple, ns: int, d: int) -> None:
    """decode.cu's combine_last for one query row: the S partial LSEs to weights
    e^(LSE_s - LSE) (stored in shared memory with 1/Σ, read by each 8-column pass) and
    O = Σ_s weight·O_s / Σ."""
    ls = m.load("LSEpart", Lp[at], smem=False)
    top = ls.max()
    wt = m.exp(ls - (top if top > -np.inf else 0.0))
    tot = wt.sum()
    o = (wt[:, None] * m.load("Opart", Op[at], smem=False)).sum(0)
    m.alu(2 * ns + 2 + d * (2 * ns + 1))
    m.sm[m.kernel] += (ns + 1) * F32 * (1 + d // 8)
    with np.errstate(divide="ignore"):  # no key in any split: 0, -inf
        lg = m.log(np.array(tot))
        m.store("O", O, at, o / tot if tot > 0 else o * 0)
        m.store("LSE", LSE, at, np.array(top + lg if tot > 0 else -np.inf))


def _paged(p: Problem, k, v, rng: np.random.Generator):
    """K and V copied into pages (page_size x KVH x d each) in a random order with their block
    table, and the gather of one tile: its distinct table entries, then each key row."""
    ps, nk = p.page_size, p.seqlen_k
    npg = -(-nk // ps)
    perm = rng.permutation(p.batch * npg)
    table = perm.reshape(p.batch, npg)
    shape = (p.batch * npg, ps, p.kv_heads, p.head_dim)
    kc, vc = np.zeros(shape), np.zeros(shape)
    for b in range(p.batch):
        for t in range(nk):
            kc[table[b, t // ps], t % ps] = k[b, :, t]
            vc[table[b, t // ps], t % ps] = v[b, :, t]

    def gather(m: Meter, b: int, kvh: int, c0: int, c1: int):
        pages = m.load("BlockTable", table[b, c0 // ps:(c1 - 1) // ps + 1], smem=False).astype(int)
        idx = np.arange(c0, c1)
        rows = pages[idx // ps - c0 // ps], idx % ps
        return m.load("K", kc[rows[0], rows[1], kvh]), m.load("V", vc[rows[0], rows[1], kvh])
    return gather


def run(plan: Plan, q, k, v, do=None, o=None, lse=None):
    """Execute `plan` on float64 arrays. Forward returns {O, LSE}; backward (needs dO and the
    forward's O and LSE) returns {dQ, dK, dV}. Also returns the Meter with the counts."""
    p, name = plan.problem, plan.schedule
    if name == "naive":
        return naive(p, plan, q, k, v, do)
    if name == "standard":  # the papers' PyTorch baseline and its autograd backward
        return standard(p, plan, q, k, v) if p.direction is Direction.fwd \
            else standard_bwd(p, plan, q, k, v, do)
    if name == "decode":
        return decode(p, plan, q, k, v)
    if p.direction is Direction.fwd:
        if name in ("fa1", "fa1_paper"):
            return fa1_fwd(p, plan, q, k, v)
        if plan.main.name == "fa3_fwd_fp8":
            return fp8_fwd(p, plan, q, k, v)
        return fa2_fwd(p, plan, q, k, v)
    return flash_bwd(p, plan, q, k, v, o, do, lse, fa1=(name == "fa1"))
