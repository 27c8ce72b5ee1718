"""The schedules, by name. Each module's `plan(problem, hw, tiles)` returns a Plan."""

from __future__ import annotations

from ..hardware import HardwareProfile, InputError
from ..plan import Plan
from ..problem import Problem
from . import fa1, fa2, fa3, naive
from .base import Tiles

SCHEDULES = {"naive": naive.plan, "fa1": fa1.plan, "fa2": fa2.plan, "fa3": fa3.plan}


def plan(name: str, problem: Problem, hw: HardwareProfile, tiles: Tiles = Tiles()) -> Plan:
    if name not in SCHEDULES:
        raise InputError(f"unknown schedule '{name}' (allowed: {', '.join(SCHEDULES)})")
    return SCHEDULES[name](problem, hw, tiles)


__all__ = ["SCHEDULES", "Tiles", "plan"]
