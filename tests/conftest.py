import os

import pytest
from hypothesis import settings

# CI (and anyone who sets CI): the same examples every run, none saved between runs, so a
# property test never fails by the luck of the draw or by a remembered example.
settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


def _gpu_missing() -> str | None:
    try:
        import cupy  # noqa: F401
        import torch
    except ImportError as e:
        return f"needs CuPy and PyTorch with CUDA ({e.name} is not installed)"
    if not torch.cuda.is_available():
        return "needs an NVIDIA GPU (no CUDA device)"
    return None


def pytest_collection_modifyitems(config, items):
    gpu = [i for i in items if "gpu" in i.keywords]
    if not gpu:
        return
    why = _gpu_missing()
    if why:
        for item in gpu:
            item.add_marker(pytest.mark.skip(reason=why))
