"""What backs a prediction: a real kernel of this project, a published implementation, or nothing.

Modelling a schedule that no one has built (fp8 FA2, FA1 on fp32) is useful, but a row must say
so. `backing(plan, hw)` gives one of:

- "kernel": this project's own kernel runs it (kernels/*.cu; `iosim bench` checks and times it);
- "published": no kernel here, but a published implementation runs it (the table below);
- "hypothetical": neither; the numbers are the model's alone.

And `footprint_bytes(plan)`: the HBM the Plan's tensors occupy at once (every tensor its kernels
read or write, at its full size), which `fits` compares with the profile's hbm_capacity_bytes.
"""

from __future__ import annotations

from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.plan import Plan
from iosim.core.problem import Direction
from iosim.kernels import kv_splits, supported
from iosim.model.memory import sizes

KERNEL, PUBLISHED, HYPOTHETICAL = "kernel", "published", "hypothetical"

# (schedule, direction) -> (dtypes, architectures, largest head_dim) of a published
# implementation, with where to find it.
PUBLISHED_IMPLEMENTATIONS = {
    # PyTorch's math backend of scaled_dot_product_attention materialises S and P.
    ("naive", "fwd"): ({"fp16", "bf16", "fp32"}, {"sm_80", "sm_90a"}, None),
    ("naive", "bwd"): ({"fp16", "bf16", "fp32"}, {"sm_80", "sm_90a"}, None),
    # the FA papers' benchmark baseline (iosim.schedules.standard) is PyTorch code: it runs
    # wherever torch does, forward
    ("standard", "fwd"): ({"fp16", "bf16", "fp32"}, {"sm_80", "sm_90a"}, None),
    ("standard", "bwd"): ({"fp16", "bf16", "fp32"}, {"sm_80", "sm_90a"}, None),
    # github.com/Dao-AILab/flash-attention v1.x (Dao et al. 2022): fp16/bf16, head_dim <= 128.
    ("fa1", "fwd"): ({"fp16", "bf16"}, {"sm_80", "sm_90a"}, 128),
    ("fa1", "bwd"): ({"fp16", "bf16"}, {"sm_80", "sm_90a"}, 128),
    # flash-attention v2.x (Dao 2023): fp16/bf16, head_dim <= 256, Ampere and later.
    ("fa2", "fwd"): ({"fp16", "bf16"}, {"sm_80", "sm_90a"}, 256),
    ("fa2", "bwd"): ({"fp16", "bf16"}, {"sm_80", "sm_90a"}, 256),
    # flash-attention's hopper/ (FlashAttention-3, Shah et al. 2024): fp16/bf16 forward and
    # backward, fp8 e4m3 forward, Hopper only.
    ("fa3", "fwd"): ({"fp16", "bf16", "fp8_e4m3"}, {"sm_90a"}, 256),
    ("fa3", "bwd"): ({"fp16", "bf16"}, {"sm_90a"}, 256),
    # flash-attention v2.x's flash_attn_with_kvcache: split-KV decode (num_splits), GQA, paged
    # K/V (block_table), sliding windows; fp16/bf16, head_dim <= 256, Ampere and later.
    ("decode", "fwd"): ({"fp16", "bf16"}, {"sm_80", "sm_90a"}, 256),
}


def backing(plan: Plan, hw: HardwareProfile) -> str:
    """KERNEL, PUBLISHED or HYPOTHETICAL for this (schedule, problem, hardware)."""
    p = plan.problem
    try:
        supported(plan)
        return KERNEL
    except InputError:
        pass
    dtypes, archs, max_d = PUBLISHED_IMPLEMENTATIONS.get((plan.schedule, p.direction.value),
                                                         (set(), set(), None))
    if p.dtype.value in dtypes and hw.arch in archs and (max_d is None or p.head_dim <= max_d):
        return PUBLISHED
    return HYPOTHETICAL


_INPUTS = frozenset({"Q", "K", "V", "dO"})  # a backward's inputs


def _touched(plan: Plan, touched: set[str] | None) -> set[str]:
    """The tensors a Plan holds in HBM: those its kernels read or write (`touched`, where the
    caller has them), and a backward's inputs, which live whether or not a kernel reads them."""
    names = set(plan.traffic.reads) | set(plan.traffic.writes) if touched is None else touched
    return names | _INPUTS if plan.problem.direction is Direction.bwd else names


def tensor_bytes(plan: Plan, size: dict[str, int] | None = None,
                 touched: set[str] | None = None) -> dict[str, int]:
    """Bytes of every tensor a Plan's kernels touch in HBM, at its full size (`size`: the
    Plan's memory.sizes; `touched`: the tensors its kernels read or write; where the caller
    has them)."""
    size = sizes(plan.problem, kv_splits(plan)) if size is None else size
    return {n: size[n] for n in sorted(_touched(plan, touched)) if n in size}


def touched_bytes(plan: Plan, size: dict[str, int], touched: set[str]) -> int:
    """Σ tensor_bytes (ints: any order sums them alike), without its dict."""
    return sum(map(size.__getitem__, filter(size.__contains__, _touched(plan, touched))))


def footprint_bytes(plan: Plan) -> int:
    return sum(tensor_bytes(plan).values())


__all__ = ["HYPOTHETICAL", "KERNEL", "PUBLISHED", "backing", "footprint_bytes", "tensor_bytes",
           "touched_bytes"]
