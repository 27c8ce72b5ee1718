"""The suite's one conftest: the Hypothesis profile, the layer markers, and GPU skips.

Every test gets exactly one layer marker (registered in pyproject.toml): by its module (LAYERS),
`property` for a Hypothesis test, or the one it names itself. `slow` marks the tests that keep
`pytest -m "not slow"` from being a one-minute run: the compile and browser layers and SLOW."""

import os
from functools import lru_cache

import pytest
from hypothesis import settings

# CI (and anyone who sets CI): the same examples every run, none saved between runs, so a
# property test never fails by the luck of the draw or by a remembered example. The only
# profile: a module sets its tests' own limits with @settings, never a profile of its own.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

LAYER_MARKERS = ("unit", "property", "accuracy", "compile", "browser", "gpu")
LAYERS = {
    "test_backward_plans": "unit",
    "test_bench_decode": "unit",
    "test_bound": "property",
    "test_calibrate": "accuracy",
    "test_cli_hardening": "unit",
    "test_decode_measured": "accuracy",
    "test_executor": "property",
    "test_fp8": "unit",
    "test_gpu_fp8": "gpu",
    "test_explain_tune": "unit",
    "test_fa1_split": "unit",
    "test_fast_stream": "unit",
    "test_gpu_backward": "gpu",
    "test_gpu_decode": "gpu",
    "test_gpu_hardening": "gpu",
    "test_gpu_kernels": "gpu",
    "test_hardware_cli": "unit",
    "test_kernel_compile": "compile",
    "test_kernels_spec": "unit",
    "test_mechanisms": "accuracy",
    "test_memory": "unit",
    "test_output_conventions": "unit",
    "test_paper_counts": "unit",
    "test_paper_schedules": "unit",  # its torch_math test: accuracy
    "test_published": "accuracy",
    "test_report": "unit",
    "test_report_browser": "browser",
    "test_suite": "unit",
    "test_sweep": "unit",
    "test_vectorised": "unit",
    "test_timing": "unit",
    "test_validation": "accuracy",
    "test_whatif": "unit",
    "test_writes_and_filters": "unit",
}
SLOW_LAYERS = ("compile", "browser")  # nvcc and NVRTC builds; chromium runs
# tests of the other layers that take several seconds each on a 2-core machine
SLOW = {"test_fuzz_every_command_exits_0_or_2_without_traceback"}


@lru_cache(maxsize=1)
def _gpu_missing() -> str | None:
    try:
        import cupy  # noqa: F401
        import torch
    except ImportError as e:
        return f"needs CuPy and PyTorch with CUDA ({e.name} is not installed)"
    if not torch.cuda.is_available():
        return "needs an NVIDIA GPU (no CUDA device)"
    return None


def layer(item: pytest.Item) -> str:
    own = [m for m in LAYER_MARKERS if item.get_closest_marker(m)]
    if len(own) > 1:
        raise pytest.UsageError(f"{item.nodeid}: more than one layer marker ({', '.join(own)})")
    if own:
        return own[0]
    if getattr(item.obj, "is_hypothesis_test", False):
        return "property"
    module = item.module.__name__.rpartition(".")[2]
    if module not in LAYERS:
        raise pytest.UsageError(f"{item.nodeid}: {module} has no layer; add it to LAYERS in "
                                f"tests/conftest.py (allowed: {', '.join(LAYER_MARKERS)})")
    return LAYERS[module]


def pytest_collection_modifyitems(config, items):
    for item in items:
        kind = layer(item)
        item.add_marker(kind)
        if kind in SLOW_LAYERS or getattr(item, "originalname", item.name) in SLOW:
            item.add_marker("slow")
        if kind == "gpu" and _gpu_missing():
            item.add_marker(pytest.mark.skip(reason=_gpu_missing()))
