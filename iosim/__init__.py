"""iosim: IO-complexity simulator and GPU roofline tool for attention schedules."""

__version__ = "0.1.0"

from .hardware import HardwareProfile, InputError  # noqa: E402
from .hardware import load as load_hw
from .predict import predict  # noqa: E402
from .problem import Direction, Dtype, Problem  # noqa: E402
from .sweep import sweep  # noqa: E402

__all__ = ["Direction", "Dtype", "HardwareProfile", "InputError", "Problem", "load_hw", "predict", "sweep"]
