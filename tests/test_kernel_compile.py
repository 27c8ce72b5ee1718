"""Every fa2 configuration we ship compiles offline with nvcc, without register spills or a
stack frame (no GPU needed; skipped when nvcc is not on PATH)."""

from __future__ import annotations

import itertools

import pytest

from iosim.gpu.compile import nvcc_available, nvcc_resources
from iosim.gpu.tiles import fa2_defines

pytestmark = pytest.mark.skipif(not nvcc_available(), reason="nvcc not on PATH")

HEAD_DIMS = (64, 128, 256)
CAUSAL = (False, True)
DTYPES = ("bf16", "fp16")
ARCHS = ("sm_80", "sm_90a")


def fa2_case_defines(head_dim: int, causal: bool) -> dict[str, int]:
    # One line to switch to the Plan's defines once it owns fa2 tiling.
    return fa2_defines(head_dim, causal)


@pytest.mark.parametrize(
    "head_dim,causal,dtype,arch", list(itertools.product(HEAD_DIMS, CAUSAL, DTYPES, ARCHS)))
def test_fa2_compiles_without_spills(head_dim, causal, dtype, arch):
    defines = fa2_case_defines(head_dim, causal)
    res = nvcc_resources("fa2.cu", "fa2_fwd", defines, dtype, arch)
    assert res["spill_stores"] == 0, res
    assert res["spill_loads"] == 0, res
    assert res["stack_frame"] == 0, res
    assert 0 < res["registers"] <= 255, res
    assert res["smem_static"] == 0, res  # all shared memory is dynamic (KernelPlan.smem_bytes)
