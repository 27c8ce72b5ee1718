"""The attention problem being modelled: shapes, dtype, masking and pass direction."""

from __future__ import annotations

from enum import Enum
from operator import attrgetter

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Dtype(str, Enum):
    fp16 = "fp16"
    bf16 = "bf16"
    fp8_e4m3 = "fp8_e4m3"
    fp32 = "fp32"

    @property
    def bytes(self) -> int:
        return _DTYPE_BYTES[self]


_DTYPE_BYTES = {Dtype.fp16: 2, Dtype.bf16: 2, Dtype.fp8_e4m3: 1, Dtype.fp32: 4}  # Dtype.bytes


class Fp8Scaling(str, Enum):
    """How an fp8_e4m3 problem's bf16 Q, K and V are scaled into e4m3 (FA3 paper Sec. 3.3): one
    scale per tile of rows per head (`block`, the tiles of the attention kernel) or one per
    tensor (`tensor`), by a quantisation kernel the Plan counts; or `given`: they arrive in
    e4m3 already (V transposed, per-tensor factors), as FlashAttention-3's interface takes them
    and its paper times them: the attention kernel alone."""

    block = "block"
    tensor = "tensor"
    given = "given"


class Direction(str, Enum):
    fwd = "fwd"
    bwd = "bwd"


class CausalAlign(str, Enum):
    """Where the causal diagonal sits when Nq != Nk: top-left (torch's `is_causal`: query row i
    sees keys j <= i) or bottom-right (FlashAttention 2.1+ and FA3: the last query row sees
    every key, row i sees keys j <= i + Nk - Nq)."""

    top_left = "top-left"
    bottom_right = "bottom-right"


MAX_SEQLEN = 2**31 - 1
MAX_HEAD_DIM = 2**16  # far beyond any model's; keeps every per-row count inside int64 arrays


class Problem(BaseModel):
    """One attention call: O = softmax(scale * Q K^T [+ causal mask]) V.

    Layout is (batch, heads, seqlen, head_dim), contiguous. K and V have `kv_heads` heads, each
    shared by `heads // kv_heads` query heads (GQA; MQA when kv_heads == 1). The causal mask is
    top-left aligned (query row i sees keys j <= i), as torch's `is_causal`, or bottom-right
    aligned (`causal_align`): row i sees keys j <= i + Nk - Nq. A row that sees no key (only
    bottom-right, Nq > Nk) has O = 0 and LSE = -inf, as FlashAttention returns.

    fp8_e4m3: the caller's Q, K, V and O are bf16; the schedule quantises Q, K and V to e4m3
    (`fp8_scaling`), Q and K first multiplied by a random-sign Hadamard transform when
    `hadamard` (incoherent processing; head_dim a power of two). Both apply to fp8 only.
    `window` (a sliding window, as Mistral and Gemma use; causal only): row i sees only the W
    keys back from its diagonal, keys j with i + offset - W <= j <= i + offset
    (FlashAttention's window_size = (W, 0)); None: no window.

    `page_size` (a paged K/V cache, decode): K and V live in pages of that many tokens, each
    page (page_size, kv_heads, head_dim) as FlashAttention's and vLLM's caches lay them out,
    found through a block table of int32 page indices (batch, ceil(Nk / page_size)); None:
    contiguous K and V.

    `seqlens_k` (a ragged batch, decode): each sequence's own cached length, one per sequence,
    at most seqlen_k (the cache's allocated length, by default the longest); sequence b's query
    rows sit at its last keys (row i at seqlens_k[b] - Nq + i). None: every sequence seqlen_k.

    `deterministic`: the backward must give the same bits on every run (FlashAttention's
    `deterministic=True`): partial sums added in a fixed order. A schedule whose backward adds
    in whatever order its CTAs arrive has a deterministic mode (fa3's kernel; fa1 unsplit) or
    refuses the problem (fa2); naive and standard add in a fixed order anyway. Every forward
    here is deterministic.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch: int = Field(4, gt=0, le=MAX_SEQLEN)
    heads: int = Field(32, gt=0, le=MAX_SEQLEN)
    kv_heads: int | None = Field(None, gt=0, le=MAX_SEQLEN)
    # at most 2^31 - 1: every modelled kernel (ours, FlashAttention's) indexes rows with int32
    seqlen_q: int = Field(4096, gt=0, le=MAX_SEQLEN)
    seqlen_k: int | None = Field(None, gt=0, le=MAX_SEQLEN)
    head_dim: int = Field(128, gt=0, le=MAX_HEAD_DIM)  # naive's GEMMs take any; flash: <= 256
    dtype: Dtype = Dtype.bf16
    causal: bool = False
    causal_align: CausalAlign = CausalAlign.top_left
    direction: Direction = Direction.fwd
    fp8_scaling: Fp8Scaling = Fp8Scaling.block
    hadamard: bool = False
    window: int | None = Field(None, ge=0, le=MAX_SEQLEN)
    page_size: int | None = Field(None, gt=0, le=MAX_SEQLEN)
    seqlens_k: tuple[int, ...] | None = None
    deterministic: bool = False

    @model_validator(mode="after")
    def _defaults_and_groups(self) -> Problem:
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.seqlens_k is not None:
            if len(self.seqlens_k) != self.batch:
                raise ValueError(f"seqlens_k: {len(self.seqlens_k)} lengths for batch {self.batch} "
                                 "(allowed: one length per sequence)")
            if not all(0 < n <= MAX_SEQLEN for n in self.seqlens_k):
                raise ValueError(f"seqlens_k: {min(self.seqlens_k)} (allowed: lengths from 1 to "
                                 f"{MAX_SEQLEN})")
            if self.seqlen_k is None:
                object.__setattr__(self, "seqlen_k", max(self.seqlens_k))
            if max(self.seqlens_k) > self.seqlen_k:
                raise ValueError(f"seqlens_k: a length over seqlen_k={self.seqlen_k} "
                                 "(allowed: at most the cache's length)")
        if self.seqlen_k is None:
            object.__setattr__(self, "seqlen_k", self.seqlen_q)
        if self.dtype is not Dtype.fp8_e4m3 and (self.hadamard
                                                  or self.fp8_scaling is not Fp8Scaling.block):
            raise ValueError("fp8_scaling and hadamard apply to dtype fp8_e4m3 only "
                             "(allowed with other dtypes: the defaults, block and no hadamard)")
        if self.hadamard and self.fp8_scaling is Fp8Scaling.given:
            raise ValueError("hadamard needs fp8_scaling block or tensor (given: the inputs "
                             "arrive quantised)")
        if self.hadamard and self.head_dim & (self.head_dim - 1):
            raise ValueError(f"hadamard needs head_dim a power of two (got {self.head_dim})")
        if self.heads % self.kv_heads:
            raise ValueError(
                f"kv_heads={self.kv_heads} must divide heads={self.heads} "
                "(allowed: any divisor of heads)"
            )
        if self.window is not None and not self.causal:
            raise ValueError(f"window={self.window} needs the causal mask "
                             "(allowed: a window with causal true)")
        return self

    @property
    def causal_offset(self) -> int:
        """Query row i sees keys j <= i + causal_offset (when causal)."""
        if self.causal_align is CausalAlign.bottom_right:
            return self.seqlen_k - self.seqlen_q
        return 0

    def visible_keys(self, i: int) -> int:
        """Keys query row i sees: all Nk, or with the causal mask min(Nk, max(0, i+1+offset))."""
        if not self.causal:
            return self.seqlen_k
        last = min(self.seqlen_k, max(0, i + 1 + self.causal_offset))
        if self.window is None:
            return last
        return max(0, last - max(0, i + self.causal_offset - self.window))

    @property
    def group(self) -> int:
        """Query heads per K/V head."""
        return self.heads // self.kv_heads

    def shape_key(self) -> tuple:
        """Every field but batch, heads and kv_heads, and heads / kv_heads: what problems whose
        Plans differ only in counts that grow with batch x kv_heads share (SHAPE_FIELDS)."""
        return (*_shape_fields(self), self.group)

    @property
    def bh(self) -> int:
        return self.batch * self.heads

    @property
    def elem_bytes(self) -> int:
        return self.dtype.bytes

    @property
    def scale(self) -> float:
        return self.head_dim**-0.5

    def sequences(self) -> list[Problem]:
        """One problem per sequence of a ragged batch (batch 1, its own seqlen_k); the problem
        itself when the batch is not ragged."""
        if self.seqlens_k is None:
            return [self]
        return [self.model_copy(update={"batch": 1, "seqlen_k": n, "seqlens_k": None})
                for n in self.seqlens_k]

    def window_pairs(self) -> int:
        """(query row, key) pairs a sliding window leaves visible, per head: Σ_i of
        clip(i+off+1, 0, Nk) - clip(i+off-W, 0, Nk), in closed form."""
        off, nq, nk = self.causal_offset, self.seqlen_q, self.seqlen_k
        return _sum_clip(nq, off + 1, nk) - _sum_clip(nq, off - self.window, nk)

    def fa_flops(self, bh=None):
        """FlashAttention's reporting convention: 4·B·H·Nq·Nk·d forward (2.5x that backward),
        halved when causal; with a sliding window 4·B·H·d per visible (row, key) pair. Used for
        TFLOP/s columns so numbers compare with the papers. `bh`: B·H of problems of this
        shape instead (an array: one answer each, the same float operations)."""
        if self.seqlens_k is not None:
            return sum(q.fa_flops() for q in self.sequences())
        bh = self.bh if bh is None else bh
        if self.window is not None:
            return 4.0 * bh * self.window_pairs() * self.head_dim
        f = 4.0 * bh * self.seqlen_q * self.seqlen_k * self.head_dim
        if self.direction is Direction.bwd:
            f *= 2.5
        return f / 2 if self.causal else f


def _sum_clip(n: int, c: int, top: int) -> int:
    """Σ_{i<n} clip(i + c, 0, top) in closed form."""
    a = min(max(-c, 0), n)  # rows below 0
    b = min(max(top - c, a), n)  # rows at or above top from here
    return (b - a) * (a + c + b - 1 + c) // 2 + (n - b) * top


# the fields a shape shares (Problem.shape_key)
SHAPE_FIELDS = tuple(f for f in Problem.model_fields if f not in ("batch", "heads", "kv_heads"))
_shape_fields = attrgetter(*SHAPE_FIELDS)
