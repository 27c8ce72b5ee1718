"""Launch a Plan's real kernels (kernels/*.cu) on CuPy/torch device buffers.

Each KernelPlan names its entry; the arguments come from a table keyed by entry name, in the
order docs/kernel-contract.md gives. Workspaces (S, P, Oacc, ℓ, m) are allocated here with the
Plan's problem shapes; tiles, grid, threads and shared memory come from the Plan alone.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iosim.core.hardware import InputError
from iosim.core.plan import Plan
from iosim.core.problem import Direction
from iosim.gpu.compile import compile_kernel, launch

ARGS = {
    "naive_qk": ("Q", "K", "S", "Nq", "Nk", "H", "KVH", "scale"),
    "naive_softmax": ("S", "P", "Nq", "Nk"),
    "naive_pv": ("P", "V", "O", "Nq", "Nk", "H", "KVH"),
    "fa1_init": ("Oacc", "L", "M", "Nq"),
    "fa1_fwd": ("Q", "K", "V", "Oacc", "O", "L", "M", "Nq", "Nk", "H", "KVH", "scale"),
    "fa2_fwd": ("Q", "K", "V", "O", "LSE", "Nq", "Nk", "H", "KVH", "scale"),
    "fa3_fwd": ("TmQ", "TmK", "TmV", "O", "LSE", "Nq", "Nk", "H", "KVH", "scale"),
    # backward (iosim/gpu/backward.py): dKx, dVx are per-query-head dK, dV (dK, dV themselves
    # when kv_heads == heads); naive's dP re-uses the forward's S
    "naive_bwd_dv": ("P", "dO", "dVx", "Nq", "Nk", "H", "KVH"),
    "naive_bwd_dp": ("dO", "V", "dP", "Nq", "Nk", "H", "KVH"),
    "naive_bwd_softmax": ("P", "dP", "dS", "Nq", "Nk"),
    "naive_bwd_dq": ("dS", "K", "dQ", "Nq", "Nk", "H", "KVH", "scale"),
    "naive_bwd_dk": ("dS", "Q", "dKx", "Nq", "Nk", "H", "KVH", "scale"),
    "fa1_bwd_init": ("dQacc", "Nq"),
    "fa1_bwd": ("Q", "K", "V", "O", "dO", "L", "M", "dQacc", "dKx", "dVx", "Nq", "Nk", "H", "KVH",
                "scale"),
    "fa1_bwd_convert": ("dQacc", "dQ", "Nq"),
    "fa2_bwd_pre": ("O", "dO", "D", "dQacc", "Nq", "H"),
    "fa2_bwd": ("Q", "K", "V", "dO", "LSE", "D", "dQacc", "dKx", "dVx", "Nq", "Nk", "H", "KVH",
                "scale"),
    "fa2_bwd_convert": ("dQacc", "dQ", "Nq", "H", "scale"),
    "gqa_reduce": ("dKx", "dVx", "dK", "dV", "Nk", "H", "KVH"),
}
# Tensor-map arguments (iosim/gpu/tma.py): the tensor and the KernelPlan field giving box rows.
TENSOR_MAPS = {"TmQ": ("Q", "block_m"), "TmK": ("K", "block_n"), "TmV": ("V", "block_n")}
MAX_HEAD_DIM = 256  # every multiple of 8 up to this (16-byte rows; the kernels pad inside)
SUPPORTED_DTYPES = ("fp16", "bf16")
# Sources that pad any head_dim inside and take either causal alignment (CAUSAL_BOTTOM_RIGHT);
# a kernel from any other source runs head_dim 64, 128, 256 with the top-left mask only.
# (gqa_reduce.cu sums dK/dV rows of any multiple of 8 and masks nothing.)
ANY_HEAD_DIM_SOURCES = frozenset({"naive.cu", "fa1.cu", "fa2.cu", "gqa_reduce.cu"})
BASE_HEAD_DIMS = (64, 128, 256)
# The backward kernels that pad any head_dim (fa1.cu's fa1_bwd; gqa_reduce.cu sums rows of any
# multiple of 8); naive.cu's and fa2_bwd.cu's run 64, 128, 256 only.
ANY_HEAD_DIM_BWD_SOURCES = frozenset({"fa1.cu", "gqa_reduce.cu"})
# Sources that take either causal alignment (fa2_bwd.cu: CAUSAL_BOTTOM_RIGHT, head_dim 64, 128, 256)
EITHER_ALIGN_SOURCES = ANY_HEAD_DIM_SOURCES | {"fa2_bwd.cu"}


def supported(plan: Plan) -> None:
    """Refuse, in one line, a problem no real kernel exists for."""
    p = plan.problem
    if p.direction is Direction.bwd and any(k.source is None for k in plan.kernels):
        raise InputError(f"no real backward kernel for schedule {plan.schedule} "
                         "(allowed with --direction bwd: naive, fa1, fa2)")
    if p.direction is Direction.bwd and p.head_dim not in BASE_HEAD_DIMS and \
            {k.source for k in plan.kernels} - ANY_HEAD_DIM_BWD_SOURCES:
        raise InputError(f"head_dim={p.head_dim} has no real backward kernel for {plan.schedule} "
                         f"(allowed: {', '.join(map(str, BASE_HEAD_DIMS))}; any multiple of 8 "
                         "up to 256 with fa1)")
    if any(k.source is None for k in plan.kernels):
        raise InputError(f"no real kernel for schedule {plan.schedule} (allowed: naive, fa1, fa2, fa3)")
    if p.head_dim % 8 or p.head_dim > MAX_HEAD_DIM:
        raise InputError(f"head_dim={p.head_dim} has no real kernel "
                         f"(allowed: a multiple of 8 up to {MAX_HEAD_DIM})")
    if {k.source for k in plan.kernels} - ANY_HEAD_DIM_SOURCES:
        if p.head_dim not in BASE_HEAD_DIMS:
            raise InputError(f"head_dim={p.head_dim} has no real {plan.schedule} kernel "
                             f"(allowed: {', '.join(map(str, BASE_HEAD_DIMS))})")
        if p.causal and p.causal_offset and {k.source for k in plan.kernels} - EITHER_ALIGN_SOURCES:
            raise InputError(f"the real {plan.schedule} kernel masks top-left only "
                             "(allowed: --causal-align top-left, or Nq = Nk)")
    if p.dtype.value not in SUPPORTED_DTYPES:
        raise InputError(f"dtype {p.dtype.value} has no real kernel (allowed: fp16, bf16)")


@dataclass
class Launcher:
    """Compiled kernels of one Plan, bound to device buffers (torch tensors)."""

    plan: Plan
    q: object
    k: object
    v: object

    def __post_init__(self) -> None:
        import torch

        supported(self.plan)
        p, dev = self.plan.problem, self.q.device
        dt = self.q.dtype
        b, h, nq, nk, d = p.batch, p.heads, p.seqlen_q, p.seqlen_k, p.head_dim
        f32 = torch.float32
        names = {n for k in self.plan.kernels for n in ARGS[k.name]}
        shapes = {"O": ((b, h, nq, d), dt), "S": ((b, h, nq, nk), dt), "P": ((b, h, nq, nk), dt),
                  "Oacc": ((b, h, nq, d), f32), "L": ((b, h, nq), f32), "M": ((b, h, nq), f32),
                  "LSE": ((b, h, nq), f32)}
        self.buf = {n: torch.empty(*shapes[n][0], dtype=shapes[n][1], device=dev)
                    for n in names if n in shapes}
        self.buf.update(Q=self.q, K=self.k, V=self.v)
        self.scalars = {"Nq": np.int32(nq), "Nk": np.int32(nk), "H": np.int32(h),
                        "KVH": np.int32(p.kv_heads), "scale": np.float32(p.scale)}
        for k in self.plan.kernels:
            for n in ARGS[k.name]:
                if n in TENSOR_MAPS:
                    from iosim.gpu.tma import tensor_map

                    tensor, rows = TENSOR_MAPS[n]
                    self.scalars[n] = tensor_map(self.buf[tensor], getattr(k, rows))
        self.kernels = [(k, compile_kernel(k.source, k.name, k.defines, p.dtype.value))
                        for k in self.plan.kernels]

    def poison(self) -> None:
        """NaN-fill every output and workspace so an element the kernels skip fails the check."""
        for n, t in self.buf.items():
            if n not in ("Q", "K", "V"):
                t.fill_(float("nan"))

    def _arg(self, name: str):
        if name in self.scalars:
            return self.scalars[name]
        return np.uint64(self.buf[name].data_ptr())  # a device pointer, passed by value

    def __call__(self) -> None:
        for k, fn in self.kernels:
            launch(fn, k.grid, k.threads, k.smem_bytes, tuple(self._arg(a) for a in ARGS[k.name]))

    def outputs(self) -> dict:
        """O and the natural-log LSE (FA1 keeps ℓ and m: LSE = m + log ℓ; naive has none)."""
        out = {"O": self.buf["O"]}
        if "LSE" in self.buf:
            out["LSE"] = self.buf["LSE"]
        elif "L" in self.buf:
            out["LSE"] = self.buf["M"] + self.buf["L"].log()
        return out

    def entries(self) -> list[str]:
        return [k.name for k in self.plan.kernels]
