"""Every real kernel compiles offline with nvcc, at the tiles the Plans choose, with no register
spills and no stack frame (no GPU needed; skipped with a reason where nvcc is absent)."""

from __future__ import annotations

import pytest

from iosim.gpu.compile import nvcc_available, nvcc_resources
from iosim.hardware import load
from iosim.problem import Problem
from iosim.schedules import plan

pytestmark = pytest.mark.skipif(not nvcc_available(), reason="nvcc not on PATH (CUDA toolkit)")

PROFILES = {"sm_90a": "h100-sxm5-80gb", "sm_80": "a100-sxm4-80gb"}


def cases() -> list[tuple]:
    """(source, entry, defines, dtype, arch) of every kernel the Plans launch, deduplicated.
    N = 4096 and 16384 exercise two softmax widths; N = 200000 the two-pass softmax."""
    seen = {}
    for arch, hw_name in PROFILES.items():
        hw = load(hw_name)
        for dtype in ("bf16", "fp16") if arch == "sm_90a" else ("bf16",):
            for d in (64, 128, 256):
                for causal in (False, True):
                    for n in (4096, 16384, 200000):
                        p = Problem(batch=1, heads=2, seqlen_q=n, head_dim=d, dtype=dtype,
                                    causal=causal)
                        for s in ("naive", "fa1", "fa2") if n < 200000 else ("naive",):
                            for k in plan(s, p, hw).kernels:
                                key = (k.source, k.name, tuple(sorted(k.defines.items())), dtype, arch)
                                seen[key] = key
    return list(seen)


@pytest.mark.parametrize("source,entry,defines,dtype,arch", cases(),
                         ids=lambda x: x if isinstance(x, str) else None)
def test_kernel_compiles_without_spills(source, entry, defines, dtype, arch):
    res = nvcc_resources(source, entry, dict(defines), dtype, arch)
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res
    assert res["stack_frame"] == 0, res
    assert 0 < res["registers"] <= 255, res
