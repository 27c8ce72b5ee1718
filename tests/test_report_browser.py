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
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from iosim.cli import app

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
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

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--no-first-run", "--no-default-browser-check",
         "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=60000"]


def chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=300)


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
    iosim("sweep", "--seqlen", "512..32768", "--set", "hbm_bandwidth_bytes_per_s=3.35e12,4.8e12,8e12",
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
          "--direction", "both", "--batch", "1,4,16", "--heads", "16,32", "--schedule", "all",
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
