"""Predict: one row per (hardware, schedule, direction, problem) with the shared columns."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from iosim.analysis import table
from iosim.analysis.table import predictable
from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.plan import Plan
from iosim.core.problem import Direction, Problem
from iosim.schedules import ALL, DEFAULT, SCHEDULES, Tiles, defaults_for, plan
from iosim.schedules.knobs import TunedTiles

if TYPE_CHECKING:
    import pandas as pd


def row(pl: Plan, hw: HardwareProfile) -> dict:
    """The shared columns for one Plan, plus per-row extras (intensity, notes)."""
    return rows([(pl, hw)])[0]


def rows(items: list[tuple[Plan, HardwareProfile]]) -> list[dict]:
    """row() of many (Plan, profile) pairs, predicted in one batch (each Plan a template of
    its own problem: iosim.analysis.table)."""
    if not items:
        return []
    return table.as_rows(table.columns([table.Template(pl, hw, [pl.problem]) for pl, hw in items]))


class _collector_paused:
    """Python's cyclic garbage collector off for a batch's call, as it was after: the batch
    builds tens of thousands of short-lived lists, tuples and arrays, which reference counting
    frees (the call leaves no cycles: gc.collect() after it finds none), and the collector's
    passes over them (about 20 in a call of 7,680 rows) cost some 4% of its CPU time. (A class:
    contextlib's generator-made manager costs a one-problem call more than its few passes.)"""

    __slots__ = ("was",)

    def __enter__(self) -> None:
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc) -> None:
        if self.was:
            gc.enable()


def predict_many(problems: Sequence[Problem], hw: HardwareProfile,
                 schedules: Sequence[str] | None = None, tiles: Tiles = DEFAULT,
                 tuned: TunedTiles | None = None, limiter: bool = True) -> pd.DataFrame:
    """predict's rows for many problems at once, schedule by schedule, problems in order: the
    problems of one shape share a template Plan and all are predicted in one batch
    (iosim.analysis.table). `limiter=False` leaves `bound` empty: the time alone, what a cost
    function needs, at about a third of the cost. A (schedule, problem) that cannot be planned
    is left out, counted by reason in `df.attrs["skipped"]`."""
    with _collector_paused():
        return _predict_many(problems, hw, schedules, tiles, tuned, limiter)


def _predict_many(problems: Sequence[Problem], hw: HardwareProfile, schedules: Sequence[str] | None,
                  tiles: Tiles, tuned: TunedTiles | None, limiter: bool) -> pd.DataFrame:
    from collections import Counter

    names = list(schedules or [s for s in ALL if s != "fa3" or hw.has_wgmma])
    for s in names:
        if s not in SCHEDULES:
            raise InputError(f"unknown schedule '{s}' (allowed: {', '.join(SCHEDULES)})")
    problems = list(problems)
    keys = [p.shape_key() for p in problems]  # once, for every schedule's shapes
    temps, skipped = [], Counter()
    for s in names:
        ts, order, errors = table.templates(problems, hw, s, tiles, tuned, keys=keys)
        for e, n in errors:
            skipped[str(e)] += n
        temps.append((ts, order))
    # each schedule's problems in the templates' order, and back to the problems' order
    orders = [np.asarray(order, np.int64) for _, order in temps]
    at = np.concatenate(orders) if orders else np.zeros(0, np.int64)
    cols = (table.columns([t for ts, _ in temps for t in ts], limiter, coded=True, rows=(problems, at))
            if len(at) else {})
    sizes = [len(order) for order in orders]
    perm = np.concatenate([start + np.argsort(order, kind="stable") for order, start in zip(
        orders, np.cumsum(sizes) - sizes)]) if orders else []
    df = table.as_frame(table.take(cols, perm)) if cols else table.as_frame({})
    df.attrs["skipped"] = dict(skipped)
    return df


def directions(direction: str) -> list[Direction]:
    return [Direction.fwd, Direction.bwd] if direction == "both" else [Direction(direction)]


def predict_rows(problem: Problem, hw: HardwareProfile, schedules: list[str] | None = None,
                 tiles: Tiles = DEFAULT, tuned: TunedTiles | None = None) -> tuple[list[dict], dict]:
    """`predict`'s rows as dicts, and {schedule: why it was left out}: the same table without
    pandas (the CLI's default table prints these, and starts faster for it)."""
    with _collector_paused():
        cols, skipped = _columns(problem, hw, schedules, tiles, tuned)
        return table.as_rows(cols), skipped


def _columns(problem: Problem, hw: HardwareProfile, schedules: list[str] | None, tiles: Tiles,
             tuned: TunedTiles | None) -> tuple[dict, dict]:
    """predict's table as columns (table.columns'), with each row's ratios to naive, and
    {schedule: why it was left out}."""
    names = schedules or [s for s in defaults_for(problem) if s != "fa3" or hw.has_wgmma]
    for s in names:
        if s not in SCHEDULES:
            raise InputError(f"unknown schedule '{s}' (allowed: {', '.join(SCHEDULES)})")
    plans, skipped = [], {}
    try:  # predictable's check of the profile's rate for the dtype, once: a Plan's problem is this
        hw.tensor_peak(problem.dtype)
        no_rate = None
    except InputError as e:
        no_rate = e
    for s in names:  # a schedule that cannot be planned is said why, the others still predicted
        try:
            pl = plan(s, problem, hw, tiles, check=True, tuned=tuned)
            if no_rate is not None or pl.problem.dtype is not problem.dtype:
                pl = predictable(pl, hw)  # (raises what it raises)
            plans.append(pl)
        except InputError as e:
            skipped[s] = str(e).removeprefix(f"{s}: ")
    if not plans:
        raise InputError("no schedule can run this problem: "
                         + "; ".join(f"{s}: {why}" for s, why in skipped.items()))
    cols = table.columns([table.Template(pl, hw, [pl.problem]) for pl in plans])
    if "naive" in cols["schedule"]:  # as Python divides a row's values (ints past 2^53 too)
        i = cols["schedule"].index("naive")
        two = [r + w for r, w in zip(table._py(cols["hbm_read_bytes_2level"]),
                                     table._py(cols["hbm_write_bytes_2level"]))]
        t = cols["time_pred_ms"].tolist()
        cols["hbm_vs_naive"] = [x / two[i] for x in two]
        cols["time_vs_naive"] = [x / t[i] for x in t]
    return cols, skipped


def predict(problem: Problem, hw: HardwareProfile, schedules: list[str] | None = None,
            tiles: Tiles = DEFAULT, tuned: TunedTiles | None = None) -> pd.DataFrame:
    """All schedules side by side for one problem (fa3 is left out on GPUs without wgmma
    unless asked for by name). Adds each schedule's ratios to naive. A schedule that cannot be
    planned (tiles over the SRAM, head_dim out of range) is left out, with the reason in
    `df.attrs["skipped"]`; InputError only when none can. `tuned`: a tiles file's entries."""
    with _collector_paused():  # (as predict_many's: a few collections a call, on no cycles)
        cols, skipped = _columns(problem, hw, schedules, tiles, tuned)
        df = table.as_frame(cols, dicts=True)  # the frame of the rows' dicts, built from the columns
    df.attrs["skipped"] = skipped  # schedule -> why it was left out
    return df
