"""`iosim report`: plotly figures from prediction and measurement rows, in one offline HTML page.

The page shows one configuration at a time: the menus choose hardware, direction, dtype, causal
and head_dim (only those that vary, and only combinations that exist), and, for a what-if sweep,
the hardware variant ("all" draws every variant as its own series). Within a configuration,
each (schedule, predicted/measured, problem shape, variant) is one series across N; shapes
(batch, heads) are series rather than menu choices, so data sets with different splits (a sweep's
B = 4, H = 32 and a bench's batch = 16384/N) share a chart, and the TFLOP/s chart lines them up.

The rows come from `iosim.report.data` (labelled, re-predicted where measured, thinned to a
page budget: the page says what it left out). Figure builders are pure functions of those rows,
so tests can read the traces; every data trace carries `meta={"dims": {...}}` for the menus and
each point's `customdata[0]` is its N for the N menu.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import numpy as np
import pandas as pd
import plotly.io as pio
import typer
from plotly.colors import qualitative
from plotly.offline import get_plotlyjs

from iosim import __version__
from iosim.analysis.accuracy import canonical_hw, error_table
from iosim.core import hardware
from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.output import write_text
from iosim.core.problem import Dtype, Problem
from iosim.core.rows import MEASURED_NEEDS, PREDICTED_NEEDS, read_rows, require_columns
from iosim.model.occupancy import ctas_per_sm
from iosim.report.data import (
    ALL,
    MENU_DIMS,
    SHAPE,
    STOCK,
    VARIANT,
    Budget,
    Data,
    N,
    achievable,
    as_text,
    combinations,
    default_choice,
    filter_options,
    for_join,
    numbers,
    ordered,
    prepare_data,
    profile_field,
    roof_profile,
    set_columns,
    setting,
    si,
    stock_rows,
    unit_of,
)
from iosim.schedules import plan

LATENCY_UTIL_PCT = 50  # below this share of its rate, the bound unit is not what limits a kernel
PRED, MEAS = "circle-open", "circle"  # hollow: predicted, filled: measured
COLORS = {"naive": "#7f7f7f", "fa1": "#1f77b4", "fa2": "#2ca02c", "fa3": "#d62728",
          "torch_flash": "#9467bd", "torch_cudnn": "#8c564b", "torch_efficient": "#e377c2",
          "torch_math": "#bcbd22"}
LABELS = {"hw": "hardware", "direction": "direction", "dtype": "dtype", "causal": "causal",
          "head_dim": "head_dim d", VARIANT: "hardware variant", N: "N (seqlen_k)"}
BOUNDS = {"hbm": "DRAM bandwidth", "l2": "L2 bandwidth", "tensor": "tensor-core throughput",
          "sfu": "exponentials on the SFU", "alu": "FP32 (non-tensor) arithmetic",
          "sram": "shared-memory bandwidth", "launch": "launch overhead", "issue": "instruction issue",
          "latency": "latency and parallelism: time that no unit or level accounts for "
                     "(too few CTAs to overlap serialized load and compute phases, tail waves)"}


def color(schedule: str) -> str:
    if schedule not in COLORS:
        COLORS[schedule] = qualitative.Dark24[len(COLORS) % len(qualitative.Dark24)]
    return COLORS[schedule]


def _shade(hex_color: str, i: int, k: int) -> str:
    """The i-th of k shades of a colour (dark to light), to tell variants apart."""
    if k <= 1:
        return hex_color
    t = -0.35 + 0.9 * i / (k - 1)
    rgb = [int(hex_color[j:j + 2], 16) for j in (1, 3, 5)]
    rgb = [round(c + (255 - c) * t) if t > 0 else round(c * (1 + t)) for c in rgb]
    return "#" + "".join(f"{c:02x}" for c in rgb)


def _visible(dims: dict, chosen: dict[str, str]) -> bool:
    def ok(v: object, w: str) -> bool:
        return w == ALL or (w in v if isinstance(v, list) else v == w)
    return all(ok(v, chosen.get(d, ALL)) for d, v in dims.items())


# ---------------------------------------------------------------- figures

class Figure:
    """A plotly figure as plain dicts (`data`: traces, `layout`): plotly's validation of
    thousands of traces would cost seconds, and the page needs none of it."""

    def __init__(self) -> None:
        self.data: list[dict] = []
        self.layout: dict = {}

    def add(self, **trace) -> None:
        self.data.append({"type": "scatter", **trace})


def _sig(values, digits: int = 4) -> list:
    """Numbers rounded to `digits` significant digits (a smaller page; the charts show 3), None
    where not finite."""
    a = np.asarray(values, dtype=float)
    out = a.copy()
    ok = np.isfinite(a) & (a != 0)
    e = np.floor(np.log10(np.abs(a[ok]))) - (digits - 1)  # a = m x 10^e, m with `digits` digits
    up, v = e >= 0, a[ok]
    r = np.where(up, np.round(v / 10.0 ** np.maximum(e, 0)) * 10.0 ** np.maximum(e, 0),
                 np.round(v * 10.0 ** np.maximum(-e, 0)) / 10.0 ** np.maximum(-e, 0))
    out[ok] = r
    return [x if math.isfinite(x) else None for x in out.tolist()]


def _hover_columns(df: pd.DataFrame, kind: str) -> list[list]:
    """customdata per point: [N, "B=.. H=..", bound, time ms, TFLOP/s, and for a measured point
    the predicted time]; N first, for the N menu."""
    time = numbers(df, "time_ms" if kind == "measured" else "time_pred_ms")
    tf = numbers(df, "tflops" if kind == "measured" else "tflops_pred")
    bound = df["bound"].fillna("–").astype(str) if "bound" in df.columns else pd.Series("–", index=df.index)
    if "util_pct" in df.columns:  # how busy the bound unit is: low means latency, not that unit
        util = pd.to_numeric(df["util_pct"], errors="coerce")
        bound = bound + np.where(util.notna(), " at " + util.round().astype("Int64").astype(str) + "%", "")
    if "fits" in df.columns:  # a prediction whose tensors exceed the GPU's HBM says so
        fits = df["fits"].map(lambda v: str(v).strip().lower() not in ("false", "0", "no"))
        bound = bound + np.where(fits, "", "; cannot run: its tensors do not fit in HBM")
    if "backing" in df.columns:  # no kernel, ours or published: the model's numbers alone
        bound = bound + np.where(df["backing"].astype(str) == "hypothetical",
                                 "; hypothetical: no kernel runs it", "")
    bh = "B=" + df["batch"].astype(str) + " H=" + df["heads"].astype(str)
    cols = [df[N].astype(str), bh, bound, _sig(time), _sig(tf)]
    if kind == "measured":
        cols.append([v if v is not None else "none" for v in _sig(numbers(df, "time_pred_ms"))])
    return [list(r) for r in zip(*cols, strict=True)]


def _series(fig: Figure, df: pd.DataFrame, chosen: dict[str, str], *, x: str, y: str, kind: str,
            label: str = "", symbol: str | None = None, dash: str | None = None,
            mode: str = "lines+markers", legend: bool = True, extra: str = "",
            variant_dim: bool = True, shapes: bool = True, order: str = N) -> None:
    """One trace per (configuration, variant, shape, schedule): `df[x]` against `df[y]` in the
    order of `order`, hollow when `kind` is "predicted", filled otherwise."""
    xv, yv = pd.to_numeric(df[x], errors="coerce"), pd.to_numeric(df[y], errors="coerce")
    df = df[np.isfinite(xv) & np.isfinite(yv)]
    if df.empty:
        return
    keys = [*MENU_DIMS, VARIANT, SHAPE, "schedule"]
    df = df.sort_values([*keys, order], kind="stable")
    exact = pd.api.types.is_integer_dtype  # N and other counts stay exact
    xs = df[x].tolist() if exact(df[x]) else _sig(df[x])
    ys = df[y].tolist() if exact(df[y]) else _sig(df[y])
    cd = _hover_columns(df, kind)
    variants = ordered(df[VARIANT])
    for key, idx in df.groupby(keys, sort=False).indices.items():
        conf = dict(zip(keys, key, strict=True))
        sched, var = str(conf["schedule"]), str(conf[VARIANT])
        meta = {d: as_text(conf[d]) for d in MENU_DIMS}
        if variant_dim and kind == "predicted":
            meta[VARIANT] = var
        name = " · ".join(filter(None, [f"{sched} {label}".strip(), conf[SHAPE] if shapes else "",
                                        var if len(variants) > 1 or var != STOCK else ""]))
        c = _shade(color(sched), variants.index(var), len(variants))
        head = (f"<b>{html.escape(name)}</b><br>{conf['hw']} {conf['direction']} d={conf['head_dim']} "
                f"{conf['dtype']}{' causal' if as_text(conf['causal']) == 'True' else ''}")
        fig.add(x=[xs[i] for i in idx], y=[ys[i] for i in idx], mode=mode, name=name, legendgroup=name,
                showlegend=legend, visible=_visible(meta, chosen),
                marker={"symbol": symbol or (PRED if kind == "predicted" else MEAS), "size": 8,
                        "color": c, "line": {"width": 1.5, "color": c}},
                line={"dash": dash or ("dash" if kind == "predicted" else "solid"), "width": 1.5, "color": c},
                customdata=[cd[i] for i in idx],
                hovertemplate=(head + "<br>N=%{customdata[0]} %{customdata[1]}<br>" + extra
                               + f"{kind} %{{customdata[3]}} ms, %{{customdata[4]}} TFLOP/s"
                               + (" (model: %{customdata[5]} ms)" if kind == "measured" else "") + "<br>"
                               "model's bound: %{customdata[2]}<extra></extra>"),
                meta={"dims": meta, "kind": kind, "schedule": sched})


TEMPLATE = pio.templates["plotly_white"].to_plotly_json()


def _layout(fig: Figure, title: str, xt: str, yt: str, *, xlog: bool = True, ylog: bool = True,
            points: bool = True, xunit: str = "", yunit: str = "", titles: dict | None = None) -> Figure:
    fig.layout = {
        "title": {"text": title}, "height": 560, "template": TEMPLATE, "hovermode": "closest",
        "legend": {"font": {"size": 11}, "groupclick": "togglegroup"},
        "meta": {"point_dims": [N] if points else [], "titles": titles or {}},
        "xaxis": {"title": {"text": xt}, "type": "log" if xlog else "linear", "exponentformat": "SI",
                  "ticksuffix": xunit},
        "yaxis": {"title": {"text": yt}, "type": "log" if ylog else "linear", "exponentformat": "SI",
                  "ticksuffix": yunit}}
    return fig


def _measured_flops(m: pd.DataFrame) -> pd.Series:
    # torch's backends have no prediction: their FLOPs by the FlashAttention convention
    return numbers(m, "tensor_flops_pred", "tensor_flops").fillna(m["tflops"] * m["time_ms"] * 1e9)


def sfu_flops_per_exp(pred: pd.DataFrame) -> pd.DataFrame:
    """Tensor FLOPs per exponential, from the Plans' counts, per (hw, direction, head_dim): about
    4·d forward (QKᵀ and PV: 4d FLOPs per score, one exp each), 10·d backward (recomputed)."""
    p = pred[(pred["exp_ops"] > 0) & (pred["tensor_flops"] > 0)]
    ratio = (p["tensor_flops"] / p["exp_ops"]).rename("flops_per_exp")
    return (pd.concat([p[["hw", "direction", "head_dim"]], ratio], axis=1)
            .groupby(["hw", "direction", "head_dim"], as_index=False)["flops_per_exp"].median())


def _roofs(profiles: dict[str, HardwareProfile], data: Data) -> list[dict]:
    """Roof lines per hardware and variant, merged where variants share a rate: bandwidths
    (datasheet and achievable), tensor ceilings per dtype (datasheet, wgmma, mma.sync) and the
    SFU ceiling in tensor FLOP/s per (direction, d)."""
    pred = data.pred
    out: dict[tuple, dict] = {}
    ratios = sfu_flops_per_exp(pred)

    def add(hw, var, kind, rate, label, hover, style, line, dims=None):
        k = (hw, kind, round(rate, 3), tuple(sorted((dims or {}).items())))
        r = out.setdefault(k, {"hw": hw, "kind": kind, "rate": rate, "label": label, "hover": hover,
                               "style": style, "line": line, "dims": {"hw": hw, **(dims or {})},
                               "variants": []})
        r["variants"].append(var)

    for hw, base in profiles.items():
        rows = pred[pred["hw"] == hw]
        if rows.empty:
            continue
        sets = set_columns(rows)
        for var, vrows in rows.groupby(VARIANT, sort=True):
            changes = {}
            if var != STOCK:
                first = vrows.iloc[0]
                changes = {c[4:]: first[c] for c in sets if pd.notna(first[c])}
                changes = {k: int(v) if isinstance(profile_field(base, k), int) else float(v)
                           for k, v in changes.items()}
            prof = base.with_changes(**changes) if changes else base
            ach = achievable(prof)
            for lvl, name, col in (("hbm", "HBM", "black"), ("l2", "L2", "#777")):
                sheet = getattr(prof, f"{lvl}_bandwidth_bytes_per_s")
                add(hw, var, lvl, sheet, f"{name} {si(sheet, 'B/s')}", f"{name} datasheet bandwidth",
                    {"color": col, "width": 2, "dash": "solid"}, "bw")
                rate, src = ach[lvl]
                add(hw, var, f"{lvl}_achievable", rate, f"{name} {si(rate, 'B/s')} achievable",
                    f"{name} achievable: datasheet × {src}", {"color": col, "width": 1.5, "dash": "dash"}, "bw")
            for dt in ordered(rows["dtype"]):
                try:
                    peak = prof.tensor_peak(Dtype(dt))
                except (ValueError, InputError):
                    continue
                key = "tf32" if dt == "fp32" else dt
                add(hw, var, "tensor", peak, f"tensor {dt} {si(peak, 'FLOP/s')}",
                    f"tensor {dt} datasheet peak (dense)", {"color": "#111", "width": 1.5, "dash": "dashdot"},
                    "flat", {"dtype": dt})
                for inst in ("wgmma", "mma.sync"):
                    if f"{inst} {key}" in ach:
                        rate, src = ach[f"{inst} {key}"]
                        add(hw, var, f"tensor_{inst}", rate, f"{inst} {si(rate, 'FLOP/s')} achievable",
                            f"{inst} {dt} achievable: datasheet × {src}",
                            {"color": "#555" if inst == "wgmma" else "#999", "width": 1.2, "dash": "dot"},
                            "flat", {"dtype": dt})
            for r in ratios[ratios["hw"] == hw].itertuples(index=False):
                rate = prof.sfu_exp_per_s * r.flops_per_exp
                add(hw, var, "sfu", rate, f"SFU {si(rate, 'FLOP/s')} (d={r.head_dim} {r.direction})",
                    f"SFU ceiling in tensor FLOP/s: {si(prof.sfu_exp_per_s, 'exp/s')} × "
                    f"{r.flops_per_exp:.0f} tensor FLOP per exp (the Plans' counts, d={r.head_dim} "
                    f"{r.direction}: {r.flops_per_exp / r.head_dim:.2f}·d)",
                    {"color": "#b8860b", "width": 1.5, "dash": "longdash"}, "flat",
                    {"direction": r.direction, "head_dim": as_text(r.head_dim)})
    roofs = list(out.values())
    nvar = {hw: pred.loc[pred["hw"] == hw, VARIANT].nunique() for hw in profiles}
    for r in roofs:  # a roof that some variants change follows the variant menu
        if nvar.get(r["hw"], 1) > 1:
            r["dims"][VARIANT] = sorted(set(r["variants"]))
    return roofs


def roofline_figure(data: Data, profiles: dict[str, HardwareProfile], chosen: dict[str, str]) -> Figure:
    """Attained tensor FLOP/s against tensor FLOP per byte, each point placed twice: by its DRAM
    bytes (circles: the L2-aware estimate, or Nsight Compute's bytes for measured rows) and by its
    L2 bytes (diamonds: the two-level count of every tile), under the roofs of the chosen hardware
    (and variant): datasheet and achievable bandwidths, tensor ceilings, SFU ceiling per d."""
    fig = Figure()
    p = data.pred.copy()
    p["ai_dram"] = p["tensor_flops"] / (p["dram_read_bytes"] + p["dram_write_bytes"])
    p["ai_l2"] = p["tensor_flops"] / (p["hbm_read_bytes_2level"] + p["hbm_write_bytes_2level"])
    p["tf"] = p["tensor_flops"] / (p["time_pred_ms"] * 1e9)  # TFLOP/s
    m = data.joined
    if len(m):
        m = m[m["status"] == "ok"].copy()
        flops = _measured_flops(m)
        ncu = numbers(m, "dram_read_bytes_ncu") + numbers(m, "dram_write_bytes_ncu")
        model = numbers(m, "dram_read_bytes_pred", "dram_read_bytes") + numbers(m, "dram_write_bytes_pred",
                                                                          "dram_write_bytes")
        m["ai_dram"] = flops / ncu.fillna(model)
        m["ai_l2"] = flops / (numbers(m, "hbm_read_bytes_2level_pred", "hbm_read_bytes_2level")
                              + numbers(m, "hbm_write_bytes_2level_pred", "hbm_write_bytes_2level"))
        m["tf"] = flops / (m["time_ms"] * 1e9)
    ai = pd.concat([p["ai_dram"], p["ai_l2"]] + ([m["ai_dram"], m["ai_l2"]] if len(m) else []))
    ai = ai[np.isfinite(ai) & (ai > 0)]
    lo, hi = (ai.min() / 2, ai.max() * 2) if len(ai) else (1.0, 1e4)
    roofs = _roofs(profiles, data)
    top = max([r["rate"] for r in roofs if r["kind"] == "tensor"] or [1e15])
    for r in roofs:
        if r["line"] == "bw":
            lo, hi = min(lo, top / r["rate"] / 4), max(hi, top / r["rate"] * 4)
    for r in roofs:
        if r["line"] == "bw":
            xs = [lo, top / r["rate"]]
            ys = [x * r["rate"] / 1e12 for x in xs]
        else:
            xs, ys = [lo, hi], [r["rate"] / 1e12] * 2
        fig.add(x=xs, y=ys, mode="lines", name=r["label"], line=r["style"],
                                 hovertemplate=html.escape(f"{r['label']}: {r['hover']}") + "<extra></extra>",
                                 visible=_visible(r["dims"], chosen),
                                 meta={"roof": r["kind"], "rate": r["rate"], "dims": r["dims"]})
    for frame, kind in ((p, "predicted"), (m, "measured")):
        if len(frame):
            _series(fig, frame, chosen, x="ai_dram", y="tf", kind=kind, label=kind, shapes=data.shapes_vary,
                    extra="%{x:.3s} tensor FLOP per DRAM byte<br>")
            _series(fig, frame, chosen, x="ai_l2", y="tf", kind=kind, label=kind, legend=False,
                    shapes=data.shapes_vary,
                    symbol="diamond-open" if kind == "predicted" else "diamond", mode="markers",
                    extra="%{x:.3s} tensor FLOP per L2 byte<br>")
    titles = {hw: f"Roofline: {hw} ({prof.gpu_name})" for hw, prof in profiles.items()}
    hw0 = chosen.get("hw") if chosen.get("hw", ALL) != ALL else next(iter(profiles), "")
    return _layout(fig, titles.get(hw0, "Roofline"),
                   "arithmetic intensity (tensor FLOP per byte; ● DRAM bytes, ◆ L2 bytes)",
                   "attained tensor throughput (TFLOP/s)", titles=titles)


def io_figure(data: Data, chosen: dict[str, str]) -> Figure:
    """Bytes against N: the papers' two-level count, the L2-aware DRAM estimate, and ncu's."""
    fig = Figure()
    p = data.pred.copy()
    p["two"] = p["hbm_read_bytes_2level"] + p["hbm_write_bytes_2level"]
    p["l2"] = p["dram_read_bytes"] + p["dram_write_bytes"]
    sv = data.shapes_vary
    _series(fig, p, chosen, x=N, y="two", kind="predicted", label="2-level HBM", dash="solid", shapes=sv,
            extra="%{y:.3s}B every tile (2-level)<br>")
    _series(fig, p, chosen, x=N, y="l2", kind="predicted", label="L2-aware DRAM", dash="dot", shapes=sv,
            extra="%{y:.3s}B DRAM (L2-aware)<br>")
    m = data.joined
    if len(m) and "dram_read_bytes_ncu" in m.columns:
        m = m[m["status"] == "ok"].copy()
        m["ncu"] = numbers(m, "dram_read_bytes_ncu") + numbers(m, "dram_write_bytes_ncu")
        _series(fig, m, chosen, x=N, y="ncu", kind="measured", label="ncu DRAM", mode="markers", shapes=sv,
                extra="%{y:.3s}B DRAM (Nsight Compute)<br>")
    for key, g in p.groupby(MENU_DIMS, sort=True):  # slope guides through each configuration's smallest N
        ns = sorted(g[N].unique())
        if len(ns) < 2:
            continue
        y0 = float(g.loc[g[N] == ns[0], "two"].median())
        dims = {d: as_text(v) for d, v in zip(MENU_DIMS, key, strict=True)}
        for power, name in ((2, "∝ N² (naive Θ(Nd+N²); FlashAttention Θ(N²d²/M))"),
                            (1, "∝ N (compulsory Θ(Nd))")):
            fig.add(
                x=[ns[0], ns[-1]], y=[y0, y0 * (ns[-1] / ns[0]) ** power], mode="lines", name=name,
                legendgroup=name, line={"color": "#bbb", "dash": "dot", "width": 1}, hoverinfo="name",
                visible=_visible(dims, chosen), meta={"guide": power, "dims": dims})
    return _layout(fig, "IO against N", "sequence length N (tokens)", "bytes moved to/from DRAM",
                   points=False, yunit="B")


def time_figure(data: Data, chosen: dict[str, str], metric: str = "time") -> Figure:
    """Predicted (hollow, dashed) and measured (filled, solid, torch's backends included) time or
    TFLOP/s against N. TFLOP/s lines up problems of different (batch, heads) splits."""
    fig = Figure()
    yp, ym = ("time_pred_ms", "time_ms") if metric == "time" else ("tflops_pred", "tflops")
    sv = data.shapes_vary
    _series(fig, data.pred, chosen, x=N, y=yp, kind="predicted", label="predicted", shapes=sv)
    if len(data.meas):
        _series(fig, data.joined[data.joined["status"] == "ok"], chosen, x=N, y=ym, kind="measured",
                label="measured", shapes=sv)
    if metric == "time":
        return _layout(fig, "Time against N", "sequence length N (tokens)", "time per call",
                       points=False, yunit=" ms")
    return _layout(fig, "Throughput against N (comparable across batch and heads)",
                   "sequence length N (tokens)", "TFLOP/s (4·B·H·N²·d forward, ×2.5 backward, ÷2 causal)",
                   ylog=False, points=False)


def accuracy_figure(data: Data, chosen: dict[str, str]) -> Figure:
    """Predicted against measured time, per schedule: the cycle-approximate model (circles) and
    the roofline (crosses), with y = x."""
    fig = Figure()
    j = data.joined
    if len(j):
        j = j[(j["status"] == "ok") & numbers(j, "time_pred_ms_pred", "time_pred_ms").notna() & (j["time_ms"] > 0)]
    if len(j):
        j = j.assign(time_pred_ms=numbers(j, "time_pred_ms_pred", "time_pred_ms"),
                     time_roofline=numbers(j, "time_roofline_ms_pred", "time_roofline_ms"))
        v = pd.concat([j["time_ms"], j["time_pred_ms"], j["time_roofline"]]).dropna()
        lo, hi = v[v > 0].min() / 1.5, v.max() * 1.5
        fig.add(x=[lo, hi], y=[lo, hi], mode="lines", name="y = x (exact)",
                                 line={"color": "black", "dash": "dot", "width": 1}, meta={"guide": "y=x"})
        _series(fig, j, chosen, x="time_ms", y="time_pred_ms", kind="measured", mode="markers",
                label="cycle model", extra="predicted %{y:.3g} ms (cycle model)<br>")
        _series(fig, j, chosen, x="time_ms", y="time_roofline", kind="measured", mode="markers",
                label="roofline", symbol="x-thin-open", extra="predicted %{y:.3g} ms (roofline)<br>")
    return _layout(fig, "Predicted against measured time", "measured time", "predicted time",
                   xunit=" ms", yunit=" ms")


def whatif_figures(data: Data, chosen: dict[str, str]) -> list[Figure]:
    """Predicted time against each swept hardware field, at the largest N of each configuration;
    one series per schedule and value of the other swept fields."""
    w = data.whatif
    figs = []
    for col in set_columns(w):
        if w[col].nunique() < 2:
            continue
        others = [c for c in set_columns(w) if c != col]
        p = w[w[col].notna()].copy()
        p["x"] = pd.to_numeric(p[col])
        p[VARIANT] = (p[others].apply(lambda r: ", ".join(setting(c[4:], v) for c, v in r.items()
                                                          if pd.notna(v)), axis=1)
                      if others else STOCK)
        p[VARIANT] = p[VARIANT].replace("", STOCK)
        fig = Figure()
        _series(fig, p, chosen, x="x", y="time_pred_ms", kind="predicted", variant_dim=False, order="x",
                shapes=data.shapes_vary, extra=f"{col[4:]} = %{{x:.4s}}<br>")
        unit = unit_of(col[4:])
        figs.append(_layout(fig, f"What-if: predicted time against {col[4:]}",
                            f"{col[4:]} (hardware field)", "predicted time per call", xlog=False,
                            points=False, xunit=unit and f"{unit}", yunit=" ms"))
    return figs


# ---------------------------------------------------------------- page


def limits_text(data: Data, chosen: dict[str, str], profiles: dict[str, HardwareProfile]) -> str:
    """What limits each schedule at the largest N of the default configuration, in the model's
    own words (`bound`), with the launch's parallelism from the Plan."""
    p = stock_rows(data.pred)
    for d in MENU_DIMS:
        if chosen.get(d, ALL) != ALL:
            p = p[p[d].map(as_text) == chosen[d]]
    if p.empty:
        return ""
    items = []
    longest = p.groupby(SHAPE)[N].max().sort_values(ascending=False).index[:2]  # the two reaching furthest
    for shape, g in p[p[SHAPE].isin(longest)].groupby(SHAPE, sort=True):
        top = g[g[N] == g[N].max()]
        for r in top.sort_values("schedule").itertuples(index=False):
            hw = profiles.get(r.hw) or roof_profile(r.hw)
            prob = Problem(batch=r.batch, heads=r.heads, kv_heads=r.kv_heads, seqlen_q=r.seqlen_q,
                           seqlen_k=r.seqlen_k, head_dim=r.head_dim, dtype=r.dtype, causal=r.causal,
                           direction=r.direction)
            try:
                k = plan(r.schedule, prob, hw).main
            except InputError:
                continue
            slots = ctas_per_sm(k, hw) * hw.sm_count
            par = (f"{k.ctas:,} CTAs for {hw.sm_count} SMs ({slots:,} resident at once)"
                   + (f": {hw.sm_count - k.ctas} SMs idle" if k.ctas < hw.sm_count else ""))
            if r.schedule == "fa1":
                par += f"; fa1 runs one CTA per batch·head (B·H = {r.batch * r.heads})"
            bound = f"<b>{html.escape(str(r.bound))}</b> ({html.escape(BOUNDS.get(str(r.bound), str(r.bound)))})"
            util = getattr(r, "util_pct", float("nan"))  # how busy the model says that unit is
            rate = f", at {util:.0f}% of its achievable rate" if util == util else ""
            if util == util and util < LATENCY_UTIL_PCT:
                what = f"no unit saturates (the busiest, {bound}, runs{rate[1:]}): the time goes to latency"
                if k.ctas < hw.sm_count:
                    what += "; with fewer CTAs than SMs, parallelism, not IO, limits it"
            else:
                what = f"bound by {bound}{rate}"
            items.append(f"<li><b>{html.escape(r.schedule)}</b> at N={r.seqlen_k} ({html.escape(shape)}): "
                         f"{what}; {par}. Predicted {r.tflops_pred:.0f} TFLOP/s.</li>")
    conf = ", ".join(f"{LABELS[d]} {chosen[d]}" for d in MENU_DIMS if d in chosen)
    return (f"<p>At the largest N of the opening configuration ({html.escape(conf) or 'the only one'}), "
            "the model says what limits each schedule (its <code>bound</code>; every point's hover "
            f"says the same):</p><ul>{''.join(items)}</ul>")


FILTER_JS = """
(function () {
  var C = JSON.parse(document.getElementById('iosim-combos').textContent);
  var sels = Array.prototype.slice.call(document.querySelectorAll('select.iosim-filter'));
  var conf = sels.filter(function (s) { return s.dataset.conf === '1'; });
  function fits(c, skip) {
    return conf.every(function (s) { return s === skip || c[s.dataset.dim] === s.value; });
  }
  function settle(changed) {  // keep every menu on a combination that exists
    conf.forEach(function (s) {
      if (s === changed) return;
      var ok = function (v) { return C.some(function (c) { return c[s.dataset.dim] === v && fits(c, s); }); };
      if (!ok(s.value)) {
        var o = Array.prototype.find.call(s.options, function (o) { return ok(o.value); });
        if (o) s.value = o.value;
      }
    });
    conf.forEach(function (s) {
      Array.prototype.forEach.call(s.options, function (o) {
        o.disabled = !C.some(function (c) { return c[s.dataset.dim] === o.value && fits(c, s); });
      });
    });
    sels.filter(function (s) { return s.dataset.dim === 'seqlen_k'; }).forEach(function (s) {
      var ns = {};  // N values of the chosen configuration
      C.filter(function (c) { return fits(c, null); }).forEach(function (c) {
        c._n.forEach(function (n) { ns[n] = 1; }); });
      Array.prototype.forEach.call(s.options, function (o) { o.disabled = o.value !== '__all__' && !ns[o.value]; });
      if (s.options[s.selectedIndex].disabled) s.value = '__all__';
    });
  }
  function apply() {
    var f = {};
    sels.forEach(function (s) { f[s.dataset.dim] = s.value; });
    var ok = function (v, w) {
      if (w === undefined || w === '__all__') return true;
      return Array.isArray(v) ? v.indexOf(w) >= 0 : String(v) === w;
    };
    document.querySelectorAll('.plotly-graph-div').forEach(function (gd) {
      if (!gd.data || !gd.layout) return;
      var m = gd.layout.meta || {}, pd = m.point_dims || [];
      if (!gd._iosimOrig) gd._iosimOrig = gd.data.map(function (t) {
        return {x: t.x, y: t.y, customdata: t.customdata}; });
      var idx = [], u = {visible: [], x: [], y: [], customdata: []};
      gd.data.forEach(function (t, i) {
        if (!t.meta || !t.meta.dims) return;
        var o = gd._iosimOrig[i], dims = t.meta.dims;
        var vis = Object.keys(dims).every(function (d) { return ok(dims[d], f[d]); });
        var keep = [];
        for (var j = 0; j < o.x.length; j++) {
          var hit = !o.customdata || !t.meta.kind ||
                    pd.every(function (d) { return ok(o.customdata[j][0], f[d]); });
          if (hit) keep.push(j);
        }
        var pick = function (a) { return a ? keep.map(function (j) { return a[j]; }) : a; };
        idx.push(i); u.visible.push(vis); u.x.push(pick(o.x)); u.y.push(pick(o.y));
        u.customdata.push(pick(o.customdata) || null);
      });
      if (idx.length) Plotly.restyle(gd, u, idx);
      if (m.titles && f.hw && m.titles[f.hw]) Plotly.relayout(gd, {'title.text': m.titles[f.hw]});
    });
  }
  sels.forEach(function (s) {
    s.addEventListener('change', function () { if (s.dataset.conf === '1') settle(s); apply(); });
  });
  settle(null);
})();
"""

CSS = """body{font-family:system-ui,sans-serif;margin:0 2em 3em;color:#222;max-width:1400px}
header{border-bottom:1px solid #ddd;padding:.5em 0}#filters{position:sticky;top:0;background:#fff;
z-index:10;padding:.6em 0;border-bottom:1px solid #eee}#filters label{margin-right:1.2em}
table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}td:last-child{text-align:left}
.note{color:#666}.thin{background:#fff8e0;border:1px solid #e8d9a0;padding:.4em .8em}"""


def _fig_html(fig: Figure, i: int) -> str:
    return pio.to_html({"data": fig.data, "layout": fig.layout}, full_html=False, include_plotlyjs=False,
                       div_id=f"iosim-fig-{i}", validate=False,
                       config={"displaylogo": False, "responsive": True})


def _header(profiles: dict[str, HardwareProfile], sources: Sequence[str], data: Data) -> str:
    prof = []
    for gpu, p in profiles.items():
        ach = achievable(p)
        tensor = ", ".join(f"{k} {si(v, 'FLOP/s')}" for k, v in p.tensor_flops_per_s.items())
        reach = ", ".join(f"{k} {si(v, 'B/s' if k in ('hbm', 'l2') else 'FLOP/s')}" for k, (v, _) in ach.items())
        used = data.pred.loc[data.pred["hw"] == gpu, "profile"].value_counts()
        made = ", ".join(f"{html.escape(str(k))} ({v:,} rows)" for k, v in used.items())
        prof.append(f"<li><b>{html.escape(gpu)}</b> ({html.escape(p.gpu_name)}). Datasheet: HBM "
                    f"{si(p.hbm_bandwidth_bytes_per_s, 'B/s')}, L2 {si(p.l2_bandwidth_bytes_per_s, 'B/s')}, "
                    f"tensor {tensor}, SFU {si(p.sfu_exp_per_s, 'exp/s')}. Achievable (from "
                    f"<code>{html.escape(p.name)}</code>: {html.escape(p.describe())}): {reach}. "
                    f"Predictions drawn here were made with: {made}.</li>")
    files = "".join(f"<li><code>{html.escape(s)}</code></li>" for s in sources)
    bad = int((data.meas["status"] != "ok").sum()) if len(data.meas) else 0
    thin = ""
    if data.notes:
        thin = (f"<p class='thin'>To keep this page small, it draws {len(data.pred):,} of "
                f"{data.total_pred:,} predicted rows and {len(data.meas):,} of {data.total_meas:,} "
                f"measured rows: {'; '.join(html.escape(n) for n in data.notes)}. Every row is in the "
                "data files.</p>")
    fresh = " (measured problems predicted afresh with today's model)" if data.total_meas else ""
    return (f"<header><h1>iosim report</h1><p>Made by iosim {__version__}: {data.total_pred:,} predicted "
            f"rows ({', '.join(ordered(data.pred['schedule']))}){fresh}, "
            f"{data.total_meas:,} measured rows" + (f" ({bad} not ok, left out)" if bad else "")
            + ". Predicted points are hollow, measured filled.</p>" + thin
            + f"<p>Hardware:</p><ul>{''.join(prof)}</ul><p>Data files:</p><ul>{files}</ul></header>")


def _filters(options: dict[str, list[str]], chosen: dict[str, str], combos: list[dict]) -> str:
    parts = []
    for d, vals in options.items():
        opts = [ALL] + vals if d in (N, VARIANT) else vals
        o = "".join(f'<option value="{html.escape(v)}"{" selected" if v == chosen.get(d) else ""}>'
                    f'{"all" if v == ALL else html.escape(v)}</option>' for v in opts)
        conf = "1" if d in MENU_DIMS else "0"
        parts.append(f'<label>{html.escape(LABELS.get(d, d))} <select class="iosim-filter" '
                     f'data-dim="{html.escape(d)}" data-conf="{conf}">{o}</select></label>')
    body = "".join(parts) or '<span class="note">one configuration: nothing to choose</span>'
    data = json.dumps(combos).replace("</", "<\\/")
    return (f'<div id="filters">{body}</div>'
            f'<script type="application/json" id="iosim-combos">{data}</script>')


def _menu_note(options: dict[str, list[str]]) -> str:
    menus = [LABELS[d] for d in options if d != N]
    return (f"Choose {', '.join(menus)} in the menus above; " if menus else "") + \
        ("choose N to see one sequence length." if N in options else "")


def _tables(data: Data) -> str:
    """Error per (hw, schedule) and the worst points, for the cycle model and the roofline."""
    stock = for_join(data.pred)
    parts = []
    for title, pred in (("cycle-approximate model (time_pred_ms)", stock),
                        ("roofline (time_roofline_ms: slowest unit or level at datasheet peaks)",
                         stock.assign(time_pred_ms=stock["time_roofline_ms"]))):
        t = error_table(pred, data.meas)
        if title.startswith("roofline"):  # its time is the one compared: a roofline column repeats it
            t = t.drop(columns=[c for c in t.columns if c.startswith("roof")])
        body = (t.to_html(index=False, float_format=lambda v: f"{v:.1f}", classes="errors", escape=True)
                if len(t) else "<p>No measured row matches a prediction.</p>")
        parts.append(f"<h3>{html.escape(title)}</h3>{body}")
    return "".join(parts)


def build_html(data: Data, profiles: dict[str, HardwareProfile], sources: Sequence[str]) -> str:
    """The whole page, from prepared data."""
    options = filter_options(data)
    chosen = default_choice(data, options)
    sections: list[tuple[str, str]] = []  # (title, body), numbered at the end
    count = iter(range(10_000))

    def section(title: str, note: str, figs: list[Figure] = (), extra: str = "") -> None:
        body = "".join(_fig_html(f, next(count)) for f in figs)
        sections.append((title, f"<p class='note'>{note}</p>{body}{extra}"))

    menu = _menu_note(options)
    wi = whatif_figures(data, chosen)
    if wi:  # a what-if sweep: its answer first
        section("What-if", "Predicted time as a swept hardware field changes, at the largest N of "
                "the configuration; one line per schedule and value of the other swept fields. The "
                "charts below draw each hardware variant as its own series.", wi)
    section("Roofline", "Tensor FLOP/s against tensor FLOP per byte. Each point twice: ● by its DRAM "
            "bytes (the L2-aware estimate; Nsight Compute's for measured rows where counted), ◆ by its "
            "L2 bytes (every tile, the two-level count). Solid roofs: datasheet peaks; dashed and dotted: "
            "what kernels achieve (datasheet × the profile's efficiency fields); the SFU roof is the "
            "exponential rate × tensor FLOPs per exponential of the Plans (≈4·d forward), in tensor "
            f"FLOP/s, per d. {menu}", [roofline_figure(data, profiles, chosen)],
            limits_text(data, chosen, profiles))
    section("IO against N", "Solid: every tile counted (FA1 Theorem 2 view); dotted: L2-aware DRAM "
            "estimate; filled: Nsight Compute DRAM bytes.", [io_figure(data, chosen)])
    section("Time and TFLOP/s against N", "Each line is one problem shape (batch, heads); TFLOP/s "
            "puts shapes of different data sets side by side. " + menu,
            [time_figure(data, chosen, "time"), time_figure(data, chosen, "tflops")])
    if len(data.meas):
        section("Accuracy", "Predicted against measured time (status ok only), for the cycle-"
                "approximate model (●) and the roofline (×). MAPE: mean |pred − measured| / measured, "
                "percent.", [accuracy_figure(data, chosen)], _tables(data))
    else:
        section("Accuracy", "No measured data given.")
    if not wi:
        section("What-if", "The sweep varies no hardware field (<code>iosim sweep --set FIELD=VALUES</code> "
                "does).")
    body = "".join(f"<section><h2>{i}. {t}</h2>{b}</section>" for i, (t, b) in enumerate(sections, 1))
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>iosim report</title>"
            f"<style>{CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            f"{_header(profiles, sources, data)}{_filters(options, chosen, combinations(data, options))}"
            f"{body}<script>{FILTER_JS}</script></body></html>")


def write_report(pred: Sequence[pd.DataFrame] | pd.DataFrame, measured: Sequence[pd.DataFrame], out: Path,
                 sources: Sequence[str], profiles: dict[str, HardwareProfile] | None = None,
                 budget: Budget = Budget()) -> Path:
    """Write the report to `out`; rooflines from `profiles` (default: `roof_profile` of each hw)."""
    frames = [pred] if isinstance(pred, pd.DataFrame) else list(pred)
    for p in frames:
        require_columns(p, PREDICTED_NEEDS, "predictions")
    for m in measured:
        require_columns(m, MEASURED_NEEDS, "measurements")
    data = prepare_data(frames, measured, budget)
    profiles = dict(profiles or {})
    for name in ordered(data.pred["hw"]):
        if name not in profiles:
            profiles[name] = roof_profile(name)  # InputError names the available profiles
    profiles = {k: v for k, v in profiles.items() if k in set(data.pred["hw"])}
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot write {out}: {e.strerror or e}") from None
    return write_text(out, build_html(data, profiles, sources))


def report_command(
    files: Annotated[list[Path], typer.Argument(
        help="prediction rows (iosim sweep/predict CSV or Parquet) and measured rows (iosim bench)")],
    output: Annotated[Path, typer.Option("-o", "--output", help="HTML file to write")] = Path("report.html"),
    force: Annotated[bool, typer.Option(
        "--force", help="replace an existing output file (never one that holds measurements)")] = False,
    hw: Annotated[list[str] | None, typer.Option(
        "--hw", help="profile (name or TOML) whose peaks the roofline draws for the hardware of "
        "that name, e.g. a calibrated profile (repeatable; default: each hw in the data)")] = None,
) -> None:
    """Write one self-contained HTML report (roofline, IO and time against N, accuracy, what-if)."""
    from iosim.core.output import check_writable

    check_writable(output, (".html", ".htm"), force)  # before any work: a bad -o is one line
    preds, meas = [], []
    for f in files:
        df = read_rows(f)
        if "time_ms" in df.columns:  # measurements (their predictions are made afresh)
            require_columns(df, MEASURED_NEEDS, str(f))
            meas.append(df)
        elif "time_pred_ms" in df.columns:
            require_columns(df, PREDICTED_NEEDS, str(f))
            preds.append(df)
        else:
            raise InputError(f"{f}: neither predictions (need time_pred_ms, counts, tflops_pred, bound) "
                             "nor measurements (need time_ms, tflops, status)")
    profiles = {p.name: p for p in map(hardware.load, hw)} if hw else None
    if profiles:
        names = {canonical_hw(str(n)) for df in preds + meas for n in df["hw"].unique()}
        unused = sorted(set(profiles) - names)
        if unused:
            raise InputError(f"--hw {', '.join(unused)}: no row of the data is on that hardware "
                             f"(the data has: {', '.join(sorted(names))})")
    out = write_report(preds, meas, output, [str(f) for f in files], profiles)
    typer.echo(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
