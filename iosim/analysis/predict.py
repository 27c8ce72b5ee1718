"""Predict: one row per (hardware, schedule, direction, problem) with the shared columns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.plan import Plan
from iosim.core.problem import Direction, Problem
from iosim.core.rows import problem_fields
from iosim.model import memory, timing
from iosim.model.backing import backing, footprint_bytes
from iosim.schedules import SCHEDULES, Tiles, defaults_for, plan
from iosim.schedules.knobs import TunedTiles

if TYPE_CHECKING:
    import pandas as pd


def row(pl: Plan, hw: HardwareProfile) -> dict:
    """The shared columns for one Plan, plus per-row extras (intensity, notes)."""
    return rows([(pl, hw)])[0]


def predictable(pl: Plan, hw: HardwareProfile) -> Plan:
    """The Plan, or the InputError its row would raise (a profile with no tensor-core rate for
    the dtype): checked before a batch, so one such Plan does not stop the others'."""
    hw.tensor_peak(pl.problem.dtype)
    return pl


def rows(items: list[tuple[Plan, HardwareProfile]]) -> list[dict]:
    """row() of many (Plan, profile) pairs, their times predicted in one batch
    (timing.predict_plans)."""
    drams = memory.estimate_many(items)
    preds = timing.predict_plans([(pl, hw, d) for (pl, hw), d in zip(items, drams)])
    return [_row(pl, hw, d, pred) for (pl, hw), d, pred in zip(items, drams, preds)]


def _row(pl: Plan, hw: HardwareProfile, dram: list[memory.Dram], pred: list[timing.KernelTime]) -> dict:
    p, t, w = pl.problem, pl.traffic, pl.work
    roof = [timing.roofline(k, d, hw, pl) for k, d in zip(pl.kernels, dram)]
    t_roof = sum(r.seconds for r in roof)
    t_pred = sum(r.seconds for r in pred)
    flops = w.tensor_flops + w.alu_flops
    dram_r, dram_w = sum(d.read for d in dram), sum(d.write for d in dram)
    return {
        "hw": hw.name, "schedule": pl.schedule, **problem_fields(p),
        "block_m": pl.block_m, "block_n": pl.block_n,
        "warps": pl.main.defines.get("NUM_WARPS", pl.main.threads // 32), "stages": pl.main.stages,
        "split_rows": pl.main.defines.get("SPLIT_ROWS"),  # fa1's query rows per CTA
        "split_cols": pl.main.defines.get("SPLIT_COLS"),  # fa1 backward's key rows per CTA
        "hbm_read_bytes_2level": t.hbm_read, "hbm_write_bytes_2level": t.hbm_write,
        "dram_read_bytes": dram_r, "dram_write_bytes": dram_w, "sram_bytes": t.sram,
        "tensor_flops": w.tensor_flops, "exp_ops": w.exp_ops, "alu_flops": w.alu_flops,
        "intensity_flop_per_byte": flops / max(dram_r + dram_w, 1),
        "time_roofline_ms": t_roof * 1e3,
        "bound_roofline": max(roof, key=lambda r: r.seconds).bound,
        "time_pred_ms": t_pred * 1e3,
        "tflops_pred": p.fa_flops() / t_pred / 1e12,
        "bound": timing.plan_bound(pred),  # the limiter: what a 2x rate shortens most
        "busiest": (main := max(pred, key=lambda r: r.seconds)).busiest,  # its busiest unit
        "util_pct": 100 * main.util,  # ... and that unit's share of its efficient peak
        "kernels": len(pl.kernels),
        # the tensors' HBM at once, against the card's: a problem that cannot run says so
        "hbm_footprint_bytes": (foot := footprint_bytes(pl)),
        "fits": foot <= hw.hbm_capacity_bytes,
        # kernel (this project's), published (someone's), or hypothetical (the model's alone)
        "backing": backing(pl, hw),
        "notes": pl.notes,
    }


def directions(direction: str) -> list[Direction]:
    return [Direction.fwd, Direction.bwd] if direction == "both" else [Direction(direction)]


def predict_rows(problem: Problem, hw: HardwareProfile, schedules: list[str] | None = None,
                 tiles: Tiles = Tiles(), tuned: TunedTiles | None = None) -> tuple[list[dict], dict]:
    """`predict`'s rows as dicts, and {schedule: why it was left out}: the same table without
    pandas (the CLI's default table prints these, and starts faster for it)."""
    names = schedules or [s for s in defaults_for(problem) if s != "fa3" or hw.has_wgmma]
    for s in names:
        if s not in SCHEDULES:
            raise InputError(f"unknown schedule '{s}' (allowed: {', '.join(SCHEDULES)})")
    plans, skipped = [], {}
    for s in names:  # a schedule that cannot be planned is said why, the others still predicted
        try:
            plans.append((predictable(plan(s, problem, hw, tiles, check=True, tuned=tuned), hw), hw))
        except InputError as e:
            skipped[s] = str(e).removeprefix(f"{s}: ")
    out = rows(plans)
    if not out:
        raise InputError("no schedule can run this problem: "
                         + "; ".join(f"{s}: {why}" for s, why in skipped.items()))
    base = next((r for r in out if r["schedule"] == "naive"), None)
    if base is not None:
        two = base["hbm_read_bytes_2level"] + base["hbm_write_bytes_2level"]
        for r in out:
            r["hbm_vs_naive"] = (r["hbm_read_bytes_2level"] + r["hbm_write_bytes_2level"]) / two
            r["time_vs_naive"] = r["time_pred_ms"] / base["time_pred_ms"]
    return out, skipped


def predict(problem: Problem, hw: HardwareProfile, schedules: list[str] | None = None,
            tiles: Tiles = Tiles(), tuned: TunedTiles | None = None) -> pd.DataFrame:
    """All schedules side by side for one problem (fa3 is left out on GPUs without wgmma
    unless asked for by name). Adds each schedule's ratios to naive. A schedule that cannot be
    planned (tiles over the SRAM, head_dim out of range) is left out, with the reason in
    `df.attrs["skipped"]`; InputError only when none can. `tuned`: a tiles file's entries."""
    import pandas as pd

    out, skipped = predict_rows(problem, hw, schedules, tiles, tuned)
    df = pd.DataFrame(out)
    df.attrs["skipped"] = skipped  # schedule -> why it was left out
    return df
