"""Exact attention in float64 numpy: the reference the executor is held to."""

from __future__ import annotations

import numpy as np

from iosim.core.problem import Problem


def _expand(p: Problem, x: np.ndarray) -> np.ndarray:
    return np.repeat(x, p.group, axis=1)  # K/V head h // group serves query head h


def probs(p: Problem, q, k) -> np.ndarray:
    """softmax(scale·QKᵀ) with the causal mask: the P that standard attention stores."""
    return _probs(p, q, k)[0]


def _probs(p: Problem, q, k):
    """P and the natural-log LSE; a row that sees no key (bottom-right causal, Nq > Nk) has
    P = 0 and LSE = -inf."""
    s = np.einsum("bhid,bhjd->bhij", q, _expand(p, k)) * p.scale
    if p.causal:
        s = np.where(visible(p), s, -np.inf)
    mx = s.max(-1, keepdims=True)
    mx = np.where(np.isfinite(mx), mx, 0.0)
    e = np.exp(s - mx)
    tot = e.sum(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(tot > 0, e / tot, 0.0), (mx + np.log(tot))[..., 0]


def visible(p: Problem) -> np.ndarray:
    """bool (Nq, Nk): True where query row i sees key j under the causal mask
    (j <= i + Problem.causal_offset) and the sliding window (j >= i + offset - window)."""
    seen = np.tri(p.seqlen_q, p.seqlen_k, k=p.causal_offset, dtype=bool)
    if p.window is not None:
        seen &= ~np.tri(p.seqlen_q, p.seqlen_k, k=p.causal_offset - p.window - 1, dtype=bool)
    return seen


def forward(p: Problem, q, k, v) -> dict[str, np.ndarray]:
    if p.seqlens_k is not None:  # a ragged batch: each sequence over its own keys
        parts = [forward(sq, q[b:b + 1], k[b:b + 1, :, :sq.seqlen_k], v[b:b + 1, :, :sq.seqlen_k])
                 for b, sq in enumerate(p.sequences())]
        return {x: np.concatenate([r[x] for r in parts]) for x in ("O", "LSE")}
    P, lse = _probs(p, q, k)
    return {"O": np.einsum("bhij,bhjd->bhid", P, _expand(p, v)), "LSE": lse}


def backward(p: Problem, q, k, v, do) -> dict[str, np.ndarray]:
    P, _ = _probs(p, q, k)
    ve, ke = _expand(p, v), _expand(p, k)
    dv = np.einsum("bhij,bhid->bhjd", P, do)
    dp = np.einsum("bhid,bhjd->bhij", do, ve)
    ds = P * (dp - (P * dp).sum(-1, keepdims=True))
    dq = np.einsum("bhij,bhjd->bhid", ds, ke) * p.scale
    dk = np.einsum("bhij,bhid->bhjd", ds, q) * p.scale

    def fold(x):  # sum the query heads of each K/V group
        return x.reshape(p.batch, p.kv_heads, p.group, *x.shape[2:]).sum(2)

    return {"dQ": dq, "dK": fold(dk), "dV": fold(dv)}


def random_inputs(p: Problem, rng: np.random.Generator) -> dict[str, np.ndarray]:
    shape_q = (p.batch, p.heads, p.seqlen_q, p.head_dim)
    shape_k = (p.batch, p.kv_heads, p.seqlen_k, p.head_dim)
    return {"q": rng.standard_normal(shape_q), "k": rng.standard_normal(shape_k),
            "v": rng.standard_normal(shape_k), "do": rng.standard_normal(shape_q)}
