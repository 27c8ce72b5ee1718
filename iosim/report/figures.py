"""The report's plotly figures, pure functions of the prepared rows (`iosim.report.data`), so
tests can read the traces. Every data trace carries `meta={"dims": {...}}` for the page's menus
and each point's `customdata[0]` is its N for the N menu.

Within a configuration, each (schedule, predicted/measured, problem shape, variant) is one series;
a series' legend entry is shared by its schedule and shape (legendgroup), so the legend lists
schedule × shape, not every trace. The roofline is drawn as Nsight Compute draws it: each
bandwidth roof rises to its ridge point with the highest compute ceiling of its kind (datasheet
or achievable) and each compute ceiling starts where the fastest bandwidth roof of its kind meets it.
"""

from __future__ import annotations

import html
import math

import numpy as np
import pandas as pd
import plotly.io as pio
from plotly.colors import qualitative

from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.problem import Dtype
from iosim.report.data import (
    ALL,
    MENU_DIMS,
    SHAPE,
    STOCK,
    VARIANT,
    Data,
    N,
    achievable,
    as_text,
    numbers,
    ordered,
    profile_field,
    set_columns,
    setting,
    si,
    unit_of,
)

PRED, MEAS = "circle-open", "circle"  # hollow: predicted, filled: measured
COLORS = {"naive": "#7f7f7f", "standard": "#17becf", "fa1": "#1f77b4", "fa1_paper": "#aec7e8", "fa2": "#2ca02c", "fa3": "#d62728",
          "torch_flash": "#9467bd", "torch_cudnn": "#8c564b", "torch_efficient": "#e377c2",
          "torch_math": "#bcbd22"}
LABELS = {"hw": "hardware", "direction": "direction", "dtype": "dtype", "causal": "causal",
          "head_dim": "head_dim d", VARIANT: "hardware variant", N: "N (seqlen_k)"}


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


class Figure:
    """A plotly figure as plain dicts (`data`: traces, `layout`): plotly's validation of
    thousands of traces would cost seconds, and the page needs none of it."""

    def __init__(self, by_shape: bool = True) -> None:
        self.by_shape = by_shape  # legend entries per (schedule, shape), else per schedule
        self.data: list[dict] = []
        self.layout: dict = {}
        self._entries: set[tuple] = set()

    def add(self, **trace) -> None:
        self.data.append({"type": "scatter", **trace})

    def legend_entry(self, group: str, dims: dict, color: str, visible: bool) -> None:
        """The one legend entry of a (schedule, shape) group in one configuration: an empty trace
        in the group (clicking it shows or hides all the group's series), shown with its
        configuration."""
        key = (group, tuple(sorted(dims.items())))
        if key in self._entries:
            return
        self._entries.add(key)
        self.add(x=[None], y=[None], mode="markers", name=group, legendgroup=group, showlegend=True,
                 marker={"symbol": "square", "size": 10, "color": color}, hoverinfo="skip",
                 visible=visible, meta={"dims": dims, "legend": group})


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
            mode: str = "lines+markers", extra: str = "",
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
        group = " · ".join(filter(None, [sched, conf[SHAPE] if shapes and fig.by_shape else ""]))
        fig.legend_entry(group, {d: meta[d] for d in MENU_DIMS}, color(sched),
                         _visible({d: meta[d] for d in MENU_DIMS}, chosen))
        fig.add(x=[xs[i] for i in idx], y=[ys[i] for i in idx], mode=mode, name=name, legendgroup=group,
                showlegend=False, visible=_visible(meta, chosen),
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


def _axis(title: str, log: bool, unit: str) -> dict:
    """An axis whose every tick label reads as a number: on a log axis plotly labels the ticks
    between powers of ten with a bare digit ("2" for 2000) unless the axis has a tickformat:
    SI prefixes for bytes (2 GB), plain numbers otherwise (2000, 0.05)."""
    axis = {"title": {"text": title}, "type": "log" if log else "linear", "exponentformat": "SI",
            "ticksuffix": unit}
    if log:
        axis["tickformat"] = "~s" if unit.strip() in ("B", "B/s") else "~r"
    return axis


def _layout(fig: Figure, title: str, xt: str, yt: str, *, xlog: bool = True, ylog: bool = True,
            points: bool = True, xunit: str = "", yunit: str = "", titles: dict | None = None,
            meta: dict | None = None) -> Figure:
    fig.layout = {
        "title": {"text": title}, "height": 560, "template": TEMPLATE, "hovermode": "closest",
        "legend": {"font": {"size": 11}, "groupclick": "togglegroup",
                   "title": {"text": "○ predicted, ● measured", "font": {"size": 11}}},
        "meta": {"point_dims": [N] if points else [], "titles": titles or {}, **(meta or {})},
        "xaxis": _axis(xt, xlog, xunit), "yaxis": _axis(yt, ylog, yunit)}
    return fig


LEGEND_SHAPES = 3  # more (batch, heads) shapes per configuration: one legend entry per schedule


def legend_by_shape(data: Data) -> bool:
    """Legend entries per (schedule, shape) while a configuration has few shapes: else the
    legend would run to schedules × shapes entries (each shape's hover names it)."""
    frames = [f for f in (data.pred, data.meas) if len(f)]
    per = pd.concat([f[[*MENU_DIMS, SHAPE]] for f in frames]).groupby(MENU_DIMS)[SHAPE].nunique()
    return bool(per.max() <= LEGEND_SHAPES)


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


# what-if ceilings of different values: the i-th value of a roof gets the i-th colour and dash
ROOF_COLORS = ["#000000", "#1f5fbf", "#c0392b", "#16a085", "#8e44ad", "#d35400", "#7f8c8d", "#2c3e50"]
ROOF_DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
SFU_COLOR = "#daa520"  # a wide golden band: a tensor ceiling at the same height shows inside it


def _ceilings(prof: HardwareProfile, dtypes: list[str], ratios: pd.DataFrame) -> list[dict]:
    """One profile's roofs: bandwidths (datasheet and achievable), tensor ceilings per dtype
    (datasheet; wgmma and mma.sync achievable) and the SFU ceiling per (direction, d), each of a
    family ("datasheet" or "achievable"): a family's bandwidth roofs rise to its highest compute
    ceiling (the ridge point), and each of its ceilings starts on its fastest bandwidth roof."""
    ach = achievable(prof)
    out = []
    for lvl, name in (("hbm", "HBM"), ("l2", "L2")):
        sheet = getattr(prof, f"{lvl}_bandwidth_bytes_per_s")
        out.append({"kind": lvl, "family": "datasheet", "bw": True, "rate": sheet, "sheet": sheet, "group": name,
                    "label": f"{name} {si(sheet, 'B/s')}", "hover": f"{name} datasheet bandwidth"})
        rate, src = ach[lvl]
        out.append({"kind": f"{lvl}_achievable", "family": "achievable", "bw": True, "rate": rate,
                    "sheet": sheet, "group": name, "label": f"{name} {si(rate, 'B/s')} achievable",
                    "hover": f"{name} achievable: datasheet × {src}"})
    for dt in dtypes:
        try:
            peak = prof.tensor_peak(Dtype(dt))
        except (ValueError, InputError):
            continue
        key = "tf32" if dt == "fp32" else dt
        out.append({"kind": "tensor", "family": "datasheet", "bw": False, "rate": peak, "sheet": peak,
                    "group": "tensor",
                    "label": f"tensor {dt} {si(peak, 'FLOP/s')}", "dims": {"dtype": dt},
                    "hover": f"tensor {dt} datasheet peak (dense)"})
        for inst in ("wgmma", "mma.sync"):
            if f"{inst} {key}" in ach:
                rate, src = ach[f"{inst} {key}"]
                out.append({"kind": f"tensor_{inst}", "family": "achievable", "bw": False, "rate": rate,
                            "sheet": peak, "group": "tensor", "dims": {"dtype": dt},
                            "label": f"{inst} {si(rate, 'FLOP/s')} achievable",
                            "hover": f"{inst} {dt} achievable: datasheet × {src}"})
    for r in ratios.itertuples(index=False):
        rate = prof.sfu_exp_per_s * r.flops_per_exp
        out.append({"kind": "sfu", "family": "datasheet", "bw": False, "rate": rate, "sheet": rate,
                    "group": "SFU",
                    "label": f"SFU {si(rate, 'FLOP/s')} (d={r.head_dim} {r.direction})",
                    "dims": {"direction": r.direction, "head_dim": as_text(r.head_dim)},
                    "hover": f"SFU ceiling in tensor FLOP/s: {si(prof.sfu_exp_per_s, 'exp/s')} × "
                             f"{r.flops_per_exp:.0f} tensor FLOP per exp (the Plans' counts, d={r.head_dim} "
                             f"{r.direction}: {r.flops_per_exp / r.head_dim:.2f}·d)"})
    return out


def _shaped(ceilings: list[dict], dtypes: list[str]) -> list[dict]:
    """The roof shape: a bandwidth roof per dtype, from `x0` (None: the chart's left edge) to its
    ridge point `x1` = the family's highest tensor ceiling / bandwidth; a compute ceiling from
    `x0` = ceiling / the family's fastest bandwidth to `x1` (None: the chart's right edge)."""
    out = []
    for c in ceilings:
        fam = [r for r in ceilings if r["family"] == c["family"]]
        fastest = max(r["rate"] for r in fam if r["bw"])
        if not c["bw"]:
            out.append({**c, "x0": c["rate"] / fastest, "x1": None})
            continue
        for dt in dtypes:
            tops = [r["rate"] for r in fam if r["kind"].startswith("tensor") and r["dims"]["dtype"] == dt]
            if tops:
                out.append({**c, "dims": {"dtype": dt}, "x0": None, "x1": max(tops) / c["rate"]})
    return out


def _roofs(profiles: dict[str, HardwareProfile], data: Data) -> list[dict]:
    """Roof lines per hardware and variant (`_ceilings`, shaped by `_shaped`), merged where
    variants share a roof; a roof whose value differs between variants gets a colour and dash
    per value."""
    pred = data.pred
    out: dict[tuple, dict] = {}
    ratios = sfu_flops_per_exp(pred)
    for hw, base in profiles.items():
        rows = pred[pred["hw"] == hw]
        if rows.empty:
            continue
        sets, dtypes = set_columns(rows), ordered(rows["dtype"])
        for var, vrows in rows.groupby(VARIANT, sort=True):
            changes = {}
            if var != STOCK:
                first = vrows.iloc[0]
                changes = {c[4:]: first[c] for c in sets if pd.notna(first[c])}
                changes = {k: int(v) if isinstance(profile_field(base, k), int) else float(v)
                           for k, v in changes.items()}
            prof = base.with_changes(**changes) if changes else base
            for r in _shaped(_ceilings(prof, dtypes, ratios[ratios["hw"] == hw]), dtypes):
                dims = {"hw": hw, **r.get("dims", {})}
                k = (hw, r["kind"], round(r["rate"], 3), r["x0"] and round(r["x0"], 6),
                     r["x1"] and round(r["x1"], 6), tuple(sorted(dims.items())))
                out.setdefault(k, {**r, "hw": hw, "dims": dims, "variants": []})["variants"].append(var)
    roofs = list(out.values())
    nvar = {hw: pred.loc[pred["hw"] == hw, VARIANT].nunique() for hw in profiles}
    for r in roofs:  # a roof that some variants change follows the variant menu
        if nvar.get(r["hw"], 1) > 1:
            r["dims"][VARIANT] = sorted(set(r["variants"]))
    for r in roofs:  # the i-th value of a roof kind on a GPU: the i-th colour and dash
        values = sorted({round(q["rate"], 3) for q in roofs if (q["hw"], q["kind"]) == (r["hw"], r["kind"])})
        i = values.index(round(r["rate"], 3))
        r["style"] = _roof_style(r, i if len(values) > 1 else None)
        r["legend"] = r["label"] if r["family"] == "datasheet" else None  # achievable: in its group
    return roofs


def _roof_style(r: dict, i: int | None) -> dict:
    """Datasheet roofs solid and dark, achievable ones thinner and dashed or dotted; the SFU a
    wide golden band; the i-th of several what-if values its own colour and dash."""
    if r["kind"] == "sfu":
        style = {"color": SFU_COLOR, "width": 5, "dash": "solid"}
    elif r["family"] == "datasheet":
        style = {"color": "black" if r["kind"] != "l2" else "#666", "width": 2, "dash": "solid"}
    else:
        style = {"color": "#555" if "l2" not in r["kind"] else "#999", "width": 1.3,
                 "dash": "dot" if r["kind"].startswith("tensor") else "dash"}
    if i is not None and r["kind"] != "sfu":
        style = {**style, "color": ROOF_COLORS[i % len(ROOF_COLORS)]}
        if r["family"] == "datasheet":
            style["dash"] = ROOF_DASHES[i % len(ROOF_DASHES)]
    return style


def roofline_figure(data: Data, profiles: dict[str, HardwareProfile], chosen: dict[str, str]) -> Figure:
    """Attained tensor FLOP/s against tensor FLOP per byte, each point placed twice: by its DRAM
    bytes (circles: the L2-aware estimate, or Nsight Compute's bytes for measured rows) and by its
    L2 bytes (diamonds: the two-level count of every tile), under the roofs of the chosen hardware
    (and variant): datasheet and achievable bandwidths, tensor ceilings, SFU ceiling per d.
    Points are markers only: each N is its own kernel, not a trajectory."""
    fig = Figure(legend_by_shape(data))
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
    ends = [x for r in roofs for x in (r["x0"], r["x1"]) if x]
    lo, hi = min([lo, *ends]) / 2, max([hi, *ends]) * 2  # every ridge point in view
    for r in sorted(roofs, key=lambda r: r["kind"] != "sfu"):  # the SFU band under a tensor line
        xs = [r["x0"] or lo, r["x1"] or hi]
        ys = [x * r["rate"] / 1e12 for x in xs] if r["bw"] else [r["rate"] / 1e12] * 2
        label = {"mode": "lines"}
        if r["kind"] in ("tensor", "sfu"):  # named on the chart: the tensor peak above its line, SFU below
            label = {"mode": "lines+text", "text": ["", r["label"]], "textfont": {"size": 10},
                     "textposition": "top left" if r["kind"] == "tensor" else "bottom left"}
        fig.add(x=xs, y=ys, name=r["legend"] or r["label"], line=r["style"],
                legendgroup=f"{r['hw']} {r['group']} {r['sheet']:.6g} "
                            + str({k: v for k, v in r["dims"].items() if k != VARIANT}),
                showlegend=r["legend"] is not None, **label,
                hovertemplate=html.escape(f"{r['label']}: {r['hover']}") + "<extra></extra>",
                visible=_visible(r["dims"], chosen),
                meta={"roof": r["kind"], "rate": r["rate"], "dims": r["dims"]})
    for frame, kind in ((p, "predicted"), (m, "measured")):
        if len(frame):
            _series(fig, frame, chosen, x="ai_dram", y="tf", kind=kind, label=kind, shapes=data.shapes_vary,
                    mode="markers", extra="%{x:.3s} tensor FLOP per DRAM byte<br>")
            _series(fig, frame, chosen, x="ai_l2", y="tf", kind=kind, label=kind, shapes=data.shapes_vary,
                    symbol="diamond-open" if kind == "predicted" else "diamond", mode="markers",
                    extra="%{x:.3s} tensor FLOP per L2 byte<br>")
    titles = {hw: f"Roofline: {hw} ({prof.gpu_name})" for hw, prof in profiles.items()}
    hw0 = chosen.get("hw") if chosen.get("hw", ALL) != ALL else next(iter(profiles), "")
    return _layout(fig, titles.get(hw0, "Roofline"),
                   "arithmetic intensity (tensor FLOP per byte; ● DRAM bytes, ◆ L2 bytes)",
                   "attained tensor throughput (TFLOP/s)", titles=titles)


def io_figure(data: Data, chosen: dict[str, str]) -> Figure:
    """Bytes against N: the papers' two-level count, the L2-aware DRAM estimate, and ncu's."""
    fig = Figure(legend_by_shape(data))
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
    fig = Figure(legend_by_shape(data))
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
    fig = Figure(legend_by_shape(data))
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
        p = _against(w, col)
        fig = Figure(legend_by_shape(data))
        _series(fig, p, chosen, x="x", y="time_pred_ms", kind="predicted", variant_dim=False, order="x",
                shapes=data.shapes_vary, extra=f"{col[4:]} = %{{x:.4s}}<br>")
        unit = unit_of(col[4:])
        figs.append(_layout(fig, f"What-if: predicted time against {col[4:]}",
                            f"{col[4:]} (hardware field)", "predicted time per call", xlog=False,
                            points=False, xunit=unit and f"{unit}", yunit=" ms",
                            meta={"field": col[4:]}))
    return figs



def _against(w: pd.DataFrame, col: str) -> pd.DataFrame:
    """The what-if rows that set `col`, with x = its value and, as the variant, the values of
    the other swept fields."""
    others = [c for c in set_columns(w) if c != col]
    p = w[w[col].notna()].copy()
    p["x"] = pd.to_numeric(p[col])
    p[VARIANT] = (p[others].apply(lambda r: ", ".join(setting(c[4:], v) for c, v in r.items()
                                                      if pd.notna(v)), axis=1)
                  if others else STOCK)
    p[VARIANT] = p[VARIANT].replace("", STOCK)
    return p


SRAM_FIELDS = ("set_smem_per_block_optin_bytes", "set_smem_per_sm_bytes")  # M: what a CTA may use
THEOREM2 = ("fa1_paper", "fa1", "fa2", "naive")


def theorem2_figure(data: Data, chosen: dict[str, str]) -> Figure | None:
    """FA1's Theorem 2 when the sweep varies the SRAM size: two-level HBM bytes against it
    (log-log), at the largest N of each configuration. fa1 at the paper's tiles (`fa1_paper`,
    Bc = ceil(M/4d)) falls as 1/M; fa1 at the kernel's register-capped tiles, fa2 and naive do
    not. None when no SRAM field is swept or fa1_paper is not in the sweep."""
    w = data.whatif
    col = next((c for c in SRAM_FIELDS if c in w.columns and w[c].nunique() >= 2), None)
    if col is None:
        return None
    p = _against(w, col)
    p = p[p["schedule"].isin(THEOREM2)]
    if not (p["schedule"] == "fa1_paper").any():
        return None
    p["two"] = numbers(p, "hbm_read_bytes_2level") + numbers(p, "hbm_write_bytes_2level")
    fig = Figure(legend_by_shape(data))
    _series(fig, p, chosen, x="x", y="two", kind="predicted", variant_dim=False, order="x",
            shapes=data.shapes_vary, extra=f"{col[4:]} = %{{x:.4s}}B<br>%{{y:.3s}}B 2-level HBM<br>")
    paper = p[p["schedule"] == "fa1_paper"]
    for key, g in paper.groupby(MENU_DIMS, sort=True):  # 1/M through each configuration's smallest M
        xs = sorted(g["x"].unique())
        if len(xs) < 2:
            continue
        y0 = float(g.loc[g["x"] == xs[0], "two"].median())
        dims = {d: as_text(v) for d, v in zip(MENU_DIMS, key, strict=True)}
        fig.add(x=[xs[0], xs[-1]], y=[y0, y0 * xs[0] / xs[-1]], mode="lines",
                name="∝ 1/M (Theorem 2: Θ(N²d²/M))", legendgroup="guide",
                line={"color": "#bbb", "dash": "dot", "width": 1}, hoverinfo="name",
                visible=_visible(dims, chosen), meta={"guide": -1, "dims": dims})
    return _layout(fig, "Theorem 2: HBM accesses against the SRAM size M",
                   f"M: {col[4:]} (hardware field)", "bytes to/from HBM (2-level: every tile)",
                   points=False, xunit="B", yunit="B", meta={"field": col[4:]})


def decode_figures(data: Data, profiles: dict[str, HardwareProfile],
                   chosen: dict[str, str]) -> list[Figure]:
    """Decode's two views when the sweep has decode rows (else none): its roofline, the time
    of a decode step against the bytes it moves (the L2-aware DRAM estimate) under each
    profile's HBM ceiling (time = bytes / bandwidth: datasheet solid, achievable dashed), and
    the serving view, the time of a decode step against the context length, one line per
    (batch, heads) shape."""
    p = data.pred[data.pred["schedule"] == "decode"].copy()
    if p.empty:
        return []
    p["dram"] = numbers(p, "dram_read_bytes") + numbers(p, "dram_write_bytes")
    roof = Figure(legend_by_shape(data))
    lo, hi = p["dram"][p["dram"] > 0].min() / 2, p["dram"].max() * 2
    for hw, prof in profiles.items():
        dims = {"hw": hw}
        for rate, dash, what in ((prof.hbm_bandwidth_bytes_per_s, "solid", "datasheet"),
                                 (prof.hbm_bandwidth_bytes_per_s * prof.efficiency.hbm, "dash",
                                  "achievable")):
            roof.add(x=[lo, hi], y=[lo / rate * 1e3, hi / rate * 1e3], mode="lines",
                     name=f"HBM ceiling, {what} ({rate / 1e12:.2f} TB/s)", legendgroup=f"{hw} {what}",
                     line={"color": "#888", "dash": dash, "width": 1}, hoverinfo="name",
                     visible=_visible(dims, chosen), meta={"roof": "hbm", "rate": rate, "dims": dims})
    _series(roof, p, chosen, x="dram", y="time_pred_ms", kind="predicted", label="predicted",
            shapes=data.shapes_vary, mode="markers", extra="%{x:.3s}B DRAM a step<br>")
    serving = Figure(legend_by_shape(data))
    _series(serving, p, chosen, x=N, y="time_pred_ms", kind="predicted", label="predicted",
            shapes=data.shapes_vary)
    return [_layout(roof, "Decode: time of a step against the bytes it moves",
                    "DRAM bytes a decode step (K/V cache, Q, O, partials)", "time per step",
                    points=False, xunit="B", yunit=" ms"),
            _layout(serving, "Decode: time of a step against the context length",
                    "context length Nk (tokens)", "time per decode step", points=False,
                    yunit=" ms")]
