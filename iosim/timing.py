"""Time models: a roofline and a cycle-approximate model of tiles, waves and overlap.

Roofline: per kernel, the slowest of work over the peak of its unit and bytes over the
bandwidth of their level, naming the limit that binds.

Cycle-approximate (`predict`), per kernel of a Plan:

1. Occupancy. CTAs resident per SM from the Plan's shared memory, registers and threads against
   the profile's limits (`occupancy.ctas_per_sm`); `slots` = that x SMs.
2. Per-trip demand of one CTA, in seconds, at per-SM rates (peak x efficiency / SMs): tensor
   cores, SFU (exp), FP32 ALU, shared memory; and at shares of the global levels: the L2 and
   DRAM bandwidths are split evenly between the CTAs running at the time. A kernel's work and
   streamed bytes are spread over its loop trips evenly (`KernelPlan.trips`); the bytes of a
   tensor moved exactly once (each CTA its own slice: Q in, O out) are the CTA's prologue and
   epilogue instead. The DRAM share of the streamed bytes is the L2-aware estimate's share of
   the two-level count (`memory.estimate`).
3. Overlap policy (`KernelPlan.overlap`) turns the demands into the time of one trip of a CTA
   with `n` CTAs resident on its SM: the slower of the CTA's own dependency chain and the
   SM's throughput (`n` x the busiest per-SM unit):
   - "none" (FA1): loads are synchronous: chain = memory + tensor + SFU + ALU.
   - "async" (FA2, GEMMs): the next tile loads while this one computes; softmax and MMA run
     in sequence in each warp: chain = max(memory, tensor + SFU + ALU). Resident CTAs overlap
     each other's phases through the throughput term. With one pipeline stage, "none".
   - "warpspecialized" (FA3): a producer warpgroup loads; two consumer warpgroups ping-pong, so
     one's softmax hides under the other's GEMMs: chain = max(memory, tensor,
     (tensor + SFU + ALU) / 2), each warpgroup's own sequence covering half the rows.
4. Waves. CTA durations (prologue + trips x trip time + epilogue) in launch order are placed
   on the slots greedily, as the hardware's block scheduler does. Equal CTAs that all fit at
   once: one CTA's duration. Otherwise the slower of: the waves of the SM-side durations (the units and
   chains of each SM, without the bandwidth share): ceil(CTAs / slots) x duration for equal
   CTAs (tail waves), and for unequal (causal) ones the list schedule's latest finish,
   max over CTAs c of start_c + duration_c, start_c = 0 for the first `slots` CTAs and
   (Σ durations before c) / slots less the mean residual duration of the CTAs then running
   after them (causal imbalance, the last long CTAs); and the fluid time Σ full durations /
   slots, in which the shared bandwidth evens out across waves (a tail wave's few CTAs get
   the whole bandwidth). This keeps the model
   monotone: more SMs or bandwidth never make it slower. Vectorised: no loop over CTAs; trip
   counts repeat per (batch, head), so only one period of the grid is walked.
5. The kernel is never faster than any unit's or level's total at its efficient rate (the
   fluid limits), and each launch costs `launch_overhead_s`.

`bound` names what limits the kernel: the unit or level whose fluid time is the largest
(`tensor`, `sfu`, `alu`, `sram`, `l2`, `hbm`), or `latency` when the time not explained by any
one of them (serialised phases, low occupancy, tail waves, causal imbalance) is larger still,
or `launch` when the launch overhead exceeds the kernel's busy time.

Every rate and efficiency comes from the HardwareProfile; nothing here is a hardware constant.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .hardware import HardwareProfile
from .memory import Dram, sizes
from .occupancy import ctas_per_sm
from .plan import KernelPlan, Plan
from .problem import Problem

UNITS = ("tensor", "sfu", "alu", "sram")  # per-SM units
LEVELS = ("l2", "hbm")  # levels shared by all SMs


@dataclass(frozen=True)
class KernelTime:
    seconds: float
    bound: str  # hbm | l2 | sram | tensor | sfu | alu | launch (| latency in the cycle model)
    ctas_per_sm: int = 0
    waves: float = 0.0  # CTAs / slots


def roofline_terms(k: KernelPlan, dram: Dram, hw: HardwareProfile, plan: Plan) -> dict[str, float]:
    """Seconds each unit and level needs at its datasheet peak."""
    t, w = k.traffic, k.work
    smem_bw = hw.smem_bandwidth_bytes_per_clk_per_sm * hw.sm_count * hw.boost_clock_hz
    return {
        "tensor": w.tensor_flops / hw.tensor_peak(plan.problem.dtype),
        "sfu": w.exp_ops / hw.sfu_exp_per_s,
        "alu": w.alu_flops / hw.fp32_flops_per_s,
        "hbm": (dram.read + dram.write) / hw.hbm_bandwidth_bytes_per_s,
        "l2": (t.hbm_read + t.hbm_write) / hw.l2_bandwidth_bytes_per_s,
        "sram": t.sram / smem_bw,
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
    l2: float
    hbm: float

    @classmethod
    def of(cls, k: KernelPlan, hw: HardwareProfile, p: Problem) -> Rates:
        eff, sms = hw.efficiency, hw.sm_count
        tensor_eff = eff.tensor_wgmma if k.overlap == "warpspecialized" else eff.tensor_mma_sync
        return cls(
            tensor=hw.tensor_peak(p.dtype) * tensor_eff / sms,
            sfu=hw.sfu_exp_per_s * eff.sfu / sms,
            alu=hw.fp32_flops_per_s * eff.alu / sms,
            sram=hw.smem_bandwidth_bytes_per_clk_per_sm * hw.boost_clock_hz * eff.smem,
            l2=hw.l2_bandwidth_bytes_per_s * eff.l2,
            hbm=hw.hbm_bandwidth_bytes_per_s * eff.hbm,
        )


def fluid(k: KernelPlan, dram: Dram, r: Rates, sms: int) -> dict[str, float]:
    """Seconds each unit and level needs for the whole kernel at its efficient rate."""
    t, w = k.traffic, k.work
    return {"tensor": w.tensor_flops / (r.tensor * sms), "sfu": w.exp_ops / (r.sfu * sms),
            "alu": w.alu_flops / (r.alu * sms), "sram": t.sram / (r.sram * sms),
            "l2": (t.hbm_read + t.hbm_write) / r.l2, "hbm": (dram.read + dram.write) / r.hbm}


def _split(k: KernelPlan, p: Problem) -> tuple[float, float, float, float]:
    """(read, write) bytes moved once per CTA (prologue/epilogue, whole kernel) and
    (read, write) bytes streamed by the loop trips (whole kernel), two-level counts."""
    size = sizes(p)
    fixed_r = sum(v for n, v in k.traffic.reads.items() if v <= size[n])
    fixed_w = sum(v for n, v in k.traffic.writes.items() if v <= size[n])
    return fixed_r, fixed_w, k.traffic.hbm_read - fixed_r, k.traffic.hbm_write - fixed_w


def _trip_time(policy: str, stages: int, mem: float, tensor: float, sfu: float, alu: float,
               sram: float, n: int) -> float:
    """Seconds per loop trip of one CTA with `n` CTAs resident on its SM."""
    compute = tensor + sfu + alu
    if policy == "warpspecialized":
        chain = max(mem, tensor, compute / 2)
    elif policy == "async" and stages > 1:
        chain = max(mem, compute)
    else:  # "none", or nothing to overlap the loads with
        chain = mem + compute
    return max(chain, n * max(tensor, sfu, alu, sram))


def kernel_time(k: KernelPlan, dram: Dram, hw: HardwareProfile, p: Problem) -> KernelTime:
    """Predicted time of one kernel (see the module docstring)."""
    r = Rates.of(k, hw, p)
    sms, ctas = hw.sm_count, k.ctas
    occ = ctas_per_sm(k, hw)
    slots = occ * sms
    # One period of the launch order (the CTAs along grid x), repeated for every (batch, head).
    one, masked = k.trips, k.masked
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

    # per trip of one CTA, at per-SM rates; the once-per-CTA work and the mask apart
    w, once = k.work, k.once
    tensor = (w.tensor_flops - once.tensor_flops) / steps / r.tensor
    sfu = (w.exp_ops - once.exp_ops) / steps / r.sfu
    alu = (w.alu_flops - once.alu_flops - k.mask_alu) / steps / r.alu
    mask = k.mask_alu / total_masked / r.alu if total_masked else 0.0  # per masked trip
    sram = k.traffic.sram / steps / r.sram
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

        def mem(rd: float, wr: float) -> float:
            return share * max((rd + wr) / r.l2, (rd * dram_r + wr * dram_w) / r.hbm)

        t1, s1, a1 = (once.tensor_flops / ctas / r.tensor, once.exp_ops / ctas / r.sfu,
                      once.alu_flops / ctas / r.alu)
        fixed = mem(fixed_r / ctas, fixed_w / ctas) + max(t1 + s1 + a1, n * max(t1, s1, a1))
        m = mem(loop_r / steps, loop_w / steps)
        trip = _trip_time(k.overlap, k.stages, m, tensor, sfu, alu, sram, n)
        extra = _trip_time(k.overlap, k.stages, m, tensor, sfu, alu + mask, sram, n) - trip
        return fixed, trip, extra

    conc = min(ctas, slots)
    fixed, trip, extra = durations(conc)
    if uniform:
        d = fixed + float(one[0]) * trip + float(masked[0]) * extra
        if ctas <= slots:
            sched = d
        else:  # waves of the SM-side time; the shared bandwidth evens out across waves
            fixed_c, trip_c, extra_c = durations(conc, memory=False)
            d_c = fixed_c + float(one[0]) * trip_c + float(masked[0]) * extra_c
            sched = max(-(-ctas // slots) * d_c, ctas * d / slots)
    else:
        # CTA durations of one period: summed with the shared bandwidth, one by one without
        d_sum = fixed * period + total_trips / reps * trip + total_masked / reps * extra
        fixed_c, trip_c, extra_c = durations(conc, memory=False)
        dc = fixed_c + one * trip_c + masked * extra_c
        # List scheduling, in launch order: CTA c starts at once while slots are free
        # (c < slots); after that, when a slot frees: by then the slots have run what was
        # launched before c, less what the CTAs still running have left, on average one
        # residual life each, E[d^2] / (2 E[d]) (renewal theory; the Graham bound without
        # it is pessimistic by up to one CTA). The latest finish is in the last period.
        residual = float((dc * dc).sum() / (2 * dc.sum()))
        before = np.cumsum(dc) - dc + (reps - 1) * float(dc.sum())
        index = (reps - 1) * period + np.arange(period)
        start = np.where(index < slots, 0.0, np.maximum(0.0, before / slots - residual))
        sched = max(float((start + dc).max()), reps * d_sum / slots)

    limits = fluid(k, dram, r, sms)
    ideal = max(limits.values())
    busy = max(sched, ideal)
    bound = max(limits, key=limits.get)
    if busy - ideal > ideal:
        bound = "latency"
    if hw.launch_overhead_s > busy:
        bound = "launch"
    return KernelTime(busy + hw.launch_overhead_s, bound, occ, ctas / slots)


def predict(plan: Plan, hw: HardwareProfile, dram: list[Dram]) -> list[KernelTime]:
    """Per-kernel predicted time of a Plan, in launch order."""
    return [kernel_time(k, d, hw, plan.problem) for k, d in zip(plan.kernels, dram)]
