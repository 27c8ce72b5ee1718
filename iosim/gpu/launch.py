"""Launch a Plan's real kernels (kernels/*.cu) on CuPy/torch device buffers.

Each KernelPlan names its entry; its KernelSpec (iosim.kernels.SPECS) gives the arguments in
launch order and its tensor maps, iosim.kernels.TENSORS the shapes and dtypes of the workspaces
(S, P, Oacc, ℓ, m) allocated here; tiles, grid, threads and shared memory come from the Plan.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iosim.core.plan import Plan
from iosim.gpu.compile import compile_kernel, launch
from iosim.kernels import (
    INDEX_TENSORS,
    SPECS,
    TENSORS,
    ZEROED_TENSORS,
    kv_splits,
    supported,
    tensor_shape,
    tma_box_bytes,
)


def buffer(torch, p, name: str, elem, device, splits: int = 1):
    """An uninitialised device tensor `name` of problem p (iosim.kernels.TENSORS); e4m3 copies
    as uint8 (their bytes: TMA copies them as such, and 0x7F is e4m3's NaN for the poison);
    `splits`: a split-KV Plan's (the partials' S)."""
    t = TENSORS[name]
    dtype = torch.float32 if t.f32 else torch.uint8 if t.e4m3 else \
        torch.int32 if name in INDEX_TENSORS else elem
    make = torch.zeros if name in ZEROED_TENSORS else torch.empty
    return make(*tensor_shape(p, name, splits), dtype=dtype, device=device)


def tensor_maps(plan: Plan, buf: dict) -> dict:
    """The TMA descriptors the Plan's kernels take (KernelSpec.tensor_maps), over `buf`."""
    from iosim.gpu.tma import tensor_map

    return {n: tensor_map(buf[tensor], rows if isinstance(rows, int) else k.defines[rows],
                          tma_box_bytes(rows, k.defines, buf[tensor].element_size()))
            for k in plan.kernels
            for n, (tensor, rows) in SPECS[k.name].tensor_maps.items()}


def paged_cache(torch, p, k, v) -> dict:
    """K and V copied into a paged cache (Problem.page_size tokens x KVH x d a page), the pages
    in a random order, with the int32 block table that finds them: {Kc, Vc, BlockTable}."""
    ps, nk, b = p.page_size, p.seqlen_k, p.batch
    npg = -(-nk // ps)
    perm = torch.randperm(b * npg, device=k.device)

    def pages(x):  # (B, KVH, Nk, d) -> pages (B·NP, page, KVH, d), page i at perm[i]
        x = torch.nn.functional.pad(x, (0, 0, 0, npg * ps - nk))
        x = x.view(b, p.kv_heads, npg, ps, p.head_dim).permute(0, 2, 3, 1, 4)
        out = torch.empty((b * npg, ps, p.kv_heads, p.head_dim), dtype=x.dtype, device=x.device)
        out[perm] = x.reshape(b * npg, ps, p.kv_heads, p.head_dim)
        return out

    return {"Kc": pages(k), "Vc": pages(v),
            "BlockTable": perm.to(torch.int32).view(b, npg).contiguous()}


def scalars(p) -> dict:
    """The scalar arguments of every entry (int32 sizes, float32 softmax scale)."""
    return {"Nq": np.int32(p.seqlen_q), "Nk": np.int32(p.seqlen_k), "H": np.int32(p.heads),
            "KVH": np.int32(p.kv_heads), "scale": np.float32(p.scale), "B": np.int32(p.batch)}


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
        p = self.plan.problem
        inputs = {"Q": self.q, "K": self.k, "V": self.v}
        names = {n for k in self.plan.kernels for n in SPECS[k.name].args if n in TENSORS}
        names |= {t for k in self.plan.kernels for t, _ in SPECS[k.name].tensor_maps.values()
                  if t not in inputs}
        if "BlockTable" in names:  # a paged cache: K and V scattered over pages
            inputs.update(paged_cache(torch, p, self.k, self.v))
        splits = kv_splits(self.plan)
        self.buf = {n: inputs.get(n) if n in inputs else buffer(torch, p, n, self.q.dtype,
                                                                 self.q.device, splits)
                    for n in sorted(names)}
        self.buf.update(inputs)
        self.scalars = scalars(p) | tensor_maps(self.plan, self.buf)
        self.kernels = [(k, compile_kernel(k.source, k.name, k.defines, p.dtype.value))
                        for k in self.plan.kernels]
        self._given_fp8()

    def _given_fp8(self) -> None:
        """fp8_scaling `given`: the Plan is the attention kernel alone, on e4m3 inputs; they are
        made here once, untimed, from the bf16 ones by the per-tensor quantisation kernels."""
        p = self.plan.problem
        if p.dtype.value != "fp8_e4m3" or p.fp8_scaling.value != "given":
            return
        import torch

        from iosim.core.problem import Fp8Scaling
        from iosim.schedules.fa3 import quant_kernels

        tensor = p.model_copy(update={"fp8_scaling": Fp8Scaling.tensor})
        pre = quant_kernels(tensor, self.plan.main.block_m, self.plan.main.block_n)
        for n in {n for k in pre for n in SPECS[k.name].args if n in TENSORS} - set(self.buf):
            self.buf[n] = buffer(torch, p, n, self.q.dtype, self.q.device)
        for k in pre:
            fn = compile_kernel(k.source, k.name, k.defines, p.dtype.value)
            launch(fn, k.grid, k.threads, k.smem_bytes,
                   tuple(self._arg(a) for a in SPECS[k.name].args))

    def poison(self) -> None:
        """NaN-fill every output and workspace so an element the kernels skip fails the check."""
        written = {n for k in self.plan.kernels for n in SPECS[k.name].writes}
        for n, t in self.buf.items():
            if n in written:
                t.fill_(0x7F if TENSORS[n].e4m3 else float("nan"))

    def _arg(self, name: str):
        if name in self.scalars:
            return self.scalars[name]
        return np.uint64(self.buf[name].data_ptr())  # a device pointer, passed by value

    def __call__(self) -> None:
        for k, fn in self.kernels:
            launch(fn, k.grid, k.threads, k.smem_bytes, tuple(self._arg(a) for a in SPECS[k.name].args))

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

    def only(self, entry: str):
        """A callable that launches one kernel of the Plan (e.g. to time it alone), on the
        buffers the kernels before it left."""
        k, fn = next((k, fn) for k, fn in self.kernels if k.name == entry)
        args = tuple(self._arg(a) for a in SPECS[k.name].args)
        return lambda: launch(fn, k.grid, k.threads, k.smem_bytes, args)
