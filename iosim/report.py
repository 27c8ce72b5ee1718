"""`iosim report`: plotly figures from prediction and measurement rows, in one offline HTML page.

Each figure builder is a pure function of DataFrames (and a profile for the roofline), so tests
can read the traces. Points and lines are split into one trace per problem configuration
(hardware, direction, dtype, causal, head_dim, batch, heads, kv_heads and any swept hardware
field `set_*`), each tagged `meta={"dims": {...}}`; the page's menus show the traces of the chosen
configuration and, on the roofline and accuracy charts, the points of the chosen N (each point's
`customdata` is `[N]`). Predicted points are hollow, measured points filled.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import typer
from plotly.colors import qualitative
from plotly.offline import get_plotlyjs

from . import __version__, hardware
from .accuracy import canonical_hw, error_table, join
from .hardware import HardwareProfile, InputError
from .io import MEASURED_NEEDS, PREDICTED_NEEDS, normalize, read_rows, require_columns
from .problem import Dtype

ALL_TRACE_DIMS = ["hw", "direction", "dtype", "causal", "head_dim", "batch", "heads", "kv_heads"]
TRACE_DIMS = ALL_TRACE_DIMS  # write_report drops batch/heads/kv_heads for FA-convention data
N = "seqlen_k"
ALL = "__all__"
PRED, MEAS = "circle-open", "circle"  # hollow: predicted, filled: measured
COLORS = {"naive": "#7f7f7f", "fa1": "#1f77b4", "fa2": "#2ca02c", "fa3": "#d62728",
          "torch_flash": "#9467bd", "torch_cudnn": "#8c564b", "torch_efficient": "#e377c2",
          "torch_math": "#bcbd22"}
LABELS = {"hw": "hardware", "direction": "direction", "dtype": "dtype", "causal": "causal",
          "head_dim": "head_dim d", "batch": "batch", "heads": "heads", "kv_heads": "kv_heads",
          N: "N (seqlen_k)"}


def color(schedule: str) -> str:
    if schedule not in COLORS:
        COLORS[schedule] = qualitative.Dark24[len(COLORS) % len(qualitative.Dark24)]
    return COLORS[schedule]


def _s(v: object) -> str:
    """One string per value, the same in trace meta and in the menus."""
    if v is None or (not isinstance(v, str) and pd.isna(v)):
        return "base"
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return str(bool(v))
    if isinstance(v, float) or type(v).__name__.startswith("float"):
        return str(int(v)) if float(v).is_integer() else f"{float(v):g}"
    return str(v)


def _order(values: Iterable[str]) -> list[str]:
    def key(v: str) -> tuple:
        try:
            return (0, float(v), v)
        except ValueError:
            return (1, 0.0, v)
    return sorted(set(values), key=key)


def set_columns(*frames: pd.DataFrame) -> list[str]:
    return sorted({c for f in frames for c in f.columns if c.startswith("set_")})


def filter_options(*frames: pd.DataFrame) -> dict[str, list[str]]:
    """The menus: every problem dimension (and swept hardware field) with more than one value."""
    opts = {}
    for d in [*TRACE_DIMS, *set_columns(*frames), N]:
        vals = _order(_s(v) for f in frames if d in f.columns for v in f[d])
        if len(vals) > 1:
            opts[d] = vals
    return opts


def default_choice(options: dict[str, list[str]], *frames: pd.DataFrame) -> dict[str, str]:
    """All N; real hardware ("base") for swept fields; otherwise the most common value in the
    first frame that has the column (pass the measured rows first so the default view has them)."""
    out = {}
    for d, vals in options.items():
        if d == N or d.startswith("set_"):
            out[d] = ALL if d == N else ("base" if "base" in vals else vals[0])
            continue
        out[d] = vals[0]
        for f in frames:
            counts = f[d].map(_s).value_counts() if d in f.columns and len(f) else pd.Series(dtype=int)
            if len(counts):
                best = counts.max()
                out[d] = next(v for v in vals if counts.get(v, 0) == best)
                break
    return out


def _visible(dims: dict[str, str], trace_dims: Sequence[str], chosen: dict[str, str]) -> bool:
    return all(chosen.get(d, ALL) in (ALL, dims[d]) for d in trace_dims if d in dims)


def _fmt(v: float, unit: str) -> str:
    if pd.isna(v):
        return "–"
    for scale, p in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.3g} {p}{unit}"
    return f"{v:.3g} {unit}"


def _num(df: pd.DataFrame, *names: str) -> pd.Series:
    """The first of `names` that `df` has, as numbers (NaN where absent). After a join a predicted
    column is suffixed `_pred` when the measured file had it too: ask for both."""
    for c in names:
        if c in df.columns:
            return pd.to_numeric(df[c], errors="coerce")
    return pd.Series(float("nan"), index=df.index)


def _hover(r: dict, kind: str) -> str:
    g = lambda k: r.get(k, float("nan"))  # noqa: E731
    heads = f"{r['heads']}" + (f"/{r['kv_heads']} kv" if r["kv_heads"] != r["heads"] else "")
    lines = [f"<b>{r['schedule']}</b> {kind} · {r['hw']}",
             f"{r['direction']} B={r['batch']} H={heads} N={r['seqlen_q']}×{r['seqlen_k']} "
             f"d={r['head_dim']} {r['dtype']}{' causal' if r['causal'] else ''}"]
    if not pd.isna(g("block_m")):
        lines.append(f"tiles {int(g('block_m'))}×{int(g('block_n'))}")
    lines.append(f"HBM 2-level rd/wr {_fmt(g('hbm_read_bytes_2level'), 'B')} / "
                 f"{_fmt(g('hbm_write_bytes_2level'), 'B')}")
    lines.append(f"DRAM (L2-aware) rd/wr {_fmt(g('dram_read_bytes'), 'B')} / "
                 f"{_fmt(g('dram_write_bytes'), 'B')}")
    if not pd.isna(g("dram_read_bytes_ncu")):
        lines.append(f"DRAM (ncu) rd/wr {_fmt(g('dram_read_bytes_ncu'), 'B')} / "
                     f"{_fmt(g('dram_write_bytes_ncu'), 'B')}")
    lines.append(f"tensor {_fmt(g('tensor_flops'), 'FLOP')}, exp {_fmt(g('exp_ops'), 'op')}")
    t = f"time pred {g('time_pred_ms'):.4g} ms"
    if not pd.isna(g("time_ms")):
        t += f", measured {g('time_ms'):.4g} ms ({g('tflops'):.4g} TFLOP/s)"
    lines.append(t + (f", bound: {r['bound']}" if isinstance(r.get("bound"), str) else ""))
    lines += [f"{c} = {_s(r[c])}" for c in r if c.startswith("set_") and not pd.isna(r[c])]
    return "<br>".join(lines)


def _series(fig: go.Figure, df: pd.DataFrame, chosen: dict[str, str], trace_dims: Sequence[str], *,
            x: str, y: str, kind: str, label: str = "", dash: str | None = None,
            mode: str = "lines+markers", points: bool = False, order: str | None = None) -> None:
    """One trace per (configuration, schedule): `df[x]` against `df[y]` in the order of `order`
    (default: x), hollow when `kind` is "predicted", filled otherwise; `label` may name row fields
    ("N={seqlen_k}"); `points` tags each point with its N for the N menu."""
    df = df[df[x].notna() & df[y].notna()]
    dims = [d for d in trace_dims if d in df.columns]
    for key, g in df.groupby([*dims, "schedule"], sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        meta = {d: _s(v) for d, v in zip(dims, key[:-1], strict=True)
                if not (d.startswith("set_") and pd.isna(v))}
        g = g.sort_values(order or x)
        g = g.loc[:, ~g.columns.duplicated()]  # a file can be both predictions and measurements
        rows = g.to_dict("records")
        sched = str(key[-1])
        name = f"{sched} {label.format(**rows[0])}".strip()
        fig.add_trace(go.Scatter(
            x=g[x].tolist(), y=g[y].tolist(), mode=mode, name=name, legendgroup=name,
            visible=_visible(meta, trace_dims, chosen),
            marker={"symbol": PRED if kind == "predicted" else MEAS, "size": 9, "color": color(sched),
                    "line": {"width": 2, "color": color(sched)}},
            line={"dash": dash or ("dash" if kind == "predicted" else "solid"), "width": 1.5},
            text=[_hover(r, kind) for r in rows], hovertemplate="%{text}<extra></extra>",
            customdata=[[_s(r[N])] for r in rows] if points else None,
            meta={"dims": meta, "kind": kind, "schedule": sched},
        ))


def _layout(fig: go.Figure, title: str, xt: str, yt: str, trace_dims: Sequence[str],
            point_dims: Sequence[str] = (), xlog: bool = True, ylog: bool = True) -> go.Figure:
    fig.update_layout(
        title=title, height=560, template="plotly_white", hovermode="closest",
        legend={"font": {"size": 11}, "groupclick": "togglegroup"},
        meta={"trace_dims": list(trace_dims), "point_dims": list(point_dims)},
        xaxis={"title": {"text": xt}, "type": "log" if xlog else "linear"},
        yaxis={"title": {"text": yt}, "type": "log" if ylog else "linear"})
    return fig


def roofs(profile: HardwareProfile, dtypes: Iterable[str]) -> list[tuple[str, str, float]]:
    """(kind, label, rate) of each roof: bandwidths in B/s, ceilings in op/s, datasheet peaks."""
    out = [("hbm", "HBM", profile.hbm_bandwidth_bytes_per_s),
           ("l2", "L2", profile.l2_bandwidth_bytes_per_s)]
    for d in _order(dtypes):
        try:
            out.append(("tensor", f"tensor {d}", profile.tensor_peak(Dtype(d))))
        except (ValueError, InputError):
            continue
    out += [("fp32", "FP32 (non-tensor)", profile.fp32_flops_per_s),
            ("sfu", "SFU exp", profile.sfu_exp_per_s)]
    return out


def roofline_figure(pred: pd.DataFrame, measured: pd.DataFrame, profile: HardwareProfile,
                    chosen: dict[str, str]) -> go.Figure:
    """Attained tensor FLOP/s against tensor FLOP per DRAM byte (the L2-aware estimate for
    predictions, Nsight Compute's bytes for measurements where present), with the profile's
    roofs. `measured` is a left join of measured rows with the predictions (`accuracy.join`)."""
    fig = go.Figure()
    p = pred.copy()
    p["ai"] = p["tensor_flops"] / (p["dram_read_bytes"] + p["dram_write_bytes"])
    p["tf"] = p["tensor_flops"] / (p["time_pred_ms"] * 1e-3) / 1e12
    m = measured.copy()
    # torch's backends have no prediction: their FLOPs by the FlashAttention convention
    flops = _num(m, "tensor_flops_pred", "tensor_flops").fillna(m["tflops"] * m["time_ms"] * 1e9)
    ncu = _num(m, "dram_read_bytes_ncu") + _num(m, "dram_write_bytes_ncu")
    m["ai"] = flops / ncu.fillna(_num(m, "dram_read_bytes_pred", "dram_read_bytes")
                           + _num(m, "dram_write_bytes_pred", "dram_write_bytes"))
    m["tf"] = flops / (m["time_ms"] * 1e-3) / 1e12
    dims = [d for d in TRACE_DIMS if d != "hw"] + set_columns(pred)
    ai = pd.concat([p["ai"], m["ai"]]).replace([float("inf")], float("nan")).dropna()
    ai = ai[ai > 0]
    lo, hi = (ai.min() / 3, ai.max() * 3) if len(ai) else (1.0, 1e4)
    rf = roofs(profile, set(pred["dtype"]) | set(measured.get("dtype", [])) or {"bf16"})
    top = max([r for k, _, r in rf if k == "tensor"] or [profile.fp32_flops_per_s])
    for _, _, bw in rf[:2]:  # show each bandwidth roof a decade either side of its ridge point
        lo, hi = min(lo, top / bw / 10), max(hi, top / bw * 10)
    for k, name, rate in rf:
        if k in ("hbm", "l2"):
            xs = [lo, top / rate]
            ys = [x * rate / 1e12 for x in xs]
            label = f"{name} roof {rate / 1e12:.3g} TB/s"
            style = {"color": "black" if k == "hbm" else "#555", "width": 2,
                     "dash": "solid" if k == "hbm" else "dot"}
        else:
            xs, ys = [lo, hi], [rate / 1e12] * 2
            unit = "T exp/s" if k == "sfu" else "TFLOP/s"
            label = f"{name} {rate / 1e12:.4g} {unit}"
            style = {"color": {"tensor": "black", "fp32": "#888", "sfu": "#b8860b"}[k], "width": 1.5,
                     "dash": "dashdot" if k == "tensor" else "longdash"}
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", name=label, line=style, hoverinfo="name",
                                 meta={"roof": k, "rate": rate}))
    _series(fig, p, chosen, dims, x="ai", y="tf", kind="predicted", label="predicted", points=True,
            order=N)
    ok = m[(m["status"] == "ok") & (m["ai"] > 0) & (m["tf"] > 0)] if len(m) else m
    if len(ok):
        _series(fig, ok, chosen, dims, x="ai", y="tf", kind="measured", label="measured",
                points=True, order=N)
    return _layout(fig, f"Roofline: {profile.name} ({profile.gpu_name})",
                   "arithmetic intensity (tensor FLOP per DRAM byte)",
                   "attained tensor throughput (TFLOP/s)", dims, [N])


def io_figure(pred: pd.DataFrame, measured: pd.DataFrame, chosen: dict[str, str]) -> go.Figure:
    """Bytes against N: the papers' two-level count, the L2-aware DRAM estimate, and ncu's."""
    fig = go.Figure()
    dims = TRACE_DIMS + set_columns(pred)
    p = pred.copy()
    p["two"] = p["hbm_read_bytes_2level"] + p["hbm_write_bytes_2level"]
    p["l2"] = p["dram_read_bytes"] + p["dram_write_bytes"]
    _series(fig, p, chosen, dims, x=N, y="two", kind="predicted", label="2-level HBM", dash="solid")
    _series(fig, p, chosen, dims, x=N, y="l2", kind="predicted", label="L2-aware DRAM", dash="dot")
    if len(measured) and "dram_read_bytes_ncu" in measured.columns:
        m = measured[measured["status"] == "ok"].copy()
        m["ncu"] = _num(m, "dram_read_bytes_ncu") + _num(m, "dram_write_bytes_ncu")
        _series(fig, m, chosen, dims, x=N, y="ncu", kind="measured", label="ncu DRAM", mode="markers")
    ns = sorted(set(p[N]))
    if len(ns) > 1:  # slope guides through the smallest naive/overall 2-level point
        y0 = p.loc[p[N] == ns[0], "two"].median()
        for power, name in ((2, "∝ N² (naive Θ(Nd+N²); FlashAttention Θ(N²d²/M))"),
                            (1, "∝ N (compulsory Θ(Nd))")):
            fig.add_trace(go.Scatter(
                x=[ns[0], ns[-1]], y=[y0, y0 * (ns[-1] / ns[0]) ** power], mode="lines", name=name,
                line={"color": "#bbb", "dash": "dot", "width": 1}, hoverinfo="name", meta={"guide": power}))
    return _layout(fig, "IO against N", "sequence length N (tokens)", "bytes moved to/from DRAM (bytes)",
                   dims)


def time_figure(pred: pd.DataFrame, measured: pd.DataFrame, chosen: dict[str, str],
                metric: str = "time") -> go.Figure:
    """Predicted (hollow, dashed) and measured (filled, solid, torch's backends included) time or
    TFLOP/s against N."""
    fig = go.Figure()
    dims = TRACE_DIMS + set_columns(pred)
    yp, ym = ("time_pred_ms", "time_ms") if metric == "time" else ("tflops_pred", "tflops")
    _series(fig, pred, chosen, dims, x=N, y=yp, kind="predicted", label="predicted")
    if len(measured):
        _series(fig, measured[measured["status"] == "ok"], chosen, dims, x=N, y=ym, kind="measured",
                label="measured")
    if metric == "time":
        return _layout(fig, "Time against N", "sequence length N (tokens)", "time per call (ms)", dims)
    return _layout(fig, "Throughput against N", "sequence length N (tokens)",
                   "TFLOP/s (4·B·H·N²·d forward, ×2.5 backward, ÷2 causal)", dims, ylog=False)


def accuracy_figure(joined: pd.DataFrame, chosen: dict[str, str]) -> go.Figure:
    """Predicted against measured time, one point per (schedule, problem), with y = x."""
    fig = go.Figure()
    dims = TRACE_DIMS
    j = joined[(joined["status"] == "ok") & joined["time_pred_ms"].notna() & (joined["time_ms"] > 0)]
    if len(j):
        v = pd.concat([j["time_ms"], j["time_pred_ms"]])
        lo, hi = v.min() / 1.5, v.max() * 1.5
        fig.add_trace(go.Scatter(x=[lo, hi], y=[lo, hi], mode="lines", name="y = x (exact)",
                                 line={"color": "black", "dash": "dot", "width": 1}, meta={"guide": "y=x"}))
        _series(fig, j, chosen, dims, x="time_ms", y="time_pred_ms", kind="measured", mode="markers",
                points=True)
    return _layout(fig, "Predicted against measured time", "measured time (ms)", "predicted time (ms)",
                   dims, [N])


def whatif_figures(pred: pd.DataFrame, chosen: dict[str, str]) -> list[go.Figure]:
    """Time against each swept hardware field (`set_<field>` with more than one value)."""
    figs = []
    for col in set_columns(pred):
        p = pred[pred[col].notna()]
        if p[col].nunique() < 2:
            continue
        # Only dimensions that vary among these rows filter them: a what-if run for one problem
        # stays in view whatever the menus say about problems it does not cover.
        dims = [d for d in TRACE_DIMS + set_columns(pred) + [N]
                if d != col and d in p.columns and p[d].nunique(dropna=False) > 1]
        fig = go.Figure()
        _series(fig, p, chosen, dims, x=col, y="time_pred_ms", kind="predicted", label="N={seqlen_k}")
        figs.append(_layout(fig, f"What-if: time against {col[4:]}",
                            f"{col[4:]} (hardware field; unit in its name)",
                            "predicted time per call (ms)", dims, xlog=False))
    return figs


FILTER_JS = """
(function () {
  var sels = Array.prototype.slice.call(document.querySelectorAll('select.iosim-filter'));
  function apply() {
    var f = {};
    sels.forEach(function (s) { f[s.dataset.dim] = s.value; });
    var ok = function (v, w) { return w === undefined || w === '__all__' || String(v) === w; };
    document.querySelectorAll('.plotly-graph-div').forEach(function (gd) {
      if (!gd.data || !gd.layout) return;
      var m = gd.layout.meta || {}, td = m.trace_dims || [], pd = m.point_dims || [];
      if (!gd._iosimOrig) gd._iosimOrig = gd.data.map(function (t) {
        return {x: t.x, y: t.y, text: t.text, customdata: t.customdata}; });
      var idx = [], u = {visible: [], x: [], y: [], text: [], customdata: []};
      gd.data.forEach(function (t, i) {
        if (!t.meta || !t.meta.dims) return;
        var o = gd._iosimOrig[i], dims = t.meta.dims;
        var vis = td.every(function (d) { return !(d in dims) || ok(dims[d], f[d]); });
        var keep = [];
        for (var j = 0; j < o.x.length; j++) {
          var hit = !o.customdata || pd.every(function (d, k) { return ok(o.customdata[j][k], f[d]); });
          if (hit) keep.push(j);
        }
        var pick = function (a) { return a ? keep.map(function (j) { return a[j]; }) : a; };
        idx.push(i); u.visible.push(vis); u.x.push(pick(o.x)); u.y.push(pick(o.y));
        u.text.push(pick(o.text)); u.customdata.push(pick(o.customdata) || null);
      });
      if (idx.length) Plotly.restyle(gd, u, idx);
    });
  }
  sels.forEach(function (s) { s.addEventListener('change', apply); });
})();
"""

CSS = """body{font-family:system-ui,sans-serif;margin:0 2em 3em;color:#222;max-width:1400px}
header{border-bottom:1px solid #ddd;padding:.5em 0}#filters{position:sticky;top:0;background:#fff;
z-index:10;padding:.6em 0;border-bottom:1px solid #eee}#filters label{margin-right:1.2em}
table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}td:last-child{text-align:left}
.note{color:#666}"""


def _fig_html(fig: go.Figure, i: int) -> str:
    return pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=f"iosim-fig-{i}",
                       config={"displaylogo": False, "responsive": True})


def _header(profiles: dict[str, HardwareProfile], sources: Sequence[str], pred: pd.DataFrame,
            measured: pd.DataFrame) -> str:
    prof = "".join(
        f"<li><b>{html.escape(p.name)}</b> ({html.escape(p.gpu_name)}): "
        f"HBM {p.hbm_bandwidth_bytes_per_s / 1e12:.3g} TB/s, "
        f"L2 {p.l2_bandwidth_bytes_per_s / 1e12:.3g} TB/s, "
        + ", ".join(f"{k} {v / 1e12:.4g} TFLOP/s" for k, v in p.tensor_flops_per_s.items())
        + f", FP32 {p.fp32_flops_per_s / 1e12:.3g} TFLOP/s, SFU {p.sfu_exp_per_s / 1e12:.3g} T exp/s</li>"
        for p in profiles.values())
    files = "".join(f"<li><code>{html.escape(s)}</code></li>" for s in sources)
    bad = int((measured["status"] != "ok").sum()) if len(measured) else 0
    return (f"<header><h1>iosim report</h1><p>Made by iosim {__version__}: {len(pred)} predicted rows "
            f"({', '.join(_order(pred['schedule']))}), {len(measured)} measured rows"
            + (f" ({bad} not ok, left out)" if bad else "") + ". Predicted points are hollow, measured "
            f"filled.</p><p>Profiles (datasheet peaks, no efficiency applied):</p><ul>{prof}</ul>"
            f"<p>Data files:</p><ul>{files}</ul></header>")


def _filters(options: dict[str, list[str]], chosen: dict[str, str]) -> str:
    parts = []
    for d, vals in options.items():
        opts = ([ALL] if d == N else []) + vals + ([ALL] if d != N else [])
        o = "".join(f'<option value="{html.escape(v)}"{" selected" if v == chosen[d] else ""}>'
                    f'{"all" if v == ALL else html.escape(v)}</option>' for v in opts)
        parts.append(f'<label>{html.escape(LABELS.get(d, d))} <select class="iosim-filter" '
                     f'data-dim="{html.escape(d)}">{o}</select></label>')
    body = "".join(parts) or '<span class="note">one configuration: nothing to choose</span>'
    return f'<div id="filters">{body}</div>'


def build_html(pred: pd.DataFrame, measured: pd.DataFrame, profiles: dict[str, HardwareProfile],
               sources: Sequence[str]) -> str:
    """The whole page; `pred` and `measured` normalized with canonical hardware names."""
    options = filter_options(pred, measured)
    chosen = default_choice(options, measured, pred)
    left = join(pred, measured, how="left") if len(measured) else measured
    sections: list[str] = []
    count = iter(range(1000))

    def section(title: str, note: str, new: list[go.Figure], extra: str = "") -> None:
        body = "".join(_fig_html(f, next(count)) for f in new)
        sections.append(f"<section><h2>{title}</h2><p class='note'>{note}</p>{body}{extra}</section>")

    section("1. Roofline", "Tensor FLOP/s against tensor FLOP per DRAM byte; roofs are datasheet peaks. "
            "Choose N in the menu to see one sequence length.",
            [roofline_figure(pred[pred["hw"] == name], left[left["hw"] == name] if len(left) else left,
                             prof, chosen) for name, prof in profiles.items()])
    section("2. IO against N", "Solid: every tile counted (FA1 Theorem 2 view); dotted: L2-aware DRAM "
            "estimate; filled: Nsight Compute DRAM bytes.", [io_figure(pred, left, chosen)])
    section("3. Time and TFLOP/s against N", "Choose head_dim, causal and dtype in the menus.",
            [time_figure(pred, left, chosen, "time"), time_figure(pred, left, chosen, "tflops")])
    if len(measured):
        table = error_table(pred, measured)
        extra = table.to_html(index=False, float_format=lambda v: f"{v:.1f}", classes="errors") \
            if len(table) else "<p>No measured row matches a prediction.</p>"
        section("4. Accuracy", "Predicted against measured time (status ok only). MAPE: mean |pred − "
                "measured| / measured.", [accuracy_figure(left, chosen)], extra)
    else:
        sections.append("<section><h2>4. Accuracy</h2><p class='note'>No measured data given.</p>"
                        "</section>")
    wi = whatif_figures(pred, chosen)
    if wi:
        section("5. What-if", "Predicted time as a swept hardware field changes.", wi)
    else:
        sections.append("<section><h2>5. What-if</h2><p class='note'>The sweep varies no hardware "
                        "field (no <code>set_*</code> column).</p></section>")
    return (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>iosim report</title>"
            f"<style>{CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            f"{_header(profiles, sources, pred, measured)}{_filters(options, chosen)}{''.join(sections)}"
            f"<script>{FILTER_JS}</script></body></html>")


def prepare(df: pd.DataFrame) -> pd.DataFrame:
    """Rows as the figure builders expect them: normalized types, hardware by profile name."""
    df = normalize(df)
    df["hw"] = df["hw"].map(canonical_hw)
    return df


def fa_convention(df: pd.DataFrame) -> bool:
    """Data taken with the FlashAttention convention (batch·N and heads·d fixed) has one
    configuration per (N, d): batch and heads then follow N and d and are no menu choice."""
    if df.empty or not {"batch", "heads", "seqlen_q", "head_dim"} <= set(df.columns):
        return True
    return ((df.batch * df.seqlen_q).nunique() == 1
            and (df.heads * df.head_dim).nunique() == 1)


def write_report(pred: pd.DataFrame, measured: list[pd.DataFrame], out: Path, sources: list[str],
                 profiles: dict[str, HardwareProfile] | None = None) -> Path:
    """Write the report to `out`; rooflines for `profiles` (default: each `hw` in `pred`)."""
    require_columns(pred, PREDICTED_NEEDS, "predictions")
    for m in measured:
        require_columns(m, MEASURED_NEEDS, "measurements")
    pred = prepare(pred)
    meas = (prepare(pd.concat(measured, ignore_index=True)) if measured
            else pd.DataFrame(columns=MEASURED_NEEDS))
    global TRACE_DIMS
    TRACE_DIMS = [d for d in ALL_TRACE_DIMS
                  if not (d in ("batch", "heads", "kv_heads") and fa_convention(pred) and fa_convention(meas))]
    if profiles is None:
        profiles = {}
        for name in _order(pred["hw"]):
            p = hardware.load(name)  # InputError names the available profiles
            profiles[p.name] = p
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(build_html(pred, meas, profiles, sources), encoding="utf-8")
    return out


def report_command(
    files: Annotated[list[Path], typer.Argument(
        help="prediction rows (iosim sweep/predict CSV or Parquet) and measured rows (iosim bench)")],
    output: Annotated[Path, typer.Option("-o", "--output", help="HTML file to write")] = Path("report.html"),
    hw: Annotated[list[str] | None, typer.Option(
        "--hw", help="profile to draw a roofline for (repeatable; default: each hw in the data)")] = None,
) -> None:
    """Write one self-contained HTML report (roofline, IO and time against N, accuracy, what-if)."""
    preds, meas = [], []
    for f in files:
        df = read_rows(f)
        if "time_pred_ms" not in df.columns and "time_ms" not in df.columns:
            raise InputError(f"{f}: neither predictions (need time_pred_ms, counts, tflops_pred, bound) "
                             "nor measurements (need time_ms, tflops, status)")
        if "time_pred_ms" in df.columns:
            require_columns(df, PREDICTED_NEEDS, str(f))
            preds.append(df)
        if "time_ms" in df.columns:
            require_columns(df, MEASURED_NEEDS, str(f))
            meas.append(df)
    if not preds:
        raise InputError("no prediction rows given: pass an `iosim sweep` or `iosim predict` CSV "
                         "(with time_pred_ms) before the measured files")
    profiles = {p.name: p for p in map(hardware.load, hw)} if hw else None
    out = write_report(pd.concat(preds, ignore_index=True), meas, output, [str(f) for f in files], profiles)
    typer.echo(f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB)")
