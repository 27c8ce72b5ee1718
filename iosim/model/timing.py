"""Time models: a roofline and a cycle-approximate model of tiles, waves and overlap.

The specification (equations, parameters) is docs/model.md, "Time". In short, per kernel of a
Plan: occupancy gives n CTAs per SM; one trip of a CTA costs max(the warp chain combined with
its memory time by the Plan's overlap policy, its L2/DRAM bandwidth share, n x the busiest
per-SM throughput term); CTAs are placed on the SMs in waves in launch order; a kernel is never
faster than any unit's or level's fluid total, and each launch costs `launch_overhead_s`.
`bound` names the limiter: the rate whose doubling (`RELIEFS`: a unit, a level, the SM's load
path, the warps' dependent-chain and load latency halved, the launch overhead halved) shortens the
predicted time most, the what-if `iosim explain` prints; `busiest` the unit or level with the
largest fluid time and `util` its share of its efficient peak. Every rate and efficiency comes
from the HardwareProfile.

Vectorised: the model is evaluated for many kernels at once (`predict_many`), numpy over
arrays of cases, a case being one kernel at one set of rates (its profile's, or one relief's)
and one occupancy; a single kernel or Plan is a batch of one, so there is one implementation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from itertools import accumulate
from operator import attrgetter, itemgetter

import numpy as np

from iosim.core.hardware import HardwareProfile
from iosim.core.memo import MISS, Memo
from iosim.core.plan import KernelPlan, Plan, cached, read_only
from iosim.core.problem import Problem
from iosim.kernels import SPECS, kernel_splits
from iosim.model.memory import _ONE, _ZERO, Dram, sizes  # (0-d 0 and 1: numpy 2 takes those faster)
from iosim.model.occupancy import ctas_per_sm

UNITS = ("tensor", "sfu", "alu", "sram", "issue")  # per-SM units
MMA_FLOPS = 2 * 16 * 8 * 16  # one mma.sync.m16n8k16
LDS_BYTES = 32 * 16  # one warp's ldmatrix.x4 or 16-byte cp.async
LEVELS = ("l2", "hbm")  # levels shared by all SMs
# what `bound` chooses from, each relaxed by 2x (Rates.relaxed): the units and levels, the SM's
# L2 load path, the warps' dependent chains (latency: cycles per mma.sync, per other
# instruction and per synchronous load's round trip halved) and the launch overhead (halved)
RELIEFS = (*UNITS, "port", *LEVELS, "latency", "launch")
LIMITS = (*UNITS, *LEVELS)  # the fluid limits, in the order `busiest` breaks ties


@dataclass(frozen=True)
class KernelTime:
    seconds: float
    bound: str  # the limiter: one of RELIEFS (the roofline: the largest term's unit or level)
    ctas_per_sm: int = 0
    waves: float = 0.0  # CTAs / slots
    util: float = 1.0  # the busiest unit's or level's predicted share of its efficient peak
    busiest: str = ""  # the unit or level with the largest fluid time
    # seconds with a RELIEF relaxed 2x: predicted so far (`relaxed`), a lower bound on each
    # (`lower`), and how to predict one (`again`); empty without a limiter
    relaxed: dict[str, float] = field(default_factory=dict, repr=False, compare=False)
    lower: dict[str, float] = field(default_factory=dict, repr=False, compare=False)
    again: Callable[[str], float] | None = field(default=None, repr=False, compare=False)

    def relaxed_time(self, relief: str) -> float:
        """Seconds with `relief` relaxed 2x (predicted once, then remembered)."""
        if relief not in self.relaxed:
            self.relaxed[relief] = self.again(relief)
        return self.relaxed[relief]


ROOFLINE = ("tensor", "sfu", "alu", "hbm", "l2", "sram", "launch")  # roofline_terms' keys


def roofline_table(counts: np.ndarray, peaks: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """(rows, ROOFLINE) seconds at the datasheet peaks, from (rows, 6) counts (tensor FLOPs,
    exponentials, FP32 ops, DRAM bytes, two-level bytes, shared-memory bytes) and (rows,
    ROOFLINE) peaks, the launch's being its overhead (taken as it is); into `out` where given
    (counts may be its first six columns: each divided in place)."""
    out = np.empty(peaks.shape) if out is None else out
    np.divide(counts, peaks[:, :-1], out=out[:, :-1])
    out[:, -1] = peaks[:, -1]
    return out


def roofline_terms(k: KernelPlan, dram: Dram, hw: HardwareProfile, plan: Plan) -> dict[str, float]:
    """Seconds each unit and level needs at its datasheet peak (ROOFLINE, in order)."""
    t, w = k.traffic, k.work
    counts = [w.tensor_flops, w.exp_ops, w.alu_flops, dram.read + dram.write,
              t.hbm_read + t.hbm_write, t.sram]
    peaks = [*_peaks(hw, plan.problem.dtype), hw.launch_overhead_s]
    terms = roofline_table(np.array([counts], np.float64), np.array([peaks], np.float64))[0]
    return dict(zip(ROOFLINE, terms.tolist()))


def _peaks(hw: HardwareProfile, dtype) -> tuple[float, ...]:
    """The profile's datasheet peaks (tensor for `dtype`, SFU, FP32, HBM, L2, shared memory),
    remembered per profile (_held)."""
    held = _held(hw)
    v = held.get(("peaks", dtype))
    if v is None:
        v = held[("peaks", dtype)] = (hw.tensor_peak(dtype), hw.sfu_exp_per_s, hw.fp32_ops_per_s,
                                      hw.hbm_bandwidth_bytes_per_s, hw.l2_bandwidth_bytes_per_s,
                                      hw.smem_bytes_per_s)
    return v


def roofline(k: KernelPlan, dram: Dram, hw: HardwareProfile, plan: Plan) -> KernelTime:
    terms = roofline_terms(k, dram, hw, plan)
    bound = max(terms, key=terms.get)
    return KernelTime(terms[bound], bound)


# the rates a relief changes, as columns of the rate arrays (Rates.vector)
RATE_FIELDS = ("tensor", "sfu", "alu", "sram", "issue", "port", "sm_dram", "l2", "hbm",
               "mma_cycles", "inst_cycles", "chain_cycles", "load_latency", "l2_latency", "turn_wait",
               "launch")
_FLUID_RATES = np.array([RATE_FIELDS.index(x) for x in LIMITS], np.intp)  # _fluid's, in LIMITS' order


@dataclass  # not frozen: a batch builds several, and a frozen one's fields cost a call each
class Rates:
    """Efficient rates of one profile for one kernel: per SM for the units, whole GPU for the
    levels (bytes, FLOPs or exponentials per second). Fields may be numpy arrays (one rate per
    case of a batch)."""

    tensor: float
    sfu: float
    alu: float
    sram: float
    issue: float  # warp instructions per second per SM
    port: float  # bytes per second one SM loads from (and stores to) L2
    sm_dram: float  # ... of which from DRAM at most (Pipeline.sm_dram_bytes_per_clk; inf: none)
    l2: float
    hbm: float
    wgmma: bool  # asynchronous warpgroup MMA: no per-instruction issue or dependence cost
    inst_per_op: float  # warp instructions per 32 element operations (the kernel's, else the profile's)
    mma_cycles: float  # a lone warp's cycles per mma.sync (its dependent chain)
    inst_cycles: float  # ... and per other instruction
    chain_cycles: float  # ... per step of a loop's dependent address chain (loop_chain)
    load_latency: float  # seconds a synchronous global load's round trip to DRAM takes
    l2_latency: float  # ... to a line the L2 holds (Pipeline.l2_latency_cycles)
    turn_wait: float  # seconds a wgmma consumer waits at a GEMM turn (Pipeline.wgmma_wait_cycles)
    launch: float  # seconds a launch costs

    def relaxed(self, what: str, factor: float = 2.0) -> Rates:
        """These rates with `what` (one of RELIEFS) `factor` times faster."""
        if what == "latency":
            return replace(self, mma_cycles=self.mma_cycles / factor,
                           inst_cycles=self.inst_cycles / factor,
                           chain_cycles=self.chain_cycles / factor,
                           load_latency=self.load_latency / factor,
                           l2_latency=self.l2_latency / factor,
                           turn_wait=self.turn_wait / factor)
        if what == "launch":
            return replace(self, launch=self.launch / factor)
        if what == "port":  # the SM's load path, whatever level its bytes come from
            return replace(self, port=self.port * factor, sm_dram=self.sm_dram * factor)
        return replace(self, **{what: getattr(self, what) * factor})

    @classmethod
    def of(cls, k: KernelPlan, hw: HardwareProfile, p: Problem) -> Rates:
        eff, sms = hw.efficiency, hw.sm_count
        wgmma = k.overlap == "warpspecialized"
        tensor_eff = eff.tensor_wgmma if wgmma else eff.tensor_mma_sync
        return cls(
            tensor=hw.tensor_peak(p.dtype) * tensor_eff / sms,
            sfu=hw.sfu_exp_per_s * eff.sfu / sms,
            alu=hw.fp32_ops_per_s * eff.alu / sms,
            sram=hw.smem_bytes_per_s * eff.smem / sms,
            issue=hw.issue_per_clk_per_sm * hw.clock_hz,
            port=hw.pipeline.sm_load_bytes_per_clk * hw.clock_hz,
            sm_dram=(hw.pipeline.sm_dram_bytes_per_clk or math.inf) * hw.clock_hz,
            l2=hw.l2_bandwidth_bytes_per_s * eff.l2,
            hbm=hw.hbm_bandwidth_bytes_per_s * eff.hbm,
            wgmma=wgmma,
            inst_per_op=k.inst_per_op or hw.pipeline.inst_per_op,
            mma_cycles=hw.pipeline.mma_sync_cycles,
            inst_cycles=hw.pipeline.inst_cycles,
            chain_cycles=hw.pipeline.chain_cycles,
            load_latency=hw.pipeline.load_latency_cycles / hw.clock_hz,
            l2_latency=hw.pipeline.l2_trip_cycles / hw.clock_hz,
            turn_wait=hw.pipeline.turn_wait_cycles / hw.clock_hz,
            launch=hw.launch_overhead_s,
        )

    def vector(self) -> tuple[float, ...]:
        """The RATE_FIELDS, in order."""
        return tuple(getattr(self, f) for f in RATE_FIELDS)


def _relief_factors() -> np.ndarray:
    """(1 + len(RELIEFS), len(RATE_FIELDS)) multipliers: row 0 the profile's rates, row 1 + i
    RELIEFS[i] relaxed 2x (Rates.relaxed: x2 on a rate, /2 on a latency or the launch; exact
    in binary floating point, so a row times the rates is Rates.relaxed's)."""
    f = np.ones((1 + len(RELIEFS), len(RATE_FIELDS)))
    for i, x in enumerate(RELIEFS, 1):
        if x == "latency":
            for c in ("mma_cycles", "inst_cycles", "chain_cycles", "load_latency", "l2_latency",
                      "turn_wait"):
                f[i, RATE_FIELDS.index(c)] = 0.5
        elif x == "launch":
            f[i, RATE_FIELDS.index("launch")] = 0.5
        elif x == "port":  # Rates.relaxed: both of the SM's load rates
            f[i, RATE_FIELDS.index("port")] = f[i, RATE_FIELDS.index("sm_dram")] = 2.0
        else:
            f[i, RATE_FIELDS.index(x)] = 2.0
    return f


RELIEF_FACTORS = _relief_factors()


# more numbers of the hot expressions as 0-d arrays (as _ZERO and _ONE): numpy takes those
# faster than Python's numbers (about half a microsecond a call), to the same bits
_FOUR, _WARP, _MMA, _LDS, _INF = (np.array(float(x)) for x in (4, 32, MMA_FLOPS, LDS_BYTES, math.inf))


def _instructions(tensor_flops, ops, sram_bytes, wgmma, inst_per_op):
    """(mma, other) warp instructions, elementwise (instructions' formula)."""
    ops_inst = inst_per_op * ops / _WARP
    return (np.where(wgmma, _ZERO, tensor_flops / _MMA),
            np.where(wgmma, ops_inst, ops_inst + sram_bytes / _LDS))


def instructions(tensor_flops: float, ops: float, sram_bytes: float, hw: HardwareProfile,
                 wgmma: bool, inst_per_op: float | None = None) -> tuple[float, float]:
    """(mma, other) warp instructions for this much work: one mma.sync per m16n8k16,
    `inst_per_op` per 32 element operations (FP32 and exp), one ldmatrix / cp.async per 512
    shared-memory bytes. wgmma: a handful of instructions per tile, its operands read from
    shared memory by the tensor cores and its tiles copied by TMA, so neither is counted."""
    mma, other = _instructions(tensor_flops, ops, sram_bytes, wgmma,
                               inst_per_op or hw.pipeline.inst_per_op)
    return float(mma), float(other)


def _fluid(f: _Facts, rv: np.ndarray) -> np.ndarray:
    """Seconds each unit and level needs for the whole kernel at its efficient rate, per case
    (rv: the cases' rate rows, RATE_FIELDS columns): (LIMITS, cases), the work over the rate
    of each (one division; the units' rates per SM, times the SMs)."""
    mma, other = _instructions(f.flops, f.alu + f.exps, f.sram, f.wg, f.inst_per_op)
    # beyond the work (KernelPlan.loop_issue, loop_shadow)
    other = other + (f.x_trip + f.x_shadow) * f.total_trips
    rate = rv.take(_FLUID_RATES, 1).T
    rate[:len(UNITS)] *= f.sms
    return np.array([f.flops, f.exps, f.alu, f.sram - f.fill, mma + other, f.l2_bytes, f.dram_bytes]) / rate


def fluid(k: KernelPlan, dram: Dram, r: Rates, sms: int, hw: HardwareProfile) -> dict[str, float]:
    """Seconds each unit and level needs for the whole kernel at its efficient rate."""
    ext, inten, _ = kernel_raw(k, hw, None)
    table = facts_table(np.array([ext], np.float64), np.array([inten], np.float64),
                        np.array([dram.read], np.float64), np.array([dram.write], np.float64))
    table[:, FACTS.index("sms")] = sms
    table[:, FACTS.index("inst_per_op")] = r.inst_per_op
    return dict(zip(LIMITS, _fluid(_Facts(table), np.array([r.vector()], np.float64))[:, 0].tolist()))


def _split(k: KernelPlan, p: Problem, size: dict | None = None, acc: list | None = None
           ) -> tuple[float, float, float, float]:
    """(read, write) bytes moved once per CTA (prologue/epilogue, whole kernel) and
    (read, write) bytes streamed by the loop trips (whole kernel), two-level counts. `size`:
    memory.sizes(p, kernel_splits(k)), where the caller has it. `acc`: a list extended with
    each access's (count, tensor size), reads then writes, in the same pass (table._raw's)."""
    if size is None:
        size = sizes(p, kernel_splits(k))
    t, streamed, out = k.traffic, k.streamed, []
    for tensors in (t.reads, t.writes):  # sums in the order sum() takes them: the same ints
        fixed = whole = 0
        for n, v in tensors.items():
            whole += v
            s = size[n]
            if v <= s and n not in streamed:
                fixed += v
            if acc is not None:
                acc += (v, s)
        out += (fixed, whole - fixed)
    return out[0], out[2], out[1], out[3]


def _present(codes: np.ndarray) -> np.ndarray:
    """The values of an array of small non-negative integers, ascending (np.unique's answer
    without its import of numpy.ma, a start-up cost)."""
    return np.bincount(np.asarray(codes, np.int64)).nonzero()[0]


# unstack's getters of n entries (itemgetter(0, ..., n - 1): a tuple, also of one)
_UNSTACK = [lambda a: (), lambda a: (a[0],), *(itemgetter(*range(n)) for n in range(2, 17))]


def unstack(a) -> tuple:
    """np.unstack(a): the entries of its first axis (a 2-D array's rows as views), indexed
    rather than iterated: iterating an array ends in the IndexError whose message numpy
    formats (some 300 ns an unpacking, as much as three rows' views)."""
    n = len(a)
    return _UNSTACK[n](a) if n < len(_UNSTACK) else tuple(a[i] for i in range(n))


def _max(*xs):
    """Elementwise max of arrays and numbers."""
    top = xs[0]
    for x in xs[1:]:
        top = np.maximum(top, x)
    return top


def _values(x: np.ndarray) -> list[float]:
    """The distinct values of an array that holds a few (a profile's exponent per case)."""
    out, rest = [], x.ravel()
    while len(rest):
        out.append(float(rest[0]))
        rest = rest[rest != rest[0]]
    return out


def pnorm(terms: Sequence, p) -> np.ndarray | float:
    """(Σ t^p)^(1/p): the max for p = inf, the sum for p = 1 (scaled by the largest term);
    elementwise over arrays. p is a profile's (sync_overlap): a batch holds a few values, each
    raised to on its own entries (numpy's power with one exponent runs about four times
    faster than with an array of them, to the same bits)."""
    top = _max(*terms)
    if isinstance(p, float) and p != math.inf:  # one finite exponent (_one): fewer numpy calls.
        # The terms are times, never negative: where all are zero the sum over the smallest
        # positive float is zero too, and top x 0 is top; elsewhere the float is top itself
        # (no select: the general path's bits, to the sign of a zero)
        s = _norm(terms, np.maximum(top, _TINY), p)
        s *= top  # (top x s's bits; in place: s is _norm's own)
        return s
    plain = (top <= 0) | np.isinf(p)
    safe, q = np.where(plain, 1.0, top), np.where(np.isinf(p), 1.0, p)  # plain: top, whatever q

    vals = _values(q)
    if len(vals) == 1:
        s = _norm(terms, safe, vals[0])
    else:
        *ts, safe, q = np.broadcast_arrays(*terms, safe, q)
        s = np.empty(q.shape)
        for v in vals:
            at = q == v
            s[at] = _norm([t[at] for t in ts], safe[at], v)
    return np.where(plain, top, top * s)


def _norm(ts, safe, q: float):
    """(Σ (t / safe)^q)^(1/q), one exponent q (as 0-d arrays: numpy takes those faster than
    Python's floats, to the same bits; made once per exponent)."""
    e = _EXPONENTS.get(q)
    if e is None:
        if len(_EXPONENTS) > 256:
            _EXPONENTS.clear()
        e = _EXPONENTS[q] = (np.array(q), np.array(1 / q))
    # (in place where the operand is a temporary of this function's: the same bits, fewer arrays
    # made; safe has every term's shape)
    s = ts[0] / safe
    s **= e[0]
    for t in ts[1:]:
        u = t / safe
        u **= e[0]
        s += u
    s **= e[1]
    return s


_EXPONENTS: dict = {}  # _norm's exponent q -> (q, 1 / q) as 0-d arrays


_TINY = np.array(5e-324)  # the smallest positive float (pnorm's)


def _one(x: np.ndarray | float):
    """x's value as a float where the array holds one value (a profile's exponent over a batch
    of one profile: pnorm's fast path), else x (a float: itself)."""
    if isinstance(x, float):
        return x
    v = float(x.flat[0]) if x.size else 1.0
    return x if np.count_nonzero(x != v) else v  # (count_nonzero: faster than .all())


SUBSET = 128  # entries above which Trip.time computes each policy on its own entries only
# the overlap policies, as codes of a case (Trip.time)
POLICIES = {"warpspecialized": 0, "async": 1, "lockstep": 2, "none": 3, "spread": 4, "drift": 5,
            "prefetch": 6}
_WS, _ASYNC = (np.array(float(POLICIES[x])) for x in ("warpspecialized", "async"))  # policy codes
WARPSPECIALIZED = POLICIES["warpspecialized"]
# `drift`: how much better than synchronous phases (sync_overlap) the bandwidth share and the
# SM's throughput of drifting warps overlap: the exponent's multiple (1: `none`, as if the
# warps ran in step; inf: perfectly, the larger of the two). Not fitted by calibrate: chosen
# between the two limits, neither of which the measured one-wave fa1 forward points follow,
# by trying 1.5, 2, 3, 4 and inf on the committed fa1 forward rows (docs/model.md)
DRIFT_OVERLAP = 2.0
# `under_pv`: how much better a warpgroup's softmax overlaps the tensor cores' work when it
# also runs under its own previous P·V GEMM than under the other warpgroups' GEMMs alone (the
# exponent's multiple, as DRIFT_OVERLAP). Chosen, not fitted by calibrate: the value whose
# predicted speed-up of fa3.cu's FP8 kernel with PV_WAIT_TOP over without it matches the
# measured rounds' (experiments/fp8/h100/speed14c/c1/variants.csv, d = 128: 1.04-1.06 measured,
# 1.05 predicted; 1.15 gives 1.04, 1.25 gives 1.06; tools/pv_overlap.py)
PV_OVERLAP = 1.2


def _policies(policy, stages):
    """The overlap policies Trip.time computes by: `async` with one stage has nothing to
    overlap its loads with (`none`)."""
    return np.where((policy == POLICIES["async"]) & (stages <= 1), POLICIES["none"], policy)


# Trip's terms, in order (the rows of the array Trip.time gathers a policy's entries from)
TRIP = ("tensor", "sfu", "alu", "sram", "issue", "warp_mma", "warp_other", "groups", "dispatch",
        "apart", "under_pv", "in_step", "queue")


class Trip:
    """Demands of one loop trip of one CTA, in seconds: per-SM throughput terms at efficient
    rates, and one warp's own chain (its MMAs and its other instructions); arrays, per case
    (given by name, or as the rows of one array in TRIP's order: a subset of the entries of
    them all is one gather)."""

    tensor: np.ndarray
    sfu: np.ndarray
    alu: np.ndarray
    sram: np.ndarray
    issue: np.ndarray
    warp_mma: np.ndarray
    warp_other: np.ndarray
    groups: np.ndarray  # consumer warpgroups that take turns at the tensor cores (wgmma)
    dispatch: np.ndarray  # mma.sync: tensor time and the other instructions' issue, added
    apart: np.ndarray  # wgmma: 1 where consumer warps' softmax phases overlap (no turns)
    under_pv: np.ndarray  # wgmma: 1 where a warpgroup's softmax runs under its own P·V GEMM
    in_step: np.ndarray  # wgmma: 1 where the consumer warpgroups run each step together
    queue: np.ndarray  # mma.sync: a warp's wait behind its sub-partition's other warps' MMAs

    def __init__(self, terms: np.ndarray | None = None, **named):
        # (not a dataclass: Trip.time builds one a policy, and a dataclass's fields cost a call each)
        self.__dict__.update(named if terms is None else zip(TRIP, terms))  # (rows as views)
        if terms is not None:
            self.terms = terms

    def _terms(self) -> np.ndarray:
        """The terms as the rows of one array (TRIP's order; the one given, if any)."""
        t = self.__dict__.get("terms")
        return np.array([getattr(self, x) for x in TRIP]) if t is None else t

    @classmethod
    def of(cls, flops, exps, alu, sram, warps, r: Rates, cyc, extra=0.0, apart=0.0,
           fill=0.0, shadow=0.0, under_pv=0.0, in_step=0.0, barrier=0.0, chained=0.0) -> Trip:
        """`sram`: shared-memory bytes (one instruction per LDS_BYTES); `fill`: those of them
        that asynchronous copies write, which the shared-memory pipe does not carry
        (smem_fill); `shadow`: instructions issued in the MMAs' shadow (loop_shadow): issue
        slots, no chain; `barrier`: the share of trips that begin at a CTA barrier
        (barrier_trips); `chained`: those of `extra` that are steps of the warps' dependent
        address chains (loop_chain), on the chain at chain_cycles each (Trip.stack's terms)."""
        x = np.broadcast_arrays(flops, exps, alu, sram, extra, fill, shadow, barrier, chained,
                                *(getattr(r, n) for n in _TRIP_RATES), apart, under_pv, in_step,
                                warps, cyc, r.wgmma, r.inst_per_op)
        shape = x[0].shape
        x = np.array(x, np.float64).reshape(len(x), -1)  # (rows of at least one entry: arrays)
        w, n = len(_TRIP_OF), len(_TRIP_OF) + len(_TRIP_RATES)
        t = cls.stack(x[:w], x[w:n], x[n + 3], x[n + 4], x[n:n + 3], x[n + 5] != 0, x[n + 6]).terms
        return cls(t.reshape(len(TRIP), *shape))

    @classmethod
    def stack(cls, work: np.ndarray, rates: np.ndarray, warps, cyc, turns: np.ndarray, wg,
              inst_per_op) -> Trip:
        """Trip.of of its operands stacked: `work` the rows of _TRIP_OF (its sram row
        overwritten), `rates` those of _TRIP_RATES, `turns` apart, under_pv and in_step, each
        broadcast against work's trailing axes (the terms' shape); the terms made as the rows of one array
        (TRIP's), several at once (numpy's calls, not the entries, cost a few rows' time)."""
        flops, exps, alu, sram, extra, fill, shadow, barrier, chained = unstack(work)
        tensor_r, _, _, _, issue_r, inst_r, mma_r, chain_r = unstack(rates)
        t = np.zeros((len(TRIP), *work.shape[1:]))
        mma, other = _instructions(flops, alu + exps, sram, wg, inst_per_op)
        other = other + extra  # instructions beyond the work (KernelPlan.loop_issue)
        issued = other + shadow
        np.subtract(sram, fill, out=sram)  # the bytes the shared-memory pipe carries
        tensor = np.divide(work[:4], rates[:4], out=t[:4])[0]  # tensor, sfu, alu, sram
        np.divide(mma + issued, issue_r, out=t[4])  # issue
        np.multiply(mma / warps, mma_r, out=t[5])  # warp_mma
        np.divide((other - chained) * inst_r + chained * chain_r, warps, out=t[6])  # warp_other
        t[5:7] *= cyc  # (both in cycles)
        # groups: consumers in step share the tensor cores at once: no turns
        t[7] = np.where(wg & (turns[2] == _ZERO), np.maximum(_ONE, warps / _FOUR), _ONE)
        np.copyto(t[9:12], turns, where=wg)  # apart, under_pv, in_step: wgmma's alone
        # dispatch and queue (rows 8 and 12), mma.sync's alone: the tensor time (the same
        # division as `tensor`'s) and the other instructions' issue, added; a trip released at
        # a CTA barrier: the CTA's w warps of a sub-partition (one warp scheduler each: the
        # profile's issue_per_clk_per_sm an SM) reach their MMAs at once, and each waits on
        # average for (w - 1) / w of the sub-partition's tensor time (its share of the CTA's)
        np.add(tensor, issued * inst_r / issue_r, out=t[8])
        # (rint: np.round's to no decimals, without its Python layer)
        np.divide(barrier * np.maximum(_ZERO, _ONE - np.rint(issue_r * cyc) / warps) * flops, tensor_r,
                  out=t[12])
        np.copyto(t[8::4], _ZERO, where=wg)  # (wgmma's: none)
        return _Terms(t)  # (its rows made views as asked: _schedule asks for few)

    def time(self, policy, stages, port, level, n, sync_overlap, latency=0.0) -> np.ndarray:
        """Seconds per loop trip of one CTA with `n` CTAs resident on its SM (`policy`: codes
        of POLICIES); `port`: the trip's bytes through the SM's load path, `level`: the CTA's
        share of L2/DRAM time (its leading axes, if any, the answer's: the bandwidth shared
        and not). The trip is the largest of its own chain, its bandwidth share
        and the SM's throughput when the CTAs' phases overlap perfectly (asynchronous loads);
        with synchronous loads they do not, and the three combine as a `sync_overlap`-norm
        (1: they add up)."""
        policy = _policies(policy, stages)
        codes = _present(policy)
        if len(codes) == 1:
            return self._time(int(codes[0]), port, level, n, sync_overlap, latency)
        if len(policy) <= SUBSET:  # few entries: numpy's cost per call outweighs them
            out = np.empty(np.shape(level))
            sm = self._sm(port, n, latency)  # (every mma.sync policy's)
            for code in codes.tolist():
                np.copyto(out, self._time(code, port, level, n, sync_overlap, latency, sm),
                          where=policy == code)
            return out
        out = np.empty(np.shape(level))
        terms = self._terms()
        for code in codes.tolist():  # many: each policy on its own entries (one gather of all terms)
            at = (policy == code).nonzero()[0]
            q = sync_overlap if isinstance(sync_overlap, float) else sync_overlap[at]
            out[..., at] = Trip(terms[:, at])._time(code, port[at], level[..., at], n[..., at], q,
                                                    latency[at])
        return out

    def time_runs(self, runs, port, level, n, sync_overlap, latency, masked=True) -> np.ndarray:
        """Trip.time of _schedule's trips laid out as (trips, rows): plain trips, masked ones
        (where _schedule keeps them) and epilogues (asynchronous, the last), of rows sorted by
        policy (`runs`: each policy's code, first row and end row; the arguments' last two
        axes (trips, rows)): the epilogues' policy on every entry at once, each other policy
        on its rows' loop trips, as views (no gather: a few rows' cost is numpy's calls). Without `masked`
        trips (none of the rows has one), the plain ones' times stand in for theirs (taken no
        times)."""
        terms = self._terms().reshape(len(TRIP), *np.shape(port))
        q = sync_overlap
        thr, warp, sync = Trip(terms)._sm(port, n, latency)  # (every mma.sync policy's, at once)
        # the epilogues' policy on every entry at once (the SM's throughput and a warp's chain
        # all it takes of the terms): the epilogues' times and those of the runs of its policy
        out = _Terms(terms)._time(EPILOGUE, port, level, n, q, latency, (thr, warp, sync))
        k = len(port) - 1 if masked else 1  # (the epilogues: the last)
        for code, a, z in runs:
            if code == EPILOGUE or code in _NORMS and not np.count_nonzero(out[..., :k, a:z]):
                # (a run whose trips have no work, every term 0 where the epilogues' policy's
                # largest is: any p-norm of them the same +0, not computed)
                continue
            lv, th = level[..., :k, a:z], thr[..., :k, a:z]
            if code in _NORMS:  # (each taken twice, by a p-norm's max and its division: copied
                # whole, numpy's faster operands than the strided views)
                lv, th = lv.copy(), th.copy()
            # (warp-specialized trips take most terms: all at once, as views)
            out[..., :k, a:z] = (Trip if code == WARPSPECIALIZED else _Terms)(terms[:, :k, a:z])._time(
                code, port[:k, a:z], lv, n[..., :k, a:z], q if isinstance(q, float) else q[:k, a:z],
                latency[:k, a:z], (th, warp[:k, a:z], sync[:k, a:z]))
        if k < len(port) - 1:
            out[..., 1, :] = out[..., 0, :]
        return out

    def _sm(self, port, n, latency) -> tuple:
        """(the SM's throughput, a warp's chain, and that after its round trips and bytes: a
        synchronous trip's) of mma.sync trips, `n` CTAs an SM."""
        # an mma.sync holds its sub-partition's dispatch while the tensor core reads its
        # register operands: other warps' instructions issue between MMAs, not beside them
        thr = n * _max(self.dispatch, self.sfu, self.alu, self.sram, self.issue, port)
        warp = self.warp_mma + self.warp_other + self.queue  # queue: after a CTA barrier
        return thr, warp, latency + port + warp

    def _time(self, policy: int, port, level, n, sync_overlap, latency, sm=None) -> np.ndarray:
        """Trip.time for entries that share one policy (`sm`: _sm's answer, where known)."""
        if policy == POLICIES["warpspecialized"]:  # a warpgroup: its share of the MMAs, then
            # its softmax; the softmax (MUFU and FP32 work, one dependent chain in each warp)
            # and the asynchronous wgmma overlap no better than synchronous phases; the
            # results it waits for with nothing else to issue (`latency`: FA3's backward,
            # iosim.kernels) lengthen its chain. One consumer warp's softmax at a time on a
            # sub-partition (turns): its exp2 and FP32 instructions are one dependent chain and
            # add; consumer warps whose softmax phases overlap (`apart`, no turns): one warp's
            # FP32 work issues while another's exp2 holds the MUFU, the two combine as the
            # other unsynchronised phases do (each of these three cases computed only where
            # some entry is one: the same bits, fewer numpy calls)
            pipes = sfu_alu = self.sfu + self.alu
            t = self.__dict__.get("terms")  # (apart, under_pv, in_step: its rows 9-11, counted at once)
            turns = t is None or np.count_nonzero(t[_TURNS])
            if turns and np.count_nonzero(self.apart):  # (faster than .any())
                pipes = np.where(self.apart > _ZERO, pnorm([self.sfu, self.alu], sync_overlap), sfu_alu)
            # a warpgroup's softmax under its own previous P·V (`under_pv`) as well as under the
            # other warpgroups' GEMMs overlaps the tensor cores' work better (PV_OVERLAP)
            pv = sync_overlap
            if turns and np.count_nonzero(self.under_pv):
                pv = np.where(self.under_pv > 0, PV_OVERLAP, 1.0) * sync_overlap
            soft = pnorm([self.tensor, pipes], _one(pv) if isinstance(sync_overlap, float) else pv)
            thr = n * _max(soft, self.sram, self.issue, port)
            # consumers in step (a barrier every step, no turns): their GEMMs share the tensor
            # cores at once (groups 1), and their softmax runs while no GEMM does, all their
            # warps at once: at the MUFU's and FP32 pipes' rate where that is slower than the
            # warps' own issue
            other = self.warp_other
            if turns and np.count_nonzero(self.in_step):
                other = np.where(self.in_step > _ZERO, np.maximum(self.warp_other, sfu_alu),
                                 self.warp_other)
            chain = self.tensor / self.groups + other + latency
            return _max(port, chain, level, thr)
        thr, warp, sync = self._sm(port, n, latency) if sm is None else sm
        if policy == POLICIES["async"]:  # with more than one stage; the round trips of plain
            # loads its issue waits for (sync_loads: decode's per-row table reads) bound the
            # trip, not added to the chain (docs/model.md: as measured)
            return _max(port, warp, latency, level, thr)
        if policy == POLICIES["spread"]:  # one-trip CTAs, many to an SM, each started as
            # another ends: their phases spread, so loads, compute and stores of different CTAs
            # overlap as a fluid (a CTA still takes its own chain)
            return _max(sync, level, thr)  # (sync: latency + port + warp)
        if policy == POLICIES["lockstep"]:  # barriers inside the trip: the warps' phases
            # cannot drift, so their chain and the SM's throughput combine as synchronous phases.
            # The chain holds the trip's bytes through the SM's own load/store path (the port),
            # which the ring's copies and the warps' dQ atomics share: an atomic's registers are
            # free again only once its data has left. The CTA's share of L2/DRAM is not waited
            # for: the next trip's tiles are copied a trip ahead (a cp.async ring, fa2_bwd.cu's
            # STAGES >= 2) and the atomics are not waited for, so it bounds the trip, not adds
            return _max(pnorm([port + warp, thr], sync_overlap), level)
        if policy in (POLICIES["drift"], POLICIES["prefetch"]):  # `drift`: warps with no CTA
            # barrier in the trip (FA1's forward) drift apart: while one warp waits for its loads
            # or runs its chain, others use the SM's pipes and others the memory system;
            # `prefetch`: synchronous loads whose lines the step before brought into L2 (FA1's
            # backward: the next step's O_i and dQacc_i prefetched, Q_i and dO_i in a cp.async
            # ring), so DRAM fills L2 for the next step while the warps wait their round trips,
            # bytes and instructions. Either way the CTA's bandwidth share and the SM's
            # throughput overlap each other better than synchronous phases do (DRIFT_OVERLAP x
            # the exponent; for `prefetch` not fitted anew), and the pair combines with the
            # chain as `none`'s
            busy = pnorm([level, thr], DRIFT_OVERLAP * sync_overlap)
            # the SM's port is shared by its resident CTAs: a warp's synchronous loads find it
            # busy with each other CTA's bytes for the share of time that CTA's own chain keeps
            # it busy (port / chain, as alone: mean value analysis's arrival theorem) and wait
            # for them (fa1's forward with two CTAs on an SM)
            chain = sync  # latency + port + warp
            share = np.divide(port, chain, out=np.zeros(np.shape(chain)), where=chain > _ZERO)  # (chain: port's shape too)
            queued = (n - _ONE) * share * port
            return pnorm([chain + queued, busy], sync_overlap)
        # synchronous loads: the warps wait a round trip (`latency`), then the bytes, then compute
        return pnorm([sync, level, thr], sync_overlap)  # (sync: latency + port + warp)

    def deps(self, td: Trip, policy, stages, port, level, n, sync_overlap, latency,
             d_port, d_level, d_lat) -> np.ndarray:
        """Which reliefs may change Trip.time's answer (RELIEFS bits, per entry), of the same
        arguments; `td`: the terms' own bits (_trip_deps), `d_port`, `d_level`, `d_lat`:
        those of the port, level and latency terms. _time's combinations term for term: a
        max changes only by a relief that may change each of its largest terms (_max_deps),
        a sum or p-norm by one that may change any term."""
        policy = _policies(policy, stages)
        codes = _present(policy)
        if len(codes) == 1:
            return self._deps(int(codes[0]), td, port, level, n, sync_overlap, latency, d_port,
                              d_level, d_lat) + np.zeros(np.shape(level), np.int64)
        out = np.zeros(np.shape(level), np.int64)
        for code in codes:  # each policy on its own entries (the arguments: numbers, or arrays
            # of an entry each along their last axis)
            at = (policy == code).nonzero()[0]
            sub, sd = (Trip(**{x: getattr(t, x)[at] for x in TRIP}) for t in (self, td))
            out[..., at] = sub._deps(int(code), sd, *(x[..., at] if np.ndim(x) else x for x in (
                port, level, n, sync_overlap, latency, d_port, d_level, d_lat)))
        return out

    def _deps(self, policy: int, td: Trip, port, level, n, sync_overlap, latency,
              d_port, d_level, d_lat) -> np.ndarray:
        """Trip.deps for every entry, as if all had this policy (_time's terms, recomputed to
        the same bits; written apart from _time's lines, which the mutation check finds once)."""
        if policy == POLICIES["warpspecialized"]:
            pipes = np.where(self.apart <= 0, self.sfu + self.alu,
                             pnorm([self.sfu, self.alu], sync_overlap))
            pv = np.where(self.under_pv > 0, PV_OVERLAP, 1.0) * sync_overlap
            soft = pnorm([self.tensor, pipes], pv if not isinstance(sync_overlap, float) else _one(pv))
            d_soft = td.tensor | td.sfu | td.alu
            thr = n * _max(soft, self.sram, self.issue, port)
            d_thr = _max_deps([soft, self.sram, self.issue, port], [d_soft, td.sram, td.issue, d_port])
            alone = self.sfu + self.alu
            other = np.where(self.in_step > 0, np.maximum(self.warp_other, alone), self.warp_other)
            d_other = np.where(self.in_step > 0, _max_deps([self.warp_other, alone],
                                                           [td.warp_other, td.sfu | td.alu]),
                               td.warp_other)
            chain = latency + (self.tensor / self.groups + other)
            return _max_deps([port, chain, level, thr], [d_port, td.tensor | d_other | d_lat, d_level, d_thr])
        thr = _max(self.dispatch, self.sfu, self.alu, self.sram, self.issue, port) * n
        d_thr = _max_deps([self.dispatch, self.sfu, self.alu, self.sram, self.issue, port],
                          [td.dispatch, td.sfu, td.alu, td.sram, td.issue, d_port])
        warp = self.warp_other + self.warp_mma + self.queue
        d_warp = td.warp_mma | td.warp_other | td.queue
        if policy == POLICIES["async"]:
            return _max_deps([port, warp, latency, level, thr], [d_port, d_warp, d_lat, d_level, d_thr])
        if policy == POLICIES["spread"]:
            return _max_deps([latency + port + warp, level, thr], [d_lat | d_port | d_warp, d_level, d_thr])
        if policy == POLICIES["lockstep"]:
            return _max_deps([pnorm([port + warp, thr], sync_overlap), level],
                             [d_port | d_warp | d_thr, d_level])
        # p-norms of them all (drift's and prefetch's port queue is made of the same terms: at
        # three or more CTAs an SM a shorter chain may lengthen it, (n - 1) port^2 / chain, so
        # a max that holds such a trip must hold its bits in every term: _schedule's do, each
        # of its terms holds the same trips)
        return d_lat | d_port | d_warp | d_level | d_thr


class _Terms(Trip):
    """A Trip whose terms are the rows of one array, each made a view only when _time asks
    for it (the mma.sync policies given the SM's throughput ask for none)."""

    def __init__(self, terms: np.ndarray):
        self.terms = terms

    def __getattr__(self, x: str) -> np.ndarray:
        v = self.__dict__[x] = self.terms[_TRIP_AT[x]]
        return v


_TRIP_AT = {x: i for i, x in enumerate(TRIP)}
_TURNS = slice(_TRIP_AT["apart"], _TRIP_AT["in_step"] + 1)  # (Trip._time's: apart, under_pv, in_step)
assert TRIP[_TURNS] == ("apart", "under_pv", "in_step")


# what a relief may change, as bits of RELIEFS (Trip.deps, _schedule's `deps`)
BIT = {x: 1 << i for i, x in enumerate(RELIEFS)}
ALL = (1 << len(RELIEFS)) - 1


def _dep(v, bit: int) -> np.ndarray:
    """`bit` where v is not zero: a term that is a count over a rate (or times a latency),
    none where the count is zero (zero at any rate)."""
    return np.where(np.asarray(v) != 0, bit, 0)


def _max_deps(vals: Sequence, deps: Sequence) -> np.ndarray:
    """Bits of _max(*vals): a relief changes the largest only where it may change every term
    that is largest, since no relief lengthens a term (each is a count over a rate, a count
    times a latency, or a sum, product by a count, max or p-norm of such: faster rates and
    shorter latencies only shorten it)."""
    top = _max(*vals)
    out = ALL
    for v, d in zip(vals, deps):
        out = out & np.where(v == top, d, ALL)
    return out


def _trip_deps(t: Trip) -> Trip:
    """The bits of each term of Trip.of (Trip's fields; those rates leave alone: 0)."""
    lat = BIT["latency"]
    zero = np.zeros(np.shape(t.tensor), np.int64)
    return Trip(tensor=_dep(t.tensor, BIT["tensor"]), sfu=_dep(t.sfu, BIT["sfu"]),
                alu=_dep(t.alu, BIT["alu"]), sram=_dep(t.sram, BIT["sram"]),
                issue=_dep(t.issue, BIT["issue"]), warp_mma=_dep(t.warp_mma, lat),
                warp_other=_dep(t.warp_other, lat),
                # mma.sync's tensor time and its issue (_dep of what is left of it: none where
                # that is too small to move the sum, and it only shrinks under a relief)
                dispatch=_dep(t.dispatch, BIT["tensor"]) & _dep(t.tensor, BIT["tensor"])
                | _dep(t.dispatch - t.tensor, BIT["issue"] | lat),
                groups=zero, apart=zero, under_pv=zero, in_step=zero,
                # the tensor time of the sub-partition's other warps, their share by its
                # warp schedulers (the issue rate's: more of them, fewer warps to wait for)
                queue=_dep(t.queue, BIT["tensor"] | BIT["issue"]))


def reduced_loop_reads(k: KernelPlan, p: Problem, spec=..., size: dict | None = None) -> float:
    """Loop-trip reads (two-level, whole kernel) of the tensors the kernel adds into in L2 by
    reductions (iosim.kernels: its spec's `l2_reductions`): the L2 reads them, the SM does not
    (its reductions' bytes cross its port once, as writes). `spec`, `size`: the kernel's
    KernelSpec (SPECS.get) and memory.sizes, where the caller has them (kernel_raw)."""
    spec = SPECS.get(k.name) if spec is ... else spec
    if spec is None or spec.l2_reductions is None:
        return 0.0
    if size is None:
        size = sizes(p, kernel_splits(k))
    return float(sum(v for n, v in k.traffic.reads.items() if n in spec.l2_reductions(k.defines)
                     and not (v <= size[n] and n not in k.streamed)))


def l2_extra(k: KernelPlan, spec=...) -> float:
    """L2 work beyond the kernel's bytes, in byte-equivalents (iosim.kernels: its spec's
    `l2_weights`, the L2's work per byte of a tensor's traffic; 0 for a plain byte each),
    charged to the loop trips' share of the L2 and to its fluid limit, not to the SM's port."""
    spec = SPECS.get(k.name) if spec is ... else spec
    if spec is None or spec.l2_weights is None:
        return 0.0
    t = k.traffic
    return sum((w - 1.0) * (t.reads.get(n, 0) + t.writes.get(n, 0))
               for n, w in spec.l2_weights(k.defines).items())


# a warp's cp.async (16 bytes a thread, 512 a warp) takes one 128-byte wavefront of the
# shared-memory data pipe; its bytes reach the banks through the L1's fill path
FILL_WAVEFRONT = 128 / 512


def smem_fill(k: KernelPlan, spec=...) -> float:
    """Shared-memory bytes of the kernel's asynchronous copies (iosim.kernels: its spec's
    `smem_fills`, the tensors cp.async loads into shared memory; their two-level reads) that the
    data pipe does not carry: ldmatrix and st.shared take a wavefront (128 bytes) a cycle, a
    warp's cp.async one wavefront for its 512 bytes, written through the L1's fill path
    (Nsight Compute's shared-memory wavefronts: tests/test_mechanisms.py); their instructions
    are issued all the same."""
    spec = SPECS.get(k.name) if spec is ... else spec
    if spec is None or not spec.smem_fills:
        return 0.0
    return (1 - FILL_WAVEFRONT) * float(sum(k.traffic.reads.get(n, 0) for n in spec.smem_fills))


def _spec_says(k: KernelPlan, fact: str, spec=...) -> bool:
    """A yes/no fact of the kernel's KernelSpec at its defines (False without a spec or fact).
    `spec` (each fact's too): the kernel's KernelSpec (SPECS.get), where the caller has it."""
    spec = SPECS.get(k.name) if spec is ... else spec
    rule = getattr(spec, fact, None)
    return bool(rule is not None and rule(k.defines))


def softmax_under_pv(k: KernelPlan, spec=...) -> bool:
    """Whether a warpgroup's softmax runs while its own previous P·V GEMM is in flight
    (iosim.kernels: its spec's `softmax_under_pv`)."""
    return _spec_says(k, "softmax_under_pv", spec)


def consumers_in_step(k: KernelPlan, spec=...) -> bool:
    """Whether the kernel's consumer warpgroups run each step together, no turns (iosim.kernels:
    its spec's `consumers_in_step`)."""
    return _spec_says(k, "consumers_in_step", spec)


def softmax_apart(k: KernelPlan, spec=...) -> bool:
    """Whether the kernel's consumer warps run their softmax phases at the same time
    (iosim.kernels: its spec's `softmax_apart`)."""
    return _spec_says(k, "softmax_apart", spec)


def loop_chain(k: KernelPlan, spec=...) -> float:
    """Instructions of one loop trip of a CTA that are steps of its warps' dependent address
    chains (iosim.kernels: its spec's `loop_chain`: then its loop_issue, else none)."""
    return k.loop_issue if _spec_says(k, "loop_chain", spec) else 0.0


def sync_loads(k: KernelPlan, spec=...) -> float:
    """Memory round trips one trip of the kernel waits for (iosim.kernels: its spec's
    `sync_loads`; a kernel with no spec: its KernelPlan's `round_trips`; 0 for kernels whose
    loads a cp.async/TMA pipeline or other warps hide)."""
    spec = SPECS.get(k.name) if spec is ... else spec
    return spec.sync_loads(k.defines) if spec is not None and spec.sync_loads else k.round_trips


def barrier_trips(k: KernelPlan, spec=...) -> float:
    """The share of the kernel's loop trips that begin at a CTA barrier releasing all its
    warps at once (iosim.kernels: its spec's `barrier_trips`; 0 without one)."""
    spec = SPECS.get(k.name) if spec is ... else spec
    return spec.barrier_trips(k.defines) if spec is not None and spec.barrier_trips else 0.0


def sync_in_l2(k: KernelPlan, spec=...) -> bool:
    """Whether the kernel's synchronous round trips are to lines the L2 holds (iosim.kernels:
    its spec's `sync_in_l2`; else first reads from DRAM)."""
    return _spec_says(k, "sync_in_l2", spec)


def first_loads(k: KernelPlan, spec=...) -> float:
    """How much of its first trip's loads a CTA waits for before that trip's work, beyond
    what its trips already wait (sync_loads to DRAM: fa1's forward waits its K/V tiles, 1 / QB
    of a round trip a trip; PyTorch's elementwise kernel its loads): 1 for a kernel that reads
    and whose loads run ahead of its work (a cp.async ring, TMA, its fixed loads), 0 for one
    that reads nothing."""
    return _first_loads(k.traffic.hbm_read > 0, sync_in_l2(k, spec), sync_loads(k, spec))


def _first_loads(reads: bool, in_l2: bool, nsync: float) -> float:
    """first_loads of a kernel that reads (or not), its sync_in_l2 and sync_loads."""
    return max(0.0, float(reads) - (0.0 if in_l2 else nsync))


def store_drain(k: KernelPlan) -> float:
    """Round trips a CTA waits at its end: its warps exit only once their stores and
    reductions have been taken by the memory system (Nsight Compute's `drain` stall, high in
    fa1_init, which only stores: experiments/small_fwd16/h100/ncu16); one where it writes."""
    return float(k.traffic.hbm_write > 0)


def turn_waits(k: KernelPlan, spec=...) -> int:
    """GEMM turns a warp-specialised consumer's trip waits out with nothing else to issue
    (iosim.kernels: its spec's `turn_waits`; 0 without one)."""
    spec = SPECS.get(k.name) if spec is ... else spec
    return spec.turn_waits(k.defines) if spec is not None and spec.turn_waits else 0


_NONE = np.iinfo(np.int64).max  # (_Rows.first's place of no entry)


@dataclass(frozen=True)
class _Rows:
    """Rows of unequal lengths (periods of CTA durations) laid end to end in one flat array,
    shorter rows first: row i is entries off[i]:off[i + 1]. A sum along a row is taken as
    np.sum takes it over a (rows, length) array of the rows of its length (`blocks`: each
    length's run of rows), so to the bit what a pass per length gives; the rest is elementwise
    over the flat entries, or a max (exact in any order), one pass for every length."""

    size: np.ndarray  # (rows,) each row's length, ascending
    off: np.ndarray  # (rows + 1,) where each row starts, and the end
    seg: np.ndarray  # (entries,) each entry's row
    pos: np.ndarray  # (entries,) its place in its row
    blocks: tuple  # (length, first row, end row, first entry, end entry) of each length

    @classmethod
    def of(cls, size: np.ndarray) -> _Rows:
        size = np.asarray(size, np.int64)
        s = size.tolist()
        if s and s[0] > 0 and s.count(s[0]) == len(s):  # one length (most): each entry's row and
            # place by one division (the layout the general path gives, in fewer numpy calls)
            n, k = s[0], len(s)
            return cls(size, np.arange(0, (k + 1) * n, n), *np.divmod(np.arange(k * n), n),
                       ((n, 0, k, 0, k * n),))
        off = np.zeros(len(size) + 1, np.int64)
        np.cumsum(size, out=off[1:])
        seg = np.repeat(np.arange(len(size)), size)
        edges = [0, *((size[1:] != size[:-1]).nonzero()[0] + 1).tolist(), len(size)]
        o = off.tolist()
        return cls(size, off, seg, np.arange(o[-1]) - off.take(seg),
                   tuple((s[a], a, z, o[a], o[z]) for a, z in zip(edges[:-1], edges[1:]) if z > a))

    @classmethod
    def square(cls, dc) -> tuple[np.ndarray, _Rows]:
        """A (rows, period) array's entries, flat, and their rows."""
        dc = np.atleast_2d(np.asarray(dc, np.float64))
        return dc.ravel(), cls.of(np.full(len(dc), dc.shape[1]))

    def take(self, i: np.ndarray) -> tuple[_Rows, np.ndarray]:
        """The rows i (ascending) and where their entries are in this layout."""
        sub = _Rows.of(self.size.take(i))
        return sub, self.off.take(i).take(sub.seg) + sub.pos

    def sums(self, x: np.ndarray) -> np.ndarray:
        if len(self.blocks) == 1:  # (one length: the one pass, no copy)
            n, a, z, lo, hi = self.blocks[0]
            return x[lo:hi].reshape(z - a, n).sum(axis=1)
        out = np.empty(len(self.size))
        for n, a, z, lo, hi in self.blocks:
            out[a:z] = x[lo:hi].reshape(z - a, n).sum(axis=1)
        return out

    def cumsums(self, x: np.ndarray) -> np.ndarray:
        if len(self.blocks) == 1:  # (one length: the one pass, no copy)
            n, a, z, lo, hi = self.blocks[0]
            return np.add.accumulate(x[lo:hi].reshape(z - a, n), axis=1).ravel()
        out = np.empty(len(x), x.dtype)
        for n, a, z, lo, hi in self.blocks:
            out[lo:hi] = np.add.accumulate(x[lo:hi].reshape(z - a, n), axis=1).ravel()
        return out

    def max(self, x: np.ndarray) -> np.ndarray:
        return np.maximum.reduceat(x, self.off[:-1])

    def first(self, at: np.ndarray) -> np.ndarray:
        """Per row, the place of the first of its entries where `at` holds."""
        return np.minimum.reduceat(np.where(at, self.pos, _NONE), self.off[:-1])


def list_schedule(dc: np.ndarray, reps, slots, first=None) -> np.ndarray | float:
    """Latest finish of CTAs with durations `dc` (one period, launched `reps` times over) on
    `slots` slots, in launch order, each on the first slot to free (_starts). The latest
    finish is in the last period, or `first` (per case: the longest CTA that starts with the
    launch, with its share of the bandwidth) where later. `dc` may be (cases, period), with
    `reps` and `slots` per case."""
    flat, rows = _Rows.square(dc)
    n = len(rows.size)
    finish = _list_schedule(flat, rows, np.broadcast_to(reps, n), np.broadcast_to(slots, n), first)
    return float(finish[0]) if np.ndim(dc) == 1 else finish


def _list_schedule(dc: np.ndarray, rows: _Rows, reps, slots, first=None) -> np.ndarray:
    """list_schedule of periods of several lengths at once (`dc` laid out as `rows`)."""
    # CTA c of the last period, (reps - 1) x period + c in launch order
    periods = (np.asarray(reps) - 1).astype(np.int64)  # whole numbers (a float reps)
    past = (periods * rows.size >= slots).all()  # every row's last period launched past its first wave
    if past and len(rows.blocks) == 1:  # (one length: each row's terms as a column, no gathers)
        start = _starts(dc, rows, None, periods, np.asarray(slots), None)
    else:
        last = periods[rows.seg]
        k = None if past else last * rows.size[rows.seg] + rows.pos
        start = _starts(dc, rows, rows.seg, last, np.asarray(slots)[rows.seg], k)
    finish = rows.max(start + dc)
    return finish if first is None else np.maximum(finish, first)


def _starts(dc: np.ndarray, rows: _Rows, row: np.ndarray, periods: np.ndarray, slots,
            k: np.ndarray | None, c: np.ndarray | None = None) -> np.ndarray:
    """Start of CTA k = periods x period + kind (launch order; of row `row` of `dc`, one
    period's durations laid out as `rows`, with its `slots`; `c`: its kind's place in `dc`,
    None: each entry of `dc` is its own CTA, of row rows.seg) on the first slot to free: at
    once while slots are free (k < slots: whole numbers, exact in float64); after that, when a
    slot frees: by then the slots have run what was launched before k, less what the CTAs
    still running have left, on average one residual life each, E[d^2] / (2 E[d]) (renewal
    theory; the Graham bound without it is pessimistic by up to one CTA). `k` None: every
    one of them launched past the first wave (k >= slots). `row` None: `rows` of one length,
    each entry of `dc` its own CTA, `periods` and `slots` per row (their columns broadcast)."""
    total = rows.sums(dc)
    residual = rows.sums(dc * dc) / (2 * total)
    before = rows.cumsums(dc) - dc
    if row is None:
        before = before.reshape(len(total), -1) + (periods * total)[:, None]
        start = np.maximum(_ZERO, before / slots[:, None] - residual[:, None]).ravel()
    else:
        before = (before if c is None else before[c]) + periods * total[row]
        start = np.maximum(_ZERO, before / slots - residual[row])
    return start if k is None else np.where(k < slots, 0.0, start)


# ------------------------------------------------------------------ one kernel's facts
_HELD: dict = {}  # id(profile) -> (profile, what was derived from it)


def _held(hw: HardwareProfile) -> dict:
    """What was derived from this profile so far (profiles are frozen; the profile is kept, so
    its id is not reused while it is held)."""
    held = _HELD.get(id(hw))
    if held is None or held[0] is not hw:
        if len(_HELD) > 64:
            _HELD.clear()
        held = _HELD[id(hw)] = (hw, {})
    return held[1]


def _rates(k: KernelPlan, hw: HardwareProfile, p: Problem) -> tuple[float, ...]:
    """Rates.of(k, hw, p).vector(), remembered per profile (it depends on the kernel only
    through its overlap policy and inst_per_op)."""
    held = _held(hw)
    key = (p.dtype, k.overlap == "warpspecialized", k.inst_per_op)
    v = held.get(key)
    if v is None:
        v = held[key] = Rates.of(k, hw, p).vector()
    return v


def _ctas_per_sm(k: KernelPlan, hw: HardwareProfile) -> int:
    """ctas_per_sm, remembered per profile: a function of the kernel's threads, registers and
    shared memory alone."""
    held = _held(hw)
    key = ("occ", k.threads, k.regs_per_thread, k.smem_bytes)
    v = held.get(key)
    if v is None:
        v = held[key] = ctas_per_sm(k, hw)
    return v


_PERIODS = Memo()  # (id(trips), id(masked)) -> (trips, masked, _period's answer)


def _period(trips: np.ndarray, masked: np.ndarray) -> tuple:
    """(trips, masked trips, period, uniform, Σ trips, Σ masked, the first CTA's trips and
    masked trips as floats) of one period of the launch
    order (the CTAs along grid x), repeated for every (batch, head); remembered per pair of
    arrays (a Plan's come from cached block maps, read-only). A masked trip is one of the CTA's
    trips (ragged tiles count a fraction of a trip): never more masked trips than trips, or a
    faster plain trip would lengthen the CTA."""
    key = (id(trips), id(masked))
    out = _PERIODS.get(key, trips, masked)
    if out is not MISS:
        return out
    one, low = trips, np.minimum(masked, trips)  # (low: the two's length)
    if len(low) == 1:  # every CTA alike
        out = (one, low, 1, True, float(one[0]), float(low[0]))
    else:
        if len(one) != len(low):
            one, low = np.broadcast_arrays(one, low)
        # (np.add.reduce: ndarray.sum's own reduction, without its Python wrapper)
        uniform = bool((one == one[0]).all() and (low == low[0]).all())
        out = (one, low, len(one), uniform, float(np.add.reduce(one)), float(np.add.reduce(low)))
    return _PERIODS.put(key, (trips, masked), out + (float(one[0]), float(low[0])))


# facts of one kernel, the columns of _Facts
FACTS = ("sms", "ctas", "occ", "period", "reps", "uniform", "total_trips", "total_masked", "steps",
         "one0", "masked0", "wg", "warps", "a_flops", "a_exps", "a_alu", "a_sram", "o_flops",
         "o_exps", "o_alu", "mask", "fixed_r", "fixed_w", "loop_r", "loop_w", "dram_r", "dram_w",
         "policy", "stages", "q", "nsync", "l2sync", "nturn", "cyc", "inst_per_op", "flops", "exps", "alu", "sram",
         "l2_bytes", "dram_bytes", "need_port", "tail", "loop_x", "streams", "x_trip", "apart",
         "fill", "x_chain", "a_fill", "x_shadow", "under_pv", "in_step", "red", "barrier", "head", "drain")
# what they are made of (kernel_raw): counts that grow with the problem's (batch, K/V head)
# pairs, u = batch x kv_heads (a Plan of the same shape with u pairs has u/u0 times those of
# one with u0: EXTENSIVE), and facts that do not (INTENSIVE)
EXTENSIVE = ("ctas", "flops", "exps", "alu", "o_flops", "o_exps", "o_alu", "mask_alu", "sram",
             "two_r", "two_w", "fixed_r", "fixed_w", "loop_r", "loop_w", "l2_extra", "fill", "units",
             "loop_red")
INTENSIVE = ("sms", "occ", "period", "uniform", "sum_one", "sum_masked", "one0", "masked0", "wg",
             "warps", "policy", "stages", "q", "nsync", "l2sync", "nturn", "cyc", "inst_per_op", "tail", "streams",
             "x_trip", "apart", "pad", "x_shadow", "under_pv", "in_step", "barrier", "head", "drain",
             "x_chain")


def kernel_raw(k: KernelPlan, hw: HardwareProfile, p: Problem | None, size: dict | None = None,
               acc: list | None = None) -> tuple:
    """(EXTENSIVE counts, INTENSIVE facts, the period's (trips, masked trips) or None when every
    CTA is alike) of one kernel: what facts_table makes its facts of, besides its DRAM bytes.
    `size`: memory.sizes(p, kernel_splits(k)), where the caller has it; `acc` (with p): a list
    extended with its accesses' (count, tensor size), reads then writes (_split's)."""
    trips = k.trips if k.tile_trips is None else k.tile_trips
    one, masked, period, uniform, sum_one, sum_masked, one0, masked0 = _period(trips, k.masked)
    # whole tiles per tile of work (KernelPlan.tile_trips: ragged tiles computed in full)
    pad = 1.0 if trips is k.trips else sum_one / max(_period(k.trips, k.masked)[4], 1e-300)
    w, once, t = k.work, k.once, k.traffic
    wg = k.overlap == "warpspecialized"
    warps = max(1, k.threads // 32 - (4 if wg else 0))  # wgmma: less the producer warpgroup
    spec = SPECS.get(k.name)  # looked up once, for every fact of it below
    if p is not None:
        size = sizes(p, kernel_splits(k)) if size is None else size
        fixed_r, fixed_w, loop_r, loop_w = _split(k, p, size, acc)
        two_r, two_w = fixed_r + loop_r, fixed_w + loop_w  # the whole counts (ints: exact)
    else:
        fixed_r, fixed_w, loop_r, loop_w = 0, 0, 0, 0
        two_r, two_w = t.hbm_read, t.hbm_write
    ctas = k.ctas
    # (the spec's rules asked only where it has them: most kernels have none, and each would
    # answer 0.0 through a call)
    ext = (ctas, w.tensor_flops, w.exp_ops, w.alu_flops, once.tensor_flops, once.exp_ops,
           once.alu_flops, k.mask_alu, t.sram, two_r, two_w, fixed_r, fixed_w, loop_r, loop_w,
           0.0 if spec is None or spec.l2_weights is None else l2_extra(k, spec),
           smem_fill(k, spec) if spec is not None and spec.smem_fills else 0.0,
           k.tiles or ctas,  # k.units
           0.0 if p is None or spec is None or spec.l2_reductions is None
           else reduced_loop_reads(k, p, spec, size))
    nsync, in_l2, turns, apart, under_pv, in_step, barrier, chain = _spec_facts(k, spec)
    inten = (hw.sm_count, _ctas_per_sm(k, hw), period, uniform, sum_one, sum_masked,
             one0, masked0, wg, warps, POLICIES[k.overlap], k.stages,
             hw.pipeline.sync_overlap, nsync, in_l2, turns, 1.0 / hw.clock_hz,
             k.inst_per_op or hw.pipeline.inst_per_op, k.tail_round_trips, float(bool(k.streamed)),
             k.loop_issue, apart, pad, k.loop_shadow, under_pv, in_step,
             barrier, _first_loads(two_r > 0, in_l2, nsync),
             float(two_w > 0), chain)  # first_loads, store_drain
    return ext, inten, (None if uniform else (one, masked))


_SPEC_FACTS = Memo()  # (name, id(defines), id(spec), round_trips, loop_issue) -> (defines, spec, facts)


def _spec_facts(k: KernelPlan, spec) -> tuple:
    """(sync_loads, sync_in_l2, turn_waits, softmax_apart, softmax_under_pv, consumers_in_step,
    barrier_trips, loop_chain) of a kernel, the yes/no facts as floats (as kernel_raw takes
    them): its KernelSpec's rules at its defines, and the KernelPlan fields they fall back on. Remembered by its defines dict and its spec (both kept,
    so their ids are not reused; kernel_defines gives one dict a set of values, nothing changes
    a Plan's, and a spec put in another's place is another)."""
    d = k.defines
    key = (k.name, id(d), id(spec), k.round_trips, k.loop_issue)
    facts = _SPEC_FACTS.get(key, d, spec)
    if facts is not MISS:
        return facts
    return _SPEC_FACTS.put(key, (d, spec), (
        sync_loads(k, spec), float(sync_in_l2(k, spec)), turn_waits(k, spec),
        float(softmax_apart(k, spec)), float(softmax_under_pv(k, spec)),
        float(consumers_in_step(k, spec)), barrier_trips(k, spec), loop_chain(k, spec)))


def facts_table(ext: np.ndarray, inten: np.ndarray, dram_r: np.ndarray,
                dram_w: np.ndarray) -> np.ndarray:
    """(kernels, FACTS) from (kernels, EXTENSIVE) counts, (kernels, INTENSIVE) facts and the
    kernels' DRAM bytes: per trip of one CTA, the once-per-CTA work and the mask apart (a block
    of facts a numpy call: a small batch's cost is the calls)."""
    e, s = _EXT_AT, _INT_AT
    ctas = ext[:, e["ctas"]]
    reps = np.floor_divide(ctas, inten[:, s["period"]])
    total_trips, total_masked = inten[:, s["sum_one"]] * reps, inten[:, s["sum_masked"]] * reps
    # the loop's work and bytes are spread over its tiles of work: trips less the padding of
    # ragged tiles computed in full (each trip then a whole tile's work)
    steps = np.where(total_trips > _ZERO, total_trips / inten[:, s["pad"]], _ONE)
    two_r, two_w = ext[:, e["two_r"]], ext[:, e["two_w"]]
    once = ext.take(_ONCE[1], 1)  # (take: a faster gather)
    loop = ext.take(_STEP[1], 1)  # the loop's: less the once-per-CTA work, and the mask's ALU ops
    loop[:, :len(_ONCE[0])] -= once
    loop[:, _A_ALU] -= ext[:, e["mask_alu"]]
    # ALU ops of a masked trip; DRAM shares of the two-level bytes
    part, whole = np.array([ext[:, e["mask_alu"]], dram_r, dram_w]), np.array([total_masked, two_r, two_w])
    some = whole > _ZERO
    share = np.zeros(part.shape)  # (0 where the whole is none)
    np.divide(part, whole, out=share, where=some)
    two = two_r + two_w
    # the facts taken as they are and the computed ones, block by block end to end, then put
    # in FACTS' order (_BLOCKS_AT: one gather)
    return np.concatenate((inten, ext, loop / steps[:, None], once / ctas[:, None],
                           share.T,
                           np.array([reps, total_trips, total_masked, steps, two + ext[:, e["l2_extra"]],
                                     dram_r + dram_w, two > _ZERO]).T), axis=1).take(_BLOCKS_AT, 1)


def _as_is(names: tuple, computed: set) -> tuple[list, list]:
    """(columns of FACTS, of `names`) of the facts facts_table takes from `names` as they are."""
    pairs = [(FACTS.index(x), i) for i, x in enumerate(names) if x in FACTS and x not in computed]
    return [a for a, _ in pairs], [i for _, i in pairs]


def _at(names: tuple, of: tuple) -> np.ndarray:
    return np.array([of.index(x) for x in names], np.intp)


_EXT_AT, _INT_AT = ({x: i for i, x in enumerate(n)} for n in (EXTENSIVE, INTENSIVE))
# facts_table's computed facts, by block: per loop step (the once-per-CTA work's first, in
# _ONCE's order) and once per CTA, with the EXTENSIVE counts they are made of; the shares of
# a count; the others
_STEP = (("a_flops", "a_exps", "a_alu", "a_sram", "a_fill", "loop_x", "red"),
         _at(("flops", "exps", "alu", "sram", "fill", "l2_extra", "loop_red"), EXTENSIVE))
_ONCE = (("o_flops", "o_exps", "o_alu"), _at(("o_flops", "o_exps", "o_alu"), EXTENSIVE))
_SHARE = ("mask", "dram_r", "dram_w")
_PLAIN = ("reps", "total_trips", "total_masked", "steps", "l2_bytes", "dram_bytes", "need_port")
_A_ALU = _STEP[0].index("a_alu")
_STEP_AT, _ONCE_AT, _SHARE_AT, _PLAIN_AT = (_at(b, FACTS) for b in (_STEP[0], _ONCE[0], _SHARE, _PLAIN))
_COMPUTED = {*_STEP[0], *_ONCE[0], *_SHARE, *_PLAIN}
# (the others come from INTENSIVE and EXTENSIVE as they are)
_AS_IS = (_as_is(INTENSIVE, _COMPUTED), _as_is(EXTENSIVE, _COMPUTED))
if set(FACTS) != _COMPUTED | {FACTS[i] for i in _AS_IS[0][0] + _AS_IS[1][0]}:
    raise AssertionError("a fact that facts_table neither computes nor takes as it is")
_AS_IS = tuple(tuple(np.array(x, np.intp) for x in pair) for pair in _AS_IS)  # fancy indices


def _blocks_at() -> np.ndarray:
    """Per column of FACTS, its column among facts_table's blocks laid end to end (INTENSIVE,
    EXTENSIVE, then the computed blocks, in order: a later block's wins)."""
    at, base = np.full(len(FACTS), -1, np.intp), 0
    for cols, of, width in ((*_AS_IS[0], len(INTENSIVE)), (*_AS_IS[1], len(EXTENSIVE))):
        at[cols] = base + of
        base += width
    for cols in (_STEP_AT, _ONCE_AT, _SHARE_AT, _PLAIN_AT):
        at[cols] = base + np.arange(len(cols))
        base += len(cols)
    if (at < 0).any():
        raise AssertionError("a fact facts_table does not make")
    return at


_BLOCKS_AT = _blocks_at()


class _Facts:
    """FACTS (or those of `names`: its columns) as arrays, one entry per case (the rows of `table`)."""

    def __init__(self, table: np.ndarray, names: tuple = FACTS):
        self.table = table
        self.__dict__.update(zip(names, table.T))  # the columns as views, at a quarter of setattr's cost


class _SomeFacts(_Facts):
    """_Facts of a table of FACTS with fewer columns made at once: those _schedule reads of a
    predict of the record problem and its causal twin (_EAGER, a choice of speed only: 22 of
    57 views made), any other when first read (the same view: table[:, its column])."""

    def __init__(self, table: np.ndarray):
        self.table = table
        self.__dict__.update(zip(_EAGER, _EAGER_OF(table.T)))

    def __getattr__(self, x: str) -> np.ndarray:
        i = _FACT_AT.get(x)
        if i is None:
            raise AttributeError(x)
        v = self.__dict__[x] = self.table[:, i]
        return v


_FACT_AT = {x: i for i, x in enumerate(FACTS)}
_EAGER = ("ctas", "drain", "dram_r", "dram_w", "head", "inst_per_op", "l2sync", "loop_x", "mask", "masked0",
          "nsync", "nturn", "occ", "one0", "policy", "red", "sms", "stages", "streams", "total_masked",
          "total_trips", "wg")
_EAGER_OF = itemgetter(*(_FACT_AT[x] for x in _EAGER))  # (their columns of table.T, at once)


# the facts _busy takes itself (Batch.busy_facts; _fluid's, the occupancy cap's, the tail's)
_BUSY_FACTS = ("flops", "exps", "alu", "sram", "fill", "wg", "inst_per_op", "x_trip", "x_shadow",
               "total_trips", "l2_bytes", "dram_bytes", "sms", "occ", "ctas", "tail")
_BUSY_AT = _at(_BUSY_FACTS, FACTS)
_Q_AT, _POLICY_AT, _STAGES_AT = (FACTS.index(x) for x in ("q", "policy", "stages"))  # (Batch's)
_L2_LATENCY = RATE_FIELDS.index("l2_latency")


@dataclass
class Batch:
    """Kernels to predict at once: their facts (rows of FACTS), their profiles' rates (rows of
    RATE_FIELDS), launch overheads, and the unequal CTA periods (`pidx`: a row's entry of
    `periods`, -1 when its CTAs are alike)."""

    table: np.ndarray
    rates: np.ndarray
    launch: np.ndarray
    periods: list
    pidx: np.ndarray
    # shared_end's answers by their inputs, for every pass over the batch (_shared_ends)
    ends: dict = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return len(self.table)

    @cached
    def busy_facts(self) -> np.ndarray:
        """The table's columns of _BUSY_FACTS (a narrow table: fewer columns for _busy to gather)."""
        return self.table.take(_BUSY_AT, 1)

    @cached
    def q(self) -> float | np.ndarray:
        """The profiles' sync_overlap: a float where they share it (_one)."""
        return _one(self.table[:, _Q_AT])

    @cached
    def codes(self) -> np.ndarray:
        """Each kernel's policy, as Trip.time computes by (_policies)."""
        t = self.table
        return _policies(t[:, _POLICY_AT], t[:, _STAGES_AT])

    @cached
    def stacks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The periods laid end to end, once for every _schedule pass over the batch: per
        period (`pidx`'s entry + 1; 0: none) its length and where it starts, and every
        period's (trips, masked trips) as float64, the two rows of one array (one gather)."""
        if not self.periods:  # (most batches of few kernels: no numpy call)
            return _NO_STACKS
        lengths = [len(pr[0]) for pr in self.periods]
        ends = list(accumulate(lengths))
        return (np.array([0, *lengths], np.int64), np.array([0, 0, *ends[:-1]], np.int64),
                np.concatenate([np.asarray(pr, np.float64) for pr in self.periods], axis=1))


# _schedule's bytes a trip and a CTA (loop_r / steps, ...: the first four over the last four)
_BYTES_AT = _at(("loop_r", "loop_w", "fixed_r", "fixed_w", "steps", "steps", "ctas", "ctas"), FACTS)
# _schedule's columns of FACTS (the unequal rows' facts, one gather)
_PERIOD, _TOTAL_TRIPS, _TOTAL_MASKED, _REPS, _SMS, _CTAS = (
    FACTS.index(x) for x in ("period", "total_trips", "total_masked", "reps", "sms", "ctas"))
# Batch.stacks without periods (read-only: shared by every such batch)
_NO_STACKS = (np.zeros(1, np.int64), np.zeros(1, np.int64), np.zeros((2, 0)))
for _x in _NO_STACKS:
    _x.setflags(write=False)


def batch_of(jobs: Sequence[tuple[KernelPlan, Dram, HardwareProfile, Problem]]) -> Batch:
    """The Batch of these kernels, each with its DRAM bytes, profile and problem."""
    raws = [kernel_raw(k, hw, p) for k, _, hw, p in jobs]
    periods, pidx = [], np.full(len(jobs), -1, np.int64)
    for i, r in enumerate(raws):
        if r[2] is not None:
            pidx[i] = len(periods)
            periods.append(r[2])
    table = facts_table(np.array([r[0] for r in raws], np.float64),
                        np.array([r[1] for r in raws], np.float64),
                        np.array([d.read for _, d, _, _ in jobs], np.float64),
                        np.array([d.write for _, d, _, _ in jobs], np.float64))
    return Batch(table, np.array([_rates(k, hw, p) for k, _, hw, p in jobs], np.float64),
                 np.array([hw.launch_overhead_s for _, _, hw, _ in jobs]), periods, pidx)


FEW = 1024  # cases up to which _busy schedules every occupancy of a case in one pass
# _schedule's trips (a plain loop trip, a masked one, the epilogue): the facts of each that
# Trip.of takes (_TRIP_OF, its arguments), then its policy and stages (Trip.time's), as FACTS
# columns, the three trips' in a row; the epilogue's own (_TRIP_EPI: no bytes, no instructions
# beyond its work, no barrier; an asynchronous trip); a masked trip's ALU work (the mask's on top);
# then the row's facts Trip.of takes (_TRIP_ROW, the same for its three trips: each trip's
# entries of every argument laid out alike, end to end, numpy's fastest operands) and the
# rates it takes (_TRIP_RATES)
_TRIP_OF = ("flops", "exps", "alu", "sram", "extra", "fill", "shadow", "barrier", "chained")
_TRIP_ROW = ("warps", "cyc", "apart", "under_pv", "in_step", "wg", "inst_per_op")
_TRIP_FACTS = (
    ("a_flops", "a_flops", "o_flops"), ("a_exps", "a_exps", "o_exps"), ("a_alu", "a_alu", "o_alu"),
    ("a_sram",) * 3, ("x_trip",) * 3, ("a_fill",) * 3, ("x_shadow",) * 3, ("barrier",) * 3,
    ("x_chain",) * 3, ("policy",) * 3, ("stages",) * 3, *((x,) * 3 for x in _TRIP_ROW))
# the three trips' (plain, masked, epilogue), and (_schedule's rows without masked trips) the
# plain one's and the epilogue's alone
_TRIP_IN = {3: _at(tuple(x for names in _TRIP_FACTS for x in names), FACTS),
            2: _at(tuple(x for names in _TRIP_FACTS for x in names[::2]), FACTS)}
_TRIP_RATES = ("tensor", "sfu", "alu", "sram", "issue", "inst_cycles", "mma_cycles", "chain_cycles")
# a Rates' _TRIP_RATES, each t times over (t trips a row), in one call
_TRIP_RATES_OF = {t: attrgetter(*(x for x in _TRIP_RATES for _ in range(t))) for t in (1, 2, 3)}
_TRIP_ROWS = len(_TRIP_OF) + 2  # each trip's own facts, before the row's
TILE = 4096  # trip entries up to which _schedule lays out the rows' facts and rates as the trips'
_TRIP_EPI = ({t: slice(t * 3 + t - 1, t * 11, t) for t in (2, 3)},  # the epilogue's sram, ...,
             np.array([0.0] * 6 + [POLICIES["async"], 2.0]))  # chained, policy, stages (of t trips a row)
_TRIP_MASKED = 3 * 2 + 1
EPILOGUE = int(_policies(_TRIP_EPI[1][-2], _TRIP_EPI[1][-1]))  # the epilogue's policy (Trip.time_runs)
RUNS = 8  # policy runs of _schedule's rows up to which Trip.time_runs takes them as views
# the policies whose trip time is a p-norm of no terms but the epilogues' policy's (port,
# warp, latency, level, thr): 0 where all of those are (Trip.time_runs)
_NORMS = {POLICIES[x] for x in ("lockstep", "none", "drift", "prefetch")}


def _busy(b: Batch, kidx: np.ndarray, relief: np.ndarray, deps: bool = False,
          bound: bool = False, idle: Callable | None = None, factors: np.ndarray | None = None) -> tuple:
    """Seconds each case keeps the GPU busy (launch apart), case i being kernel kidx[i] of the
    batch at the rates of RELIEF_FACTORS row relief[i], and its fluid limits ((LIMITS, cases));
    with `deps`, also per case the reliefs (RELIEFS bits) that may change its seconds: any
    other leaves them as they are, to the last bit (_schedule's `deps`). With `bound`, the
    seconds of cases of unequal CTAs are a lower bound on theirs (_schedule's `bound`, at
    every occupancy below the cap too), those of the others the same to the bit. `idle`: of
    the fluid limits, the cases whose seconds the caller takes no further (predict_batch's
    rates a kernel never uses): not scheduled (their seconds then any; the last case's kept)."""
    # (take: a faster gather; `factors`: RELIEF_FACTORS' rows of `relief`, where the caller has them)
    rates = b.rates.take(kidx, 0) * (RELIEF_FACTORS.take(relief, 0) if factors is None else factors)
    few = len(kidx) <= FEW
    # (few: the facts this function takes itself, _shortest gathers its own)
    f = _Facts(b.busy_facts.take(kidx, 0), _BUSY_FACTS) if few else _Facts(b.table.take(kidx, 0))
    limits = _fluid(f, rates)
    top = np.maximum.reduce(limits)

    # the occupancies each case is scheduled at: CTAs resident on one SM overlap at least as
    # well as the same CTAs run fewer at a time (more warps never hide less latency; what more
    # CTAs cost in L2 is the DRAM estimate's): the best of the occupancies up to the one the
    # resources allow (beyond ctas/SMs, all run, the cap): the cap and the powers of two below
    # it (a small kernel may fit 32 CTAs an SM: not 32 schedules)
    cap = np.minimum(f.occ, -(-f.ctas // f.sms)).astype(np.int64)
    # unequal CTAs, one wave, two on some SMs: the hardware places them all at once, and
    # _schedule shares each such SM between its two (shared_pairs); fewer at a time is no
    # schedule the hardware runs, nor a bound on one (a long CTA alone on an SM first finishes
    # sooner than beside another)
    # (no unequal CTAs in the batch: none)
    paired = (cap == 2) & (b.pidx[kidx] >= 0) & (f.ctas <= 2 * f.sms) if b.periods else None
    if few:  # numpy's cost per call outweighs the rows: all in one pass
        # (idle cases: no occupancy tried)
        used = True if idle is None else ~idle(limits)
        best = _shortest(b, kidx, rates, cap if idle is None else cap * used, with_cap=used,
                         only_cap=paired, deps=deps, bound=bound)
        best, bits = best if deps else (best, None)
    else:  # the cap first (the best almost always), then fewer at a time where that could
        # do better: where the cap's time is above the fluid limits (every occupancy's floor)
        # and above a floor of the occupancies below it: o CTAs an SM run the kernel's trips,
        # each no shorter than a warp's dependent chain, o x SMs at a time (the most below
        # the cap, 2^(e-1) for cap - 1 = x 2^e with x in [0.5, 1), has the lowest floor)
        r = _rates_of(rates, f)
        paired = np.zeros(len(cap), bool) if paired is None else paired
        best, chain, *bits = _schedule(f, r, cap * f.sms, b, kidx, deps, bound)
        fewer = np.ldexp(1.0, np.frexp(np.maximum(cap - 1, 1))[1] - 1)
        # (and the kernel's drain: every schedule's edges or its lone CTAs' rings hold it)
        floor = f.total_trips * chain / (fewer * f.sms) + f.drain * r.load_latency
        may = (best > top) & (floor * (1 - 1e-9) <= best)
        if bound:  # where the cap's time is a bound (unequal CTAs), the least of every
            # occupancy's bounds bounds the least of those the exact pass tries
            may |= b.pidx[kidx] >= 0
        i = ((cap > 1) & may & ~paired).nonzero()[0]
        if deps:  # a relief that may change the floor (the chain, the drain) may change which
            # occupancies are tried
            bits = bits[0] | np.where((cap > 1) & ~paired, bits[1] | _dep(f.drain, BIT["latency"]), 0)
        if len(i):
            less = _shortest(b, kidx[i], rates[i], cap[i], with_cap=False, deps=deps, bound=bound)
            if deps:
                less, bits[i] = less[0], bits[i] | less[1]
            best[i] = np.minimum(best[i], less)
    # after the last CTA's loop, a chain of dependent round trips to L2 no other work overlaps
    # (KernelPlan.tail_round_trips: split-KV decode's fused combine, on lines other SMs wrote)
    tail = f.tail * rates[:, _L2_LATENCY]
    if deps:  # the schedule past the fluid limits: a relief of theirs shortens one, leaves it
        # the larger; else either may change it (a relief may lengthen a schedule)
        top_bits = _max_deps(limits, [_dep(v, BIT[u]) for u, v in zip(LIMITS, limits)])
        bits = np.where(best > top, bits, bits | top_bits) | _dep(tail, BIT["latency"])
        return np.maximum(best, top) + tail, limits, bits
    return np.maximum(best, top) + tail, limits


def _shortest(b: Batch, kidx: np.ndarray, rates: np.ndarray, cap: np.ndarray,
              with_cap: bool, only_cap: np.ndarray | None = None, deps: bool = False,
              bound: bool = False):
    """Per case (kernel kidx[i] at rates[i]), its shortest schedule at the powers of two below
    its cap, and at the cap `with_cap` (each case must have one; `only_cap`: cases scheduled at
    their cap alone); with `deps`, also the bits of all the schedules it takes the least of."""
    bits = _POW2[:int(np.maximum.reduce(cap)).bit_length()]
    occ = np.empty((len(cap), len(bits) + 1), np.int64)
    occ[:, :-1], occ[:, -1] = bits, cap
    tried = np.empty(occ.shape, bool)
    np.less(bits, cap[:, None], out=tried[:, :-1])
    tried[:, -1] = with_cap
    if only_cap is not None:
        tried[only_cap, :-1] = False
    case = tried.nonzero()[0]  # rows (case, occupancy), a case's contiguous
    # where each case's rows start (case ascending, before any sort: the first row of each)
    starts = case.searchsorted(np.arange(len(cap)))
    occ, kc = occ[tried], kidx.take(case)
    sort = 3 * len(case) > SUBSET  # _schedule's rows sorted by policy (Trip.time_runs), then back
    if sort:
        order = b.codes.take(kc).argsort(kind="stable")
        case, occ, kc = case.take(order), occ.take(order), kc.take(order)
    g = _SomeFacts(b.table.take(kc, 0))
    sched, _, *more = _schedule(g, _rates_of(rates.take(case, 0), g), occ * g.sms, b, kc, deps, bound)
    if sort:
        sched, more = _unsort(sched, order), [_unsort(x, order) for x in more]
    least = np.minimum.reduceat(sched, starts)
    return (least, np.bitwise_or.reduceat(more[0], starts)) if deps else least


_POW2 = 1 << np.arange(63, dtype=np.int64)  # _shortest's occupancies below a cap


def _unsort(x: np.ndarray, order: np.ndarray) -> np.ndarray:
    """x's entries back in their places before `order` sorted them (one scatter)."""
    out = np.empty_like(x)
    out[order] = x
    return out


_THREE = np.arange(3)[:, None]  # (_alone's three trips, a column)
# _alone's epilogue: its policy, stages, port, latency and level terms (Trip.time's arguments)
_EPI_ARGS = np.array([POLICIES["async"], 2.0, 0.0, 0.0, 0.0])[:, None]


def _rep(a: np.ndarray, k: int) -> np.ndarray:
    """`a` repeated k times end to end (np.tile's result, without its overhead)."""
    return np.concatenate((a,) * k)


def _tile(x, k: int):
    """A dataclass of arrays (Rates) with each array repeated k times end to end."""
    return type(x)(**{n: _rep(getattr(x, n), k) for n in x.__dataclass_fields__})


def _rates_of(rv: np.ndarray, f: _Facts) -> Rates:
    """Rates of arrays from rate rows (RATE_FIELDS columns) and the cases' facts."""
    r = Rates.__new__(Rates)  # (its fields set at once: the dataclass's __init__ sets each)
    r.__dict__.update(zip(RATE_FIELDS, rv.T), wgmma=f.wg.astype(bool), inst_per_op=f.inst_per_op)
    return r


def _alone(f: _Facts, trips: Trip, ix: np.ndarray, res: np.ndarray, q, loop_port, lat,
           fixed_port, waits, m: int, levels=(0.0, 0.0)) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(fixed part, plain trip, a masked trip's extra) of one CTA of rows `ix` at `res` (per
    row of ix) CTAs an SM, without the bandwidth share (the SM's own units) or, `levels`, with its share
    of L2/DRAM time (a loop trip's, the fixed part's; per row of ix). `loop_port`, `lat`,
    `fixed_port`, `waits`: per row of the m (arrays of m). `trips`: _schedule's
    Trip of 3m entries (plain trips, masked, epilogues); `q`: its sync_overlap (a float or per
    row); `waits`: what a CTA's fixed part adds to its phases (a pipeline's fill, a ring's
    first stage)."""
    sel = (_THREE * m + ix).ravel()
    sub = Trip(trips._terms().take(sel, 1))  # (one gather of every term)
    k = len(ix)
    # per row of ix (one gather): the loop trip's policy, stages, port and latency terms, the
    # fixed part's port term and waits
    rows = np.array((f.policy, f.stages, loop_port, lat, fixed_port, waits)).take(ix, 1)
    # Trip.time's arguments of the three trips (a loop trip plain and masked, the epilogue:
    # asynchronous, two stages, no port or latency term, no bandwidth share): policy, stages,
    # port, latency, level, residency
    args = np.empty((6, 3, k))
    args[:4, :2] = rows[:4, None]
    args[:5, 2] = _EPI_ARGS
    np.add(levels[0], _ZERO, out=args[4, :2])  # (+ 0: a zero's sign, as the sum with zeros gives)
    args[5] = res
    qi = q if isinstance(q, float) else q[ix]
    policy, stages, port, latency, level, n = unstack(args.reshape(6, 3 * k))
    t = sub.time(policy, stages, port, level, n,
                 qi if isinstance(qi, float) else np.concatenate((qi, qi, qi)), latency).reshape(3, k)
    fixed = pnorm([np.maximum(rows[4], levels[1]) + _ZERO, t[2]], qi) + rows[5]
    return fixed, t[0], t[1] - t[0]


def _alone_deps(f: _Facts, trips: Trip, td: Trip, ix: np.ndarray, res: np.ndarray, q, loop_port,
                lat, fixed_port, waits, m: int, levels, d: dict) -> np.ndarray:
    """The bits (Trip.deps) of _alone's parts of the same arguments, together, per row of ix
    (rows may repeat; `res` and `levels` per row of ix); `td`: the terms' bits of `trips`,
    `d`: those of loop_port, lat, fixed_port, waits and the levels (per row of ix)."""
    sel = (np.arange(3)[:, None] * m + ix).ravel()
    sub, sd = (Trip(**{x: getattr(t, x)[sel] for x in TRIP}) for t in (trips, td))
    k = len(ix)

    def three(plain, epi, kind=np.float64):
        out = np.empty(3 * k, kind)
        out[:2 * k].reshape(2, k)[:] = plain
        out[2 * k:] = epi
        return out

    def at(x):
        return np.broadcast_to(x, (m,))[ix]

    qi = q if isinstance(q, float) else q[ix]
    zk = np.zeros(k, np.int64)
    t = sub.deps(sd, three(f.policy[ix], POLICIES["async"]), three(f.stages[ix], 2.0),
                 three(at(loop_port), 0.0), three(levels[0] + np.zeros(k), 0.0),
                 three(res, res), qi if isinstance(qi, float) else three(qi, qi),
                 three(at(lat), 0.0), three(at(d["port"]), 0, np.int64),
                 three(d["levels"][0] + zk, 0, np.int64), three(at(d["lat"]), 0, np.int64)).reshape(3, k)
    fixed = _max_deps([at(fixed_port) + np.zeros(k), levels[1] + np.zeros(k)],
                      [at(d["fixed_port"]) + zk, d["levels"][1] + zk])
    return t[0] | t[1] | t[2] | fixed | at(d["waits"])


def _expected_max(values: np.ndarray, draws: float) -> float:
    """Expected largest of `draws` independent draws from `values`, each value equally likely."""
    v = np.sort(np.ravel(values))
    return float(np.sum(v * _max_steps(len(v), draws)))


@lru_cache(maxsize=1024)
def _max_steps(size: int, draws: float) -> np.ndarray:
    """_expected_max's weights of the sorted values: P(the largest of `draws` is the i-th of
    `size`), the same for every set of values of one size (a kernel's periods, each relief)."""
    at = (np.arange(1, size + 1) / size) ** draws
    return read_only(np.diff(at, prepend=0.0))


def shared_pairs(two: np.ndarray, one: np.ndarray, ctas: int, sms: int) -> float:
    """Latest finish of one wave of `ctas` unequal CTAs, at most two an SM (`two`, `one`: one
    period's durations with another CTA on the SM and alone): ctas - SMs SMs hold two, which
    share the SM's units while both run, the one left then alone at its own speed (processor
    sharing); which CTA shares with which is the block scheduler's, so any two of the period
    alike: the expected latest of the pairs, and of the CTAs alone."""
    pairs = max(0, ctas - sms)
    a2, b2, a1, b1 = two[:, None], two[None, :], one[:, None], one[None, :]
    first = np.minimum(a2, b2)  # both at the shared speed until the shorter ends
    done = first + np.where(a2 <= b2, (1 - first / b2) * b1, (1 - first / a2) * a1)
    return max(_expected_max(done, pairs) if pairs else 0.0,
               _expected_max(one, sms - pairs) if sms > pairs else 0.0)


BINS = 16  # shared_end's: the CTAs left when the last one starts, in this many bins
_BINS, _FLOOR = np.array(float(BINS)), np.array(1e-300)  # (_past_wave's, 0-d: numpy takes those faster)
# rows of _past_wave at a time: each of its (rows, slots) temporaries, 32 x 264 x 8 B on an
# H100, stays in a core's cache (all of a big batch's rows at once ran slower)
PAST_ROWS = 32


def shared_end(dc: np.ndarray, d1: np.ndarray, reps, slots, sms) -> np.ndarray | float:
    """Latest finish of unequal CTAs at two an SM (`dc`, `d1`: one period's durations beside
    another CTA and alone, launched `reps` times over, `slots` = 2 x `sms` places, or fewer
    CTAs): while CTAs wait for a place, every freed place takes the next at once and the SMs
    run full, two CTAs each; once the last CTA has started (list_schedule's start of it) each
    SM keeps the two it holds, which share its units while both run, the one left then alone
    at its own speed (shared_pairs, on what each has left then). Those two are the last CTAs
    given its places: the grid's last `slots`, which started at list_schedule's starts. One
    wave (CTAs <= slots): all start at once, shared_pairs on whole CTAs. `dc`, `d1` may be
    (cases, period), with `reps`, `slots`, `sms` per case."""
    flat, rows = _Rows.square(dc)
    out = _shared_end(flat, np.asarray(d1, np.float64).ravel(), rows,
                      *(np.broadcast_to(x, len(rows.size)) for x in (reps, slots, sms)))
    return float(out[0]) if np.ndim(dc) == 1 else out


def _shared_end(dc: np.ndarray, d1: np.ndarray, rows: _Rows, reps, slots, sms) -> np.ndarray:
    """shared_end of periods of several lengths at once (`dc`, `d1` laid out as `rows`)."""
    reps, slots, sms = np.asarray(reps, np.int64), np.asarray(slots, np.int64), np.asarray(sms, np.int64)
    ctas = reps * rows.size
    if 0 < len(ctas) <= PAST_ROWS and (ctas > slots).all():  # (all past the first wave, at once: no gather)
        return _past_wave(dc, d1, rows, ctas, slots, sms)
    out = np.empty(len(ctas))
    wave = ctas <= slots
    for i in np.flatnonzero(wave):
        lo, hi = rows.off[i], rows.off[i + 1]
        out[i] = shared_pairs(dc[lo:hi], d1[lo:hi], int(ctas[i]), int(sms[i]))
    past = np.flatnonzero(~wave)
    for lo in range(0, len(past), PAST_ROWS):
        i = past[lo:lo + PAST_ROWS]
        sub, at = rows.take(i)
        out[i] = _past_wave(dc[at], d1[at], sub, ctas[i], slots[i], sms[i])
    return out


def _shared_ends(b: Batch, dc: np.ndarray, d1: np.ndarray, rows: _Rows, reps, slots, sms) -> np.ndarray:
    """_shared_end of each row (a case's durations), each distinct row of inputs computed once
    for all passes over the batch `b`: a relief that leaves a kernel's durations as they were
    (one not on its CTAs' critical path) gives the rows the base pass had, so the same answer
    (each row's answer is its own inputs' alone)."""
    keys = []  # each row's inputs as bytes (a length's rows at once: each row one void item)
    for n, a, z, lo, hi in rows.blocks:
        raw = np.concatenate((dc[lo:hi].reshape(z - a, n), d1[lo:hi].reshape(z - a, n), reps[a:z, None],
                              slots[a:z, None], sms[a:z, None]), axis=1, dtype=np.float64)
        keys += raw.view(np.dtype((np.void, 8 * (2 * n + 3)))).ravel().tolist()
    ends, todo = b.ends, {}  # todo: each input not known yet: its first row
    for i, k in enumerate(keys):
        if k not in ends:
            todo.setdefault(k, i)
    if len(todo) == len(keys):  # every row new and its own (no gather)
        out = _shared_end(dc, d1, rows, reps, slots, sms)
        ends.update(zip(todo, out.tolist()))
        return out
    if todo:
        i = np.array(list(todo.values()))
        if len(rows.blocks) == 1:  # (one length: the rows' entries by one take)
            n = rows.blocks[0][0]
            sub, dc, d1 = _Rows.of(rows.size.take(i)), dc.reshape(-1, n).take(i, 0), d1.reshape(-1, n).take(i, 0)
            dc, d1 = dc.ravel(), d1.ravel()
        else:
            sub, at = rows.take(i)
            dc, d1 = dc.take(at), d1.take(at)
        ends.update(zip(todo, _shared_end(dc, d1, sub, reps.take(i), slots.take(i), sms.take(i)).tolist()))
    return np.array(list(map(ends.__getitem__, keys)), np.float64)


def _past_wave(dc, d1, rows: _Rows, ctas, slots, sms) -> np.ndarray:
    """shared_end of cases with CTAs past the first wave, all at once (`dc`, `d1` laid out
    as `rows`)."""
    n = len(ctas)
    r = np.arange(n)[:, None]
    period, off = rows.size[:, None], rows.off[:-1, None]
    sl = slots.tolist()
    width = max(sl)
    j = np.arange(width)
    valid = None if min(sl) == width else j < slots[:, None]  # (None: every row's own slots)
    k = (ctas - slots)[:, None] + j  # launch order of the last `slots` CTAs
    periods, kind = np.divmod(k, period)  # (one integer division for both)
    c = kind + off  # its kind, in `dc`
    launched = ctas.tolist()
    # (the first of them launched past the first wave, k >= slots, in every row: no select)
    wave = None if all(x >= 2 * y for x, y in zip(launched, sl)) else k
    start = _starts(dc, rows, r, periods, slots[:, None], wave, c)
    # the j-th CTA past the first wave starts no later than the first wave's j-th end (its
    # durations in order; where none of those before it ends first, then) and no sooner than
    # its first end: the renewal average misses that the first places to free are the first
    # wave's shortest CTAs (the q-th end of the first wave, q = k - slots < slots: none where
    # every row launches 3 x slots CTAs or more)
    if not all(x >= 3 * y for x, y in zip(launched, sl)):
        start = _refill(dc, rows, r, start, k - slots[:, None], slots, width)
    if valid is not None:
        start = np.where(valid, start, 0.0)
    last = start.max(axis=1, keepdims=True)
    dk = dc.take(c)  # each CTA's duration
    two = np.maximum(_ZERO, start + dk - last)  # left, shared
    if valid is not None:
        two = np.where(valid, two, 0.0)
    lone = two / dk * d1.take(c)  # and alone
    # what is left, in BINS bins of equal width, each as likely as the CTAs in it (at most
    # 1/(2 BINS) of the longest off: a numerical shortcut)
    top = np.maximum(two.max(axis=1, keepdims=True), _FLOOR)
    at = np.minimum((two * (_BINS / top)).astype(np.int64), BINS - 1) + r * BINS
    if valid is not None:  # (the CTAs past a row's own slots apart)
        at, two, lone = at[valid], two[valid], lone[valid]
    at, two, lone = at.ravel(), two.ravel(), lone.ravel()
    w = np.bincount(at, minlength=n * BINS).reshape(n, BINS).astype(np.float64)
    safe = np.maximum(w, _ONE)
    a2 = np.bincount(at, two, n * BINS).reshape(n, BINS) / safe
    a1 = np.bincount(at, lone, n * BINS).reshape(n, BINS) / safe
    return last[:, 0] + _pairs_max(a2, a1, w / w.sum(axis=1, keepdims=True), slots - sms)


def _refill(dc, rows: _Rows, r, start, q, slots, width) -> np.ndarray:
    """_past_wave's starts (`start`) of the CTAs that take the first wave's places as its CTAs
    end (the q-th end, 0 <= q < slots) bounded by those ends."""
    n = len(slots)
    period, off = rows.size[:, None], rows.off[:-1, None]
    # The first wave holds each kind of CTA slots // period times, the first slots % period
    # kinds once more
    order = np.empty(len(dc), np.int64)  # each row's kinds, shortest first
    for m, a, z, lo, hi in rows.blocks:
        order[lo:hi] = dc[lo:hi].reshape(z - a, m).argsort(axis=1).ravel()
    times, more = np.divmod(slots.take(rows.seg), rows.size.take(rows.seg))
    upto = rows.cumsums(times + (order < more))  # first-wave CTAs up to each kind, shortest first
    # the kinds whose first-wave CTAs have all ended by the q-th end (q <= slots.max()):
    # counted, each row's counts apart
    width += 1
    nth = np.bincount(rows.seg * width + upto, minlength=n * width).reshape(n, width).cumsum(axis=1)
    nth = nth.ravel().take(np.minimum(np.maximum(q, 0), width - 1) + r * width)
    ranked = dc.take(order + rows.off.take(rows.seg))  # each row's durations, shortest first
    ends = ranked.take(np.minimum(nth, period - 1) + off)
    refill = (q >= 0) & (q < slots[:, None])
    # (np.clip's bits: the larger of the start and the first end, then the lesser of that and `ends`)
    return np.where(refill, np.minimum(np.maximum(start, ranked.take(off)), ends), start)


def _pairs_max(two: np.ndarray, one: np.ndarray, w: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Per case (rows of `two`, `one`: what CTAs have left, shared and alone, each as likely as
    `w`), the expected latest of `pairs` SMs' pairs drawn at random (shared_pairs's)."""
    a2, b2, a1, b1 = two[:, :, None], two[:, None, :], one[:, :, None], one[:, None, :]
    first = np.minimum(a2, b2)
    # what the longer of the two (shared_pairs's: b where a <= b) has left alone; what it had
    # left by then a share 1 - first / longer of that. The longer is the larger (what is left
    # is >= +0, no NaN), at least the smallest float: where both are 0 the share is then 1, not
    # shared_pairs's 0, of what is left alone, 0 there too (_past_wave's `lone`): the same +0
    top = np.maximum(two, _TINY)
    ratio = first / np.maximum(top[:, :, None], top[:, None, :])
    done = (first + (_ONE - ratio) * np.where(a2 <= b2, b1, a1)).reshape(len(two), -1)
    ww = (w[:, :, None] * w[:, None, :]).ravel()
    order = done.argsort(axis=1)
    order += np.arange(0, done.size, done.shape[1])[:, None]  # (rows apart, one gather)
    v, p = done.ravel()[order], ww[order]
    at = np.minimum(np.add.accumulate(p, axis=1), _ONE) ** pairs[:, None]
    at[:, 1:] -= at[:, :-1].copy()  # (np.diff's, the first less 0)
    return (v * at).sum(axis=1)


def _longest(dc, reps, conc, slots, rows: _Rows | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The place in its row of the longest CTA of those that start with the launch (per row of
    `dc`: one period's durations without the bandwidth share; laid out as `rows`, if given),
    and the bandwidth share it has over its life
    (the CTAs it shares L2 and DRAM with, _schedule's `alone`): processor sharing, the CTAs that run beside it
    for as long as they run, Σ min(d, D) / D of them on average (itself included), at most
    the `conc` that run at once. A CTA that ends early gives its share back, but the longest
    still shares with every CTA for as long as that one runs (ncu,
    experiments/ncu_mechanism/h100/small15b: fa2's causal backward at one CTA an SM, 128
    CTAs, its busiest SM 3.5% short of the non-causal kernel's, not the 10% of a CTA alone)."""
    if rows is None:
        dc, rows = _Rows.square(dc)
    if rows.blocks and max(x[0] for x in rows.blocks) <= np.asarray(slots).min():  # (every CTA of a period starts with it)
        first = dc
    else:
        first = np.where(rows.pos < np.asarray(slots).take(rows.seg), dc, -np.inf)
    d = rows.max(first)
    at = d.take(rows.seg)  # (each entry's row's)
    share = np.minimum(conc, reps * rows.sums(np.minimum(dc, at)) / d)
    return rows.first(first == at), share


def _schedule(f: _Facts, r: Rates, slots: np.ndarray, b: Batch,
              kidx: np.ndarray, deps: bool = False, bound: bool = False) -> tuple:
    """The grid's CTAs through `slots` resident places (CTAs per SM x SMs), launch order, per
    row (row i: kernel kidx[i]); and per row what no loop trip takes less than at any
    occupancy, a warp's dependent chain. With `deps`, also per row the reliefs (RELIEFS
    bits) that may change its time, and those of its chain: the union of the bits of every
    term its time is made of (Trip.deps of each trip the row's schedule takes, at every
    residency and share it takes them). With `bound`, the rows of unequal CTAs take the
    spread of their summed durations alone, of which their time is the max with the rest:
    a lower bound on it, to the bit (predict_batch's search)."""
    ctas, m = f.ctas, len(f.ctas)
    conc = np.minimum(ctas, slots)

    def flat(x):  # a (trips, m) or (m,) array as one of nt x m entries
        return x.ravel() if x.ndim == 2 else np.concatenate((x,) * nt)

    # three trips per row: a plain loop trip, a masked one (the mask's ALU work on top) and
    # the epilogue (the work done once per CTA), in one Trip of 3m entries (the rates and the
    # per-row facts broadcast); each with the global bandwidth shared and without (below): a
    # leading axis of the bandwidth share alone, which Trip.time's answer keeps. The three
    # trips' facts (_TRIP_IN) in one gather of the rows' facts, the epilogue's own set
    zero = np.zeros(m)
    few = 3 * m <= TILE
    # (a few rows of which none has a masked trip, no unequal CTAs and no bits asked: the plain
    # trip and the epilogue alone, `nt` trips a row; a masked trip's extra time is taken no times)
    masked = bool(b.periods) or bool(np.count_nonzero(f.total_masked) or np.count_nonzero(f.masked0))
    nt = 2 if few and not deps and not masked else 3
    x = f.table.T[_TRIP_IN[nt] if few else _TRIP_IN[nt][:nt * _TRIP_ROWS]]  # (facts, m): each fact's entries contiguous
    x[_TRIP_EPI[0][nt]] = _TRIP_EPI[1][:, None]
    if nt == 3:
        x[_TRIP_MASKED] += f.mask
    x = x.reshape(-1, nt * m)  # each fact's entries of its trips (end to end)
    policy, stages = unstack(x[len(_TRIP_OF):len(_TRIP_OF) + 2])  # (the trips' policy and stages)
    if few:  # the row's facts and rates three times over, as the trips' (numpy's fastest operands;
        # the rates in one concatenation: each rate's rows, its trips' end to end)
        warps, cyc, _, _, _, wg, inst_per_op = unstack(x[len(_TRIP_OF) + 2:])
        rates = np.concatenate(_TRIP_RATES_OF[nt](r)).reshape(len(_TRIP_RATES), nt * m)
        trips = Trip.stack(x[:len(_TRIP_OF)], rates, warps, cyc,
                           x[len(_TRIP_OF) + 4:len(_TRIP_OF) + 7], wg.astype(bool), inst_per_op)
    else:  # many: broadcast (no copies)
        rates = np.array(_TRIP_RATES_OF[1](r))
        parts = Trip.stack(x[:len(_TRIP_OF)].reshape(len(_TRIP_OF), 3, m), rates[:, None], f.warps, f.cyc,
                           np.array([f.apart, f.under_pv, f.in_step])[:, None], r.wgmma, r.inst_per_op)
        trips = Trip(parts.terms.reshape(len(TRIP), 3 * m))
    # a warp-specialized pipeline fills once per CTA: the first warpgroup's GEMMs and softmax
    # have no other warpgroup's work to hide under; consumer warpgroups without turns (`apart`)
    # all wait for the same first tiles and start in step: the first trip's GEMMs and softmax
    # (exp2 and FP32) of all of them, one after the other
    ws = f.policy == _WS
    # (the plain trips' terms: rows of one view, fewer arrays made than the Trip's rows sliced)
    tm = trips.terms[:, :m]
    tensor1, other1 = tm[_TRIP_AT["tensor"]], tm[_TRIP_AT["warp_other"]]
    turn = tensor1 / tm[_TRIP_AT["groups"]] + other1
    in_step = tensor1 + tm[_TRIP_AT["sfu"]] + tm[_TRIP_AT["alu"]]
    # (no row's consumers apart, most batches: `turn` is the inner select's every pick)
    apart = tm[_TRIP_AT["apart"]]
    ws_fill = np.where(apart > _ZERO, np.maximum(turn, in_step), turn) if np.count_nonzero(apart) else turn
    fill = np.where(ws, ws_fill, _ZERO)
    q = b.q if isinstance(b.q, float) else _one(f.q)  # a float where the profiles share it (pnorm's fast path)

    # Durations of one CTA when `conc` CTAs run at once: with the global bandwidth split
    # between them (`share` = conc), and (share = 0) the SM's own units alone, what a wave
    # costs however bandwidth is shared: [with, without].
    # resident per SM on the busiest SMs (whole numbers below 2^53: the quotient rounds to no
    # whole number it is not, and ceil's is -(-conc // sms)'s, in fewer and faster calls)
    n = np.ceil(conc / f.sms)
    shares3 = np.array([conc, zero, zero])  # (and with the fixed part's third row: the last wave's)
    shares = shares3[:2]
    # the last, partial wave of alike CTAs (`left` of them; 0: none) beyond the full waves: the
    # block scheduler places each CTA on whichever SM has a slot free, so the `left` CTAs
    # spread over the SMs, ceil(left / SMs) an SM (`res`), each as fast as that residency lets
    # it, the SM's units alone (ncu, experiments/ncu_mechanism/h100/small15b: fa2's 272 CTAs at
    # two an SM ran two or three CTAs an SM, the last 8 alone): a third row of the trips' times
    full = np.floor(ctas / slots)
    left = ctas - full * slots
    res = np.maximum(_ONE, np.ceil(left / f.sms))

    # a loop that streams its operands from DRAM (KernelPlan.streamed: each byte read once, by
    # one CTA) with its loads pipelined ahead (a cp.async ring of 2 or more stages, TMA) fills
    # what the SM keeps in flight, and reads DRAM at most at the rate that sustains
    # (Rates.sm_dram: Little's law over DRAM's round trip; stores wait for no round trip);
    # synchronous loads keep one tile in flight a CTA and wait out their round trips
    # (load_latency) long before that. Measured on such streams (decode's K/V); kernels whose
    # DRAM bytes a trip are the L2 model's estimate of re-read tiles are left to their port
    staged = f.stages > _ONE
    piped = (((f.policy == _ASYNC) & staged) | ws) & (f.streams > _ZERO)
    sm_dram = np.where(piped, r.sm_dram, _INF)

    def port(rd, wr, sums=None):  # through this SM's own load/store path (its DRAM reads:
        # sm_dram); `sums`: (rd + wr, rd x dram_r), where the caller has them
        rw, rdd = (rd + wr, rd * f.dram_r) if sums is None else sums
        return np.maximum(rw / r.port, rdd / sm_dram)

    def level(rd, wr, share, x=0.0, sums=None):  # this CTA's share of L2 (`x`: its extra L2
        # work) and DRAM (share None: one CTA's, `sums` with its `x` already)
        rw, rdd = (rd + wr, rd * f.dram_r) if sums is None else sums
        if share is None:
            return np.maximum(rw / r.l2, (rdd + wr * f.dram_w) / r.hbm)
        return share * np.maximum((rw + x) / r.l2, (rdd + wr * f.dram_w) / r.hbm)

    # a loop trip's reads and writes, and a CTA's once (one division: _BYTES_AT's rows)
    # (fancy indexing: `take` of the transposed table would copy all of it first)
    rd, wr, rd_f, wr_f = unstack(np.divide(*unstack(f.table.T[_BYTES_AT].reshape(2, 4, m))))
    rd1 = rd  # the first trip's loads
    # round trips the trip waits for (to L2 where the kernel's lines are there, else to DRAM),
    # and a wgmma consumer's waits at its GEMM turns
    lat = f.nsync * np.where(f.l2sync > _ZERO, r.l2_latency, r.load_latency) + f.nturn * r.turn_wait
    # a loop trip's bytes, the fixed part's and the first trip's loads, as the rows of one
    # stack: through the SM's port (a trip's reductions' once: their reads are the L2's), and
    # the L2/DRAM time of one CTA (`solo`: times the CTAs that share them); the two stacks
    # one, their sums (port's and level's) at once
    rd6, wr6 = np.array([rd - f.red, rd_f, rd1, rd, rd_f, rd1]), np.array([wr, wr_f, zero] * 2)
    rw, rdd = rd6 + wr6, rd6 * f.dram_r
    loop_port, fixed_port, port1 = unstack(port(None, None, (rw[:3], rdd[:3])))
    rw[3] += f.loop_x  # (the loop trip's extra L2 work, level's `x`, in place: the others' + 0 adds nothing)
    solo = level(None, wr6[3:], None, sums=(rw[3:], rdd[3:]))
    # the epilogue as an asynchronous trip with no bytes of its own; rows: the bandwidth
    # shared, the SM's units alone, and those at the last wave's `res` CTAs an SM
    levels = np.zeros((3, nt, m))
    np.multiply(shares[:, None], solo[0], out=levels[:2, :nt - 1])
    lv = levels[:2, 0]  # shares x solo[0]
    resident = np.concatenate((n,) * (2 * nt) + (res,) * nt).reshape(3, nt * m)
    port_lat = np.zeros((2, nt, m))  # the trips' port and latency terms (the epilogue's none)
    port_lat[0, :nt - 1], port_lat[1, :nt - 1] = loop_port, lat
    # rows sorted by policy (_shortest's): each policy's rows a run, taken as views
    if 3 * m > SUBSET:
        codes = b.codes.take(kidx)
        cut = (codes[1:] != codes[:-1]).nonzero()[0] + 1
    if 3 * m > SUBSET and len(cut) < RUNS:
        ends = [0, *cut.tolist(), m]
        runs = list(zip(map(int, codes.take(ends[:-1]).tolist()), ends[:-1], ends[1:]))
        # (no masked trips: a masked trip's extra time is taken no times, 0 in its place)
        t = trips.time_runs(runs, port_lat[0], levels, resident.reshape(3, nt, m),
                            q if isinstance(q, float) else flat(q).reshape(nt, m), port_lat[1], masked)
    else:
        t = trips.time(policy, stages, port_lat[0].ravel(), levels.reshape(3, nt * m), resident,
                       q if isinstance(q, float) else flat(q), port_lat[1].ravel()).reshape(3, nt, m)
    # (trips first, each trip's (3, m) entries contiguous: the sums below numpy's fast operands)
    t = t.transpose(1, 0, 2).copy()
    trip, epilogue = t[0], t[-1]
    extra = t[1] - t[0] if nt == 3 else (0.0, 0.0, 0.0)
    if deps:  # the bits of the same terms (Trip.deps): port's, level's (the larger of its
        # L2 and DRAM times: a relief of the other leaves it), latency's, the fill's
        td = _trip_deps(trips)

        def level_bits(rd, wr, x=0.0):
            a, c = (rd + wr + x) / r.l2, (rd * f.dram_r + wr * f.dram_w) / r.hbm
            return np.where(a > c, BIT["l2"], 0) | np.where(c > a, BIT["hbm"], 0)

        def bits3(plain, masked, epi):  # three's, of bits
            return np.concatenate([np.broadcast_to(x, (m,)) for x in (plain, masked, epi)]).astype(np.int64)

        d_lat, d_lport, d_lv1 = _dep(lat, BIT["latency"]), _dep(loop_port, BIT["port"]), level_bits(rd, wr, f.loop_x)
        d_lv = np.zeros((3, 3, m), np.int64)
        d_lv[:2, 0] = d_lv[:2, 1] = np.where(lv != 0, d_lv1, 0)
        dt = trips.deps(td, policy, stages, port_lat[0].ravel(), levels.reshape(3, 3 * m), resident,
                        q if isinstance(q, float) else flat(q), port_lat[1].ravel(),
                        bits3(d_lport, d_lport, 0), d_lv.reshape(3, 3 * m),
                        bits3(d_lat, d_lat, 0)).reshape(3, 3, m)
        d_turn = td.tensor[:m] | td.warp_other[:m]
        d_fill = np.where(f.policy == POLICIES["warpspecialized"], np.where(
            trips.apart[:m] > 0, _max_deps([turn, in_step], [d_turn, td.tensor[:m] | td.sfu[:m] | td.alu[:m]]),
            d_turn), 0)
    rd, wr = rd_f, wr_f
    # a CTA loads its own slice, then computes its epilogue: synchronous phases, which the
    # other resident CTAs overlap as imperfectly as FA1's trips
    fixed = pnorm([np.maximum(fixed_port, shares3 * solo[1]), epilogue], q)  # (the three rows')
    fixed[:2] += fill
    # a CTA that holds its SM alone (its shared memory admits one CTA an SM) waits, before its
    # first trip, for its cp.async ring's first stage (whatever the policy of its trips): a
    # DRAM round trip and that stage's bytes through its port, with no other CTA's trips on the
    # SM to fill the wait (a warp-specialised pipeline's first trip: `fill`)
    # ... and at its end for its stores' drain (store_drain), before the next CTA can take its
    # place: a round trip, priced at the measured one (load_latency; the fitted L2 round trip
    # would let the fit trade fa1's backward's L2 waits against the launch overhead)
    ring = staged & ~ws & (f.total_trips > _ZERO) & (f.occ == _ONE)  # (staged: f.stages > 1)
    drain = f.drain * r.load_latency
    ring = np.where(ring, r.load_latency + port1 + drain, _ZERO)
    waits = fill + ring  # (the last wave's, and _alone's)
    fixed[:2] += ring
    fixed[2] += waits
    if deps:  # every term of the row's CTA parts, with the share and without
        fp, fl = port(rd, wr), level(rd, wr, shares3)
        d_fp, d_lf1 = _dep(fp, BIT["port"]), level_bits(rd, wr)
        d_waits = d_fill | np.where(ring != 0, BIT["latency"] | _dep(port(f.loop_r / f.steps, 0.0), BIT["port"]), 0)
        d_fixed = _max_deps([fp, fl], [d_fp, np.where(fl != 0, d_lf1, 0)])  # (3 rows, m)
        # a duration's (d, d_c and the last wave's below): its fixed part, its trips (masked
        # ones where it has any)
        d_dur = d_fixed | d_waits | dt[:, 0] | dt[:, 2] | np.where(f.total_masked > 0, dt[:, 1], 0)
        acc = np.zeros(m, np.int64)  # the CTA parts' bits at other residencies and shares
        # (`alone`'s: the unequal rows' first CTA, their pairs' lone CTAs)
        used, asked = b.pidx[kidx] >= 0, []

        def asked_bits():  # the bits of the CTA parts `alone` gave so far, all at once, into acc
            if asked:
                ix, res, l0, l1, dl0, dl1 = (np.concatenate(x) for x in zip(*asked))
                asked.clear()
                np.bitwise_or.at(acc, ix, _alone_deps(
                    f, trips, td, ix, res, q, loop_port, lat, port(rd, wr), waits, m, (l0, l1),
                    {"port": d_lport, "lat": d_lat, "fixed_port": d_fp, "waits": d_waits,
                     "levels": (dl0, dl1)}))
    # every CTA alike: one duration; waves of the SM-side time, the shared bandwidth evening
    # out across waves; the last, partial wave at its own residency (`res`, where fewer): the
    # three rows' at once
    dur = fixed + f.one0 * trip
    if nt == 3:  # (else no row has a masked trip: its term is a zero, which adds nothing to
        # these sums of times, never -0)
        dur += f.masked0 * extra
    d, d_c, last_t = unstack(dur)
    (fixed, fixed_c, _), (trip, trip_c, _), (extra, extra_c, _) = unstack(fixed), unstack(trip), unstack(extra)

    def alone(ix, res, share):  # rows ix's CTA parts at `res` CTAs an SM, with `share` CTAs
        # sharing L2 and DRAM (0: the SM's units alone; both per row of ix)
        lv_at = tuple(share * solo[:2].take(ix, 1))  # a loop trip's, the fixed part's
        parts = _alone(f, trips, ix, res, q, loop_port, lat, fixed_port, waits, m, lv_at)
        use = np.flatnonzero(used[ix]) if deps else ()
        if len(use):  # its bits (asked_bits; a share made of the row's durations: their bits
            # are the row's already)
            at = ix[use]
            lv = [np.broadcast_to(v, (len(ix),))[use] for v in lv_at]
            asked.append((at, res[use], *lv, *(np.where(v != 0, d[at], 0)
                                               for v, d in zip(lv, (d_lv1, d_lf1)))))
        return parts

    partial = left > _ZERO
    last = np.where(partial & (res < n), last_t, np.where(partial, d_c, _ZERO))
    out = np.where(ctas <= slots, d, np.maximum(full * d_c + last, ctas * d / slots))
    if deps:  # (the waves' larger term: _max_deps; the unequal rows' below, all of them)
        d_last = np.where((left > 0) & (res < n), d_dur[2], 0)
        waves = _max_deps([full * d_c + last, ctas * d / slots], [d_dur[1] | d_last, d_dur[0]])
        row_bits = np.where(ctas <= slots, d_dur[0], waves)
        wins = np.zeros(m, bool)  # the unequal rows' own: their first CTA's, pairs'
    if b.periods:  # unequal CTAs: durations of one period summed with the shared bandwidth,
        # one by one without (rows grouped by kernel period length)
        lengths, begin, period_trips = b.stacks
        # (gathers by `take`: numpy's fancy indexing gives the same entries, slower)
        pid = b.pidx.take(kidx) + 1
        ix = (lengths.take(pid) > 0).nonzero()[0]

        def spread_of(ix, reps, g=None):  # a period's durations summed, reps times over the
            # slots (`g`: the rows' facts, where taken)
            g = f.table.take(ix, 0) if g is None else g
            d_sum = (fixed.take(ix) * g[:, _PERIOD] + g[:, _TOTAL_TRIPS] / reps * trip.take(ix)
                     + g[:, _TOTAL_MASKED] / reps * extra.take(ix))
            return reps * d_sum / slots.take(ix)

        if bound:  # what the time is the max of the spread with: not computed
            out[ix] = spread_of(ix, f.reps[ix])
        elif len(ix):
            # every length's periods in one pass: the rows laid out end to end (_Rows), shorter
            # periods first
            pix = pid.take(ix)
            size = lengths.take(pix)
            order = np.argsort(size, kind="stable")
            ix = ix.take(order)
            rows = _Rows.of(size.take(order))
            seg = rows.seg
            trips_of = period_trips.take(begin.take(pix.take(order)).take(seg) + rows.pos, 1)  # each entry's (trips, masked)
            one, msk = unstack(trips_of)
            g = f.table.take(ix, 0)  # the rows' facts
            reps, sms, on = g[:, _REPS], g[:, _SMS], slots.take(ix)
            e = ix.take(seg)  # each entry's row of the batch
            dc = fixed_c.take(e) + one * trip_c.take(e) + msk * extra_c.take(e)
            # two CTAs on some SMs: each pair shares its SM while both run, the one left alone at
            # its own speed (shared_end; ncu, experiments/ncu_mechanism/h100/small15b: 136 causal
            # CTAs at two an SM, 4 SMs held two)
            held = n.take(ix)  # CTAs an SM
            two = ((held == 2) & (g[:, _CTAS] > sms)).nonzero()[0]
            big, share = _longest(dc, reps, conc.take(ix), on, rows)
            # the CTA parts: the longest CTA that starts with the launch, at its share of the
            # bandwidth (_longest), and the pairs' CTAs alone
            parts = alone(np.concatenate((ix, ix.take(two))), np.concatenate((held, np.ones(len(two)))),
                          np.concatenate((share, np.zeros(len(two)))))
            fixed1, trip1, extra1 = (x[:len(ix)] for x in parts)
            big += rows.off[:-1]
            one1, msk1 = unstack(trips_of.take(big, 1))
            first = fixed1 + one1 * trip1 + msk1 * extra1
            listed, spread = _list_schedule(dc, rows, reps, on, first), spread_of(ix, reps, g)
            out[ix] = np.maximum(listed, spread)
            if deps:
                wins[ix] = listed > spread
            if len(two):
                p1, t1, x1 = (x[len(ix):] for x in parts)
                pairs, at = rows.take(two)
                one1, msk1 = trips_of.take(at, 1)
                d1 = p1.take(pairs.seg) + one1 * t1.take(pairs.seg) + msk1 * x1.take(pairs.seg)
                end = _shared_ends(b, dc.take(at), d1, pairs, reps.take(two), on.take(two), sms.take(two))
                out[ix[two]] = np.maximum(end, spread[two])
                if deps:
                    wins[ix[two]] = end > spread[two]
    # what no loop trip takes less than, however many CTAs share the SM: a warp's dependent
    # chain (Trip._time's, at no bandwidth and no other CTA's work)
    chain = np.where(ws, turn + lat,  # (turn: the tensor time over groups plus the other chain)
                     tm[_TRIP_AT["warp_mma"]] + other1 + tm[_TRIP_AT["queue"]])
    # The kernel's edges, once. Its CTAs wait for their first trip's loads (first_loads) at
    # once through L2 and DRAM, which no earlier trip's work overlaps: the grid's first loads,
    # at most one first trip's chain (taken over the grid's CTAs, not a wave's worth: that
    # grows with the SM count, and more SMs must never come out slower); a lone CTA's ring
    # waits them through its port already. Its last CTAs wait for their stores' drain (a lone
    # CTA's: in its ring).
    burst = np.minimum(ctas * solo[2], chain)
    edges = np.where(ring > _ZERO, np.maximum(_ZERO, burst - port1), f.head * burst + drain)
    if deps:
        # the unequal rows: the schedule of their CTAs (the SM-side durations, d_c's terms) and
        # the spread of their summed durations (d's): the latter shrinks under any relief,
        # the former may not (_busy's rule)
        asked_bits()
        own = d_dur[1] | acc
        row_bits = np.where(b.pidx[kidx] >= 0, np.where(wins, own, own | d_dur[0]), row_bits)
        d_chain = np.where(ws, td.tensor[:m] | td.warp_other[:m] | d_lat,
                           td.warp_mma[:m] | td.warp_other[:m] | td.queue[:m])
        # the edges: the burst, the least of two terms, by a relief of the lesser, or of the
        # greater where that may fall below the lesser: a relief halves a level's time at
        # most, and a chain's but for its barrier queue, which the issue relief may end
        # (margins: rounding); past a lone CTA's ring, what of it its port does not take
        # already (a faster port leaves more: a relief that lengthens a term, added after
        # every max above), else the head's share of it and the drain
        first = level(rd1, 0.0, ctas)
        least = np.where(ws, chain, trips.warp_mma[:m] + trips.warp_other[:m]) * 0.5
        d_burst = (np.where((first != 0) & (first * 0.5 <= chain * (1 + 1e-9)), level_bits(rd1, 0.0), 0)
                   | np.where(least <= first * (1 + 1e-9), d_chain, 0))
        d_edges = np.where(ring > 0, _dep(port1, BIT["port"]) | np.where(burst > port1, d_burst, 0),
                           np.where(f.head != 0, d_burst, 0) | _dep(drain, BIT["latency"]))
        return out + edges, chain, row_bits | d_edges, d_chain
    return out + edges, chain


# ------------------------------------------------------------------ predictions
LAUNCH = RELIEFS.index("launch")
if LAUNCH != len(RELIEFS) - 1:  # predict_batch's one pass leaves the last relief out
    raise AssertionError("the launch relief must be the last of RELIEFS")
LIMIT_AT = np.array([RELIEFS.index(u) for u in LIMITS])  # the columns of RELIEFS that are LIMITS
MARGIN = 1e-6  # best_relief's: a relief whose lower bound exceeds the best found by more is out
_PORT, _NEED_PORT = RELIEFS.index("port"), FACTS.index("need_port")
_LIMIT_NO = np.arange(len(LIMITS))
_ONE_NEAR = np.array(1)  # _chosen's: more near reliefs than one
# numpy 2 takes a Python float operand slower than a 0-d array
_TWO, _NEAR = np.array(2.0), np.array(1 + 1e-8)  # (_chosen's: within 1e-8 of the shortest)


def _lower(busy: np.ndarray, launch: np.ndarray, lim: np.ndarray, need: np.ndarray,
           relaxed: np.ndarray, first: np.ndarray, top: np.ndarray) -> np.ndarray:
    """(kernels, RELIEFS) lower bounds on each relief's time; `relaxed` (the times known so
    far) gets the exact ones: the launch relief's (the busy time stays) and those of rates a
    kernel never uses (they change nothing). `first`, `top`: lim's argmax and max per kernel."""
    seconds = busy + launch
    largest = _LIMIT_NO == first[:, None]
    second = np.where(largest, -np.inf, lim).max(axis=1)
    # a unit's or level's relief: never below half the time, nor below another unit's or
    # level's time; the others' (port, latency, launch): never below any
    others = top[:, None].repeat(len(RELIEFS), axis=1)
    own = others.copy()
    others[:, LIMIT_AT] = np.where(largest, np.maximum(second, 0.0)[:, None], top[:, None])
    own[:, LIMIT_AT] = lim
    at = launch[:, None]
    lower = _max((seconds / 2)[:, None], others + at, own / 2 + at)
    _exact(busy, launch, need, seconds, relaxed, lower)
    return lower


def _exact(busy: np.ndarray, launch: np.ndarray, need: np.ndarray, seconds: np.ndarray,
           *into: np.ndarray) -> None:
    """The reliefs' times known exactly (_lower's), written into each of `into` ((kernels,
    RELIEFS) arrays): the launch relief's (the busy time stays) and those of rates a kernel
    never uses (they change nothing: `seconds`, busy + launch)."""
    at_launch = busy + launch / _TWO
    idle, seconds = ~need, seconds[:, None]
    for x in into:
        x[:, LAUNCH] = at_launch
        np.copyto(x, seconds, where=idle)


def _chosen(times: np.ndarray) -> list[str]:
    """ranked()'s first, per row of (rows, RELIEFS) times, of the reliefs whose times are known
    (not NaN): only the ones within 1e-8 of the shortest can share its rounded key, so only
    they are ranked."""
    best = np.fmin.reduce(times, axis=1, keepdims=True)  # (the known's; NaN: none known)
    near = times <= best * _NEAR  # (NaN, unknown, compares False)
    out = list(map(RELIEFS.__getitem__, near.argmax(axis=1).tolist()))
    # (more than one near; none near: kept as it is)
    for i in (np.add.reduce(near, axis=1) > _ONE_NEAR).nonzero()[0].tolist():
        out[i] = limiter(0.0, {RELIEFS[j]: float(times[i, j]) for j in np.flatnonzero(near[i])})
    return out


class _Reliefs(MutableMapping):
    """One kernel's row of a batch's (kernels, RELIEFS) seconds as a mapping relief -> seconds
    (NaN: not predicted, absent)."""

    __slots__ = ("row",)

    def __init__(self, row: np.ndarray):
        self.row = row

    def __getitem__(self, x: str) -> float:
        v = self.row[RELIEFS.index(x)]
        if v != v:
            raise KeyError(x)
        return float(v)

    def __setitem__(self, x: str, v: float) -> None:
        self.row[RELIEFS.index(x)] = v

    def __delitem__(self, x: str) -> None:
        self.row[RELIEFS.index(x)] = np.nan

    def __iter__(self):
        return (x for x, v in zip(RELIEFS, self.row) if v == v)

    def __len__(self) -> int:
        return int((self.row == self.row).sum())


class KernelTimes(list):
    """A Plan's kernel times, in launch order, and its limiter where the batch found it
    (plan_bound)."""

    bound: str | None = None


ONE_PASS = 32  # kernels of a batch up to which every relief is predicted in one pass


@dataclass
class Predicted:
    """predict_batch's answer, per kernel of the batch: seconds (launch included), the busiest
    unit or level (an index of LIMITS) and its share of its efficient peak; with limiters, the
    seconds with each relief (NaN: not predicted), their lower bounds, each kernel's limiter and
    each group's."""

    seconds: np.ndarray
    busiest: np.ndarray
    util: np.ndarray
    relaxed: np.ndarray | None = None
    lower: np.ndarray | None = None
    bound: list | None = None
    group_bound: list = field(default_factory=list)


def predict_batch(b: Batch, limiter_too: bool = True, starts: np.ndarray | None = None,
                  kernel_bounds: bool = True) -> Predicted:
    """Predicted times of a batch of kernels, and the limiter of each group of them (`starts`:
    where each group of contiguous rows, e.g. the kernels of one Plan, begins; its limiter is
    what shortens its summed time most). One numpy pass over every kernel at its profile's
    rates, then one over the reliefs that can be a kernel's or a group's limiter: those whose
    lower bound is within best_relief's margin of the launch relief's exact time (any other
    leaves more time than a relief already known). A small batch (ONE_PASS) predicts every
    relief in the first pass: numpy's cost per call outweighs the rows."""
    n, nr = len(b), len(RELIEFS)
    every = limiter_too and n <= ONE_PASS
    # every relief but the launch's (_lower's, exactly) and the profile's rates, in RELIEFS'
    # columns (the launch's: the profile's; _cases)
    step = nr if every else 1
    launch = b.launch
    idle = None  # (every relief in one pass) (kernels, RELIEFS) of the rates it never uses

    def idles(limits: np.ndarray) -> np.ndarray:  # a rate the kernel never uses changes
        # nothing (latency and launch: always used; _exact's): its relief's case is not
        # scheduled (its time the kernel's)
        nonlocal idle
        v = np.empty((n, nr))  # (the fluid limits and port bytes at the profile's rates)
        v.fill(1.0)
        v[:, LIMIT_AT] = limits[:, LAUNCH::nr].T
        v[:, _PORT] = b.table[:, _NEED_PORT]
        idle = v <= _ZERO
        return idle.reshape(-1)

    # (with the limiter's search to come: the reliefs that leave each kernel's time as it is)
    if every:
        kidx, relief, factors = _cases(n, step)
        (busy_all, limits_all), bits = _busy(b, kidx, relief, idle=idles, factors=factors), ()
        relaxed = busy_all.reshape(n, nr) + launch[:, None]  # (its launch column: the seconds)
        seconds = relaxed[:, LAUNCH].copy()
        busy = busy_all[LAUNCH::nr]
    else:
        busy, limits_all, *bits = _busy(b, *_cases(n, step)[:2], deps=limiter_too)
        seconds = busy + launch
    lim = limits_all[:, step - 1::step]  # (LIMITS, kernels): at the profile's rates
    busiest, top = lim.argmax(axis=0), np.maximum.reduce(lim)  # (the largest: the busiest's)
    util = np.empty(n)
    util.fill(1.0)  # (where the kernel takes no time)
    np.divide(top, busy, out=util, where=busy > _ZERO)
    out = Predicted(seconds, busiest, util)
    if not limiter_too:
        return out
    lim = lim.T
    if every:  # a rate the kernel never uses leaves its seconds; the launch's relief (_exact's)
        np.copyto(relaxed, seconds[:, None], where=idle)
        relaxed[:, LAUNCH] = busy + launch / _TWO
    else:
        relaxed = np.full((n, nr), np.nan)
    lower = None  # every relief known, the lower bounds' one use (each kernel's own limiter's
    # search) not asked for: none
    if not every or kernel_bounds:
        if every:
            need = ~idle
        else:  # a rate the kernel never uses changes nothing
            need = np.ones((n, nr), bool)
            need[:, LIMIT_AT] = lim > _ZERO
            need[:, _PORT] = b.table[:, _NEED_PORT] > _ZERO
        lower = _lower(busy, launch, lim, need, relaxed, busiest, top)
    if bits:  # a relief that changes no term of a kernel's time leaves it: known exactly
        same = (bits[0][:, None] >> np.arange(LAUNCH)) & 1 == 0
        seconds = (busy + launch)[:, None]
        relaxed[:, :LAUNCH] = np.where(same, seconds, relaxed[:, :LAUNCH])
        lower[:, :LAUNCH] = np.where(same, seconds, lower[:, :LAUNCH])
    starts = np.zeros(0, np.int64) if starts is None else np.asarray(starts, np.int64)
    if not every:  # each kernel's group, and the groups' summed lower bounds
        grp = np.arange(len(starts)).repeat(np.concatenate((starts[1:], [n])) - starts)
        sums = np.add.reduceat(lower, starts, axis=0) if len(starts) else np.zeros((0, nr))

    def predict(want: np.ndarray, bound: bool = False) -> None:  # the wanted reliefs not
        # known yet; with `bound`, those of unequal CTAs not bounded yet get a lower bound
        # (in `tight`: _busy's `bound`), the others their times
        ki, xi = (want & np.isnan(relaxed) & ~bounded if bound else want & np.isnan(relaxed)).nonzero()
        if len(ki):
            again, _ = _busy(b, ki, xi + 1, bound=bound)
            if bound:
                u = unequal[ki]
                ku, xu = ki[u], xi[u]
                tight[ku, xu] = np.maximum(tight[ku, xu], again[u] + launch[ku])
                bounded[ku, xu] = True
                ki, xi, again = ki[~u], xi[~u], again[~u]
            relaxed[ki, xi] = again + launch[ki]

    if every:  # every relief predicted in the first pass
        pass
    elif kernel_bounds or not len(starts):
        want = lower <= lower[:, LAUNCH:LAUNCH + 1] * (1 + MARGIN)
        if len(starts):
            want |= (sums <= sums[:, LAUNCH:LAUNCH + 1] * (1 + MARGIN))[grp]
        predict(want)
    else:  # groups' limiters alone (best_relief's search, batched, in rounds): each group's
        # most promising relief; then every other whose lower bound could still beat the best
        # found (best_relief's rounds would predict no other, and what they leave out could
        # not be the shortest, nor within _chosen's 1e-8 of it), on each group's longest
        # kernel first: its time in place of its lower bound rules more of them out before
        # the group's other kernels are predicted. A kernel of unequal CTAs is bounded before
        # it is predicted (_busy's `bound`: a tenth of the cost); only the reliefs whose
        # bounds still leave them a chance are predicted in full
        best = np.add.reduceat(relaxed[:, LAUNCH], starts)  # exact already
        left = sums.copy()
        left[:, LAUNCH] = np.inf
        g = np.arange(len(sums))
        pick = left.argmin(axis=1)
        first = np.zeros(sums.shape, bool)
        first[g, pick] = left[g, pick] <= best * (1 + MARGIN)
        # (kernels of unequal CTAs first bounded: their time's costliest terms left out,
        # _schedule's `bound`; the others predicted as they are)
        unequal, bounded, tight = b.pidx >= 0, np.zeros((n, nr), bool), lower.copy()

        def chances() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            """Per group the least time known (its reliefs' whose every kernel's is), each
            relief's bound, and the reliefs not known whose bound could still beat the least
            (NaN: a kernel's unknown)."""
            known = np.add.reduceat(relaxed, starts, axis=0)
            least = np.where(np.isnan(known), np.inf, known).min(axis=1)
            bound = np.add.reduceat(np.where(np.isnan(relaxed), tight, relaxed), starts, axis=0)
            return least, bound, np.isnan(known) & (bound <= least[:, None] * (1 + MARGIN))

        predict(first[grp], bound=True)
        best = chances()[0]
        rest = (left <= best[:, None] * (1 + MARGIN)) & ~first
        seconds = busy + launch
        longest = np.zeros(n, bool)
        longest[_first_max(seconds, starts)] = True
        predict(rest[grp] & longest[:, None], bound=True)
        predict((rest & chances()[2])[grp], bound=True)
        # then the times of those the bounds leave a chance: each group's most promising
        # first, then every other that could still beat the best found
        _, bound, open_ = chances()
        some = open_.any(axis=1)
        top = np.where(open_, bound, np.inf).argmin(axis=1)
        one = np.zeros(sums.shape, bool)
        one[g[some], top[some]] = True
        predict(one[grp])
        predict(chances()[2][grp])
    out.relaxed, out.lower = relaxed, lower
    out.bound = _chosen(relaxed) if kernel_bounds else None
    if len(starts):  # NaN where one kernel's is unknown
        out.group_bound = _chosen(np.add.reduceat(relaxed, starts, axis=0))
    return out


@lru_cache(maxsize=256)
def _cases(n: int, step: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """predict_batch's first pass: each of n kernels with each of its first `step` cases
    (kernels, cases), made once per size (read-only): RELIEF_FACTORS' rows 1 to step - 1, then
    its row 0 (the profile's rates: the last case's, a kernel's time, scheduled); and, for
    every relief of a few kernels (predict_batch's one pass), those rows of RELIEF_FACTORS, a
    case each (_busy's `factors`; else None: a large batch's, held, would be large)."""
    relief = _rep(np.arange(1, step + 1) % step, n)
    out = (np.arange(n).repeat(step), relief,
           RELIEF_FACTORS.take(relief, 0) if step > 1 and n <= ONE_PASS else None)
    for x in out[:2 if out[2] is None else 3]:
        x.setflags(write=False)
    return out


def _first_max(x: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per group of contiguous entries (`starts`), the index of its largest entry (the first
    of equals)."""
    sizes = np.concatenate((starts[1:], [len(x)])) - starts
    hit = (x == np.maximum.reduceat(x, starts).repeat(sizes)).nonzero()[0]
    owner = np.arange(len(starts)).repeat(sizes)[hit]
    return hit[np.concatenate([[True], owner[1:] != owner[:-1]])]


def predict_many(jobs: Sequence[tuple[KernelPlan, Dram, HardwareProfile, Problem]],
                 limiter_too: bool = True,
                 groups: Sequence[range] = ()) -> tuple[list[KernelTime], list[str]]:
    """Predicted times of many kernels at once (kernel_time's, one per job, in order), and the
    limiter of each group of jobs (`groups`: contiguous ranges, the kernels of one Plan):
    predict_batch of their Batch, as KernelTimes."""
    if not jobs:
        return [], []
    b = batch_of(jobs)
    pr = predict_batch(b, limiter_too, np.array([g.start for g in groups], np.int64))
    group_bounds = (pr.group_bound or [None] * len(groups)) if groups else []

    def lazy(i: int) -> Callable[[str], float]:
        def again(x: str) -> float:
            busy, _ = _busy(b, np.array([i]), np.array([1 + RELIEFS.index(x)]))
            return float(busy[0]) + float(b.launch[i])
        return again

    occs = b.table[:, FACTS.index("occ")]
    times = []
    for i, (k, _, hw, _) in enumerate(jobs):
        occ, u = int(occs[i]), LIMITS[pr.busiest[i]]
        kt = KernelTime(float(pr.seconds[i]), u, occ, k.ctas / (occ * hw.sm_count), float(pr.util[i]), u)
        if limiter_too:
            kt = KernelTime(kt.seconds, pr.bound[i], occ, kt.waves, kt.util, u,
                            _Reliefs(pr.relaxed[i]), _Reliefs(pr.lower[i]), lazy(i))
        times.append(kt)
    return times, group_bounds


def kernel_time(k: KernelPlan, dram: Dram, hw: HardwareProfile, p: Problem,
                limiter_too: bool = True) -> KernelTime:
    """Predicted time of one kernel (see the module docstring); with `limiter_too`, `bound` is
    the limiter (`best_relief`: the relief with the largest speed-up, each predicted again only
    where its bound could beat the best so far); without, the busiest unit (for fits, which need
    only the time). A batch of one of predict_many."""
    return predict_many([(k, dram, hw, p)], limiter_too)[0][0]


def ranked(relaxed: dict[str, float]) -> list[str]:
    """Reliefs by the time they leave, shortest first; times within one part in 10^9 of each
    other are equal (a what-if re-planned through the profile rounds differently) and keep
    RELIEFS' order."""
    return sorted(relaxed, key=lambda x: (round(math.log(relaxed[x]), 9), RELIEFS.index(x)))


def limiter(seconds: float, relaxed: dict[str, float]) -> str:
    """The relief with the largest speed-up."""
    return ranked(relaxed)[0]


def predict(plan: Plan, hw: HardwareProfile, dram: list[Dram],
            limiter_too: bool = True) -> list[KernelTime]:
    """Per-kernel predicted time of a Plan, in launch order (`limiter_too`: kernel_time's)."""
    return predict_plans([(plan, hw, dram)], limiter_too)[0]


def predict_plans(items: Sequence[tuple[Plan, HardwareProfile, list[Dram]]],
                  limiter_too: bool = True) -> list[KernelTimes]:
    """predict() of many Plans in one batch (predict_many): per Plan its kernels' times, and
    with `limiter_too` the Plan's limiter (`KernelTimes.bound`, what plan_bound returns)."""
    jobs, groups = [], []
    for pl, hw, dram in items:
        groups.append(range(len(jobs), len(jobs) + len(pl.kernels)))
        jobs += [(k, d, hw, pl.problem) for k, d in zip(pl.kernels, dram)]
    times, bounds = predict_many(jobs, limiter_too, groups)
    out = []
    for g, b in zip(groups, bounds):
        kts = KernelTimes(times[g.start:g.stop])
        kts.bound = b
        out.append(kts)
    return out


def best_relief(times: list[KernelTime]) -> str:
    """The relief that shortens the sum of these kernels' times most (a Plan's limiter, what
    `iosim explain`'s what-ifs predict first). Each relief's time is predicted only if its lower
    bound (KernelTime.lower) leaves it a chance to beat the best found: exact, and a kernel that
    one unit binds needs one prediction, not ten."""
    total = sum(t.seconds for t in times)
    bound = {x: sum(t.lower[x] for t in times) for x in RELIEFS}
    found: dict[str, float] = {}
    for x in sorted(RELIEFS, key=lambda x: (bound[x], RELIEFS.index(x))):
        if found and bound[x] > min(found.values()) * (1 + 1e-6):
            break  # this one and every later one leave more time than the best found
        found[x] = sum(t.relaxed_time(x) for t in times)
    return limiter(total, found)


def plan_bound(times: list[KernelTime]) -> str:
    """The limiter of a whole Plan (best_relief); the largest kernel's bound where the times
    were predicted without limiters."""
    known = getattr(times, "bound", None)  # found by the batch that predicted them
    if known is not None:
        return known
    if not all(t.lower for t in times):
        return max(times, key=lambda t: t.seconds).bound
    return best_relief(times)
