"""Time models. Roofline: per kernel, the slowest of work over the peak of its unit and bytes
over the bandwidth of their level, naming the limit that binds."""

from __future__ import annotations

from dataclasses import dataclass

from .hardware import HardwareProfile
from .memory import Dram
from .plan import KernelPlan, Plan


@dataclass(frozen=True)
class KernelTime:
    seconds: float
    bound: str  # hbm | l2 | sram | tensor | sfu | alu | launch (| latency in the cycle model)


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


def _rates(k: KernelPlan, hw: HardwareProfile, plan: Plan) -> dict[str, float]:
    """Seconds per unit of work or byte at the rates real kernels reach (peak x efficiency)."""
    eff = hw.efficiency
    tensor_eff = eff.tensor_wgmma if k.overlap == "warpspecialized" else eff.tensor_mma_sync
    terms = roofline_terms(k, Dram(0, 0), hw, plan)
    return {"tensor": terms["tensor"] / tensor_eff, "sfu": terms["sfu"] / eff.sfu,
            "alu": terms["alu"] / eff.alu, "l2": terms["l2"] / eff.l2, "sram": terms["sram"] / eff.smem}


def predict(plan: Plan, hw: HardwareProfile, dram: list[Dram]) -> list[KernelTime]:
    """Per-kernel predicted time: units combined by the kernel's overlap policy, stretched by
    the tail of the last wave, plus launch overhead."""
    from .occupancy import wave

    out = []
    for k, d in zip(plan.kernels, dram):
        r = _rates(k, hw, plan)
        hbm = (d.read + d.write) / (hw.hbm_bandwidth_bytes_per_s * hw.efficiency.hbm)
        mem = {"hbm": hbm, "l2": r["l2"], "sram": r["sram"]}
        mem_bound = max(mem, key=mem.get)
        if k.overlap == "none":  # loads wait; compute waits for loads
            parts = {mem_bound: mem[mem_bound] + r["tensor"] + r["sfu"] + r["alu"]}
        elif k.overlap == "async":  # loads overlap; softmax and MMA serialised per warp
            parts = {mem_bound: mem[mem_bound], "tensor": r["tensor"] + r["sfu"] + r["alu"]}
        else:  # producer/consumer ping-pong: softmax hides under the other group's GEMM
            parts = {mem_bound: mem[mem_bound], "tensor": r["tensor"], "sfu": r["sfu"] + r["alu"]}
        bound = max(parts, key=parts.get)
        if bound == "tensor" and r["tensor"] < r["sfu"] + r["alu"]:
            bound = "sfu" if r["sfu"] >= r["alu"] else "alu"
        w = wave(k, hw)
        tail = -(-k.ctas // w) / (k.ctas / w)  # a partly filled last wave costs a full one
        busy = parts[bound] * tail
        t = busy + hw.launch_overhead_s
        if tail > 1.25:
            bound = "latency"
        if hw.launch_overhead_s > busy:
            bound = "launch"
        out.append(KernelTime(t, bound))
    return out
