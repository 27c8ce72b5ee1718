"""`iosim explain`: why one schedule runs at the speed the model predicts, and what would move it.

Per kernel of the Plan: the launch (grid, CTAs, threads, registers and shared memory per CTA),
CTAs resident per SM and the resource that caps them (iosim.occupancy.limits), waves and how full
the last one is, each unit's and level's busy share of its datasheet peak over the predicted
time, the time each would need alone at its efficient rate (timing.fluid: the limit that binds
is the largest), and how much of the time no unit explains (latency: dependent chains with few
warps, tail waves, causal imbalance).

Then what-ifs, each the whole Plan predicted again: the binding and the next limit at twice their
rate (HardwareProfile.with_changes), the warps' dependent chains at half their latency, one more
resident CTA of the main kernel, and the model's best tile configuration (iosim.tune's candidates,
registers as the Plan budgets them). Measured rows for the same problem (`iosim bench` output)
go beside the prediction, with what ncu read where the rows have it.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pandas as pd

from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.plan import KernelPlan, Plan
from iosim.core.problem import Problem
from iosim.model import memory, timing
from iosim.model.occupancy import ctas_per_sm, limiter, limits
from iosim.schedules import Tiles, plan
from iosim.schedules.knobs import TunedTiles

SHOWN = ("tensor", "sfu", "alu", "sram", "issue", "l2", "hbm")  # timing.UNITS + timing.LEVELS
NAMES = {"tensor": "tensor", "sfu": "SFU (exp)", "alu": "FP32", "sram": "shared memory",
         "issue": "issue", "l2": "L2", "hbm": "DRAM", "launch": "launch",
         "port": "SM load path", "latency": "latency"}
CHANGES = {"latency": "half the warps' dependent-chain and load latency",
           "launch": "half the launch overhead"}


def change_text(relief: str) -> str:
    """What relaxing one of timing.RELIEFS means, in words."""
    return CHANGES.get(relief, f"2x {NAMES[relief]} rate")


def relax(hw: HardwareProfile, limit: str, dtype_key: str, factor: float = 2.0) -> dict:
    """The profile change that gives `limit` (one of timing.RELIEFS) `factor` times its rate
    (latency and launch: 1 / `factor` of their cycles or seconds), as timing.Rates.relaxed."""
    fields = {"tensor": f"tensor_flops_per_s.{dtype_key}", "sfu": "sfu_lanes_per_clk_per_sm",
              "alu": "fp32_lanes_per_clk_per_sm", "sram": "smem_bandwidth_bytes_per_clk_per_sm",
              "issue": "issue_per_clk_per_sm", "l2": "l2_bandwidth_bytes_per_s",
              "hbm": "hbm_bandwidth_bytes_per_s", "port": "pipeline.sm_load_bytes_per_clk"}
    if limit == "launch":
        return {"launch_overhead_s": hw.launch_overhead_s / factor}
    if limit == "latency":
        pipe = hw.pipeline
        return {"pipeline.mma_sync_cycles": pipe.mma_sync_cycles / factor,
                "pipeline.inst_cycles": pipe.inst_cycles / factor,
                "pipeline.chain_inst_cycles": pipe.chain_cycles / factor,
                "pipeline.load_latency_cycles": pipe.load_latency_cycles / factor,
                "pipeline.l2_latency_cycles": pipe.l2_trip_cycles / factor,
                "pipeline.wgmma_wait_cycles": pipe.turn_wait_cycles / factor}
    f = fields[limit]
    value = (hw.tensor_flops_per_s[dtype_key] if limit == "tensor"
             else hw.pipeline.sm_load_bytes_per_clk if limit == "port" else getattr(hw, f))
    new = value * factor
    return {f: int(new) if isinstance(value, int) else new}


def total_ms(pl: Plan, hw: HardwareProfile) -> float:
    return 1e3 * sum(t.seconds for t in timing.predict(pl, hw, memory.estimate(pl, hw),
                                                       limiter_too=False))


def kernel_view(k: KernelPlan, kt: timing.KernelTime, dram: memory.Dram, pl: Plan,
                hw: HardwareProfile) -> dict:
    """One kernel's launch, occupancy, waves, utilisation and limits."""
    slots = ctas_per_sm(k, hw) * hw.sm_count
    waves = k.ctas / slots
    tail = k.ctas % slots
    r = timing.Rates.of(k, hw, pl.problem)
    alone = timing.fluid(k, dram, r, hw.sm_count, hw)
    peak = timing.roofline_terms(k, dram, hw, pl)
    peak["issue"] = alone["issue"]  # issue has no datasheet term: its rate is the datasheet's
    busy = kt.seconds - hw.launch_overhead_s
    ideal = max(alone.values())
    return {
        "kernel": k.name, "grid": list(k.grid), "ctas": k.ctas, "threads": k.threads,
        "registers_per_thread": k.regs_per_thread, "smem_bytes": k.smem_bytes,
        "block_m": k.block_m, "block_n": k.block_n, "stages": k.stages,
        "ctas_per_sm": ctas_per_sm(k, hw), "ctas_per_sm_by": limits(k, hw),
        "occupancy_limit": limiter(k, hw),
        "waves": waves, "tail_wave_share": (tail / slots) if tail and waves > 1 else 1.0,
        "time_ms": kt.seconds * 1e3, "bound": kt.bound, "busiest": kt.busiest,
        "util_of_peak": {u: peak[u] / busy if busy > 0 else 0.0 for u in SHOWN},
        "alone_ms": {u: alone[u] * 1e3 for u in SHOWN},
        "latency_share": max(0.0, 1 - ideal / busy) if busy > 0 else 0.0,
        "launch_ms": hw.launch_overhead_s * 1e3,
    }


def what_ifs(pl: Plan, hw: HardwareProfile, base_ms: float, schedule: str, tiles: Tiles,
             tuned: TunedTiles | None = None) -> list[dict]:
    """The Plan predicted again with one thing relaxed: each of timing.RELIEFS (largest
    speed-up first: the first is what `bound` names), one more resident CTA, the model's tiles."""
    p = pl.problem
    key = "tf32" if p.dtype.value == "fp32" else p.dtype.value
    out = []

    def add(change: str, ms: float, relief: str = "") -> None:
        out.append({"change": change, "time_ms": ms, "speedup": base_ms / ms, "relief": relief})

    relaxed = {}
    for lim in timing.RELIEFS:
        h2 = hw.with_changes(**relax(hw, lim, key))
        relaxed[lim] = total_ms(plan(schedule, p, h2, tiles, tuned=tuned), h2)
    for lim in timing.ranked(relaxed):  # largest speed-up first, as timing.limiter ranks them
        add(change_text(lim), relaxed[lim], lim)
    k = pl.main
    n = ctas_per_sm(k, hw) + 1
    by = limits(k, hw)
    if all(v >= n for name, v in by.items() if name not in ("registers", "smem")):
        regs = min(k.regs_per_thread, hw.registers_per_sm // (n * k.threads))
        smem = min(k.smem_bytes, hw.smem_per_sm_bytes // n)
        k2 = replace(k, regs_per_thread=regs, smem_bytes=smem)
        if ctas_per_sm(k2, hw) == n:
            pl2 = replace(pl, kernels=tuple(k2 if x is k else x for x in pl.kernels))
            what = []
            if regs < k.regs_per_thread:
                what.append(f"{regs} registers a thread")
            if smem < k.smem_bytes:
                what.append(f"{smem // 1024} KiB of shared memory")
            add(f"{n} CTAs of {k.name} per SM ({', '.join(what) or 'as is'})", total_ms(pl2, hw))
    try:
        from iosim.analysis.tune import rank

        ranked = rank(schedule, [p], hw, compile_workers=1, compile=False)
        best = ranked.iloc[0]
        add(f"tiles {best.config} (the model's best of {len(ranked)})", float(best.time_pred_ms))
    except InputError:
        pass
    return out


def explain(schedule: str, p: Problem, hw: HardwareProfile, tiles: Tiles = Tiles(),
            measured: list[Path] | None = None, tuned: TunedTiles | None = None) -> dict:
    pl = plan(schedule, p, hw, tiles, check=True, tuned=tuned)
    dram = memory.estimate(pl, hw)
    kts = timing.predict(pl, hw, dram)
    views = [kernel_view(k, kt, d, pl, hw) for k, kt, d in zip(pl.kernels, kts, dram)]
    base = sum(v["time_ms"] for v in views)
    main = max(views, key=lambda v: v["time_ms"])
    order = sorted(main["alone_ms"], key=main["alone_ms"].get, reverse=True)
    ifs = what_ifs(pl, hw, base, schedule, tiles, tuned)
    out = {"schedule": schedule, "hw": hw.name, "profile": hw.describe(),
           "problem": {k: (v.value if hasattr(v, "value") else v)
                       for k, v in p.model_dump().items()},
           "notes": pl.notes, "time_ms": base, "tflops": p.fa_flops() / (base * 1e-3) / 1e12,
           "bound": timing.plan_bound(kts), "busiest": main["busiest"],
           "next_limit": next(w["relief"] for w in ifs if w["relief"]
                              and w["relief"] != timing.plan_bound(kts)),
           "busiest_order": order, "kernels": views, "what_if": ifs}
    if measured:
        out["measured"] = measured_rows(measured, schedule, p, hw, pl, dram)
    return out


def measured_rows(files: list[Path], schedule: str, p: Problem, hw: HardwareProfile, pl: Plan,
                  dram: list[memory.Dram]) -> list[dict]:
    """Rows of the files for this schedule and problem that passed their check: measured time,
    and what ncu read where present, as shares of the datasheet peaks."""
    from iosim.core.rows import read_rows

    df = pd.concat([read_rows(f) for f in files], ignore_index=True)
    key = {"schedule": schedule, "batch": p.batch, "heads": p.heads, "kv_heads": p.kv_heads,
           "seqlen_q": p.seqlen_q, "seqlen_k": p.seqlen_k, "head_dim": p.head_dim,
           "dtype": p.dtype.value, "causal": p.causal, "direction": p.direction.value}
    m = df
    for c, v in key.items():
        if c in m.columns:
            m = m[m[c].astype(str).str.lower() == str(v).lower()]
    if "status" in m.columns:
        m = m[m.status == "ok"]
    out = []
    for _, r in m.iterrows():
        t = float(r.time_ms)
        row = {"gpu_name": r.get("gpu_name", ""), "time_ms": t,
               "tflops": p.fa_flops() / (t * 1e-3) / 1e12,
               "tensor_of_peak": pl.work.tensor_flops / (t * 1e-3) / hw.tensor_peak(p.dtype)}
        rd, wr = r.get("dram_read_bytes_ncu", math.nan), r.get("dram_write_bytes_ncu", math.nan)
        if pd.notna(rd) and pd.notna(wr):
            row.update(dram_bytes_ncu=float(rd + wr),
                       dram_bytes_model=float(sum(d.read + d.write for d in dram)),
                       dram_of_peak=float(rd + wr) / (t * 1e-3) / hw.hbm_bandwidth_bytes_per_s)
        if pd.notna(r.get("l2_bytes_ncu", math.nan)):
            row["l2_of_peak"] = float(r.l2_bytes_ncu) / (t * 1e-3) / hw.l2_bandwidth_bytes_per_s
        out.append(row)
    return out


def format_text(e: dict) -> str:
    """The explanation as a kernel engineer reads it."""
    p = e["problem"]
    lines = [f"{e['schedule']} on {e['hw']} ({e['profile']})",
             f"  B={p['batch']} H={p['heads']} KVH={p['kv_heads']} Nq={p['seqlen_q']} "
             f"Nk={p['seqlen_k']} d={p['head_dim']} {p['dtype']} causal={p['causal']} "
             f"{p['direction']}; {e['notes']}",
             f"  predicted {e['time_ms']:.3f} ms, {e['tflops']:.0f} TFLOP/s; binds: "
             f"{NAMES.get(e['bound'], e['bound'])} (its 2x gives the largest speed-up), next: "
             f"{NAMES[e['next_limit']]}; busiest unit: {NAMES[e['busiest']]}"]
    for v in e["kernels"]:
        by = ", ".join(f"{k} {n}" for k, n in v["ctas_per_sm_by"].items())
        lines += [
            f"kernel {v['kernel']}: {v['time_ms']:.3f} ms, bound {NAMES.get(v['bound'], v['bound'])}"
            f", busiest {NAMES[v['busiest']]}",
            f"  grid {' x '.join(map(str, v['grid']))} = {v['ctas']} CTAs of {v['threads']} "
            f"threads, {v['registers_per_thread']} registers a thread, "
            f"{v['smem_bytes'] / 1024:.0f} KiB shared memory; tiles {v['block_m']}x{v['block_n']}, "
            f"{v['stages']} stage(s)",
            f"  {v['ctas_per_sm']} CTAs per SM, limited by {v['occupancy_limit']} ({by}); "
            f"{v['waves']:.2f} waves, last wave {100 * v['tail_wave_share']:.0f}% full",
            "  unit/level        busy % of peak   alone ms",
        ]
        for u in sorted(SHOWN, key=lambda u: v["alone_ms"][u], reverse=True):
            mark = "  <- busiest" + (", binds" if u == v["bound"] else "") if u == v["busiest"] else (
                "  <- binds" if u == v["bound"] else "")
            lines.append(f"  {NAMES[u]:16s} {100 * v['util_of_peak'][u]:14.1f} "
                         f"{v['alone_ms'][u]:10.3f}{mark}")
        lines.append(f"  latency (no unit busy enough to explain it): "
                     f"{100 * v['latency_share']:.0f}% of the time; launch {v['launch_ms']:.3f} ms")
    lines.append("what would move it (whole plan predicted again):")
    for w in e["what_if"]:
        lines.append(f"  {w['change']:58s} {w['time_ms']:9.3f} ms  {w['speedup']:.2f}x")
    for m in e.get("measured", []):
        extra = "".join(f", {k.removesuffix('_of_peak')} {100 * m[k]:.0f}% of peak"
                        for k in ("dram_of_peak", "l2_of_peak") if k in m)
        if "dram_bytes_ncu" in m:
            extra += (f"; DRAM bytes ncu {m['dram_bytes_ncu'] / 1e9:.3f} GB vs model "
                      f"{m['dram_bytes_model'] / 1e9:.3f} GB")
        lines.append(f"measured on {m['gpu_name']}: {m['time_ms']:.3f} ms ({m['tflops']:.0f} "
                     f"TFLOP/s; predicted/measured {e['time_ms'] / m['time_ms']:.2f}), tensor "
                     f"{100 * m['tensor_of_peak']:.0f}% of peak{extra}")
    if "measured" in e and not e["measured"]:
        lines.append("measured: no row of the files matches this schedule and problem (status ok)")
    return "\n".join(lines)
