"""Tensor maps (CUtensorMap) for the TMA copies of kernels/fa3.cu, through cuda-bindings.

A (batch, heads, N, d) tensor is described as the 3-D tensor (d, N, batch*heads), innermost
first, so that a box never crosses from one head into the next: rows past N are zero-filled by
the copy engine. Boxes are 64 columns (128 bytes, the 128-byte swizzle's span) by `box_rows`
rows by one head; the kernel loads d/64 of them per tile.
"""

from __future__ import annotations

import ctypes

import numpy as np

BOX_COLS = 64  # elements of one 128-byte swizzled row (2-byte dtypes)
# What CuPy passes by value for a `const __grid_constant__ TmaDesc` parameter: 128 raw bytes.
TMAP_DTYPE = np.dtype({"names": ["opaque"], "formats": [(np.uint8, (128,))]})


def tensor_map(t, box_rows: int) -> np.ndarray:
    """The encoded tensor map of a contiguous 4-D torch tensor `t` (bf16 or fp16), as a
    one-element numpy array of TMAP_DTYPE (a CuPy kernel argument)."""
    import torch
    from cuda.bindings import driver as cu

    b, h, n, d = t.shape
    if not t.is_contiguous() or d % BOX_COLS or t.element_size() != 2:
        raise ValueError(f"tensor map needs a contiguous 2-byte (B, H, N, d) tensor with d a "
                         f"multiple of {BOX_COLS}; got {tuple(t.shape)} {t.dtype}")
    dtype = {torch.bfloat16: cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
             torch.float16: cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16}[t.dtype]
    e = t.element_size()
    u64, u32 = cu.cuuint64_t, cu.cuuint32_t  # the bindings take typed sizes, not ints
    err, tmap = cu.cuTensorMapEncodeTiled(
        dtype, 3, t.data_ptr(), [u64(d), u64(n), u64(b * h)], [u64(d * e), u64(n * d * e)],
        [u32(BOX_COLS), u32(box_rows), u32(1)], [u32(1)] * 3,
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed ({err.name}) for shape {tuple(t.shape)}, "
                           f"box {BOX_COLS}x{box_rows}")
    raw = ctypes.string_at(tmap.getPtr(), TMAP_DTYPE.itemsize)
    return np.frombuffer(raw, np.uint8).copy().view(TMAP_DTYPE)
