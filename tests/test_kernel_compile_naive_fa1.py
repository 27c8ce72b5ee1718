"""Offline compile checks for kernels/naive.cu and kernels/fa1.cu (no GPU needed).

Every entry is built with `nvcc -std=c++17 -cubin -Xptxas -v` for sm_80 and sm_90a
(`iosim.gpu.compile.nvcc_resources`) at the recommended tiles for head_dim 64/128/256 (see the
.cu headers), causal and not, bf16 (both targets) and fp16 (sm_90a, the mma entries), and must not spill:
0 bytes of spill stores and loads, no stack frame. Skipped with a reason where nvcc is absent.
"""
from __future__ import annotations

import pytest

from iosim.gpu.compile import nvcc_available, nvcc_resources

pytestmark = pytest.mark.skipif(not nvcc_available(), reason="nvcc not on PATH: offline compile checks need the CUDA toolkit")

# Recommended tiles per head_dim (documented in the kernel headers).
QK = {64: dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, STAGES=1, NUM_WARPS=8),
      128: dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, STAGES=2, NUM_WARPS=8),
      256: dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, STAGES=3, NUM_WARPS=8)}
PV = {64: dict(BLOCK_M=128, BLOCK_N=64, BLOCK_K=64, STAGES=4, NUM_WARPS=8),
      128: dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, STAGES=3, NUM_WARPS=8),
      256: dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, STAGES=3, NUM_WARPS=8)}
FA1 = {64: dict(BLOCK_M=64, BLOCK_N=128, NUM_WARPS=4),
       128: dict(BLOCK_M=128, BLOCK_N=128, NUM_WARPS=8),
       256: dict(BLOCK_M=64, BLOCK_N=64, NUM_WARPS=4)}


def _cases():
    cases = []
    for d in (64, 128, 256):
        cases.append(("naive.cu", "naive_qk", dict(NAIVE_QK=1, HEAD_DIM=d, IS_CAUSAL=0, **QK[d])))
        cases.append(("naive.cu", "naive_pv", dict(NAIVE_PV=1, HEAD_DIM=d, IS_CAUSAL=0, **PV[d])))
        for causal in (0, 1):
            cases.append(("fa1.cu", "fa1_fwd", dict(FA1_FWD=1, HEAD_DIM=d, IS_CAUSAL=causal, **FA1[d])))
        cases.append(("fa1.cu", "fa1_init", dict(FA1_INIT=1, HEAD_DIM=d, IS_CAUSAL=0, **FA1[d])))
    for causal in (0, 1):
        for row_in_smem in (0, 1):
            for threads in ((64, 1024) if causal else (256,)):
                cases.append(("naive.cu", "naive_softmax",
                              dict(NAIVE_SOFTMAX=1, HEAD_DIM=128, IS_CAUSAL=causal,
                                   SOFTMAX_THREADS=threads, ROW_IN_SMEM=row_in_smem)))
    # a GEMM tile with rows of 2 chunks (BLOCK_K=16) and a 4-warp 128x64 tile
    cases.append(("naive.cu", "naive_pv", dict(NAIVE_PV=1, HEAD_DIM=64, IS_CAUSAL=0, BLOCK_M=64,
                                               BLOCK_N=64, BLOCK_K=16, STAGES=3, NUM_WARPS=4)))
    cases.append(("naive.cu", "naive_qk", dict(NAIVE_QK=1, HEAD_DIM=64, IS_CAUSAL=0, BLOCK_M=128,
                                               BLOCK_N=64, BLOCK_K=32, STAGES=2, NUM_WARPS=4)))
    out = []
    for src, entry, defines in cases:
        targets = [("sm_80", "bf16"), ("sm_90a", "bf16")]
        if entry in ("naive_qk", "naive_pv", "fa1_fwd"):  # the entries with mma.sync
            targets.append(("sm_90a", "fp16"))
        for arch, dtype in targets:
            tag = "-".join(f"{k}{v}" for k, v in defines.items() if k not in (entry.upper(),))
            out.append(pytest.param(src, entry, defines, dtype, arch, id=f"{entry}-{arch}-{dtype}-{tag}"))
    return out


@pytest.mark.parametrize("source,entry,defines,dtype,arch", _cases())
def test_compiles_without_spills(source, entry, defines, dtype, arch):
    res = nvcc_resources(source, entry, defines, dtype, arch)
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res
    assert res["stack_frame"] == 0, res
    assert 0 < res["registers"] <= 255, res
