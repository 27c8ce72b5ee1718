"""iosim: IO-complexity simulator and GPU roofline tool for attention schedules."""

__version__ = "0.1.0"

from .hardware import HardwareProfile, InputError, load as load_hw  # noqa: E402
from .predict import predict  # noqa: E402
from .problem import Direction, Dtype, Problem  # noqa: E402

__all__ = ["Direction", "Dtype", "HardwareProfile", "InputError", "Problem", "load_hw", "predict"]
