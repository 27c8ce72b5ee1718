"""Each chart of a report as a PNG or SVG file, drawn by plotly.js's own exporter
(`Plotly.toImage`) in a headless Chromium: the browser the report's tests load the page in.
(plotly's `write_image` needs kaleido, which needs a Chrome of its own to be downloaded.)"""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.parse
from collections.abc import Sequence
from pathlib import Path

import plotly.io as pio
from plotly.offline import get_plotlyjs

from iosim.core.hardware import InputError
from iosim.core.output import write_atomic

FORMATS = ("png", "svg")
WIDTH, HEIGHT = 1200, 640  # pixels of each image (PNG: at scale 2)
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# a headless browser with no network: any attempt to reach one fails instead of waiting
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-default-apps", "--no-first-run", "--no-default-browser-check",
                  "--host-resolver-rules=MAP * ~NOTFOUND", "--virtual-time-budget=60000"]

# Draws each figure off screen, exports it, and writes the data URLs into the DOM for --dump-dom.
EXPORT_JS = """
(async function () {
  var figs = JSON.parse(document.getElementById('figs').textContent), out = [];
  for (var i = 0; i < figs.length; i++) {
    try {
      var div = document.createElement('div');
      document.body.appendChild(div);
      await Plotly.newPlot(div, figs[i].data, figs[i].layout, {staticPlot: true});
      out.push(await Plotly.toImage(div, {format: FORMAT, width: WIDTH, height: HEIGHT, scale: SCALE}));
      Plotly.purge(div);
    } catch (e) { out.push('error: ' + e); }
  }
  var pre = document.createElement('pre');
  pre.id = 'iosim-images';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
"""


def find_chromium() -> str | None:
    """A headless-capable Chromium: $IOSIM_CHROMIUM, else the first of CHROMIUM_NAMES on PATH."""
    env = os.environ.get("IOSIM_CHROMIUM")
    if env:
        return env if Path(env).is_file() else None
    return next(filter(None, map(shutil.which, CHROMIUM_NAMES)), None)


def run_chromium(chromium: str, args: Sequence[str], profile: Path, timeout: int = 300
                 ) -> subprocess.CompletedProcess:
    return subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=timeout)


def _decode(url: str, fmt: str) -> bytes:
    head, _, body = url.partition(",")
    if not head.startswith(f"data:image/{'svg+xml' if fmt == 'svg' else 'png'}"):
        raise InputError(f"image export: the browser returned no {fmt} ({url[:80]})")
    return base64.b64decode(body) if head.endswith(";base64") else urllib.parse.unquote(body).encode()


def export_images(figures: Sequence[tuple[str, dict]], out_dir: Path, fmt: str = "png") -> list[Path]:
    """Write each (name, {"data", "layout"}) figure to out_dir/name.fmt; return the paths."""
    if fmt not in FORMATS:
        raise InputError(f"--image-format {fmt}: allowed: {', '.join(FORMATS)}")
    chromium = find_chromium()
    if chromium is None:
        raise InputError("--image-dir needs a headless Chromium to draw the charts (apt-get install "
                         "chromium, or set IOSIM_CHROMIUM to its path)")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"--image-dir {out_dir}: {e.strerror or e}") from None
    figs = "[" + ",".join(pio.to_json(f, validate=False) for _, f in figures) + "]"  # numpy-aware
    figs = figs.replace("</", "<\\/")
    js = (EXPORT_JS.replace("FORMAT", json.dumps(fmt)).replace("WIDTH", str(WIDTH))
          .replace("HEIGHT", str(HEIGHT)).replace("SCALE", "2" if fmt == "png" else "1"))
    page = (f"<!DOCTYPE html><html><head><meta charset='utf-8'><script>{get_plotlyjs()}</script></head>"
            f"<body><script type='application/json' id='figs'>{figs}</script><script>{js}</script>"
            "</body></html>")
    with tempfile.TemporaryDirectory(prefix="iosim-images-") as tmp:
        src = Path(tmp) / "export.html"
        src.write_text(page, encoding="utf-8")
        run = run_chromium(chromium, ["--dump-dom", src.as_uri()], Path(tmp) / "profile")
    m = re.search(r'<pre id="iosim-images">(.*?)</pre>', run.stdout, re.S)
    if not m:
        tail = " ".join(run.stderr.strip().splitlines()[-1:])
        raise InputError(f"image export: {chromium} drew no images (exit {run.returncode}): {tail}")
    urls = json.loads(html.unescape(m.group(1)))
    paths = []
    for (name, _), url in zip(figures, urls, strict=True):
        body = _decode(url, fmt)
        paths.append(write_atomic(out_dir / f"{name}.{fmt}", lambda tmp, b=body: Path(tmp).write_bytes(b)))
    return paths
