"""The schedules, by name. Each module's `plan(problem, hw, tiles)` returns a Plan."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.plan import Plan
from iosim.core.problem import Dtype, Problem
from iosim.schedules import decode, fa1, fa1_paper, fa2, fa3, knobs, naive, standard
from iosim.schedules.base import Tiles, check_deterministic, check_window

# naive: the lean unfused baseline (our kernels); standard: the FA papers' PyTorch baseline;
# fa1_paper: Algorithm 1 at the paper's block sizes (the model's alone)
SCHEDULES = {"naive": naive.plan, "standard": standard.plan, "fa1": fa1.plan,
             "fa1_paper": fa1_paper.plan, "fa2": fa2.plan, "fa3": fa3.plan, "decode": decode.plan}


# what `all` (and predict's and sweep's default) means: every schedule for any problem; decode
# (Nq <= 16 query rows, forward) joins predict's default for the problems it takes, and is
# otherwise asked for by name
ALL = [s for s in SCHEDULES if s != "decode"]


# the schedules whose Plans also choose something from batch x heads: that choice (`layout`)
LAYOUTS = {"fa1": fa1.layout, "decode": decode.shape_layout, "standard": standard.layout,
           "fa3": fa3.layout}
# what a LAYOUTS function reads of a problem besides its shape_key (the rest: batch, heads
# and kv_heads whole): fa1 splits by the CTAs of batch x heads alone; fa3 reads batch and heads
# for its persistent fp8 grid alone (fa3.fp8_persistent), nothing for other dtypes
LAYOUT_INPUT = {"fa1": lambda p: p.bh,
                "fa3": lambda p: (p.batch, p.heads) if p.dtype is Dtype.fp8_e4m3 else ()}
# the schedules whose counts are affine, not proportional, in batch x kv_heads: the papers'
# PyTorch baseline builds its causal mask once (Nq x Nk), whatever the batch and heads
AFFINE = {"standard"}
# the LAYOUTS whose layouts of one shape at each of its LAYOUT_INPUT are worked out at once
# (fa1's split of batch x heads CTAs: every count's waves a row of one numpy pass; a grid of
# batch and head counts asks for hundreds a shape)
BATCHED = {"fa1": fa1.layouts}


def shape(name: str, problem: Problem, hw: HardwareProfile, tiles: Tiles = Tiles(),
          tuned: knobs.TunedTiles | None = None, key: tuple | None = None) -> tuple | None:
    """What `name`'s Plan for `problem` depends on besides the counts that grow with
    batch x kv_heads: problems with the same shape have Plans alike but for those counts.
    None: a problem whose shape is its own (a ragged batch, or one the layout refuses).
    `key`: the problem's shape_key(), where the caller has it."""
    if problem.seqlens_k is not None:
        return None
    key = problem.shape_key() if key is None else key
    layout = LAYOUTS.get(name)
    if layout is not None:
        try:
            check_window(name, problem)  # a layout is a Plan's: of a problem it can plan
            key += (layout(problem, hw, knobs.resolve(tuned, name, problem, hw, tiles)[0]),)
        except InputError:
            return None
    return key


def shapes(name: str, problems: Sequence[Problem], hw: HardwareProfile, tiles: Tiles = Tiles(),
           tuned: knobs.TunedTiles | None = None,
           keys: Sequence[tuple] | None = None) -> list[tuple | None]:
    """shape() of each problem, the layout asked once per shape and LAYOUT_INPUT (a grid of
    batch and head counts asks fa1's layout of every one); `keys`: the problems'
    Problem.shape_key(), where the caller has them (one per problem for every schedule)."""
    if keys is None:
        keys = [p.shape_key() for p in problems]
    if name not in LAYOUTS:
        return [None if p.seqlens_k is not None else k for p, k in zip(problems, keys)]
    if name in BATCHED:
        return _batched(name, problems, hw, tiles, tuned, keys)
    reads = LAYOUT_INPUT.get(name, lambda p: (p.batch, p.heads, p.kv_heads))
    seen: dict = {}
    out = []
    for p, sk in zip(problems, keys):
        if p.seqlens_k is not None:
            out.append(None)
            continue
        key = (sk, reads(p))
        got = seen.get(key, seen)  # `seen` itself: not asked yet (a shape may be None)
        if got is seen:
            got = seen[key] = shape(name, p, hw, tiles, tuned, sk)
        out.append(got)
    return out


def _batched(name: str, problems: Sequence[Problem], hw: HardwareProfile, tiles: Tiles,
             tuned: knobs.TunedTiles | None, keys: Sequence[tuple]) -> list[tuple | None]:
    """shapes() of a BATCHED schedule: each shape's layouts at all of its problems' distinct
    LAYOUT_INPUT at once (what refuses a problem, its window, tiles or shared memory, is its
    shape's: the shape's first problem is asked)."""
    reads = LAYOUT_INPUT[name]
    inputs: dict = {}  # shape key -> {LAYOUT_INPUT: its shape}, and the shape's first problem
    first: dict = {}
    for p, sk in zip(problems, keys):
        if p.seqlens_k is None:
            got = inputs.get(sk)
            if got is None:
                got, first[sk] = inputs.setdefault(sk, {}), p
            got[reads(p)] = None
    for sk, got in inputs.items():
        p = first[sk]
        try:
            check_window(name, p)
            t = knobs.resolve(tuned, name, p, hw, tiles)[0]
            made = BATCHED[name](p, hw, t, np.fromiter(got, np.int64, len(got)))
        except InputError:
            continue  # (each of its problems: None)
        for x, lay in zip(got, made):
            got[x] = (*sk, lay)
    return [None if p.seqlens_k is not None else inputs[sk][reads(p)] for p, sk in zip(problems, keys)]


def defaults_for(problem: Problem) -> list[str]:
    """The schedules predict shows for a problem when none are named."""
    return ALL + (["decode"] if decode.takes(problem) else [])


DEFAULT = Tiles()  # every field the schedule's


def plan(name: str, problem: Problem, hw: HardwareProfile, tiles: Tiles = DEFAULT,
         check: bool = False, tuned: knobs.TunedTiles | None = None) -> Plan:
    """The schedule's Plan with the tiles asked for, else the tuned table's (`tuned`: a tiles
    file the command read), else the schedule's own: a pure function of its arguments. The
    model takes any tiling (the executor's tests use 8-row tiles); `check`: refuse, in one
    line, tiles the real kernel or the GPU cannot run (iosim.schedules.knobs), as the commands
    that take knobs do."""
    if name not in SCHEDULES:
        raise InputError(f"unknown schedule '{name}' (allowed: {', '.join(SCHEDULES)})")
    check_window(name, problem)
    check_deterministic(name, problem)
    given = tiles is not DEFAULT and tiles != DEFAULT  # the schedule's own tiles: nothing to check
    if check and given:
        knobs.check_values(tiles)
    tiles = tiles if given else DEFAULT  # DEFAULT itself: known by identity below, and by the
    # schedules' remembered tiles (no field compared again)
    tiles, source = knobs.resolve(tuned, name, problem, hw, tiles)
    pl = SCHEDULES[name](problem, hw, tiles)
    if check and tiles is not DEFAULT and tiles != DEFAULT:
        knobs.check(pl, tiles, hw)
    if source is not None:
        pl = replace(pl, notes=f"{pl.notes}; tiles from {source}")
    return pl


__all__ = ["AFFINE", "ALL", "DEFAULT", "SCHEDULES", "Tiles", "defaults_for", "plan", "shape", "shapes"]
