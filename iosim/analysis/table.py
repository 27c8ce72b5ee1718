"""Predicted rows as columns, for many problems at once: what predict, sweeps and tune run.

Problems that differ only in batch, heads and kv_heads (with the same heads / kv_heads) are the
same shape (`schedules.shape`): their Plans launch the same kernels with the same tiles, and
every count (CTAs, bytes, FLOPs) is a + b x u in the (batch, K/V head) pairs u = batch x
kv_heads: b per pair (a = 0) for the schedules' own kernels, a fixed part too for the papers'
PyTorch baseline (`schedules.AFFINE`: a and b fitted through a second Plan). So one Plan, the
shape's template, stands for all of them (every template's a and b fitted in one numpy pass,
its facts a view of arrays shared by all: `_shapes`); the DRAM estimate and the cycle model
run once over every (problem, kernel) as numpy arrays (memory.dram_arrays,
timing.facts_table, timing.predict_batch), and the rows come out as columns. A row of one problem planned alone
(`predict.rows`) is the same computation with a template of one (its own counts, b = 0), so
there is one implementation; tests/test_vectorised.py holds the two equal.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate, chain, repeat
from operator import attrgetter, itemgetter
from struct import error as StructError
from struct import pack
from typing import TYPE_CHECKING

import numpy as np

from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.memo import MISS, Memo
from iosim.core.plan import Plan, read_only
from iosim.core.problem import Problem
from iosim.core.rows import problem_fields
from iosim.kernels import kernel_splits
from iosim.model import memory, timing
from iosim.model.backing import backing, touched_bytes
from iosim.schedules import AFFINE, Tiles, plan, shapes
from iosim.schedules.knobs import TunedTiles

if TYPE_CHECKING:
    import pandas as pd

EXT = {x: i for i, x in enumerate(timing.EXTENSIVE)}
ROOF = timing.ROOFLINE  # the roofline's terms, in timing.roofline_terms' order
INT_MAX = 2.0**62  # counts beyond this stay Python ints (an int64 would overflow)
_NONE = type(None)
ABSENT = type("Absent", (), {"__repr__": lambda self: "ABSENT"})()  # a cell its row lacks (`window`)
EXACT = 2.0**53  # ints below it are floats exactly: float division rounds as int division
# the columns' unit factors as 0-d arrays (numpy takes a Python number operand slower; the
# same float64 values, so the same products)
_MS, _TERA, _PCT = np.array(1e3), np.array(1e12), np.array(100.0)
FEW = 16  # rows up to which a column's Python values cost fewer calls than its numpy array's
_ONES = read_only(np.ones(FEW, np.int64))  # a few templates' problems a template (predict's rows)


def predictable(pl: Plan, hw: HardwareProfile) -> Plan:
    """The Plan, or the InputError its row would raise (a profile with no tensor-core rate for
    the dtype): checked before a batch, so one such Plan does not stop the others'."""
    hw.tensor_peak(pl.problem.dtype)
    return pl


def pairs(p: Problem) -> int:
    """u: the (batch, K/V head) pairs, in which every count of a shape's Plan is affine."""
    return p.batch * p.kv_heads


@dataclass
class Template:
    """A Plan (of its first problem) and the problems of its shape it stands for."""

    plan: Plan
    hw: HardwareProfile
    problems: list[Problem]
    facts: _Shape | None = None  # _shape's, once known


class Unscalable(Exception):
    """A count of the template that is not a whole number per (batch, K/V head) pair."""


@dataclass
class _Raw:
    """A Plan's counts as flat lists (kernel EXTENSIVE counts, DRAM accesses' counts and
    tensor sizes, Plan totals) and what does not scale."""

    ext: list  # per kernel, EXTENSIVE, end to end
    acc: list  # per access: count, size, end to end
    counts: list  # 2-level read, write, sram, tensor, exp, alu, footprint
    names: list  # per access: its tensor
    kin: list  # per access: its kernel's index
    inten: list
    periods: list
    reuse: list
    ahead: list  # per access: memory.prefetch_ahead's bytes (0: not prefetched)
    write: list  # per access: 1 a write, 0 a read


_ZEROS = repeat(0)  # get's default, an item each (map's second iterable)


def _raw(pl: Plan, hw: HardwareProfile, sized: dict | None = None) -> _Raw:
    """`sized`: a dict of memory.sizes' answers by (id(problem), splits) that the caller keeps
    for one batch (its Plans mostly of one problem: sizes' cache hashes the problem, a few
    microseconds each time)."""
    p = pl.problem
    kernels = pl.kernels
    ks = list(map(kernel_splits, kernels))  # (map: no comprehension's function to build)
    splits = max(ks)  # kv_splits(pl)
    if sized is None:
        size = memory.sizes(p, splits)
    else:
        size = sized.get((id(p), splits))
        if size is None:
            size = sized[id(p), splits] = memory.sizes(p, splits)
    elem = p.elem_bytes
    ext, acc, names, kin, inten, periods, reuse, ahead, write = [], [], [], [], [], [], [], [], []
    exts = []  # per kernel, its EXTENSIVE counts
    for i, k in enumerate(kernels):
        # (its accesses' (count, size), reads then writes, from kernel_raw's pass over them)
        e, fi, per = timing.kernel_raw(k, hw, p, size if ks[i] == splits else None, acc)
        exts.append(e)
        ext += e
        inten.append(fi)
        periods.append(per)
        # its accesses, reads then writes (a kernel's reads and writes at once: a list a field)
        t = k.traffic
        rd, wr = t.reads, t.writes
        nr, nw = len(rd), len(wr)
        names += rd
        names += wr
        kin += [i] * (nr + nw)
        write += [0] * nr
        write += [1] * nw
        kr = k.reuse
        if kr:  # (map of the dict's get: no comprehension's frame)
            reuse += map(kr.get, rd, _ZEROS)
            reuse += map(kr.get, wr, _ZEROS)
        else:
            reuse += [0] * (nr + nw)
        pre = memory.prefetch_ahead(k, elem)
        if pre:
            ahead += map(pre.get, rd, _ZEROS)
            ahead += [0] * nw
        else:
            ahead += [0] * (nr + nw)
    # the Plan's totals (Plan.traffic's and Plan.work's, summed as they sum them: ints, kernel
    # by kernel) from its kernels' EXTENSIVE counts, without building the Plan's Traffic; the
    # tensors the kernels read or write (`names`) at their full size
    counts = ([0 + x for x in _TOTAL(exts[0])] if len(exts) == 1  # sum() of one: 0 + it
              else list(map(sum, zip(*map(_TOTAL, exts)))))
    counts.append(touched_bytes(pl, size, set(names)))
    return _Raw(ext, acc, counts, names, kin, inten, periods, reuse, ahead, write)


# the Plan totals of _Raw.counts (2-level read, write, sram, tensor, exp, alu) among EXTENSIVE
_TOTALS = tuple(timing.EXTENSIVE.index(x) for x in ("two_r", "two_w", "sram", "flops", "exps", "alu"))
_TOTAL = itemgetter(*_TOTALS)


@dataclass
class _Shape:
    """What one template contributes, as arrays: per kernel its facts and, for every count, a
    and b of count = a + b x u (u: a problem's pairs, float64 as the model takes them); its
    DRAM accesses likewise; the Plan's totals (Python's ints). A row a kernel (KERN's columns)
    and a row an access (ACCS'), so that a batch gathers each in one numpy call."""

    kern: np.ndarray  # per kernel: EXTENSIVE a, EXTENSIVE b, INTENSIVE, RATE_FIELDS, slots
    accs: np.ndarray  # per DRAM access: its kernel, [count, size] a, b, reuse, ahead, write
    periods: list  # per kernel: (trips, masked trips) or None
    peaks: list  # datasheet rates (ROOF; launch: the overhead), then the L2's usable bytes
    counts: tuple[list, list]  # Plan totals (_Raw.counts): a, b
    affine: bool = True  # False: b = 0 throughout (a template of its own problem alone)

    @property
    def inten(self) -> np.ndarray:
        return self.kern[:, KERN["inten"]]


def _span(*widths: tuple[str, int]) -> dict[str, slice]:
    """Named column ranges of the given widths, end to end."""
    out, at = {}, 0
    for name, w in widths:
        out[name], at = slice(at, at + w), at + w
    return out


NE = len(timing.EXTENSIVE)
KERN = _span(("ext_a", NE), ("ext_b", NE), ("inten", len(timing.INTENSIVE)),
             ("rates", len(timing.RATE_FIELDS)), ("slots", 1))
OCC, SMS = timing.INTENSIVE.index("occ"), timing.INTENSIVE.index("sms")
KERN_WIDTH, KERN_SLOTS = KERN["slots"].stop, KERN["slots"].start
KERN_OCC, KERN_SMS = KERN["inten"].start + OCC, KERN["inten"].start + SMS
ACCS = _span(("kin", 1), ("acc_a", 2), ("acc_b", 2), ("reuse", 1), ("ahead", 1), ("write", 1))


def _accesses(r: _Raw, pl: Plan) -> list:
    """(kernel, tensor, write) per access: what the two Plans of a fit must share."""
    return [(pl.kernels[i].name, n, w) for i, n, w in zip(r.kin, r.names, r.write)]


def _flat(r: _Raw) -> list:
    """A Plan's counts in one list: its kernels' EXTENSIVE, its accesses' (count, size), its
    totals."""
    return r.ext + r.acc + r.counts


def _ints(v: list) -> tuple[np.ndarray, np.ndarray] | None:
    """v as int64, and where that is not v exactly or its float64 not the division's: a float
    not whole (truncated) or past 2^53 (a float, or an int a float rounds). None where an int is
    past INT_MAX."""
    o = np.array(v + [None], object)[:-1]  # a 1-d array of the values, whatever their type
    try:
        i, f = o.astype(np.int64), o.astype(np.float64)
    except (OverflowError, ValueError, TypeError):
        return None
    if len(i) and np.abs(i).max() >= INT_MAX:
        return None
    return i, np.flatnonzero((i != f) | (np.abs(f) >= EXACT))


def _fits(v0: list[list], v1: list[list | None], u0: list[int], u1: list[int]
          ) -> tuple[np.ndarray, np.ndarray, list[bool]]:
    """(a, b) with v = a + b·u through (u0, v0) and (u1, v1), whole numbers, elementwise, for
    every template at once, end to end (int64 arrays, or object arrays of Python's ints and
    floats): in one int64 pass where the counts are ints or whole floats below 2^53 (the same
    a and b as Python divides them), the others (past 2^53, or not whole) as _fit divides them;
    without v1, b = v0 / u0 (a count proportional to u). And per template whether an a or b is
    not whole (_fit's None)."""
    if not v0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), []
    n = [len(v) for v in v0]
    line = [w is not None and w is not v for v, w in zip(v0, v1)]  # a second Plan's counts
    x: list = []
    y: list = []
    for vs in v0:  # end to end (+= a list at a time: a third of a comprehension's time)
        x += vs
    for vs, two in zip(v1, line):
        if two:
            y += vs
    xs, ys = _ints(x), _ints(y)
    if xs is None or ys is None:  # Python's ints
        ab = [_fit(a, b, s, t) for a, b, s, t in zip(v0, v1, u0, u1)]
        a = np.array([v for f, m in zip(ab, n) for v in (f[0] if f else [0] * m)] + [None], object)[:-1]
        b = np.array([v for f, m in zip(ab, n) for v in (f[1] if f else [0] * m)] + [None], object)[:-1]
        return a, b, [f is None for f in ab]
    (x0, odd), (yl, odd_y) = xs, ys
    scaled = np.array([w is None for w in v1]).repeat(n)
    at = np.flatnonzero(np.array(line).repeat(n))  # the second Plans' places
    y0 = x0.copy()  # v1 is v0 itself: its own counts (u1 = u0 + 1: b = 0, a = v0)
    y0[at] = yl
    base = np.array(u0, np.int64).repeat(n)
    den = np.where(scaled, base, np.array(u1, np.int64).repeat(n) - base)
    q, r = np.divmod(np.where(scaled, x0, y0 - x0), den)
    a = np.where(scaled, 0, x0 - q * base)
    bad = r != 0
    odd = sorted(set(odd.tolist()) | set(at[odd_y].tolist()))
    if odd:
        a, q = a.astype(object), q.astype(object)
        second = dict(zip(at.tolist(), y))
    for i in odd:  # as _fit divides them
        xi, d = x[i], int(den[i])
        if scaled[i]:
            qi, ri = divmod(xi, d)
        else:
            qi, ri = divmod(second.get(i, xi) - xi, d)
            a[i] = xi - qi * int(base[i])
        q[i], bad[i] = qi, ri != 0
    ends = np.cumsum(n)
    return a, q, np.add.reduceat(bad, ends - n).astype(bool).tolist()


def _fit(v0: list, v1: list | None, u0: int, u1: int) -> tuple[list, list] | None:
    """_fits' of one template, in Python's ints (None: not whole)."""
    if v1 is None:
        q, r = zip(*[divmod(v, u0) for v in v0])
        return None if any(r) else ([0] * len(q), list(q))
    q, r = zip(*[divmod(y - x, u1 - u0) for x, y in zip(v0, v1)])
    return None if any(r) else ([x - b * u0 for x, b in zip(v0, q)], list(q))


def _shape(pl: Plan, hw: HardwareProfile, scaled: bool = True, probe: Plan | None = None) -> _Shape:
    """The template's facts, its counts as a + b·u: proportional to u (`scaled`), affine
    through a `probe` Plan of the same shape at other pairs, or (neither) its own counts
    (a, with b = 0, for a template of one problem). Unscalable when a count is not whole."""
    return _made(_shapes([(pl, hw, scaled, probe)])[0])


_RATE_ROWS = Memo()  # (id(profile), dtype, warp-specialised, inst_per_op) -> (profile, row)


def _rate_row(k, hw: HardwareProfile, p: Problem) -> np.ndarray:
    """timing._rates as a float64 array (read-only), made once a profile (kept: its id is not
    reused), dtype, overlap policy and inst_per_op, what the rates are a function of (one
    lookup: a list of arrays becomes one array at a third of a list of tuples' cost)."""
    key = (id(hw), p.dtype, k.overlap == "warpspecialized", k.inst_per_op)
    row = _RATE_ROWS.get(key, hw)
    if row is MISS:
        row = _RATE_ROWS.put(key, (hw,), read_only(np.array(timing._rates(k, hw, p), np.float64)))
    return row


def _floats(v: list) -> np.ndarray:
    """np.array(v, np.float64) of a list of Python numbers (read-only): packed by struct, a
    C conversion an item (numpy's takes each item through its type discovery, twice the
    instructions); the same doubles (each number's nearest, as float() gives it)."""
    try:
        return np.frombuffer(pack(f"{len(v)}d", *v))
    except (StructError, TypeError):  # (not a number: numpy's answer, e.g. None as NaN)
        return np.array(v, np.float64)


def _joined(parts) -> list:
    """The parts (lists, tuples) end to end, in one list (+= a part at a time: faster than a
    comprehension of their items)."""
    out: list = []
    for x in parts:
        out += x
    return out


def _made(sh: _Shape | None) -> _Shape:
    if sh is None:
        raise Unscalable
    return sh


def _shapes(items: Sequence[tuple[Plan, HardwareProfile, bool, Plan | None]]) -> list[_Shape | None]:
    """_shape of each (Plan, profile, scaled, probe) at once: the counts fitted in one pass
    (_fits), every template's facts in one array a kind, each template's a view of them; None
    where a count is not whole, or the probe's Plan is not alike."""
    sized: dict = {}  # (the items' problems, all alive: their ids are theirs meanwhile)
    raws = [_raw(pl, hw, sized) for pl, hw, _, _ in items]
    ne = len(timing.EXTENSIVE)
    if any(scaled or probe is not None for _, _, scaled, probe in items):
        v0, v1, u0, u1, alike = [], [], [], [], []
        for (pl, hw, scaled, probe), r in zip(items, raws):
            flat, u = _flat(r), pairs(pl.problem)
            if probe is not None:
                r1 = _raw(probe, hw, sized)
                alike.append(len(probe.kernels) == len(pl.kernels)
                             and _accesses(r1, probe) == _accesses(r, pl))
                v1.append(_flat(r1) if alike[-1] else flat)
                u1.append(pairs(probe.problem) if alike[-1] else u + 1)
            else:  # proportional to u, or its own counts: the line through (u, v) and (u + 1, v)
                alike.append(True)
                v1.append(None if scaled else flat)
                u1.append(0 if scaled else u + 1)
            v0.append(flat)
            u0.append(u)
        a, b, bad = _fits(v0, v1, u0, u1)
        # each template's counts, end to end: its kernels' (EXTENSIVE), its accesses' ([count,
        # size]) and its totals, a and b; cut apart by what each entry is (0, 1, 2) at once
        lens = []
        for (pl, _, _, _), r in zip(items, raws):
            lens += (ne * len(pl.kernels), len(r.acc), len(r.counts))
        order = np.argsort(np.tile(np.arange(3), len(items)).repeat(lens), kind="stable")
        e, c = sum(lens[0::3]), sum(lens[0::3]) + sum(lens[1::3])  # the accesses', totals' start
        af, bf = a[order].astype(np.float64), b[order].astype(np.float64)
        ea, eb, aa, ab = af[:e], bf[:e], af[e:c], bf[e:c]
    else:  # templates of their own problems (predict's rows): a as it is (its totals, Python's
        # ints, taken from the Plans' counts below), b = 0
        a = b = None
        alike, bad = [True] * len(items), [False] * len(items)
    # the kernels' INTENSIVE facts, the accesses' kernel, reuse, ahead and write, and (templates
    # of their own problems) the accesses' and kernels' counts as they are: one conversion
    vals: list = []
    for r in raws:
        for x in r.inten:
            vals += x
    ni = len(vals)
    for f in ("kin", "reuse", "ahead", "write"):
        for r in raws:
            vals += getattr(r, f)
    ns = len(vals)
    if a is None:
        for r in raws:
            vals += r.acc
        nc = len(vals)
        for r in raws:
            vals += r.ext
    vals = _floats(vals)
    if a is None:
        aa, ea = vals[ns:nc], vals[nc:]
        ab, eb = np.zeros(nc - ns), np.zeros(len(vals) - nc)
    # every kernel's row of KERN's columns, a block of them a numpy call (slots below)
    rates = [_rate_row(k, hw, pl.problem) for pl, hw, _, _ in items for k in pl.kernels]
    inten = vals[:ni].reshape(-1, len(timing.INTENSIVE))
    kern = np.concatenate([
        ea.reshape(-1, ne), eb.reshape(-1, ne), inten,
        np.array(rates, np.float64).reshape(-1, len(timing.RATE_FIELDS)), inten[:, :1]], axis=1)
    # resident CTA slots: ctas_per_sm x SMs (kernel_raw's), whole numbers exactly
    kern[:, KERN_SLOTS] = kern[:, KERN_OCC] * kern[:, KERN_SMS]
    side = vals[ni:ns].reshape(4, -1).T
    accs = np.concatenate([side[:, :1], aa.reshape(-1, 2), ab.reshape(-1, 2), side[:, 1:]], axis=1)
    if a is not None:  # the Plans' totals, a and b, as Python values (a template's list each)
        ends = np.cumsum(lens[2::3]).tolist()
        ta, tb = a[order[c:]].tolist(), b[order[c:]].tolist()
    out, peaks = [], {}
    k0 = a0 = 0  # where the template's kernels, accesses begin
    for j, ((pl, hw, scaled, probe), r, ok, not_whole) in enumerate(zip(items, raws, alike, bad)):
        nkj, naj = len(pl.kernels), len(r.kin)
        if ok and not not_whole:
            at = (id(hw), pl.problem.dtype)  # the profile's peaks, once a profile and dtype
            if at not in peaks:
                peaks[at] = [*timing._peaks(hw, pl.problem.dtype), hw.launch_overhead_s,
                             hw.l2_bytes * hw.efficiency.l2_capacity]
            out.append(_Shape(
                kern[k0:k0 + nkj], accs[a0:a0 + naj], r.periods, list(peaks[at]),
                ((ta[ends[j] - len(r.counts):ends[j]], tb[ends[j] - len(r.counts):ends[j]])
                 if a is not None else (list(r.counts), [0] * len(r.counts))),
                scaled or probe is not None))
        else:
            out.append(None)
        k0, a0 = k0 + nkj, a0 + naj
    return out


def _plan_columns(plans: list[Plan]) -> dict[str, list]:
    """The columns a template's rows share, besides the problem's: a value a Plan each."""
    ms = [pl.main for pl in plans]  # (a Plan's block_m and block_n: its main kernel's)
    ds = [m.defines for m in ms]
    return {"block_m": [m.block_m for m in ms], "block_n": [m.block_n for m in ms],
            "warps": [d.get("NUM_WARPS", m.threads // 32) for d, m in zip(ds, ms)],
            "stages": [m.stages for m in ms],
            "split_rows": [d.get("SPLIT_ROWS") for d in ds],  # fa1's query rows per CTA
            "split_cols": [d.get("SPLIT_COLS") for d in ds]}  # fa1 backward's key rows per CTA


def _rows_of(sizes: np.ndarray, m: np.ndarray, one: bool = False
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Templates t with sizes[t] items (kernels, accesses) each over m[t] problems, item by
    item within a problem, problem by problem: per row (its template, its problem's index
    among all problems, the item's index within the template). `one`: every m[t] is 1."""
    if one:  # template t's problem is problem t (the item's index: not asked for)
        t = np.arange(len(sizes)).repeat(sizes)
        return t, t, None
    per = sizes * m
    t = np.arange(len(sizes)).repeat(per)
    within = np.arange(per.sum()) - (per.cumsum() - per).repeat(per)
    size = np.maximum(sizes[t], 1)
    return t, (m.cumsum() - m).repeat(per) + within // size, within % size


@dataclass
class _Model:
    """The model's answers per (template, pairs) of a batch, in order: the roofline's and the
    predicted time (summed over the Plan's kernels), DRAM bytes, the roofline's bound (a
    ROOF index), the main kernel's busiest unit (a LIMITS index) and its share of its peak,
    and the Plan's limiter (None without)."""

    roof: np.ndarray
    pred: np.ndarray
    dram_r: np.ndarray
    dram_w: np.ndarray
    roof_bound: np.ndarray
    busiest: np.ndarray
    util: np.ndarray
    bound: list


# roofline_table's counts taken from EXTENSIVE as they are: their columns, and EXTENSIVE's
_ROOF_AS_IS = np.array([0, 1, 2, 5], np.intp)
_ROOF_EXT = np.array([EXT[x] for x in ("flops", "exps", "alu", "sram")], np.intp)
_DRAM_BYTES = timing.FACTS.index("dram_bytes")
_LAUNCH = ROOF.index("launch")  # (peaks' column)


def _model(shapes: Sequence[_Shape], m: np.ndarray, u: np.ndarray, limiter: bool) -> _Model:
    """The DRAM estimate and the cycle model of every template at each of its pairs (`u`, m[t]
    of them for template t, in order), in one numpy pass over every (problem, kernel) and
    (problem, DRAM access)."""
    # every (problem, kernel) of every template, problem by problem (a Plan's kernels in a row)
    # (with k0: each template's first kernel among all templates' kernels)
    # (and whether any template's counts are affine: a + b·u, b = 0 throughout for templates
    # of their own problem, a as it is)
    sizes, periods, pid, k, affine = [], [], [], 0, False
    for sh in shapes:
        sizes += (len(sh.kern), len(sh.accs), k)
        k += len(sh.kern)
        affine = affine or sh.affine
        for per in sh.periods:
            pid.append(-1 if per is None else len(periods))
            if per is not None:
                periods.append(per)
    nk, na, k0 = timing.unstack(np.array(sizes, np.int64).reshape(-1, 3).T)  # (a flat list: numpy's quickest)
    one = m.tolist().count(1) == len(m)  # a problem a template (predict's rows): the rows in order
    uf = u.astype(np.float64) if affine else None
    # (one, not affine: each row's template and problem not asked for)
    kt, kp, ki = _rows_of(nk, m, one) if affine or not one else (None, None, None)
    kern = np.concatenate([sh.kern for sh in shapes])
    kern = kern if one else kern[k0[kt] + ki]  # each row's kernel (one: the kernels in order)
    ext = kern[:, KERN["ext_a"]] + kern[:, KERN["ext_b"]] * uf[kp][:, None] if affine else kern[:, KERN["ext_a"]]
    inten, rates, slots = kern[:, KERN["inten"]], kern[:, KERN["rates"]], kern[:, KERN["slots"]][:, 0]
    peaks = np.array([sh.peaks for sh in shapes], np.float64)
    peaks = peaks.repeat(nk, axis=0) if one else peaks[kt]  # each row's template's
    peaks, l2 = peaks[:, :-1], peaks[:, -1]
    # every (problem, DRAM access)
    at, ap, ai = _rows_of(na, m, one) if affine or not one else (None, None, None)
    accs = np.concatenate([sh.accs for sh in shapes])
    if one:  # (each access's template's first kernel, k0[at])
        kin = k0.repeat(na) + accs[:, 0].astype(np.int64)
    else:
        accs = accs[(na.cumsum() - na)[at] + ai]  # each row's access
        row0 = (nk * m).cumsum() - nk * m  # each template's first (problem, kernel) row
        kin = row0[at] + (ap - (m.cumsum() - m)[at]) * nk[at] + accs[:, 0].astype(np.int64)
    acc = (accs[:, ACCS["acc_a"]] + accs[:, ACCS["acc_b"]] * uf[ap][:, None] if affine
           else accs[:, ACCS["acc_a"]])
    dram_r, dram_w = memory.dram_arrays(kin, acc[:, 0], acc[:, 1], accs[:, ACCS["reuse"].start],
                                        accs[:, ACCS["write"].start].astype(bool), ext[:, EXT["units"]],
                                        slots, l2, accs[:, ACCS["ahead"].start])
    pid = np.array(pid, np.int64)
    b = timing.Batch(timing.facts_table(ext, inten, dram_r, dram_w), rates,
                     peaks[:, _LAUNCH], periods, pid if one else pid[k0[kt] + ki])
    nks = nk if one else nk.repeat(m)  # each (template, pairs)'s kernels
    starts = k0 if one else (nks.cumsum() - nks).astype(np.int64)
    pred = timing.predict_batch(b, limiter, starts, kernel_bounds=False)

    # per (problem, kernel): the roofline's terms, the time's
    # (the counts a column: gathered at once; the DRAM bytes' sum the facts table's)
    # (written in the terms' table, each divided by its peak in place)
    terms = np.empty(peaks.shape)
    terms[:, _ROOF_AS_IS] = ext.take(_ROOF_EXT, 1)
    terms[:, 3] = b.table[:, _DRAM_BYTES]
    np.add(ext[:, EXT["two_r"]], ext[:, EXT["two_w"]], out=terms[:, 4])
    timing.roofline_table(terms[:, :-1], peaks, out=terms)
    roof_s, roof_bound = np.maximum.reduce(terms, axis=1), terms.argmax(axis=1)

    # the Plan's largest kernel (the first of equals), by roofline and by predicted time (both
    # at once, a row each: a kernel's index where it is its Plan's largest, else past the end)
    # (with the DRAM bytes: the rows summed below)
    y = np.array([roof_s, pred.seconds, dram_r, dram_w])
    x = y[:2]
    at = np.where(x == np.maximum.reduceat(x, starts, axis=1).repeat(nks, axis=1), np.arange(len(kern)), len(kern))
    roof_at, main_at = timing.unstack(np.minimum.reduceat(at, starts, axis=1))
    # summed over the Plan's kernels
    roof, secs, d_r, d_w = timing.unstack(np.add.reduceat(y, starts, axis=1))
    return _Model(roof, secs, d_r, d_w, roof_bound[roof_at], pred.busiest[main_at],
                  pred.util[main_at], pred.group_bound if limiter else [None] * len(starts))


def _distinct(t: np.ndarray, u: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each template's distinct pairs (first seen first), as (pairs, how many a template:
    templates in order), and per problem its entry among all of them: problems of one shape
    with the same pairs (batch x kv_heads: 2 x 8 and 1 x 16) have the same counts, so the same
    prediction, made once. `t`: each problem's template (in order), `u`: its pairs."""
    key = t.astype(np.int64) * (int(u.max()) + 1 if len(u) else 1) + u
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # the templates' problems are consecutive
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    at = first[order]
    return u[at], np.bincount(t[at], minlength=int(t.max()) + 1 if len(t) else 0), rank[inv.ravel()]


def _rep(vals: list, codes: np.ndarray, alone: bool):
    """A template's value a row: a list (`alone`: a template a row, predict's rows), else the
    values coded by template (each row's template in `codes`)."""
    return vals if alone else _Coded(vals, codes)


@dataclass
class _Coded:
    """A column of few values, a row's the one its code names: a template's value for each of
    its rows, a name of a list (ROOF, LIMITS). Taken in a new order and made a frame's column
    without a Python value a row (a frame's strings: the values' Arrow array, taken). Typed as
    the column of every value (_typed: an array where they share one plain type, else a list),
    as the rows' column was before they were taken."""

    values: list
    codes: np.ndarray

    def __len__(self) -> int:
        return len(self.codes)

    def plain(self):
        """The column a value a row: the typed array, or a list (ABSENT where a row lacks it)."""
        if ABSENT not in self.values:
            typed = _typed(self.values)
            if isinstance(typed, np.ndarray):
                return typed[self.codes]
        return _objects(self.values)[self.codes].tolist()

    def frame(self, arrow_str=None):
        """The column as a frame holds it (as_frame of plain()); `arrow_str`: _str_dtype()'s."""
        import pandas as pd

        vals, codes = self.values, self.codes
        if ABSENT in vals or not len(codes):
            return _typed(self.plain())
        if arrow_str is not None and set(map(type, vals)) == {str}:
            import pyarrow as pa

            return pd.array(pa.array(vals, pa.large_string()).take(codes), dtype=arrow_str)
        typed = _typed(vals)
        if isinstance(typed, np.ndarray):
            return typed[codes]
        # a list (mixed types: None and ints, a tile some Plans lack): the frame infers one type
        # from the types of the rows' values, those of the values some row has
        seen = np.bincount(codes, minlength=len(vals)) > 0
        used = [v for v, s in zip(vals, seen.tolist()) if s]
        if all(v is None for v in used):  # a tile no Plan has: None a row, as a frame holds it
            return np.full(len(codes), None, dtype=object)
        col = pd.Series(used)
        codes = (seen.cumsum() - 1)[codes]
        return col.to_numpy()[codes] if isinstance(col.dtype, np.dtype) else col.array.take(codes)


def _objects(vals: list) -> np.ndarray:
    """A 1-d object array of the values."""
    return np.array(vals + [None], dtype=object)[:-1]


def _plain(col):
    return col.plain() if isinstance(col, _Coded) else col


_BHK = attrgetter("batch", "heads", "kv_heads")


def columns(templates: Sequence[Template], limiter: bool = True, coded: bool = False,
            rows: tuple[Sequence[Problem], np.ndarray] | None = None) -> dict[str, list]:
    """The rows (predict's shared columns) of every problem of every template, in order, as
    columns: arrays, or lists of Python values, one entry per row (a column a row lacks, e.g.
    `window`, is a list holding ABSENT there). Without `limiter`, `bound` is None: the time
    alone (a cost function's need) takes one prediction a kernel, the limiter up to one more per
    relief. `coded`: a template's values and names as they are (_Coded: no value a row), for
    take and as_frame. `rows`: the templates' problems as a caller's list and each row's index
    in it, where known (a problem several schedules predict: its sizes read once)."""
    todo = [(t.plan, t.hw, len(t.problems) > 1, None) for t in templates if t.facts is None]
    made = iter(_shapes(todo) if todo else [])
    shapes = [t.facts or _made(next(made)) for t in templates]
    alone = all(len(t.problems) == 1 for t in templates)  # a template a problem (predict's rows): nothing to repeat
    probs, at = rows or ([p for t in templates for p in t.problems], None)
    # a template a row, a few rows (predict's): columns of Python values, lists, where as_frame
    # and as_rows take them so (as_frame's numpy block of their type; fewer calls than arrays')
    few = alone and len(templates) <= FEW and at is None
    m = (_ONES[:len(templates)] if few else np.ones(len(templates), np.int64) if alone else
         np.array([len(t.problems) for t in templates], np.int64))
    if few:
        batch, heads, kv = map(list, zip(*map(_BHK, probs)))
        u_all = np.array([b * k for b, k in zip(batch, kv)], np.int64)  # pairs()
    else:
        if len(probs) <= FEW:  # (a few rows: one call)
            batch, heads, kv = np.array(list(map(_BHK, probs)), np.int64).reshape(-1, 3).T
        else:
            batch, heads, kv = (np.fromiter(map(attrgetter(f), probs), np.int64, len(probs))
                                for f in ("batch", "heads", "kv_heads"))
        if at is not None:
            batch, heads, kv = batch[at], heads[at], kv[at]
        u_all = batch * kv  # pairs()
    # each row's (template, pairs) among the model's answers (alone: the rows in order, each
    # array as it is) and its template (alone: unused)
    du, dm, back = ((u_all, m, slice(None)) if alone else
                    _distinct(np.arange(len(templates)).repeat(m), u_all))
    md = _model(shapes, dm, du, limiter)
    # each row's answers (alone: the model's arrays as they are, a row each)
    t_roof, t_pred, d_r, d_w, roof_bound, busiest, util = (
        (md.roof, md.pred, md.dram_r, md.dram_w, md.roof_bound, md.busiest, md.util) if alone else
        (md.roof[back], md.pred[back], md.dram_r[back], md.dram_w[back], md.roof_bound[back],
         md.busiest[back], md.util[back]))

    tcode = None if alone else np.arange(len(templates)).repeat(m)
    # a problem's fields (but batch, heads, kv_heads: a row's) and FLOPs, a shape's at once
    reps, scode = (list(range(len(templates))), tcode) if alone else _shapes_of(templates, m)
    fields = _fields([templates[i].plan.problem for i in reps])
    out: dict = {"hw": _rep([t.hw.name for t in templates], tcode, alone),
                 "schedule": _rep([t.plan.schedule for t in templates], tcode, alone)}
    if all(f is fields[0] for f in fields):  # one problem's (predict's rows)
        n = len(fields)
        if alone:
            out.update({name: [v] * n for name, v in fields[0].items()})
        else:
            for name, v in fields[0].items():
                out[name] = _Coded([v] * n, scode)
    else:
        for name in dict.fromkeys(k for f in fields for k in f):
            out[name] = _rep([f.get(name, ABSENT) for f in fields], scode, alone)
    out["batch"], out["heads"], out["kv_heads"] = batch, heads, kv
    if alone:  # a Plan's value a row: its lists as they are
        out.update(_plan_columns([t.plan for t in templates]))
    else:
        for name, col in _plan_columns([t.plan for t in templates]).items():
            out[name] = _Coded(col, tcode)
    rd, wr, sram, tf, ex, alu, foot = _counts(shapes, m, u_all, alone)
    dr, dw = _whole(d_r, few), _whole(d_w, few)
    if all(t.hw is templates[0].hw for t in templates):  # one card's (predict's): its capacity
        cap = templates[0].hw.hbm_capacity_bytes
        fits = (foot <= cap if isinstance(foot, np.ndarray) else
                [f <= cap for f in foot] if few else np.array([f <= cap for f in foot], bool))
    else:
        cap = np.array([t.hw.hbm_capacity_bytes for t in templates])
        cap = cap if alone else cap.repeat(m)
        fits = (foot <= cap if isinstance(foot, np.ndarray) else
                np.array([f <= c for f, c in zip(foot, cap.tolist())], bool))
    nks = [len(t.plan.kernels) for t in templates]  # a few rows (predict's): Python's ints
    nks = nks if alone and len(nks) <= FEW else np.array(nks, np.int64)
    strs = lambda names, at: [names[i] for i in at.tolist()] if alone else _Coded(list(names), at)  # noqa: E731
    out.update({
        "hbm_read_bytes_2level": rd, "hbm_write_bytes_2level": wr,
        "dram_read_bytes": dr, "dram_write_bytes": dw, "sram_bytes": sram,
        "tensor_flops": tf, "exp_ops": ex, "alu_flops": alu,
        "intensity_flop_per_byte": _intensity(tf, alu, dr, dw, few),
        "time_roofline_ms": t_roof * _MS,
        "bound_roofline": strs(ROOF, roof_bound),
        "time_pred_ms": t_pred * _MS,
        "tflops_pred": _tflops(_fa_flops(templates, [b * h for b, h in zip(batch, heads)] if few else batch * heads,
                                         alone, reps, scode), t_pred, few),
        # the limiter: what a 2x rate shortens most
        "bound": _bound(md.bound, back, limiter, alone),
        # the main kernel's busiest unit, and its share of its efficient peak
        "busiest": strs(timing.LIMITS, busiest),
        "util_pct": _PCT * util,
        "kernels": (nks if alone else nks.repeat(m)),
        # the tensors' HBM at once, against the card's: a problem that cannot run says so
        "hbm_footprint_bytes": foot,
        "fits": fits,
        # kernel (this project's), published (someone's), or hypothetical (the model's alone)
        "backing": _rep([backing(t.plan, t.hw) for t in templates], tcode, alone),
        "notes": _rep([t.plan.notes for t in templates], tcode, alone)})
    return out if coded or alone else {c: _plain(col) for c, col in out.items()}  # alone: plain


def _fields(probs: list[Problem]) -> list[dict]:
    """problem_fields of each problem, once a problem (predict's rows: one problem, a template
    a schedule)."""
    if probs and all(q is probs[0] for q in probs):  # one problem's (predict's rows): its fields once
        return [problem_fields(probs[0])] * len(probs)
    seen: dict = {}
    return [seen.get(id(p)) or seen.setdefault(id(p), problem_fields(p)) for p in probs]


def _bound(bound: list, back: np.ndarray, limiter: bool, alone: bool):
    """The limiter's column: each (template, pairs)'s name a row (None without `limiter`)."""
    if alone:  # a row each (template, pairs), in order
        return list(bound)
    if limiter and not all(type(b) is str for b in bound):
        return _rep_rows(_objects(bound)[back], alone)
    return _Coded(bound, back) if limiter else np.full(len(back), None, dtype=object)


def _shapes_of(templates: Sequence[Template], m: np.ndarray) -> tuple[list[int], np.ndarray]:
    """The templates' problems' shapes (Problem.shape_key; a variable-length batch's its own),
    first seen first: each shape's first template, and each row's shape (m[t] rows a template)."""
    first: dict = {}
    reps, of = [], []
    for i, t in enumerate(templates):
        p = t.plan.problem
        key = ("alone", i) if p.seqlens_k is not None else p.shape_key()
        if key not in first:
            first[key] = len(reps)
            reps.append(i)
        of.append(first[key])
    return reps, np.array(of, np.int64).repeat(m)


def _fa_flops(templates: Sequence[Template], bh: np.ndarray, alone: bool, reps: list[int],
              shape: np.ndarray) -> np.ndarray:
    """Problem.fa_flops of every row (`bh`: its B x H): a row a template (`alone`), Python's
    floats, else once a shape (_shapes_of: `reps`, each row's `shape`) for all its rows at
    once, the same float operations a row (`bh` a list or an array; `alone`: a list)."""
    if alone:
        ps, xs = [t.plan.problem for t in templates], _py(bh)
        if all(q is ps[0] for q in ps) and xs.count(xs[0]) == len(xs):  # one problem's rows (predict's)
            return [ps[0].fa_flops(xs[0])] * len(xs)
        return [q.fa_flops(x) for q, x in zip(ps, xs)]
    order = np.argsort(shape, kind="stable")
    out = np.empty(len(bh))
    for i, at in zip(reps, _split(order, np.bincount(shape, minlength=len(reps)))):
        out[at] = templates[i].plan.problem.fa_flops(bh[at])
    return out


def _tflops(flops, t_pred: np.ndarray, few: bool):
    """TFLOP/s a row: FLOPs / predicted seconds / 1e12; a few rows (`few`, predict's) as
    Python divides them (the same float64 divisions, a list), where no time is 0."""
    if few:
        ts = t_pred.tolist()
        if 0.0 not in ts:
            return [f / t / 1e12 for f, t in zip(flops, ts)]
    return np.asarray(flops, np.float64) / t_pred / _TERA


def _rep_rows(col: np.ndarray, alone: bool):
    """An object array a row: its list (predict's rows), or the array a frame infers from it."""
    if alone:
        return col.tolist()
    typed = _typed(col)
    return typed if isinstance(typed, np.ndarray) else col.tolist()


def _whole(x: np.ndarray, few: bool = False):
    """The DRAM estimate's bytes as whole numbers: int64, or Python ints (a list) where one is
    past INT_MAX, as the counts are (an astronomically large problem's: a cast would wrap).
    `few` (predict's rows): Python's ints, a list (as_frame's int64 where they are in its reach;
    int() truncates as the cast does)."""
    if few:
        try:
            return list(map(int, x.tolist()))
        except ValueError:  # (a NaN: the cast's answer, as before)
            pass
    if len(x) <= FEW:  # (a few rows: Python's max, fewer calls than numpy's)
        big = max(x.tolist(), default=0) >= INT_MAX
    else:
        big = x.max() >= INT_MAX
    return [int(v) for v in x.tolist()] if big else x.astype(np.int64)


def _intensity(tf, alu, dr, dw, few: bool = False):
    """(tensor + ALU FLOPs) / DRAM bytes (at least 1) a row, as Python divides the ints: in
    float64 where both ints are floats exactly (below 2^53), the other rows one by one; a few
    rows all one by one: fewer calls than numpy's, the same quotients (`few`, predict's rows:
    Python's floats, a list)."""
    if few:
        return [(x + y) / max(r + w, 1) for x, y, r, w in zip(_py(tf), _py(alu), _py(dr), _py(dw))]
    if len(tf) <= FEW or not all(isinstance(x, np.ndarray) for x in (tf, alu, dr, dw)):
        return np.array([(x + y) / max(r + w, 1) for x, y, r, w in zip(_py(tf), _py(alu), _py(dr), _py(dw))])
    den = np.maximum(dr + dw, 1)
    num = tf + alu  # no overflow: each < INT_MAX = 2^62
    out = num / den
    for i in np.flatnonzero((num >= EXACT) | (den >= EXACT)).tolist():
        out[i] = int(num[i]) / int(den[i])
    return out


def _counts(shapes: Sequence[_Shape], m: np.ndarray, u_all: np.ndarray, alone: bool) -> list:
    """The Plan totals (_Raw.counts) of every row, a + b·u: whole numbers, a column an int64
    array, or Python ints where a column could pass int64's reach."""
    if alone:  # a template a row: Python's ints, no object arrays (predict's rows)
        a = [sh.counts[0] for sh in shapes]
        if not any(map(_AFFINE, shapes)) and max(map(abs, chain.from_iterable(a))) < INT_MAX:
            # b = 0 throughout: a as it is, in int64's reach; a few rows (predict's) as lists of
            # Python's ints (as_frame's int64, fewer calls than an array's)
            return list(map(list, zip(*a))) if len(a) <= FEW else list(np.array(a, np.int64).T)
    umax = float(u_all.max())
    if alone:
        us = u_all.tolist()
        b = [sh.counts[1] for sh in shapes]
        # b = 0 throughout where not affine (a template of its own problem): a as it is
        vals = [[x + y * u for x, y in zip(aj, bj)] if sh.affine else aj
                for aj, bj, u, sh in zip(a, b, us, shapes)]
        if max(max(map(abs, aj)) for aj in a) + max(max(map(abs, bj)) for bj in b) * umax < INT_MAX:
            return list(np.array(vals, np.int64).T)  # every column in int64's reach (no need to ask each)
        big = [max(map(abs, aj)) + max(map(abs, bj)) * umax >= INT_MAX for aj, bj in zip(zip(*a), zip(*b))]
        if not any(big):  # every column in int64's reach: one array
            return list(np.array(vals, np.int64).T)
        return [list(col) if z else np.array(col, np.int64) for col, z in zip(zip(*vals), big)]
    a = np.array([sh.counts[0] for sh in shapes], dtype=object)
    b = np.array([sh.counts[1] for sh in shapes], dtype=object)
    big = (np.abs(a).max(axis=0) + np.abs(b).max(axis=0) * umax) >= INT_MAX
    out = []
    for j in range(a.shape[1]):
        if big[j]:
            out.append([x + y * int(z) for x, y, z in zip(a[:, j].repeat(m), b[:, j].repeat(m), u_all)])
        else:
            out.append(a[:, j].astype(np.int64).repeat(m) + b[:, j].astype(np.int64).repeat(m) * u_all)
    return out


_AFFINE = attrgetter("affine")


def _split(x: np.ndarray, m: np.ndarray) -> list[np.ndarray]:
    """x cut into consecutive parts of m[i] entries (np.split's, without its overhead)."""
    ends = m.cumsum().tolist()
    return [x[e - n:e] for e, n in zip(ends, m.tolist())]


def _py(col) -> list:
    """A column's values as Python values."""
    return col.tolist() if isinstance(col, np.ndarray) else col


def as_rows(cols: dict) -> list[dict]:
    """Columns as one dict per row of Python values, without the columns a row lacks."""
    py = {c: _py(col) for c, col in cols.items()}
    n = len(next(iter(py.values()))) if py else 0
    return [{c: v for c, col in py.items() if (v := col[i]) is not ABSENT} for i in range(n)]


def concat(parts: Sequence[dict]) -> dict:
    """Column tables end to end: a column that every part holds as an array stays one; others
    become lists (a cell a part lacks: ABSENT), so a frame infers their type over all rows at
    once, as from rows."""
    names = list(dict.fromkeys(c for part in parts for c in part))
    sizes = [len(next(iter(part.values()))) if part else 0 for part in parts]
    out: dict = {}
    for c in names:
        cols = [_plain(part.get(c)) for part in parts]
        if all(isinstance(x, np.ndarray) for x in cols) and len({x.dtype for x in cols}) == 1:
            out[c] = np.concatenate(cols)
        else:
            out[c] = [v for x, n in zip(cols, sizes) for v in ([ABSENT] * n if x is None else _py(x))]
    return out


def take(cols: dict, rows: Sequence[int]) -> dict:
    """These rows of the columns, in this order."""
    at = np.asarray(rows, np.int64)
    codes: dict = {}  # coded columns share their codes (a row's template): taken once
    pick = None
    out = {}
    for c, col in cols.items():
        if isinstance(col, np.ndarray):
            out[c] = col[at]
        elif isinstance(col, _Coded):
            if id(col.codes) not in codes:
                codes[id(col.codes)] = col.codes, col.codes[at]
            out[c] = _Coded(col.values, codes[id(col.codes)][1])
        else:
            pick = pick or _picker(at.tolist())
            out[c] = list(pick(col))
    return out


def _picker(rows: list[int]):
    """A list's values at these rows, as a tuple."""
    if len(rows) > 1:
        return itemgetter(*rows)
    if rows:
        i = rows[0]
        return lambda col: (col[i],)
    return lambda col: ()


# a list column whose values are all of one of these types: as the array a frame infers from it
_TYPED = {str: object, bool: bool, int: np.int64, float: np.float64}
_LISTED = {bool: np.dtype(bool), int: np.dtype(np.int64), float: np.dtype(np.float64)}  # as_frame's


def _typed(col: list):
    """A list column as the numpy array a DataFrame would infer from it, where its values share
    one plain type (the frame is the same, built faster); else the list, ABSENT as None."""
    if ABSENT in col:
        return [None if v is ABSENT else v for v in col]
    kinds = set(map(type, col))
    if len(kinds) == 1 and (kind := next(iter(kinds))) in _TYPED:
        try:
            return np.array(col, dtype=_TYPED[kind])
        except OverflowError:  # ints past int64's reach: the frame's own inference
            pass
    return col


def as_frame(cols: dict, dicts: bool = False) -> pd.DataFrame:
    """Columns (arrays, lists of Python values, _Coded) as the DataFrame pandas infers from
    them, pd.DataFrame(cols)'s (a cell a row lacks: missing), built as pandas holds it: a numpy
    dtype's columns as one 2-D block, the str columns' cells as one Arrow array sliced a column,
    other columns inferred by pandas one by one (pd.Series); a short table (predict's) by the
    layout its types give (_short_frame). pd.DataFrame infers, converts and consolidates column
    by column: for predict's frame (4 rows, 41 columns) some four times this builder's time.
    pd.DataFrame itself where pandas lacks create_dataframe_from_blocks (< 3). `dicts` (lists
    and arrays, predict's): pandas' frame of as_rows' dicts, which differs where a row lacks a
    cell (a column the first row lacks comes after its columns): that frame, then."""
    create_dataframe_from_blocks = _from_blocks()
    n = len(next(iter(cols.values()))) if cols else 0
    if create_dataframe_from_blocks is None or not n:
        import pandas as pd

        if dicts and any(isinstance(col, list) and ABSENT in col for col in cols.values()):
            return pd.DataFrame(as_rows(cols))
        return pd.DataFrame({c: _typed(_plain(col)) if isinstance(_plain(col), list) else _plain(col)
                             for c, col in cols.items()})
    if n <= _SHORT:  # predict's table: its layout known from its columns' and cells' types
        df = _short_frame(cols, n, create_dataframe_from_blocks)
        if df is not None:
            return df
    import pandas as pd

    names = _columns_index(tuple(cols))
    arrow_str = _str_dtype(names.dtype)  # the str dtype pandas infers, where Arrow holds it
    same: dict = {}  # numpy dtype: [(position, column)]
    strs, blocks = [], []  # the str columns' positions; (array, [position]) of the others
    for j, col in enumerate(cols.values()):
        if isinstance(col, _Coded):
            col = col.frame(arrow_str)
        if isinstance(col, list):
            kinds = set(map(type, col))
            if kinds == {str} and arrow_str is not None:
                strs.append(j)
                continue
            if type(ABSENT) in kinds:
                if dicts:
                    return pd.DataFrame(as_rows(cols))
                col = [None if v is ABSENT else v for v in col]
                kinds = set(map(type, col))
            if len(kinds) == 1 and (kind := next(iter(kinds))) in _LISTED:
                # one plain type: the list itself joins its dtype's block (made in one np.array)
                same.setdefault(_LISTED[kind], []).append((j, col))
                continue
            arr = _list_array(col, kinds)
            col = _inferred(col) if arr is None else arr
        elif isinstance(col, np.ndarray) and col.dtype.kind not in "biuf":
            col = _inferred(col)
        if isinstance(col, np.ndarray):
            same.setdefault(col.dtype, []).append((j, col))
        else:
            blocks.append((col, [j]))
    for dtype, g in same.items():  # np.array: a third of np.stack's time (object: np.stack's
        # arrays of arrays, not an array of their cells' lists)
        cs = [c for _, c in g]
        try:
            block = np.stack(cs) if dtype.kind == "O" else np.array(cs, dtype)
        except OverflowError:  # a list's ints past int64's reach: each list as pandas infers it
            for j, c in g:
                arr = c if isinstance(c, np.ndarray) else _list_array(c, {int})
                arr = _inferred(c) if arr is None else arr
                blocks.append((arr[None] if isinstance(arr, np.ndarray) else arr, [j]))  # a 2-D block
            continue
        blocks.append((block, [j for j, _ in g]))
    if strs:
        import pyarrow as pa
        from pandas.arrays import ArrowStringArray

        vals = list(cols.values())
        cells = ArrowStringArray(pa.array([v for j in strs for v in vals[j]], pa.large_string()), dtype=arrow_str)
        blocks += [(cells[i * n:(i + 1) * n], [j]) for i, j in enumerate(strs)]
    pos = np.arange(len(names), dtype=np.intp)  # a column's placement: a view of it
    return create_dataframe_from_blocks([(b, pos[at[0]:at[0] + 1] if len(at) == 1 else np.array(at, np.intp))
                                         for b, at in blocks], index=pd.RangeIndex(n), columns=names)


_INTERNALS = None  # pandas.api.internals, once imported (False: this pandas lacks it)


def _from_blocks():
    """pandas' create_dataframe_from_blocks (pandas >= 3), None where this pandas lacks it
    (asked of the module each call: a test takes it away; an import statement a call costs
    some ten times the attribute's read)."""
    global _INTERNALS
    if _INTERNALS is None:
        try:
            import pandas.api.internals as internals
        except ImportError:
            internals = False
        _INTERNALS = internals
    return getattr(_INTERNALS, "create_dataframe_from_blocks", None) if _INTERNALS else None


_SHORT = 64  # rows: a table this short (predict's) is built from its layout (_Layout)
_LAYOUTS: dict = {}  # (names, rows, pandas infers str, each column's type): _Cells or None


@dataclass
class _Cells:
    """A table's list columns and arrays (getters of a tuple of its columns), its names' Index
    and its rows' RangeIndex (views handed out), and the _Layout (None: as_frame's general way)
    for each (its list cells' types, its arrays' dtypes)."""

    lists: object
    arrays: object
    names: object
    rows: object
    layouts: dict


@dataclass
class _Layout:
    """as_frame's blocks for columns and cells of these types, worked out once: the numpy
    blocks (dtype, getter of their columns, whether its cells are read one by one: an int
    block with lists, _LISTS where all its columns are lists; placement), the None-and-int columns (float64: their ints to check
    exact), and the str columns (getter, (rows of their cells, placement) each: an array,
    and a slice for _built, their dtype)."""

    blocks: list
    exact: list
    strs: object
    str_at: list
    str_slots: list
    arrow_str: object
    proto: object = None  # str_maker's, once made
    placed: tuple | None = None  # _built's BlockPlacements: the numpy blocks', the str columns'

    def str_maker(self):
        """The str columns' ArrowStringArray of an Arrow chunked array (_arrow_strs)."""
        if self.proto is None:
            self.proto = _arrow_strs(self.arrow_str)
        return self.proto


def _arrow_strs(dtype, direct: bool = True):
    """An ArrowStringArray of this dtype of an Arrow chunked array, as pandas makes it of an
    operation's result (private API: _from_pyarrow_array of an empty one of the dtype, no
    check); `direct`, where that maker sets just the array, the dtype and a cache, those three
    set here (some 40% fewer instructions)."""
    import pyarrow as pa
    from pandas.arrays import ArrowStringArray

    empty = pa.array([], pa.large_string())
    maker = ArrowStringArray(empty, dtype=dtype)._from_pyarrow_array
    if not direct or set(vars(maker(pa.chunked_array([empty])))) != {"_pa_array", "_dtype", "_cache"}:
        return maker
    new = ArrowStringArray.__new__

    def made(values):
        out = new(ArrowStringArray)
        out._pa_array, out._dtype, out._cache = values, dtype, {}
        return out

    return made


def _short_frame(cols: dict, n: int, build):
    """as_frame's frame of a short table (n rows) of lists and arrays, by the layout their
    types give (_layout, worked out once for these names and types: no loop over columns);
    None where as_frame's general way is needed (a _Coded column, a column pandas infers
    itself, ints past int64's reach, tiles past float64's exact ints)."""
    vals = tuple(cols.values())
    key = (tuple(cols), n, _str_mode(), tuple(map(type, vals)))
    top = _LAYOUTS.get(key, MISS)
    if top is MISS:
        if len(_LAYOUTS) > 256:
            _LAYOUTS.clear()
        top = _LAYOUTS[key] = _cells(key[3], key[0], n)
    if top is None:
        return None
    kinds = (tuple(map(type, chain.from_iterable(top.lists(vals)))), tuple(map(_DTYPE, top.arrays(vals))))
    lay = top.layouts.get(kinds, MISS)
    if lay is MISS:
        if len(top.layouts) > 64:
            top.layouts.clear()
        lay = top.layouts[kinds] = _layout(vals, n, top.names.dtype)
    if lay is None:
        return None
    for j in lay.exact:  # an int past 2^53: pandas' float64 of it is lossy (its own, then)
        if max(map(abs, filter(None, vals[j])), default=0) >= EXACT:
            return None
    try:
        arrays = [np.fromiter(chain.from_iterable(get(vals) if flat is _LISTS else
                                                  [c if type(c) is list else c.tolist() for c in get(vals)]),
                              dtype, len(at) * n).reshape(len(at), n) if flat else np.array(get(vals), dtype)
                  for dtype, get, flat, at in lay.blocks]
    except OverflowError:  # ints past int64's reach: pandas' own inference
        return None
    cells = None
    if lay.str_at:  # the str cells, column after column, as one Arrow array: a column a slice
        cells = _large_strings(list(chain.from_iterable(lay.strs(vals))))
    fast = _pandas_blocks()
    if fast is not None:
        return _built(fast, arrays, cells, n, lay, top)
    blocks = [(a, at.copy()) for a, (*_, at) in zip(arrays, lay.blocks)]
    if cells is not None:
        from pandas.arrays import ArrowStringArray

        strs = ArrowStringArray(cells, dtype=lay.arrow_str)
        blocks += [(strs[rows], at.copy()) for rows, at in lay.str_at]
    # a placement of each block's own (pandas' BlockPlacement holds the array given)
    return build(blocks, index=top.rows.view(), columns=top.names.view())


_PANDAS_BLOCKS = None  # _pandas_blocks(): pandas' block makers, False where this pandas lacks them


def _pandas_blocks():
    """pandas' own block and manager classes and its Arrow str array's maker from an Arrow
    array (private API), to build a short frame's blocks directly: create_dataframe_from_blocks
    asks each block's class, 2-D shape and values' coercion (what a _Layout already knows:
    numpy blocks of plain dtypes, 1-D Arrow str arrays) and checks the manager's shapes, and
    slicing an ArrowStringArray checks its slice: half of a predict frame's build (14 blocks,
    10 of them str columns). None where this pandas lacks them: as_frame then builds through
    the public function (test_vectorised builds predict's frames both ways)."""
    global _PANDAS_BLOCKS
    if _PANDAS_BLOCKS is None:
        try:
            from pandas import DataFrame
            from pandas._libs.internals import BlockPlacement
            from pandas.arrays import ArrowStringArray
            from pandas.core.internals.blocks import ExtensionBlock, NumpyBlock
            from pandas.core.internals.managers import BlockManager

            ArrowStringArray._from_pyarrow_array  # noqa: B018 (pandas 3's; an AttributeError before)
            _PANDAS_BLOCKS = (BlockPlacement, NumpyBlock, ExtensionBlock, BlockManager, DataFrame._from_mgr)
        except (ImportError, AttributeError):
            _PANDAS_BLOCKS = False
    return _PANDAS_BLOCKS or None


def _built(fast: tuple, arrays: list, cells, n: int, lay: _Layout, top: _Cells):
    """The frame create_dataframe_from_blocks builds of these blocks (a _Layout's numpy
    arrays, each str column a slice of the Arrow array `cells`), from pandas' own classes
    (_pandas_blocks): each numpy block a NumpyBlock (pandas' class of a bool, int, float or
    object dtype), each str column an ExtensionBlock of an ArrowStringArray of the layout's
    dtype, their shapes right by construction (no check)."""
    place, numpy_block, ext_block, manager, from_mgr = fast
    if lay.placed is None:  # the layout's placements, made once: pandas makes a new one where
        # it moves a block (insert, delete: BlockPlacement's methods return new ones), never
        # changes one, so the frames of a layout share them
        lay.placed = ([place(at.copy()) for *_, at in lay.blocks], [place(at) for _, at in lay.str_slots])
    nums, texts = lay.placed
    # (Block's arguments by position: values, placement, ndim; some third less than by name)
    blocks = [numpy_block(a, at, 2) for a, at in zip(arrays, nums)]
    if cells is not None:
        import pyarrow as pa

        whole, strs = pa.chunked_array([cells]), lay.str_maker()
        blocks += [ext_block(strs(whole.slice(rows.start, n)), at, 2)
                   for (rows, _), at in zip(lay.str_slots, texts)]
    mgr = manager(blocks, [top.names.view(), top.rows.view()], verify_integrity=False)
    return from_mgr(mgr, mgr.axes)


def _large_strings(strs: list[str]):
    """pa.array(strs, pa.large_string()), from its buffers (the UTF-8 bytes end to end, their
    offsets): pa.array reads an environment variable each call, whose absence os.environ.get
    learns from a KeyError raised and caught."""
    import pyarrow as pa

    text = "".join(strs)
    if text.isascii():  # (a str's length its bytes')
        data, lengths = text.encode("ascii"), map(len, strs)
    else:
        parts = [s.encode() for s in strs]
        data, lengths = b"".join(parts), map(len, parts)
    ends = array("q", accumulate(lengths, initial=0))
    return pa.LargeStringArray.from_buffers(len(strs), pa.py_buffer(ends), pa.py_buffer(data))


_DTYPE = attrgetter("dtype")
_LISTS = "lists"  # a _Layout's int64 block of lists alone


def _cells(types: tuple, names: tuple, n: int) -> _Cells | None:
    """_Cells of a table of n rows whose columns are of these types; None where one is
    neither a list nor an array (_Coded)."""
    import pandas as pd

    if not set(types) <= {list, np.ndarray}:
        return None
    return _Cells(_picker([j for j, t in enumerate(types) if t is list]),
                  _picker([j for j, t in enumerate(types) if t is np.ndarray]),
                  _columns_index(names), pd.RangeIndex(n), {})


def _layout(vals: tuple, n: int, names_dtype) -> _Layout | None:
    """The blocks as_frame makes of these columns (lists and arrays of n rows), by their types
    alone: an array joins its dtype's block, a list of one plain type its numpy dtype's, of
    None and ints float64's (NaN for None), of None the object block, of str an Arrow str
    column (the object block where pandas' str is not Arrow's); None where pandas' inference
    is needed (other arrays, other mixes)."""
    arrow_str = _str_dtype(names_dtype)
    same: dict = {}  # dtype: [column position]
    exact, strs = [], []
    for j, col in enumerate(vals):
        if isinstance(col, np.ndarray):
            if col.dtype.kind not in "biuf":
                return None
            same.setdefault(col.dtype, []).append(j)
            continue
        kinds = set(map(type, col))
        if kinds == {str} and arrow_str is not None:
            strs.append(j)
            continue
        if kinds == {str} and not isinstance(names_dtype, np.dtype):  # pandas' str held in Python: its own
            return None
        if kinds in ({str}, {_NONE}):
            dtype = np.dtype(object)
        elif kinds == {_NONE, int}:
            dtype = np.dtype(np.float64)
            exact.append(j)
        elif len(kinds) == 1 and (kind := next(iter(kinds))) in _LISTED:
            dtype = _LISTED[kind]
        else:
            return None
        same.setdefault(dtype, []).append(j)
    # an int64 block with lists: its cells as Python's ints, read by np.fromiter (numpy's
    # array of a mix of arrays and lists of ints costs some twice as much: its shape's search);
    # _LISTS where every column is a list (its cells as they are)
    blocks = [(dtype, _picker(js), dtype == np.int64 and (
               _LISTS if all(isinstance(vals[j], list) for j in js) else any(isinstance(vals[j], list) for j in js)),
               np.array(js, np.intp)) for dtype, js in same.items()]
    rows = [slice(i * n, (i + 1) * n) for i in range(len(strs))]
    return _Layout(blocks, exact, _picker(strs), [(r, np.array([j], np.intp)) for r, j in zip(rows, strs)],
                   [(r, slice(j, j + 1)) for r, j in zip(rows, strs)], arrow_str)


_STR_MODE = None  # _str_mode's reader of pandas' two options, once made


def _str_mode() -> tuple:
    """How pandas holds the strs it infers: whether it infers its str dtype (an option until
    pandas 4; None where pandas has no such flag) and where it keeps them (`mode.string_storage`:
    Arrow or Python), the two options a kept column Index or frame layout depends on."""
    global _STR_MODE
    if _STR_MODE is None:
        _STR_MODE = _str_mode_reader()
    return _STR_MODE()


def _str_mode_reader(private: bool = True):
    """_str_mode's reader: the storage read from pandas' options dict as pandas' own
    using_string_dtype reads its flag (private API: pd.get_option's key checks cost a predict
    frame's some 3%), where that dict holds it as pd.get_option says; else pd.get_option."""
    import pandas as pd

    try:
        from pandas._config import using_string_dtype
    except ImportError:
        using_string_dtype = lambda: None  # noqa: E731
    if private:
        try:
            from pandas._config.config import _global_config

            if _global_config["mode"]["string_storage"] == pd.get_option("mode.string_storage"):
                return lambda: (using_string_dtype(), _global_config["mode"]["string_storage"])
        except (ImportError, KeyError, TypeError):
            pass
    return lambda: (using_string_dtype(), pd.get_option("mode.string_storage"))


def _list_array(col: list, kinds: set) -> np.ndarray | None:
    """The numpy array pandas infers from a list column (its values' `kinds`), where that is
    plain: values of one type (_TYPED's but str, in int64's reach), None alone (object), None
    and ints that a float64 holds exactly (float64, NaN for None: a tile some Plans lack); else
    None (pandas' own: str, ints past int64, other mixes)."""
    if kinds == {_NONE}:
        return np.full(len(col), None, dtype=object)
    tiles = kinds == {_NONE, int}
    kind = float if tiles else next(iter(kinds)) if len(kinds) == 1 else None
    if kind not in (int, float, bool):
        return None
    try:
        out = np.array(col, _TYPED[kind])
    except OverflowError:
        return None
    # an int past 2^53 is a float past it (pandas' float64 of it is lossy: its own, then)
    return None if tiles and (np.abs(out) >= EXACT).any() else out


def _inferred(col):
    """A column as pandas infers it: a numpy array, or an extension array (pandas' str)."""
    import pandas as pd

    s = pd.Series(col, copy=False)
    return s.to_numpy() if isinstance(s.dtype, np.dtype) and s.dtype.kind in "biufO" else s.array


_INDEX: dict = {}  # (column names, pandas infers str): their Index


def _columns_index(names: tuple):
    """The Index pandas makes of these column names, kept (a view handed out): Index() of
    predict's 41 names costs a quarter of its frame's time. Kept apart by how pandas holds the
    strs it infers (_str_mode: its str dtype's flag and storage)."""
    import pandas as pd

    key = names, _str_mode()
    if key not in _INDEX:
        _INDEX[key] = pd.Index(names)
    return _INDEX[key].view()


def _str_dtype(dtype):
    """`dtype` where it is pandas' str held in Arrow (pandas 3 with pyarrow), else None."""
    import pandas as pd

    return dtype if isinstance(dtype, pd.StringDtype) and dtype.storage == "pyarrow" else None


def templates(problems: Sequence[Problem], hw: HardwareProfile, schedule: str,
              tiles: Tiles = Tiles(), tuned: TunedTiles | None = None,
              check: bool = True, keys: Sequence[tuple] | None = None
              ) -> tuple[list[Template], list[int], list[tuple[InputError, int]]]:
    """The problems grouped by shape, each group's template planned (its first problem's Plan):
    (templates, the problems' indices in the templates' order, (error, problems) of the shapes
    that cannot be planned). A template whose counts are not whole per pair (none is known)
    gives way to one Plan per problem. `keys`: the problems' shape_key(), where known."""
    groups: dict = {}
    for i, key in enumerate(shapes(schedule, problems, hw, tiles, tuned, keys)):
        groups.setdefault(("alone", i) if key is None else key, []).append(i)
    planned, errors = [], []
    for idx in groups.values():
        try:
            pl = predictable(plan(schedule, problems[idx[0]], hw, tiles, check=check, tuned=tuned), hw)
        except InputError as e:
            errors.append((e.with_traceback(None), len(idx)))  # no cycle through this frame
            continue
        probe = None
        if schedule in AFFINE and len(idx) > 1:  # a second point of the line
            p1 = problems[idx[0]].model_copy(update={"batch": 2 * problems[idx[0]].batch})
            probe = plan(schedule, p1, hw, tiles, check=check, tuned=tuned)
        planned.append((idx, pl, probe))
    out, order = [], []
    facts = _shapes([(pl, hw, len(idx) > 1, probe) for idx, pl, probe in planned])
    for (idx, pl, _), sh in zip(planned, facts):
        if sh is None:  # Unscalable: a Plan a problem
            for i in idx:
                out.append(Template(predictable(plan(schedule, problems[i], hw, tiles, check=check,
                                                     tuned=tuned), hw), hw, [problems[i]]))
                order.append(i)
            continue
        out.append(Template(pl, hw, [problems[i] for i in idx], sh))
        order += idx
    return out, order, errors
