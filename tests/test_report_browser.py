"""The report page in a real headless browser (Debian's `chromium`): it loads from disk with no
JavaScript error, every plot draws its SVG, the menus work, and nothing is fetched from a network.

Chromium runs with every host name mapped to "not found", so any attempt to reach a network would
fail and show as an error event; the page's resource list must hold nothing but the file itself.
A screenshot is saved under the test's tmp dir for people to look at.
"""

from __future__ import annotations

import html
import itertools
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from iosim import Problem, load_hw, predict
from iosim.report import report_command

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's `chromium` (apt-get install "
                                "chromium; .ci/run installs it)")

# Injected first in <head> of a copy of the report: records errors from the start, then after
# load checks every plot, drives every menu option and writes the findings into the DOM.
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
  function visiblePoints(gd) {
    return gd.data.filter(function (t) { return t.meta && t.meta.dims && t.visible !== false; })
                  .reduce(function (n, t) { return n + t.x.length; }, 0);
  }
  function change(s, v) { s.value = v; s.dispatchEvent(new Event('change')); }
  window.addEventListener('load', function () {
    setTimeout(function () {
      var out = {errors: errs, plots: [], menus: {}, nfilter: null, resources: []};
      document.querySelectorAll('.plotly-graph-div').forEach(function (gd) {
        out.plots.push({id: gd.id, svgs: gd.querySelectorAll('.main-svg').length,
                        paths: gd.querySelectorAll('.scatterlayer path').length,
                        points: gd.querySelectorAll('.scatterlayer .point').length,
                        title: (gd.querySelector('.gtitle') || {}).textContent || ''});
      });
      var sels = Array.prototype.slice.call(document.querySelectorAll('select.iosim-filter'));
      var roof = document.querySelector('.plotly-graph-div');
      var nsel = sels.filter(function (s) { return s.dataset.dim === 'seqlen_k'; })[0];
      if (nsel && roof) {
        var before = visiblePoints(roof);
        change(nsel, nsel.options[1].value);
        out.nfilter = {before: before, after: visiblePoints(roof)};
        change(nsel, '__all__');
        out.nfilter.restored = visiblePoints(roof);
      }
      sels.forEach(function (s) {
        var orig = s.value;
        out.menus[s.dataset.dim] = s.options.length;
        for (var i = 0; i < s.options.length; i++) change(s, s.options[i].value);
        change(s, orig);
      });
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
         "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=15000"]


def chromium(args: list[str], profile: Path) -> subprocess.CompletedProcess:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    """A report from predictions on two GPUs, a what-if sweep, and measured rows (with a torch
    peer and a failed row), written through the CLI entry point."""
    d = tmp_path_factory.mktemp("report")
    h100, a100 = load_hw("h100"), load_hw("a100")
    pred = pd.concat([predict(Problem(batch=2, heads=8, seqlen_q=n, head_dim=hd, causal=c), hw)
                      for hw, n, hd, c in itertools.product([h100, a100], [512, 1024, 2048, 4096],
                                                             [64, 128], [False, True])])
    whatif = pd.concat([predict(Problem(batch=2, heads=8, seqlen_q=n), h100.with_changes(l2_bytes=l2),
                                ["fa2", "fa3"]).assign(set_l2_bytes=l2)
                        for l2, n in itertools.product([25 << 20, 50 << 20, 100 << 20], [1024, 4096])])
    m = pred[(pred.hw == h100.name) & pred.schedule.isin(["naive", "fa2", "fa3"])].copy()
    m["time_ms"] = m.time_pred_ms * np.linspace(0.8, 1.3, len(m))
    m["tflops"] = m.tflops_pred * 0.9
    m["dram_read_bytes_ncu"], m["dram_write_bytes_ncu"] = m.dram_read_bytes * 1.1, m.dram_write_bytes
    m["max_rel_err"], m["status"], m["gpu_name"] = 2e-3, "ok", h100.gpu_name
    peer = m[m.schedule == "fa2"].assign(schedule="torch_cudnn", dram_read_bytes_ncu=np.nan,
                                         dram_write_bytes_ncu=np.nan)
    m = pd.concat([m, peer])
    m.iloc[0, m.columns.get_loc("status")] = "wrong_result"
    files = [d / "sweep.csv", d / "whatif.csv", d / "measured.csv"]
    pred.to_csv(files[0], index=False)
    whatif.to_csv(files[1], index=False)
    keep = ["hw", "schedule", "direction", "batch", "heads", "kv_heads", "seqlen_q", "seqlen_k", "head_dim",
            "dtype", "causal", "time_ms", "tflops", "dram_read_bytes_ncu", "dram_write_bytes_ncu",
            "max_rel_err", "status", "gpu_name"]
    m[keep].to_csv(files[2], index=False)
    out = d / "report.html"
    report_command(files, out)
    return out


def test_html_fetches_nothing_from_a_network(report):
    text = report.read_text()
    tags = re.findall(r"<(?:script|link|img|iframe|source)\b[^>]*>", text)
    assert tags, "the page should hold its scripts inline"
    assert not [t for t in tags if re.search(r"(src|href)\s*=", t)], "no external script/link/img"


def test_page_renders_in_chromium_without_errors(report, tmp_path):
    page = tmp_path / "probe.html"
    page.write_text(report.read_text().replace("<head>", "<head>" + PROBE, 1))
    run = chromium(["--dump-dom", page.as_uri()], tmp_path / "profile")
    m = re.search(r'<pre id="iosim-probe">(.*?)</pre>', run.stdout, re.S)
    assert m, f"probe did not report (rc {run.returncode}); stderr tail:\n{run.stderr[-2000:]}"
    out = json.loads(html.unescape(m.group(1)))
    assert out["errors"] == []
    # 2 rooflines, IO, time, TFLOP/s, accuracy, what-if
    assert len(out["plots"]) == 7, out["plots"]
    for p in out["plots"]:
        assert p["svgs"] >= 1 and p["paths"] > 0, f"plot not drawn: {p}"
    assert sum(p["points"] for p in out["plots"]) > 100
    assert [p["title"] for p in out["plots"]][:2] == ["Roofline: a100-sxm4-80gb (NVIDIA A100-SXM4-80GB)",
                                                      "Roofline: h100-sxm5-80gb (NVIDIA H100 80GB HBM3)"]
    # menus for every dimension that varies; choosing one N keeps fewer roofline points
    assert set(out["menus"]) == {"hw", "causal", "head_dim", "set_l2_bytes", "seqlen_k"}
    nf = out["nfilter"]
    assert 0 < nf["after"] < nf["before"] == nf["restored"]
    # nothing but the page itself was loaded
    assert [r for r in out["resources"] if not r.startswith(("file:", "data:", "blob:"))] == []
    assert "Uncaught" not in run.stderr


def test_screenshot(report, tmp_path):
    shot = tmp_path / "report.png"
    run = chromium(["--window-size=1400,2400", f"--screenshot={shot}", report.as_uri()], tmp_path / "profile")
    assert shot.is_file() and shot.stat().st_size > 50_000, run.stderr[-2000:]
    print(f"screenshot: {shot}")
