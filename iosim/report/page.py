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
each point's `customdata[0]` is its N for the N menu (`iosim.report.figures`).
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import plotly.io as pio
from plotly.offline import get_plotlyjs

from iosim import __version__
from iosim.analysis.accuracy import error_table
from iosim.core import hardware
from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.output import check_writable, write_text
from iosim.core.problem import Problem
from iosim.core.rows import MEASURED_NEEDS, PREDICTED_NEEDS, read_rows, require_columns
from iosim.model.occupancy import ctas_per_sm
from iosim.report.data import (
    ALL,
    MENU_DIMS,
    SHAPE,
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
    gpu_key,
    ordered,
    prepare_data,
    roof_profile,
    si,
    stock_rows,
)
from iosim.report.figures import (
    LABELS,
    Figure,
    accuracy_figure,
    decode_figures,
    io_figure,
    roofline_figure,
    theorem2_figure,
    time_figure,
    whatif_figures,
)
from iosim.report.image import FORMATS, export_images
from iosim.schedules import plan

LATENCY_UTIL_PCT = 50  # below this share of its rate, the bound unit is not what limits a kernel
BOUNDS = {"hbm": "DRAM bandwidth", "l2": "L2 bandwidth", "tensor": "tensor-core throughput",
          "sfu": "exponentials on the SFU", "alu": "FP32 (non-tensor) arithmetic",
          "sram": "shared-memory bandwidth", "launch": "launch overhead", "issue": "instruction issue",
          "port": "the SM's L2 load path",
          "latency": "the warps' dependent chains: halving their latency shortens the time most "
                     "(too few warps to hide mma.sync and instruction latency)"}



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
            if not runs(r):  # no time to explain: the problem does not fit the GPU
                items.append(f"<li><b>{html.escape(r.schedule)}</b> at N={r.seqlen_k} ({html.escape(shape)}): "
                             f"<b>cannot run</b>: {cannot_run(r, hw)}. The model's "
                             f"{r.tflops_pred:.0f} TFLOP/s is not a result.</li>")
                continue
            slots = ctas_per_sm(k, hw) * hw.sm_count
            par = (f"{k.ctas:,} CTAs for {hw.sm_count} SMs ({slots:,} resident at once)"
                   + (f": {hw.sm_count - k.ctas} SMs idle" if k.ctas < hw.sm_count else ""))
            if k.grid[0] == 1:
                par += f"; {r.schedule} runs one CTA per batch·head (B·H = {r.batch * r.heads})"
            bound = f"<b>{html.escape(str(r.bound))}</b> ({html.escape(BOUNDS.get(str(r.bound), str(r.bound)))})"
            busiest = str(getattr(r, "busiest", r.bound))  # the limiter (bound) may be no unit
            util = getattr(r, "util_pct", float("nan"))  # how busy the model says that unit is
            rate = f", at {util:.0f}% of its achievable rate" if util == util else ""
            if util == util and util < LATENCY_UTIL_PCT:
                what = (f"no unit saturates (the busiest, <b>{html.escape(busiest)}</b>, runs{rate[1:]}); "
                        f"what a 2x rate shortens most: {bound}")
                if k.ctas < hw.sm_count:
                    what += "; with fewer CTAs than SMs, parallelism, not IO, limits it"
            else:
                what = f"bound by {bound}" + (rate if busiest == str(r.bound) else
                                              f" (the busiest unit, {html.escape(busiest)}{rate})")
            items.append(f"<li><b>{html.escape(r.schedule)}</b> at N={r.seqlen_k} ({html.escape(shape)}): "
                         f"{what}; {par}. Predicted {r.tflops_pred:.0f} TFLOP/s.</li>")
    conf = ", ".join(f"{LABELS[d]} {chosen[d]}" for d in MENU_DIMS if d in chosen)
    return (f"<p>At the largest N of the opening configuration ({html.escape(conf) or 'the only one'}), "
            "the model says what limits each schedule (its <code>bound</code>; every point's hover "
            f"says the same):</p><ul>{''.join(items)}</ul>")


def runs(row) -> bool:
    """False for a predicted row whose tensors do not fit in the GPU's memory (`fits`)."""
    return str(getattr(row, "fits", True)).strip().lower() not in ("false", "0", "no")


def cannot_run(row, hw: HardwareProfile) -> str:
    need = getattr(row, "hbm_footprint_bytes", float("nan"))
    return (f"its tensors need {si(need, 'B')} of HBM" if need == need else "its tensors do not fit in HBM") + \
        f", the {html.escape(hw.gpu_name)} has {si(hw.hbm_capacity_bytes, 'B')}"


def _cannot_run_note(data: Data) -> str:
    """The header's line on rows that cannot run, drawn all the same (as the hover says)."""
    p = data.pred
    bad = p[~p.apply(runs, axis=1)] if "fits" in p.columns and len(p) else p.iloc[:0]
    if bad.empty:
        return ""
    where = "; ".join(f"{html.escape(str(s))} from N={int(g[N].min())}" for s, g in bad.groupby("schedule"))
    return (f"<p class='thin'>{len(bad):,} predicted rows <b>cannot run</b>: their tensors do not fit "
            f"in the GPU's HBM ({where}). They are drawn, as the model predicts them, but are not "
            "results; their hover says <i>cannot run</i>.</p>")


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
            + ". Predicted points are hollow, measured filled.</p>" + thin + _cannot_run_note(data)
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


def page_and_charts(data: Data, profiles: dict[str, HardwareProfile], sources: Sequence[str]
                    ) -> tuple[str, list[tuple[str, dict]]]:
    """The whole page, from prepared data, and its charts as (file name, plotly figure) for
    images ("1-roofline", ...), in the page's default view."""
    options = filter_options(data)
    chosen = default_choice(data, options)
    sections: list[tuple[str, str]] = []  # (title, body), numbered at the end
    charts: list[tuple[str, dict]] = []

    def section(title: str, note: str, figs: Sequence[tuple[str, Figure]] = (), extra: str = "") -> None:
        body = ""
        for name, f in figs:
            body += _fig_html(f, len(charts))
            charts.append((f"{len(charts) + 1}-{name}", {"data": f.data, "layout": f.layout}))
        sections.append((title, f"<p class='note'>{note}</p>{body}{extra}"))

    menu = _menu_note(options)
    wi = whatif_figures(data, chosen)
    if wi:  # a what-if sweep: its answer first
        t2 = theorem2_figure(data, chosen)
        section("What-if", "Predicted time as a swept hardware field changes, at the largest N of "
                "the configuration; one line per schedule and value of the other swept fields. The "
                "charts below draw each hardware variant as its own series."
                + (" Theorem 2: the two-level HBM bytes against the SRAM size M; fa1_paper "
                   "(Algorithm 1 at the paper's Bc = ⌈M/4d⌉, hypothetical: no kernel runs it) falls "
                   "as 1/M (dotted guide), fa1 at its kernel's register-capped tiles, fa2 and naive "
                   "do not." if t2 else ""),
                [(f"whatif-{f.layout['meta']['field']}", f) for f in wi]
                + ([("theorem2", t2)] if t2 else []))
    section("Roofline", "Tensor FLOP/s against tensor FLOP per byte, as Nsight Compute draws it: each "
            "bandwidth roof rises to its ridge point, where the compute ceiling starts. Each point twice: "
            "● by its DRAM bytes (the L2-aware estimate; Nsight Compute's for measured rows where "
            "counted), ◆ by its L2 bytes (every tile, the two-level count); points are not joined (each "
            "N is its own kernel). Solid roofs: datasheet peaks; dashed and dotted: what kernels achieve "
            "(datasheet × the profile's efficiency fields); the SFU ceiling is the exponential rate × "
            "tensor FLOPs per exponential of the Plans (≈4·d forward), in tensor FLOP/s, per d. "
            f"{menu}", [("roofline", roofline_figure(data, profiles, chosen))],
            limits_text(data, chosen, profiles))
    dec = decode_figures(data, profiles, chosen)
    if dec:  # a sweep with decode rows (`--schedule decode`, a few query rows)
        section("Decode", "Split-KV decode (`decode`): the time of a decode step against the DRAM "
                "bytes it moves, under the HBM ceiling (time = bytes / bandwidth; solid: "
                "datasheet, dashed: achievable), and the serving view, the time of a step against "
                f"the context length, one line per (batch, heads). {menu}",
                [("decode-roofline", dec[0]), ("decode-serving", dec[1])])
    section("IO against N", "Solid: every tile counted (FA1 Theorem 2 view); dotted: L2-aware DRAM "
            "estimate; filled: Nsight Compute DRAM bytes.", [("io", io_figure(data, chosen))])
    section("Time and TFLOP/s against N", "Each line is one problem shape (batch, heads) across N; "
            "TFLOP/s puts shapes of different data sets side by side. " + menu,
            [("time", time_figure(data, chosen, "time")), ("tflops", time_figure(data, chosen, "tflops"))])
    if len(data.meas):
        section("Accuracy", "Predicted against measured time (status ok only), for the cycle-"
                "approximate model (●) and the roofline (×). MAPE: mean |pred − measured| / measured, "
                "percent.", [("accuracy", accuracy_figure(data, chosen))], _tables(data))
    else:
        section("Accuracy", "No measured data given.")
    if not wi:
        section("What-if", "The sweep varies no hardware field (<code>iosim sweep --set FIELD=VALUES</code> "
                "does).")
    body = "".join(f"<section><h2>{i}. {t}</h2>{b}</section>" for i, (t, b) in enumerate(sections, 1))
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>iosim report</title>"
            f"<style>{CSS}</style><script type='text/javascript'>{get_plotlyjs()}</script></head><body>"
            f"{_header(profiles, sources, data)}{_filters(options, chosen, combinations(data, options))}"
            f"{body}<script>{FILTER_JS}</script></body></html>")
    return page, charts


def build_html(data: Data, profiles: dict[str, HardwareProfile], sources: Sequence[str]) -> str:
    """The whole page, from prepared data."""
    return page_and_charts(data, profiles, sources)[0]


def write_report(pred: Sequence[pd.DataFrame] | pd.DataFrame, measured: Sequence[pd.DataFrame], out: Path,
                 sources: Sequence[str], profiles: dict[str, HardwareProfile] | None = None,
                 budget: Budget = Budget(), image_dir: Path | None = None,
                 image_format: str = "png") -> tuple[Path, list[Path]]:
    """Write the report to `out` (and each chart to `image_dir`, if given); rooflines from
    `profiles` by GPU (default: `roof_profile` of each hw). Returns the page and the images."""
    frames = [pred] if isinstance(pred, pd.DataFrame) else list(pred)
    for p in frames:
        require_columns(p, PREDICTED_NEEDS, "predictions")
    for m in measured:
        require_columns(m, MEASURED_NEEDS, "measurements")
    data = prepare_data(frames, measured, budget)
    profiles = {gpu_key(k): v for k, v in (profiles or {}).items()}
    for name in ordered(data.pred["hw"]):
        if name not in profiles:
            profiles[name] = _shipped_profile(name)
    profiles = {k: v for k, v in profiles.items() if k in set(data.pred["hw"])}
    page, charts = page_and_charts(data, profiles, sources)
    out = Path(out)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"cannot write {out}: {e.strerror or e}") from None
    write_text(out, page)
    images = export_images(charts, Path(image_dir), image_format) if image_dir is not None else []
    return out, images


def _shipped_profile(name: str) -> HardwareProfile:
    """The roofline's profile for rows on GPU `name`; rows predicted with a user's TOML name a GPU
    that no shipped profile has: then the user's TOML is needed (--hw)."""
    try:
        return roof_profile(name)
    except InputError:
        raise InputError(f"the data's hw '{name}' is no shipped profile (shipped: "
                         f"{', '.join(hardware.available())}): pass the profile the rows were "
                         f"predicted with, --hw PATH.toml") from None


def read_inputs(files: Sequence[Path]) -> tuple[list[pd.DataFrame], list[pd.DataFrame]]:
    """(prediction frames, measurement frames) of `files`, told apart by their columns."""
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
    return preds, meas


def report(files: Sequence[Path], output: Path, hw: Sequence[str] = (), image_dir: Path | None = None,
           image_format: str = "png", force: bool = False) -> tuple[Path, list[Path]]:
    """`iosim report`: the page of `files` at `output`; `hw` names profiles (names or TOML paths)
    whose ceilings the roofline draws for their GPU (`h100` or `h100-sxm5-80gb.calibrated` for
    the rows on h100-sxm5-80gb; a user's TOML for rows it predicted)."""
    check_writable(output, (".html", ".htm"), force)  # before any work: a bad -o is one line
    if image_format not in FORMATS:
        raise InputError(f"--image-format {image_format}: allowed: {', '.join(FORMATS)}")
    if image_dir is not None and Path(image_dir).is_dir():  # the images it will write, by the same rule
        for old in sorted(Path(image_dir).glob(f"*.{image_format}")):
            check_writable(old, (f".{image_format}",), force, "--image-dir")
    preds, meas = read_inputs(files)
    profiles = {gpu_key(p.name): p for p in map(hardware.load, hw)}
    names = {gpu_key(str(n)) for df in preds + meas for n in df["hw"].unique()}
    unused = sorted(set(profiles) - names)
    if unused:
        raise InputError(f"--hw {', '.join(unused)}: no row of the data is on that hardware "
                         f"(the data has: {', '.join(sorted(names))})")
    return write_report(preds, meas, output, [str(f) for f in files], profiles,
                        image_dir=image_dir, image_format=image_format)
