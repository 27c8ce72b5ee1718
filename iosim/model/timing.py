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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from iosim.core.hardware import HardwareProfile
from iosim.core.plan import KernelPlan, Plan
from iosim.core.problem import Problem
from iosim.kernels import SPECS, kernel_splits
from iosim.model.memory import Dram, sizes
from iosim.model.occupancy import ctas_per_sm

UNITS = ("tensor", "sfu", "alu", "sram", "issue")  # per-SM units
MMA_FLOPS = 2 * 16 * 8 * 16  # one mma.sync.m16n8k16
LDS_BYTES = 32 * 16  # one warp's ldmatrix.x4 or 16-byte cp.async
LEVELS = ("l2", "hbm")  # levels shared by all SMs
# what `bound` chooses from, each relaxed by 2x (Rates.relaxed): the units and levels, the SM's
# L2 load path, the warps' dependent chains (latency: cycles per mma.sync, per other
# instruction and per synchronous load's round trip halved) and the launch overhead (halved)
RELIEFS = (*UNITS, "port", *LEVELS, "latency", "launch")


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


def roofline_terms(k: KernelPlan, dram: Dram, hw: HardwareProfile, plan: Plan) -> dict[str, float]:
    """Seconds each unit and level needs at its datasheet peak."""
    t, w = k.traffic, k.work
    return {
        "tensor": w.tensor_flops / hw.tensor_peak(plan.problem.dtype),
        "sfu": w.exp_ops / hw.sfu_exp_per_s,
        "alu": w.alu_flops / hw.fp32_ops_per_s,
        "hbm": (dram.read + dram.write) / hw.hbm_bandwidth_bytes_per_s,
        "l2": (t.hbm_read + t.hbm_write) / hw.l2_bandwidth_bytes_per_s,
        "sram": t.sram / hw.smem_bytes_per_s,
        "launch": hw.launch_overhead_s,
    }


def roofline(k: KernelPlan, dram: Dram, hw: HardwareProfile, plan: Plan) -> KernelTime:
    terms = roofline_terms(k, dram, hw, plan)
    bound = max(terms, key=terms.get)
    return KernelTime(terms[bound], bound)


@dataclass(frozen=True)
class Rates:
    """Efficient rates of one profile for one kernel: per SM for the units, whole GPU for the
    levels (bytes, FLOPs or exponentials per second)."""

    tensor: float
    sfu: float
    alu: float
    sram: float
    issue: float  # warp instructions per second per SM
    port: float  # bytes per second one SM loads from (and stores to) L2
    l2: float
    hbm: float
    wgmma: bool  # asynchronous warpgroup MMA: no per-instruction issue or dependence cost
    inst_per_op: float  # warp instructions per 32 element operations (the kernel's, else the profile's)
    mma_cycles: float  # a lone warp's cycles per mma.sync (its dependent chain)
    inst_cycles: float  # ... and per other instruction
    load_latency: float  # seconds a synchronous global load's round trip takes
    launch: float  # seconds a launch costs

    def relaxed(self, what: str, factor: float = 2.0) -> Rates:
        """These rates with `what` (one of RELIEFS) `factor` times faster."""
        if what == "latency":
            return replace(self, mma_cycles=self.mma_cycles / factor,
                           inst_cycles=self.inst_cycles / factor,
                           load_latency=self.load_latency / factor)
        if what == "launch":
            return replace(self, launch=self.launch / factor)
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
            l2=hw.l2_bandwidth_bytes_per_s * eff.l2,
            hbm=hw.hbm_bandwidth_bytes_per_s * eff.hbm,
            wgmma=wgmma,
            inst_per_op=k.inst_per_op or hw.pipeline.inst_per_op,
            mma_cycles=hw.pipeline.mma_sync_cycles,
            inst_cycles=hw.pipeline.inst_cycles,
            load_latency=hw.pipeline.load_latency_cycles / hw.clock_hz,
            launch=hw.launch_overhead_s,
        )


def instructions(tensor_flops: float, ops: float, sram_bytes: float, hw: HardwareProfile,
                 wgmma: bool, inst_per_op: float | None = None) -> tuple[float, float]:
    """(mma, other) warp instructions for this much work: one mma.sync per m16n8k16,
    `inst_per_op` per 32 element operations (FP32 and exp), one ldmatrix / cp.async per 512
    shared-memory bytes. wgmma: a handful of instructions per tile, its operands read from
    shared memory by the tensor cores and its tiles copied by TMA, so neither is counted."""
    ops_inst = (inst_per_op or hw.pipeline.inst_per_op) * ops / 32
    if wgmma:
        return 0.0, ops_inst
    return tensor_flops / MMA_FLOPS, ops_inst + sram_bytes / LDS_BYTES


def fluid(k: KernelPlan, dram: Dram, r: Rates, sms: int, hw: HardwareProfile) -> dict[str, float]:
    """Seconds each unit and level needs for the whole kernel at its efficient rate."""
    t, w = k.traffic, k.work
    mma, other = instructions(w.tensor_flops, w.alu_flops + w.exp_ops, t.sram, hw, r.wgmma,
                              r.inst_per_op)
    return {"tensor": w.tensor_flops / (r.tensor * sms), "sfu": w.exp_ops / (r.sfu * sms),
            "alu": w.alu_flops / (r.alu * sms), "sram": t.sram / (r.sram * sms),
            "issue": (mma + other) / (r.issue * sms),
            "l2": (t.hbm_read + t.hbm_write) / r.l2, "hbm": (dram.read + dram.write) / r.hbm}


def _split(k: KernelPlan, p: Problem) -> tuple[float, float, float, float]:
    """(read, write) bytes moved once per CTA (prologue/epilogue, whole kernel) and
    (read, write) bytes streamed by the loop trips (whole kernel), two-level counts."""
    size = sizes(p, kernel_splits(k))
    fixed_r = sum(v for n, v in k.traffic.reads.items() if v <= size[n] and n not in k.streamed)
    fixed_w = sum(v for n, v in k.traffic.writes.items() if v <= size[n])
    return fixed_r, fixed_w, k.traffic.hbm_read - fixed_r, k.traffic.hbm_write - fixed_w


def pnorm(terms: list[float], p: float) -> float:
    """(Σ t^p)^(1/p): the max for p = inf, the sum for p = 1 (scaled by the largest term)."""
    top = max(terms)
    if top <= 0 or p == float("inf"):
        return top
    return top * sum((t / top) ** p for t in terms) ** (1 / p)


@dataclass(frozen=True)
class Trip:
    """Demands of one loop trip of one CTA, in seconds: per-SM throughput terms at efficient
    rates, and one warp's own chain (its MMAs and its other instructions)."""

    tensor: float
    sfu: float
    alu: float
    sram: float
    issue: float
    warp_mma: float
    warp_other: float
    groups: float = 1.0  # consumer warpgroups that take turns at the tensor cores (wgmma)
    dispatch: float = 0.0  # mma.sync: tensor time and the other instructions' issue, added

    @classmethod
    def of(cls, flops: float, exps: float, alu: float, sram: float, warps: int, r: Rates,
           hw: HardwareProfile) -> Trip:
        mma, other = instructions(flops, alu + exps, sram, hw, r.wgmma, r.inst_per_op)
        cyc = 1.0 / hw.clock_hz
        return cls(tensor=flops / r.tensor, sfu=exps / r.sfu, alu=alu / r.alu, sram=sram / r.sram,
                   issue=(mma + other) / r.issue,
                   dispatch=0.0 if r.wgmma else flops / r.tensor + other * r.inst_cycles / r.issue,
                   warp_mma=mma / warps * r.mma_cycles * cyc,
                   warp_other=other / warps * r.inst_cycles * cyc,
                   groups=max(1.0, warps / 4) if r.wgmma else 1.0)

    def time(self, policy: str, stages: int, port: float, level: float, n: int,
             sync_overlap: float = float("inf"), latency: float = 0.0) -> float:
        """Seconds per loop trip of one CTA with `n` CTAs resident on its SM; `port`: the
        trip's bytes through the SM's load path, `level`: the CTA's share of L2/DRAM time.
        The trip is the largest of its own chain, its bandwidth share and the SM's throughput
        when the CTAs' phases overlap perfectly (asynchronous loads); with synchronous loads
        they do not, and the three combine as a `sync_overlap`-norm (1: they add up)."""
        if policy == "warpspecialized":  # a warpgroup: its share of the MMAs, then its softmax
            # the softmax (MUFU and FP32 work, one dependent chain in each warp) and the
            # asynchronous wgmma overlap no better than synchronous phases
            soft = pnorm([self.tensor, self.sfu + self.alu], sync_overlap)
            thr = n * max(soft, self.sram, self.issue, port)
            return max(port, self.tensor / self.groups + self.warp_other, level, thr)
        # an mma.sync holds its sub-partition's dispatch while the tensor core reads its
        # register operands: other warps' instructions issue between MMAs, not beside them
        thr = n * max(self.dispatch, self.sfu, self.alu, self.sram, self.issue, port)
        warp = self.warp_mma + self.warp_other
        if policy == "async" and stages > 1:
            return max(port, warp, level, thr)
        if policy == "lockstep":  # barriers inside the trip: the warps' phases cannot drift
            return pnorm([warp, level, thr], sync_overlap)
        # synchronous loads: the warps wait a round trip (`latency`), then the bytes, then compute
        return pnorm([latency + port + warp, level, thr], sync_overlap)


def sync_loads(k: KernelPlan) -> int:
    """Memory round trips one trip of the kernel waits for (iosim.kernels: its spec's
    `sync_loads`; 0 for kernels whose loads a cp.async/TMA pipeline or other warps hide)."""
    spec = SPECS.get(k.name)
    return spec.sync_loads(k.defines) if spec is not None and spec.sync_loads else 0


def list_schedule(dc: np.ndarray, reps: int, slots: int) -> float:
    """Latest finish of CTAs with durations `dc` (one period, launched `reps` times over) on
    `slots` slots, in launch order, each on the first slot to free: CTA c starts at once
    while slots are free (c < slots); after that, when a slot frees: by then the slots have
    run what was launched before c, less what the CTAs still running have left, on average
    one residual life each, E[d^2] / (2 E[d]) (renewal theory; the Graham bound without it
    is pessimistic by up to one CTA). The latest finish is in the last period."""
    residual = float((dc * dc).sum() / (2 * dc.sum()))
    before = np.cumsum(dc) - dc + (reps - 1) * float(dc.sum())
    index = (reps - 1) * len(dc) + np.arange(len(dc))
    start = np.where(index < slots, 0.0, np.maximum(0.0, before / slots - residual))
    return float((start + dc).max())


def kernel_time(k: KernelPlan, dram: Dram, hw: HardwareProfile, p: Problem,
                limiter_too: bool = True) -> KernelTime:
    """Predicted time of one kernel (see the module docstring); with `limiter_too`, `bound` is
    the limiter (`best_relief`: the relief with the largest speed-up, each predicted again only
    where its bound could beat the best so far); without, the busiest unit (for fits, which need
    only the time)."""
    r = Rates.of(k, hw, p)
    occ = ctas_per_sm(k, hw)
    busy, limits = _busy(k, dram, hw, p, r, occ)
    seconds = busy + r.launch
    busiest = max(limits, key=limits.get)
    util = limits[busiest] / busy if busy else 1.0
    kt = KernelTime(seconds, busiest, occ, k.ctas / (occ * hw.sm_count), util, busiest)
    if not limiter_too:
        return kt
    need = demands(k, limits)
    top = max(limits.values())
    for x in RELIEFS:
        if x == "launch":  # exact: the busy time stays
            kt.relaxed[x] = kt.lower[x] = busy + r.launch / 2
        elif not need[x]:  # a rate the kernel never uses changes nothing
            kt.relaxed[x] = kt.lower[x] = seconds
        else:  # never below half the time, nor below another unit's or level's fluid total
            others = max((v for u, v in limits.items() if u != x), default=0.0)
            kt.lower[x] = max(seconds / 2, others + r.launch, limits.get(x, top) / 2 + r.launch)
    kt = replace(kt, again=lambda x: _busy(k, dram, hw, p, r.relaxed(x), occ)[0] + r.launch)
    return replace(kt, bound=best_relief([kt]))


def demands(k: KernelPlan, limits: dict[str, float]) -> dict[str, bool]:
    """Whether the kernel's time can depend on each of RELIEFS."""
    need = {u: limits[u] > 0 for u in limits}
    need["port"] = k.traffic.hbm_read + k.traffic.hbm_write > 0
    need["latency"] = need["launch"] = True
    return need


def ranked(relaxed: dict[str, float]) -> list[str]:
    """Reliefs by the time they leave, shortest first; times within one part in 10^9 of each
    other are equal (a what-if re-planned through the profile rounds differently) and keep
    RELIEFS' order."""
    return sorted(relaxed, key=lambda x: (round(math.log(relaxed[x]), 9), RELIEFS.index(x)))


def limiter(seconds: float, relaxed: dict[str, float]) -> str:
    """The relief with the largest speed-up."""
    return ranked(relaxed)[0]


def _busy(k: KernelPlan, dram: Dram, hw: HardwareProfile, p: Problem, r: Rates,
          occ: int) -> tuple[float, dict[str, float]]:
    """Seconds the kernel keeps the GPU busy (launch apart) at rates `r`, and its fluid limits."""
    sms, ctas = hw.sm_count, k.ctas
    # One period of the launch order (the CTAs along grid x), repeated for every (batch, head).
    # a masked trip is one of the CTA's trips (ragged tiles count a fraction of a trip): never
    # more masked trips than trips, or a faster plain trip would lengthen the CTA
    one, masked = k.trips, np.minimum(k.masked, k.trips)
    if len(one) == 1 and len(masked) == 1:  # every CTA alike (no numpy on one number)
        period, reps, uniform = 1, ctas, True
        total_trips, total_masked = float(one[0]) * ctas, float(masked[0]) * ctas
    else:
        one, masked = np.broadcast_arrays(one, masked)
        period = len(one)
        reps = ctas // period
        uniform = bool((one == one[0]).all() and (masked == masked[0]).all())
        total_trips, total_masked = float(one.sum()) * reps, float(masked.sum()) * reps
    steps = total_trips if total_trips > 0 else 1.0

    # per trip of one CTA; the once-per-CTA work and the mask apart
    w, once = k.work, k.once
    warps = max(1, k.threads // 32 - (4 if r.wgmma else 0))  # wgmma: less the producer warpgroup
    args = ((w.tensor_flops - once.tensor_flops) / steps, (w.exp_ops - once.exp_ops) / steps,
            (w.alu_flops - once.alu_flops - k.mask_alu) / steps, k.traffic.sram / steps)
    plain = Trip.of(*args, warps, r, hw)
    # a warp-specialized pipeline fills once per CTA: the first warpgroup's GEMMs and softmax
    # have no other warpgroup's work to hide under
    fill = plain.tensor / plain.groups + plain.warp_other if k.overlap == "warpspecialized" else 0.0
    mask = k.mask_alu / total_masked if total_masked else 0.0  # ALU ops of a masked trip
    masked_trip = Trip.of(args[0], args[1], args[2] + mask, args[3], warps, r, hw)
    fixed_r, fixed_w, loop_r, loop_w = _split(k, p)
    two_r, two_w = k.traffic.hbm_read, k.traffic.hbm_write
    dram_r = dram.read / two_r if two_r else 0.0  # DRAM share of two-level bytes
    dram_w = dram.write / two_w if two_w else 0.0

    def durations(conc: int, memory: bool = True) -> tuple[float, float, float]:
        """(prologue + epilogue, trip time, extra time of a masked trip) of one CTA when
        `conc` CTAs run at once; without `memory`, only the SM's own units (what a wave
        costs however bandwidth is shared)."""
        n = -(-conc // sms)  # resident per SM on the busiest SMs
        share = conc if memory else 0  # global bandwidth split between the running CTAs

        def port(rd: float, wr: float) -> float:  # through this SM's own load/store path
            return (rd + wr) / r.port

        def level(rd: float, wr: float) -> float:  # this CTA's share of L2 and DRAM
            return share * max((rd + wr) / r.l2, (rd * dram_r + wr * dram_w) / r.hbm)

        epilogue = Trip.of(once.tensor_flops / ctas, once.exp_ops / ctas, once.alu_flops / ctas,
                           0.0, warps, r, hw).time("async", 2, 0.0, 0.0, n)
        rd, wr = fixed_r / ctas, fixed_w / ctas
        # a CTA loads its own slice, then computes its epilogue: synchronous phases, which the
        # other resident CTAs overlap as imperfectly as FA1's trips
        fixed = pnorm([max(port(rd, wr), level(rd, wr)), epilogue], hw.pipeline.sync_overlap) + fill
        rd, wr = loop_r / steps, loop_w / steps
        q = hw.pipeline.sync_overlap
        lat = sync_loads(k) * r.load_latency  # round trips the trip waits for
        trip = plain.time(k.overlap, k.stages, port(rd, wr), level(rd, wr), n, q, lat)
        extra = masked_trip.time(k.overlap, k.stages, port(rd, wr), level(rd, wr), n, q, lat) - trip
        return fixed, trip, extra

    def schedule(slots: int) -> float:
        """The grid's CTAs through `slots` resident places (CTAs per SM x SMs), launch order."""
        conc = min(ctas, slots)
        fixed, trip, extra = durations(conc)
        if uniform:
            d = fixed + float(one[0]) * trip + float(masked[0]) * extra
            if ctas <= slots:
                return d
            # waves of the SM-side time; the shared bandwidth evens out across waves
            fixed_c, trip_c, extra_c = durations(conc, memory=False)
            d_c = fixed_c + float(one[0]) * trip_c + float(masked[0]) * extra_c
            return max(-(-ctas // slots) * d_c, ctas * d / slots)
        # CTA durations of one period: summed with the shared bandwidth, one by one without
        d_sum = fixed * period + total_trips / reps * trip + total_masked / reps * extra
        fixed_c, trip_c, extra_c = durations(conc, memory=False)
        dc = fixed_c + one * trip_c + masked * extra_c
        return max(list_schedule(dc, reps, slots), reps * d_sum / slots)

    # CTAs resident on one SM overlap at least as well as the same CTAs run fewer at a time
    # (more warps never hide less latency; what more CTAs cost in L2 is the DRAM estimate's):
    # the best of the occupancies up to the one the resources allow (beyond ctas/SMs, all run):
    # powers of two and the cap (a small kernel may fit 32 CTAs an SM: not 32 schedules)
    cap = min(occ, -(-ctas // sms))
    sched = min(schedule(o * sms) for o in {*(1 << i for i in range(cap.bit_length())), cap})

    limits = fluid(k, dram, r, sms, hw)
    return max(sched, max(limits.values())), limits


def predict(plan: Plan, hw: HardwareProfile, dram: list[Dram],
            limiter_too: bool = True) -> list[KernelTime]:
    """Per-kernel predicted time of a Plan, in launch order (`limiter_too`: kernel_time's)."""
    return [kernel_time(k, d, hw, plan.problem, limiter_too) for k, d in zip(plan.kernels, dram)]


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
    if not all(t.lower for t in times):
        return max(times, key=lambda t: t.seconds).bound
    return best_relief(times)
