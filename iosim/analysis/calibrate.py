"""`iosim calibrate`: fit a profile's free parameters to measured rows of our own kernels.

    iosim calibrate experiments/fwd_grid/h100/measured.csv experiments/bwd_grid/h100/measured_bwd.csv \
        experiments/waves/h100/measured_waves.csv --hw h100-sxm5-80gb \
        --holdout-where 'seqlen_q>=8192 or heads<=4' -o hwprofiles/h100-sxm5-80gb.calibrated.toml

The parameters are the few that the timing model (`iosim.model.timing`) cannot read off a
datasheet. What can be measured directly is measured, not fitted:
- `efficiency.hbm`: the device-to-device copy bandwidth `iosim bench` records beside every
  row (`copy_bw_bytes_per_s`) over the datasheet's;
- with `--ncu TABLE` (experiments/ncu_mechanism/ncu_mechanism.py's output): `efficiency.tensor_mma_sync`,
  the tensor pipe's saturated mma.sync rate (tensor FLOPs per elapsed cycle over the pipe's
  busy share, median over the mma.sync kernels), and `pipeline.inst_per_op`, the warp
  instructions per 32 counted element operations (Nsight Compute's executed instructions less
  the mma and ldmatrix ones, median over the softmax-carrying kernels);
- kept from the profile, measured on decode rows where they bind: the rate one SM streams
  from DRAM (`pipeline.sm_dram_bytes_per_clk`, tools/sm_dram_rate.py) and a DRAM round trip
  (`pipeline.load_latency_cycles`, tools/round_trip.py); the round trip to lines the L2 holds
  (`pipeline.l2_latency_cycles`) is fitted where the rows have such waits.
The rest is fitted to time, each bounded to what is physically possible: a lone warp's cycles
per mma.sync, the cycles each other instruction holds its scheduler (alone or beside other
warps' mma.sync), the SM's L2 load path and how well CTAs with
synchronous loads overlap (`pipeline.*`), the L2 bandwidth, the wgmma rate when
wgmma rows are given, the launch overhead, and whatever the ncu table did not measure.
Nothing is fitted per shape. The fit is deterministic: bounded least squares on
log(predicted / measured time) (scipy's trust-region reflective method from the profile's
own values). Rows matching `--holdout-where` (column comparisons read by iosim.core.where,
never evaluated as code; a split by shape such as `head_dim==256`) are left out of the fit and reported apart, so the
held-out error is prediction, not interpolation. The written profile records its provenance:
GPU, driver, date, the data files' SHA-256, the split and the residuals.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd

from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.output import check_writable, write_text
from iosim.core.problem import Problem
from iosim.core.rows import (
    MEASURED_NEEDS,
    gpu_ms,
    measured_dq_bulk,
    measured_ok,
    measured_split_cols,
    measured_split_rows,
    option_fields,
    read_rows,
)
from iosim.core.where import select
from iosim.model import memory, timing
from iosim.schedules import SCHEDULES, Tiles, plan

# (field, lower, upper): the bounds keep every parameter physical.
PARAMS = {
    "efficiency.tensor_mma_sync": (0.3, 1.0),
    "efficiency.tensor_wgmma": (0.3, 1.0),
    "efficiency.hbm": (0.5, 1.0),
    "efficiency.l2": (0.3, 1.0),
    "pipeline.mma_sync_cycles": (1.0, 32.0),
    "pipeline.inst_cycles": (1.0, 16.0),
    # a step of a loop's dependent address chain (KernelSpec.loop_chain: naive's GEMMs): issue
    # to dependent issue, a few cycles; fitted only with rows of a kernel that has such chains
    "pipeline.chain_inst_cycles": (1.0, 16.0),
    "pipeline.inst_per_op": (1.0, 8.0),
    "pipeline.sm_load_bytes_per_clk": (16.0, 256.0),
    "pipeline.sync_overlap": (1.0, 32.0),
    # a synchronous wait on lines the L2 holds (fa1's backward's prefetched O_i and dQacc_i,
    # fa3's backward's dQ atomics): hundreds of cycles; fitted only with rows of a kernel that
    # has such waits. A DRAM round trip (pipeline.load_latency_cycles) is measured, not
    # fitted: tools/round_trip.py, the profile's own value
    "pipeline.l2_latency_cycles": (0.0, 4000.0),
    # a wgmma consumer's wait at a GEMM turn (its group's drain, the barrier hand-over): at most
    # a few GEMMs' worth of cycles; fitted only with rows of a kernel that has such waits
    "pipeline.wgmma_wait_cycles": (0.0, 4000.0),
    "launch_overhead_s": (0.0, 1e-5),  # a launch and its drain: microseconds
}


MMA_KERNELS = ("fa1_fwd", "fa2_fwd", "naive_qk", "naive_pv")
SOFTMAX_KERNELS = ("fa1_fwd", "fa2_fwd")


def measured_rates(ncu_table: str | Path, hw: HardwareProfile) -> dict[str, float]:
    """`efficiency.tensor_mma_sync` and `pipeline.inst_per_op` from Nsight Compute's counters
    (see the module docstring), for the profile `hw` describes."""
    df = read_rows_any(ncu_table, ["schedule", "batch", "heads", "seqlen", "head_dim", "causal",
                                   "Kernel Name", "metric", "value"])
    keys = ["schedule", "batch", "heads", "seqlen", "head_dim", "causal", "Kernel Name"]
    eff, ipo = [], []
    for (s, b, h, n, d, causal, name), g in df.groupby(keys, sort=False):
        if name not in MMA_KERNELS:
            continue
        m = g.groupby("metric")["value"].mean()
        p = Problem(batch=int(b), heads=int(h), seqlen_q=int(n), head_dim=int(d), causal=bool(causal))
        k = next(k for k in plan(s, p, hw).kernels if k.name == name)
        flops_per_clk = hw.tensor_peak(p.dtype) / hw.clock_hz / hw.sm_count
        busy = m["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"] / 100
        cycles = m["gpc__cycles_elapsed.max"]
        eff.append(k.work.tensor_flops / (hw.sm_count * cycles * flops_per_clk) / busy)
        if name in SOFTMAX_KERNELS:
            other = (m["smsp__inst_executed.sum"] - k.work.tensor_flops / timing.MMA_FLOPS
                     - k.traffic.sram / timing.LDS_BYTES)
            ipo.append(other / ((k.work.alu_flops + k.work.exp_ops) / 32))
    if not eff:
        raise InputError(f"{ncu_table}: no mma.sync kernels ({', '.join(MMA_KERNELS)}) profiled")
    out = {"efficiency.tensor_mma_sync": float(np.median(eff))}
    if ipo:
        out["pipeline.inst_per_op"] = float(np.median(ipo))
    return out


def read_rows_any(path: str | Path, required: list[str]) -> pd.DataFrame:
    try:
        df = pd.read_csv(path)
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: cannot read ({str(e).splitlines()[0]})") from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(f"{path}: missing columns {', '.join(missing)} "
                         "(an ncu table from experiments/ncu_mechanism/ncu_mechanism.py)")
    return df


def copy_efficiency(measured: pd.DataFrame, hw: HardwareProfile) -> dict[str, float]:
    """`efficiency.hbm` from the copy bandwidth measured beside the rows, if recorded."""
    if "copy_bw_bytes_per_s" not in measured or measured.copy_bw_bytes_per_s.dropna().empty:
        return {}
    bw = float(measured.copy_bw_bytes_per_s.dropna().median())
    return {"efficiency.hbm": min(1.0, bw / hw.hbm_bandwidth_bytes_per_s)}


# measured, not fitted, and kept from the profile calibrated (tools/sm_dram_rate.py,
# tools/round_trip.py: decode rows where what they stand for binds)
PROFILE_MEASURED = ("pipeline.sm_dram_bytes_per_clk", "pipeline.load_latency_cycles")


def get_or_none(hw: HardwareProfile, field: str) -> object:
    obj: object = hw
    for part in field.split("."):
        obj = getattr(obj, part)
    return obj


def get(hw: HardwareProfile, field: str) -> float:
    obj: object = hw
    for part in field.split("."):
        obj = getattr(obj, part)
    if obj is None and field == "pipeline.wgmma_wait_cycles":  # none of its own yet
        return hw.pipeline.turn_wait_cycles
    if obj is None and field == "pipeline.l2_latency_cycles":
        return hw.pipeline.l2_trip_cycles
    if obj is None and field == "pipeline.chain_inst_cycles":
        return hw.pipeline.chain_cycles
    return float(obj)


@dataclass
class Point:
    """One measured row with its Plan and DRAM estimate (neither depends on a fitted field)."""

    plan: object
    dram: list
    time_ms: float
    schedule: str
    wgmma: bool
    turns: bool  # a kernel whose consumers wait at GEMM turns (timing.turn_waits)
    l2_trips: bool  # a kernel whose synchronous round trips go to L2 (timing.sync_in_l2)
    chains: bool  # a kernel whose loop has dependent address chains (timing.loop_chain)


def measured_plan(r, hw: HardwareProfile):
    """The Plan a measured row ran: its problem, and where the row names them (rows of
    `iosim tune --verify` or a bench with tile options: warps given) its tiles and the
    registers nvcc gave the kernel; else the schedule's own tiles. fa1 forward: the query-row
    split it ran (`measured_split_rows`); fa1 backward: its key-block split (`measured_split_cols`);
    fa3 backward: its dQ reduction (`measured_dq_bulk`: the atomics where the row predates the
    dQ warp) and its deterministic mode (`option_fields`), as `iosim validate` predicts them."""
    p = Problem(batch=r.batch, heads=r.heads, kv_heads=r.kv_heads, seqlen_q=r.seqlen_q,
                seqlen_k=r.seqlen_k, head_dim=r.head_dim, dtype=r.dtype, causal=bool(r.causal),
                direction=r.direction, **option_fields(r))
    warps, split, cols = getattr(r, "warps", None), measured_split_rows(r), measured_split_cols(r)
    ran = Tiles(split_rows=split, split_cols=cols, dq_bulk=measured_dq_bulk(r))
    if warps is None or pd.isna(warps):
        return plan(r.schedule, p, hw, ran)
    t = replace(ran, block_m=int(r.block_m), block_n=int(r.block_n), warps=int(warps),
                stages=int(r.stages) if not pd.isna(getattr(r, "stages", float("nan"))) else None)
    pl = plan(r.schedule, p, hw, t)
    regs = getattr(r, "registers", None)
    if regs is not None and not pd.isna(regs):
        main = pl.main
        pl = replace(pl, kernels=tuple(replace(k, regs_per_thread=int(regs)) if k is main else k
                                       for k in pl.kernels))
    return pl


def points(rows: pd.DataFrame, hw: HardwareProfile) -> list[Point]:
    out = []
    for r, ms in zip(rows.itertuples(index=False), gpu_ms(rows)):  # queued where timed so
        pl = measured_plan(r, hw)
        out.append(Point(pl, memory.estimate(pl, hw), float(ms), r.schedule,
                         any(k.overlap == "warpspecialized" for k in pl.kernels),
                         any(timing.turn_waits(k) > 0 for k in pl.kernels),
                         any(timing.sync_in_l2(k) and timing.sync_loads(k) > 0 for k in pl.kernels),
                         any(timing.loop_chain(k) > 0 for k in pl.kernels)))
    return out


def predicted_ms(pts: list[Point], hw: HardwareProfile) -> np.ndarray:
    return np.array([sum(k.seconds for k in timing.predict(pt.plan, hw, pt.dram, limiter_too=False)) * 1e3
                     for pt in pts])


def with_values(hw: HardwareProfile, fields: list[str], x: Sequence[float]) -> HardwareProfile:
    return hw.with_changes(**{f: float(v) for f, v in zip(fields, x)})


def error_rows(pts: list[Point], pred: np.ndarray) -> pd.DataFrame:
    meas = np.array([p.time_ms for p in pts])
    return pd.DataFrame({"schedule": [p.schedule for p in pts],
                         "err_pct": (pred - meas) / meas * 100})


def summarize(err: pd.DataFrame) -> pd.DataFrame:
    g = err.assign(ape=err.err_pct.abs()).groupby("schedule")
    return pd.DataFrame({"n": g.size(), "mape_pct": g.ape.mean(),
                         "worst_ape_pct": g.ape.max()}).reset_index()


@dataclass
class Fit:
    profile: HardwareProfile
    fields: list[str]
    train: pd.DataFrame  # per schedule: n, mape_pct, worst_ape_pct
    holdout: pd.DataFrame
    rms_log: float
    measured: dict  # fields set from direct measurements (copy bandwidth, ncu counters)


def fit(measured: pd.DataFrame, hw: HardwareProfile, holdout_where: str | None = None,
        fixed: dict[str, float] | None = None) -> Fit:
    """Fit the free parameters of `hw` to the rows (status ok, our schedules) not held out;
    `fixed` fields (measured directly) are set, not fitted."""
    from scipy.optimize import least_squares

    rows = measured[measured.schedule.isin(list(SCHEDULES)) & measured_ok(measured)]
    if rows.empty:
        raise InputError("no measured rows of naive, fa1, fa2 or fa3 with status ok and a "
                         "positive, finite time_ms to fit")
    held = pd.Series(False, index=rows.index)
    if holdout_where:
        held = select(rows, holdout_where)
    train_rows, test_rows = rows[~held], rows[held]
    if train_rows.empty:
        raise InputError(f"--holdout-where '{holdout_where}' holds out every row: nothing left to fit")
    fixed = fixed or {}
    hw = hw.with_changes(**fixed) if fixed else hw
    train, test = points(train_rows, hw), points(test_rows, hw)
    fields = [f for f in PARAMS if f not in fixed
              and (f != "efficiency.tensor_wgmma" or any(p.wgmma for p in train))
              and (f != "pipeline.wgmma_wait_cycles" or any(p.turns for p in train))
              and (f != "pipeline.l2_latency_cycles" or any(p.l2_trips for p in train))
              and (f != "pipeline.chain_inst_cycles" or any(p.chains for p in train))]
    lo = np.array([PARAMS[f][0] for f in fields])
    hi = np.array([PARAMS[f][1] for f in fields])
    x0 = np.clip([get(hw, f) for f in fields], lo, hi)
    meas = np.log([p.time_ms for p in train])
    scale = hi - lo  # fit in [0, 1] per parameter: one step size suits all

    def residuals(u: np.ndarray) -> np.ndarray:
        return np.log(predicted_ms(train, with_values(hw, fields, lo + u * scale))) - meas

    # up to 500 evaluations: a fit far from its start (tests/test_calibrate.py's synthetic
    # profile) takes about 400 since the row kernels stopped tying sync_overlap to the GEMMs
    res = least_squares(residuals, (x0 - lo) / scale, bounds=(0.0, 1.0), method="trf",
                        diff_step=1e-3, xtol=1e-6, ftol=1e-6, max_nfev=500)
    best = with_values(hw, fields, lo + res.x * scale)
    tr = summarize(error_rows(train, predicted_ms(train, best)))
    te = summarize(error_rows(test, predicted_ms(test, best))) if test else summarize(
        pd.DataFrame({"schedule": [], "err_pct": []}))
    return Fit(best, fields, tr, te, float(np.sqrt(np.mean(res.fun ** 2))), fixed)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _compact(t: pd.DataFrame) -> str:
    return "; ".join(f"{r.schedule} n={r.n} MAPE {r.mape_pct:.1f}% worst {r.worst_ape_pct:.1f}%"
                     for r in t.itertuples()) or "none"


def provenance(f: Fit, measured: pd.DataFrame, paths: Sequence[Path], holdout: str | None) -> dict:
    ok = measured[measured_ok(measured)]

    def col(c: str) -> str:
        return ", ".join(sorted({str(v) for v in ok[c].dropna()})) if c in ok else ""

    return {"calibrated": "yes", "gpu": col("gpu_name"), "driver": col("driver"),
            "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
            "data": ", ".join(f"{p} sha256:{_sha(Path(p))}" for p in paths),
            "holdout_where": holdout or "", "fitted": ", ".join(f.fields),
            # each fitted value inside its bounds: one on a bound would stand for a mechanism
            # the model lacks (issue 23)
            "fitted_within": ", ".join(f"{p}={get(f.profile, p):.4g} in [{PARAMS[p][0]:g}, {PARAMS[p][1]:g}]"
                                       for p in f.fields),
            "measured": ", ".join([f"{k}={v:.4g}" for k, v in f.measured.items()]
                                  + [f"{k}={get(f.profile, k):.4g} (the profile's own: its [sources] pipeline)"
                                     for k in PROFILE_MEASURED if get_or_none(f.profile, k) is not None]),
            "train_error": _compact(f.train), "holdout_error": _compact(f.holdout),
            "rms_log_residual": f"{f.rms_log:.4f}"}


def transfer_name(target: HardwareProfile) -> str:
    return f"{target.name.removesuffix('.calibrated')}.calibrated"


# measured on each GPU, not a trait of the architecture: a transfer keeps the target's own
# (its datasheet profile's, from its measured copy bandwidth: hwprofiles/, whose sources say
# which rows set it)
OWN = ("efficiency.hbm",)


def transfer(fitted: HardwareProfile, target: HardwareProfile, source_file: str) -> HardwareProfile:
    """`target`'s datasheet numbers with `fitted`'s free parameters, not refitted: how the
    calibration of one GPU predicts another of the same architecture; what is measured on each
    GPU (OWN) stays the target's."""
    data = target.model_dump()
    for f in (x for x in PARAMS if x not in OWN):
        table, _, key = f.rpartition(".")
        if table:
            data[table][key] = get(fitted, f)
        else:
            data[key] = get(fitted, f)
    data["name"] = transfer_name(target)
    # what was measured on the fitted GPU travels with its fit, less what the target keeps
    measured = fitted.provenance.get("measured", "")
    data["provenance"] = dict(fitted.provenance, transferred_from=f"{fitted.name} ({source_file}), "
                              f"not refitted on {target.name}",
                              measured=f"on {fitted.name}'s GPU: {measured}; its "
                              f"{', '.join(OWN)} is not this profile's (kept)",
                              kept=", ".join(f"{f}={get(target, f):.4g} ({target.name}'s own)"
                                             for f in OWN))
    data["sources"] = dict(data["sources"], **_fitted_sources(f"{fitted.name}'s fit ({source_file})"))
    return HardwareProfile.model_validate(data)


def _fitted_sources(what: str) -> dict:
    return {k: f"fitted by iosim calibrate: {what}; see [provenance]"
            for k in ("efficiency", "pipeline", "launch_overhead_s")}


def _toml_value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    return json.dumps(str(v), ensure_ascii=False)  # a TOML basic string


def to_toml(hw: HardwareProfile, header: str) -> str:
    data = hw.model_dump(mode="json")
    lines = [f"# {line}" for line in header.splitlines()]
    tables = {k: v for k, v in data.items() if isinstance(v, dict)}
    lines += [f"{k} = {_toml_value(v)}" for k, v in data.items() if k not in tables]
    for name, table in tables.items():
        lines += ["", f"[{name}]"] + [f"{json.dumps(str(k))} = {_toml_value(v)}"
                                      for k, v in table.items() if v is not None]  # None: unset
    return "\n".join(lines) + "\n"


def calibrate(paths: Sequence[str | Path], hw: HardwareProfile, out: Path,
              holdout_where: str | None = None, transfer_to: Sequence[HardwareProfile] = (),
              ncu: str | Path | None = None, force: bool = False) -> Fit:
    """Measure what can be measured, fit the rest, then write the calibrated profile to `out`
    (and one per `transfer_to` beside it); an existing profile is replaced only with `force`."""
    outs = [out] + [out.parent / f"{transfer_name(t)}.toml" for t in transfer_to]
    for o in outs:  # before any work: a path that must not be written is one line
        check_writable(o, (".toml",), force)
    measured = pd.concat([read_rows(p, MEASURED_NEEDS) for p in paths], ignore_index=True)
    from iosim.analysis.accuracy import canonical_hw

    mine = measured[measured.hw.map(canonical_hw) == canonical_hw(hw.name.removesuffix(".calibrated"))]
    if mine.empty:
        raise InputError(f"no measured rows for {hw.name} in {', '.join(map(str, paths))} "
                         f"(they are for: {', '.join(sorted(set(measured.hw)))})")
    fixed = copy_efficiency(mine, hw) | (measured_rates(ncu, hw) if ncu else {})
    f = fit(mine, hw, holdout_where, fixed)
    name = out.name.removesuffix(".toml")
    prov = provenance(f, mine, [Path(p) for p in paths] + ([Path(ncu)] if ncu else []), holdout_where)
    data = f.profile.model_dump()
    data.update(name=name, provenance=prov,
                sources=dict(data["sources"], **_fitted_sources(prov["data"])))
    f.profile = HardwareProfile.model_validate(data)
    cmd = "iosim calibrate " + " ".join(map(str, paths)) + f" --hw {hw.name} -o {out}"
    if holdout_where:
        cmd += f" --holdout-where '{holdout_where}'"
    if ncu:
        cmd += f" --ncu {ncu}"
    if force:
        cmd += " --force"
    write_text(out, to_toml(f.profile, f"Calibrated profile, made by:\n  {cmd}"))
    for target in transfer_to:
        t = transfer(f.profile, target, str(out))
        write_text(out.parent / f"{t.name}.toml", to_toml(
            t, f"{t.name.removesuffix('.calibrated')}'s datasheet with the parameters fitted in {out} (not refitted), made by:\n  {cmd}"
               + "".join(f" --transfer-to {x.name}" for x in transfer_to)))
    return f
