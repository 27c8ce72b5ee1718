"""iosim: IO-complexity simulator and GPU roofline tool for attention schedules."""

__version__ = "0.1.0"

from iosim.core.hardware import HardwareProfile, InputError  # noqa: E402
from iosim.core.hardware import load as load_hw  # noqa: E402
from iosim.core.problem import Direction, Dtype, Problem  # noqa: E402

# predict and sweep return DataFrames: they (and pandas) are imported on first use, so that
# planning (`iosim.schedules.plan`) and the CLI start without pandas
_LAZY = {"predict": "iosim.analysis.predict", "predict_many": "iosim.analysis.predict",
         "sweep": "iosim.analysis.sweep"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # once: later look-ups find it directly
        return value
    raise AttributeError(f"module 'iosim' has no attribute '{name}'")


__all__ = ["Direction", "Dtype", "HardwareProfile", "InputError", "Problem", "load_hw", "predict",
           "predict_many", "sweep"]
