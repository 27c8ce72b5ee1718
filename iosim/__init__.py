"""iosim: IO-complexity simulator and GPU roofline tool for attention schedules."""

__version__ = "0.1.0"

from iosim.analysis.predict import predict  # noqa: E402
from iosim.analysis.sweep import sweep  # noqa: E402
from iosim.core.hardware import HardwareProfile, InputError  # noqa: E402
from iosim.core.hardware import load as load_hw
from iosim.core.problem import Direction, Dtype, Problem  # noqa: E402

__all__ = ["Direction", "Dtype", "HardwareProfile", "InputError", "Problem", "load_hw", "predict", "sweep"]
