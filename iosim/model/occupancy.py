"""How many CTAs of a kernel an SM holds at once, and how many run in one wave."""

from __future__ import annotations

from iosim.core.hardware import HardwareProfile
from iosim.core.plan import KernelPlan, ctas_per_sm

__all__ = ["ctas_per_sm", "limiter", "limits", "wave"]  # ctas_per_sm lives in core: Plans use it


def wave(k: KernelPlan, hw: HardwareProfile) -> int:
    """CTAs that run at the same time (a full wave), at most the grid."""
    return min(k.ctas, ctas_per_sm(k, hw) * hw.sm_count)


def limits(k: KernelPlan, hw: HardwareProfile) -> dict[str, int]:
    """CTAs per SM each resource alone allows: shared memory, registers, threads, the CTA cap."""
    regs = min(k.regs_per_thread, hw.max_registers_per_thread) * k.threads
    out = {"smem": hw.smem_per_sm_bytes // k.smem_bytes if k.smem_bytes else hw.max_ctas_per_sm,
           "registers": hw.registers_per_sm // regs, "threads": hw.max_threads_per_sm // k.threads,
           "blocks": hw.max_ctas_per_sm}
    return out


def limiter(k: KernelPlan, hw: HardwareProfile) -> str:
    """The resource that sets `ctas_per_sm` (the first of the tightest, in `limits` order)."""
    lim = limits(k, hw)
    return min(lim, key=lim.get)
