"""Tensor maps (CUtensorMap) for the TMA copies of kernels/fa3.cu and fa3_bwd.cu (there also
fp32 dQacc, 32-column boxes, for its copy engine's reduce-adds), through cuda-bindings.

A (batch, heads, N, d) tensor is described as the 3-D tensor (d, N, batch*heads), innermost
first, so that a box never crosses from one head into the next: rows past N are zero-filled by
the copy engine. Boxes are 128 bytes wide (the 128-byte swizzle's span: 64 bf16/fp16 or 128 fp8
columns), or 64 / 32 with the 64- / 32-byte swizzle (e4m3 rows of d = 64; Vt8 panels of 64 or 32
keys), by `box_rows` rows by one head;
the kernel loads d*element_size/box_bytes of them per tile.
"""

from __future__ import annotations

import ctypes

import numpy as np

from iosim.kernels import SWIZZLE_BYTES as BOX_BYTES  # one swizzled row: 64 bf16/fp16 or 128 fp8

# What CuPy passes by value for a `const __grid_constant__ TmaDesc` parameter: 128 raw bytes.
TMAP_DTYPE = np.dtype({"names": ["opaque"], "formats": [(np.uint8, (128,))]})


SWIZZLES = {128: "CU_TENSOR_MAP_SWIZZLE_128B", 64: "CU_TENSOR_MAP_SWIZZLE_64B",
            32: "CU_TENSOR_MAP_SWIZZLE_32B"}


def tensor_map(t, box_rows: int, box_bytes: int = BOX_BYTES) -> np.ndarray:
    """The encoded tensor map of a contiguous 4-D torch tensor `t` (bf16, fp16, float8_e4m3fn,
    uint8 holding e4m3, or float32),
    as a one-element numpy array of TMAP_DTYPE (a CuPy kernel argument)."""
    import torch
    from cuda.bindings import driver as cu

    types = {torch.bfloat16: cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
             torch.float16: cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
             torch.float8_e4m3fn: cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8,
             torch.uint8: cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_UINT8,
             torch.float32: cu.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT32}
    b, h, n, d = t.shape
    e = t.element_size()
    box_cols = box_bytes // e
    if box_bytes not in SWIZZLES or not t.is_contiguous() or (d * e) % 16 or t.dtype not in types:
        raise ValueError(f"tensor map needs a contiguous bf16/fp16/fp8/uint8/fp32 (B, H, N, d) tensor "
                         f"with rows a multiple of 16 bytes and a box of 32, 64 or 128 bytes; got "
                         f"{tuple(t.shape)} {t.dtype}, box {box_bytes} bytes")
    dtype = types[t.dtype]
    u64, u32 = cu.cuuint64_t, cu.cuuint32_t  # the bindings take typed sizes, not ints
    err, tmap = cu.cuTensorMapEncodeTiled(
        dtype, 3, t.data_ptr(), [u64(d), u64(n), u64(b * h)], [u64(d * e), u64(n * d * e)],
        [u32(box_cols), u32(box_rows), u32(1)], [u32(1)] * 3,
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(cu.CUtensorMapSwizzle, SWIZZLES[box_bytes]),
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed ({err.name}) for shape {tuple(t.shape)}, "
                           f"box {box_cols}x{box_rows}")
    raw = ctypes.string_at(tmap.getPtr(), TMAP_DTYPE.itemsize)
    return np.frombuffer(raw, np.uint8).copy().view(TMAP_DTYPE)
