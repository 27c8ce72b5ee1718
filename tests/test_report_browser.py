"""Report pages in a real headless browser (Debian's `chromium`), made by the real commands: a
what-if sweep (`iosim sweep --set`), a sweep beside the committed H100 measurements, and a sweep
of more than 10^5 points. Each page loads from disk with no JavaScript error and no network
access, its default view draws data points in every chart, and its menus keep data in view.

Chromium runs with every host name mapped to "not found", so any attempt to reach a network would
fail and show as an error event; the page's resource list must hold nothing but the file itself.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from iosim.cli import app
from iosim.report.image import find_chromium, run_chromium

CHROMIUM = find_chromium()  # the one the report's --image-dir uses
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's `chromium` (apt-get install "
                                "chromium; .ci/run installs it)")
REPO = Path(__file__).resolve().parents[1]
MEASURED = REPO / "experiments" / "fwd_grid" / "h100" / "measured.csv"
PAGE_LIMIT_MB = 16  # a report of any size: plotly.js (4.6 MB) and at most Budget().rows rows
runner = CliRunner()

# Injected first in <head> of a copy of the report: records errors from the start; after load it
# reads what each chart draws, drives the menus' options (recording the charts' points after
# each), then writes its findings into the DOM for --dump-dom.
PROBE = """<script>
(function () {
  var errs = [];
  window.addEventListener('error', function (e) {
    var t = e.target && e.target !== window ? (e.target.src || e.target.href || e.target.tagName) : '';
    errs.push('error: ' + (e.message || ('resource ' + t)));
  }, true);
  window.addEventListener('unhandledrejection', function (e) { errs.push('rejection: ' + e.reason); });
  var ce = console.error;
  console.error = function () { errs.push('console.error: ' + Array.prototype.join.call(arguments, ' '));
                                ce.apply(console, arguments); };
  var wait = function () { return new Promise(function (r) { setTimeout(r, 30); }); };
  function plots() {
    return Array.prototype.map.call(document.querySelectorAll('.plotly-graph-div'), function (gd) {
      var shown = gd.data.filter(function (t) { return t.meta && t.meta.kind && t.visible !== false; });
      return {points: gd.querySelectorAll('.scatterlayer .point').length,
              title: (gd.querySelector('.gtitle') || {}).textContent || '',
              names: shown.map(function (t) { return t.name; }),
              kinds: shown.map(function (t) { return t.meta.kind; }),
              data: shown.reduce(function (n, t) { return n + t.x.length; }, 0)};
    });
  }
  function change(s, v) { s.value = v; s.dispatchEvent(new Event('change')); }
  window.addEventListener('load', function () {
    setTimeout(async function () {
      var t0 = performance.now();
      var out = {errors: errs, plots: plots(), menus: {}, after: {}};
      var sels = window.IOSIM_PROBE_MENUS === false ? [] :
        Array.prototype.slice.call(document.querySelectorAll('select.iosim-filter'));
      var orig = sels.map(function (s) { return s.value; });
      for (var i = 0; i < sels.length; i++) {
        var s = sels[i];
        out.menus[s.dataset.dim] = Array.prototype.map.call(s.options, function (o) {
          return {value: o.value, disabled: o.disabled}; });
        for (var k = 0; k < s.options.length; k++) {  // each option (N: the first three, the last)
          if (s.options[k].disabled || (s.dataset.dim === 'seqlen_k' && k > 2 && k < s.options.length - 1)) continue;
          change(s, s.options[k].value);
          await wait();
          out.after[s.dataset.dim + '=' + s.options[k].value] = plots().map(function (p) {
            return {points: p.points, title: p.title}; });
        }
        for (var j = 0; j < sels.length; j++) change(sels[j], orig[j]);
        await wait();
      }
      out.restored = plots().map(function (p) { return p.points; });
      out.menu_ms = performance.now() - t0;
      out.resources = performance.getEntriesByType('resource').map(function (e) { return e.name; });
      var pre = document.createElement('pre');
      pre.id = 'iosim-probe';
      pre.textContent = JSON.stringify(out);
      document.body.appendChild(pre);
    }, 300);
  });
})();
</script>"""

def chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    return run_chromium(CHROMIUM, args, profile)


def iosim(*args: str) -> None:
    r = runner.invoke(app, list(args))
    assert r.exit_code == 0, r.output


def probe(page: Path, tmp: Path, menus: bool = True) -> dict:
    copy = tmp / "probe.html"
    flag = "" if menus else "<script>window.IOSIM_PROBE_MENUS = false;</script>"
    copy.write_text(page.read_text().replace("<head>", "<head>" + flag + PROBE, 1))
    run = chromium(["--dump-dom", copy.as_uri()], tmp / "profile")
    m = re.search(r'<pre id="iosim-probe">(.*?)</pre>', run.stdout, re.S)
    assert m, f"probe did not report (rc {run.returncode}); stderr tail:\n{run.stderr[-2000:]}"
    out = json.loads(html.unescape(m.group(1)))
    assert out["errors"] == [] and "Uncaught" not in run.stderr
    assert [r for r in out["resources"] if not r.startswith(("file:", "data:", "blob:"))] == []
    return out


@pytest.fixture(scope="module")
def whatif_page(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("whatif")
    iosim("sweep", "--seqlen", "512..32768", "--schedule", "naive,fa1,fa2,fa3",
          "--set", "hbm_bandwidth_bytes_per_s=3.35e12,4.8e12,8e12",
          "--set", "smem_per_sm_bytes=233472,458752", "--no-progress", "-o", str(d / "w.csv"))
    iosim("report", str(d / "w.csv"), "-o", str(d / "w.html"))
    return d / "w.html"


@pytest.fixture(scope="module")
def mixed_page(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("mixed")
    iosim("sweep", "--seqlen", "512..65536", "--head-dim", "64,128,256", "--causal", "both", "--schedule", "all",
          "--hw", "h100-sxm5-80gb,a100-sxm4-80gb", "--no-progress", "-o", str(d / "s.csv"))
    iosim("report", str(d / "s.csv"), str(MEASURED), "-o", str(d / "r.html"))
    return d / "r.html"


def test_whatif_page_draws_each_variant_as_its_own_series(whatif_page, tmp_path):
    out = probe(whatif_page, tmp_path)
    assert len(out["plots"]) == 6  # roofline, IO, time, TFLOP/s, two what-if charts (no measured data)
    for p in out["plots"]:
        assert p["points"] > 0, f"no points drawn in the default view: {p['title']}"
    time = next(p for p in out["plots"] if p["title"] == "Time against N")
    variants = {n.split(" · ", 1)[1] for n in time["names"]}
    assert variants == {"as profiled", "hbm_bandwidth=4.8 TB/s", "hbm_bandwidth=8 TB/s", "smem_per_sm=458.8 kB",
                        "hbm_bandwidth=4.8 TB/s, smem_per_sm=458.8 kB", "hbm_bandwidth=8 TB/s, smem_per_sm=458.8 kB"}
    assert len(time["names"]) == len(set(time["names"])) == 4 * 6
    assert set(out["menus"]) == {"variant", "seqlen_k"}
    for choice, plots in out["after"].items():  # one variant, or one N: still data everywhere
        assert all(p["points"] > 0 for p in plots), choice
    assert out["restored"] == [p["points"] for p in out["plots"]]


def test_sweep_with_measurements_opens_on_the_measured_data(mixed_page, tmp_path):
    out = probe(mixed_page, tmp_path)
    titles = [p["title"] for p in out["plots"]]
    assert titles[0] == "Roofline: h100-sxm5-80gb (NVIDIA H100 80GB HBM3)"
    assert len(out["plots"]) == 5  # roofline, IO, time, TFLOP/s, accuracy; no what-if chart
    for p in out["plots"]:
        assert p["points"] > 0, f"no points drawn in the default view: {p['title']}"
        if p["title"] != "IO against N":  # (measured.csv has no Nsight Compute bytes)
            assert "measured" in p["kinds"], f"no measured series shown: {p['title']}"
    tflops = next(p for p in out["plots"] if p["title"].startswith("Throughput"))
    assert {"fa2 predicted · B=4 H=32", "fa2 measured · B·N=16384 H·d=2048"} <= set(tflops["names"])
    assert len(tflops["names"]) == len(set(tflops["names"]))  # every legend entry names one series
    # menus: only what varies; the roofline follows the hardware menu; every option keeps the
    # roofline, IO, time and TFLOP/s charts drawn (no measured data on the A100: no accuracy points)
    assert set(out["menus"]) == {"hw", "causal", "head_dim", "seqlen_k"}
    a100 = out["after"]["hw=a100-sxm4-80gb"]
    assert a100[0]["title"] == "Roofline: a100-sxm4-80gb (NVIDIA A100-SXM4-80GB)"
    for choice, plots in out["after"].items():
        assert all(p["points"] > 0 for p in plots[:4]), choice
    assert out["restored"] == [p["points"] for p in out["plots"]]


def test_sweep_of_100k_points_gives_a_small_page(tmp_path_factory, tmp_path):
    d = tmp_path_factory.mktemp("large")
    iosim("sweep", "--seqlen", "256..65536:300", "--head-dim", "64,128,256", "--causal", "both",
          "--direction", "both", "--batch", "1,4,16", "--heads", "16,32", "--schedule", "naive,fa1,fa2,fa3",
          "--hw", "h100-sxm5-80gb,a100-sxm4-80gb", "--no-progress", "-o", str(d / "big.csv"))
    rows = sum(1 for _ in open(d / "big.csv")) - 1
    assert rows > 100_000
    r = subprocess.run([sys.executable, "-c", "from iosim.cli import main; main()", "report", str(d / "big.csv"),
                        "-o", str(d / "big.html")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    size_mb = (d / "big.html").stat().st_size / 1e6
    assert size_mb < PAGE_LIMIT_MB
    text = (d / "big.html").read_text()
    assert f"of {rows:,} predicted rows" in text  # the page says it drew only part of the sweep
    out = probe(d / "big.html", tmp_path, menus=False)  # (the menus' code is the same as above)
    for p in out["plots"]:
        assert p["points"] > 0, f"no points drawn in the default view: {p['title']}"


def test_screenshot(whatif_page, tmp_path):
    shot = tmp_path / "report.png"
    run = chromium(["--hide-scrollbars", "--window-size=1400,2400", f"--screenshot={shot}", whatif_page.as_uri()],
                   tmp_path / "profile")
    assert shot.is_file() and shot.stat().st_size > 50_000, run.stderr[-2000:]
    print(f"screenshot: {shot}")


# After load: each chart's tick labels (text and value) and legend entries, and where the roofline's
# ceiling labels are drawn.
TICKS = """<script>
window.addEventListener('load', function () { setTimeout(function () {
  var out = Array.prototype.map.call(document.querySelectorAll('.plotly-graph-div'), function (gd) {
    var ax = function (a) { var f = gd._fullLayout[a];
      return {type: f.type, ticks: (f._vals || []).map(function (v) {
        return [f.type === 'log' ? Math.pow(10, v.x) : v.x, v.text]; })}; };
    var boxes = Array.prototype.map.call(gd.querySelectorAll('.textpoint text'), function (t) {
      var r = t.getBoundingClientRect(); return [t.textContent, r.top, r.bottom, r.left, r.right]; });
    return {title: (gd.querySelector('.gtitle') || {}).textContent || '', x: ax('xaxis'), y: ax('yaxis'),
            legend: gd.querySelectorAll('.legend .traces').length, labels: boxes};
  });
  var pre = document.createElement('pre'); pre.id = 'iosim-ticks';
  pre.textContent = JSON.stringify(out); document.body.appendChild(pre);
}, 300); });
</script>"""


def _number(text: str) -> float:
    """A tick label as the number it says: "2000", "0.05", "2 GB", "20 ms"."""
    t = text.replace("\u2212", "-").replace(",", "").strip()
    for unit in (" ms", "B/s", "B"):  # the axes' units (ticksuffix), then an SI prefix
        t = t.removesuffix(unit).strip()
    m = re.fullmatch(r"(-?[0-9.]+)\s*([kMGTPµmun]?)", t)
    assert m, f"tick label {text!r} is not a number"
    scale = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "m": 1e-3, "µ": 1e-6, "u": 1e-6, "n": 1e-9}
    return float(m.group(1)) * scale[m.group(2)]


def _charts(page: Path, tmp: Path) -> list[dict]:
    copy = tmp / "ticks.html"
    copy.write_text(page.read_text().replace("<head>", "<head>" + TICKS, 1))
    run = chromium(["--dump-dom", copy.as_uri()], tmp / "profile")
    m = re.search(r'<pre id="iosim-ticks">(.*?)</pre>', run.stdout, re.S)
    assert m, run.stderr[-2000:]
    return json.loads(html.unescape(m.group(1)))


def test_roofline_ticks_legend_and_labels_as_drawn(mixed_page, tmp_path):
    charts = _charts(mixed_page, tmp_path)
    for c in charts:
        for a in ("x", "y"):
            if c[a]["type"] != "log":
                continue
            for value, text in c[a]["ticks"]:  # 2000 reads "2000" (or "2k"), never a bare "2"
                assert _number(text) == pytest.approx(value, rel=0.02), (c["title"], text, value)
    roof = charts[0]
    assert roof["title"].startswith("Roofline") and 0 < roof["legend"] <= 20
    assert any(t == "1000" for _, t in roof["y"]["ticks"])
    labels = {t.split(" ")[0]: box for t, *box in roof["labels"]}
    assert {"tensor", "SFU"} <= set(labels)


def test_sfu_and_tensor_labels_apart_at_d64(tmp_path_factory, tmp_path):
    d = tmp_path_factory.mktemp("d64")
    iosim("sweep", "--head-dim", "64", "--seqlen", "1024..16384", "--no-progress", "-o", str(d / "s.csv"))
    iosim("report", str(d / "s.csv"), "-o", str(d / "r.html"))
    roof = _charts(d / "r.html", tmp_path)[0]
    boxes = {t.split(" ")[0]: box for t, *box in roof["labels"]}
    (t_top, t_bottom, _, _), (s_top, s_bottom, _, _) = boxes["tensor"], boxes["SFU"]
    assert t_bottom <= s_top + 1 or s_bottom <= t_top + 1  # one above the other, not on top


@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_image_export_writes_each_chart(whatif_page, tmp_path, fmt):
    src = whatif_page.parent / "w.csv"
    out = tmp_path / "charts"
    r = runner.invoke(app, ["report", str(src), "-o", str(tmp_path / "r.html"), "--image-dir", str(out),
                            "--image-format", fmt])
    assert r.exit_code == 0, r.output
    files = sorted(out.iterdir())
    assert [f.name for f in files] == [f"{n}.{fmt}" for n in (
        "1-whatif-hbm_bandwidth_bytes_per_s", "2-whatif-smem_per_sm_bytes", "3-roofline", "4-io", "5-time",
        "6-tflops")]
    for f in files:
        body = f.read_bytes()
        if fmt == "png":
            assert body[:8] == b"\x89PNG\r\n\x1a\n" and len(body) > 30_000
            w, h = int.from_bytes(body[16:20], "big"), int.from_bytes(body[20:24], "big")
            assert (w, h) == (2400, 1280)
        else:
            text = body.decode()
            assert text.startswith("<svg") and text.rstrip().endswith("</svg>") and "Roofline" in \
                (out / "3-roofline.svg").read_text()


def test_committed_roofline_image_is_the_commands():
    """reports/h100-charts is made by docs/results.md's `iosim report ... --image-dir reports/h100-charts`."""
    readme = (REPO / "docs" / "results.md").read_text()
    assert "--image-dir reports/h100-charts" in readme
    png = (REPO / "reports" / "h100-charts" / "1-roofline.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
