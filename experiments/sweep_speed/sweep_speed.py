"""How fast is a large sweep? Writes experiments/sweep_speed/sweep_speed.json.

The grid: the issue's example (N = 512..131072, d = 64,128,256, causal both, all four
schedules, forward) widened with batch 1..64 and heads 8..64 on two Hopper profiles (fa3
runs on both): 9 x 3 x 2 x 7 x 4 x 2 x 4 = 12,096 points. Each repetition runs in a fresh
process (cold caches), and is timed two ways: `iosim.sweep(grid)` after import (the
Python API, which is what "a sweep" costs), and the whole CLI command writing CSV
(interpreter start and imports included).

    python experiments/sweep_speed/sweep_speed.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GRID = {"seqlen": "512..131072", "head_dim": "64,128,256", "causal": "both", "batch": "1..64",
        "heads": "8,16,32,64", "schedule": "all", "direction": "fwd",
        "hw": "h100-sxm5-80gb,h200-sxm-141gb"}
API = """
import json, time
t0 = time.perf_counter()
import iosim
t1 = time.perf_counter()
df = iosim.sweep(json.loads({grid!r}))
t2 = time.perf_counter()
print(json.dumps({{"points": len(df), "import_s": t1 - t0, "sweep_s": t2 - t1}}))
"""


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(Path(__file__).with_suffix(".json")))
    args = ap.parse_args()
    api, cli = [], []
    for _ in range(args.repeat):
        r = subprocess.run([sys.executable, "-c", API.format(grid=json.dumps(GRID))],
                           capture_output=True, text=True, check=True)
        api.append(json.loads(r.stdout.strip().splitlines()[-1]))
        with tempfile.TemporaryDirectory() as d:
            cmd = [sys.executable, "-c", "from iosim.cli import main; main()", "sweep",
                   "--no-progress", "-o", os.path.join(d, "sweep.csv")]
            for k, v in GRID.items():
                cmd += [f"--{k.replace('_', '-')}", v]
            t0 = time.perf_counter()
            subprocess.run(cmd, capture_output=True, text=True, check=True)
            cli.append(time.perf_counter() - t0)
    points = api[0]["points"]
    result = {
        "points": points,
        "grid": GRID,
        "seconds": statistics.median(a["sweep_s"] for a in api),
        "seconds_all": [round(a["sweep_s"], 3) for a in api],
        "points_per_second": points / statistics.median(a["sweep_s"] for a in api),
        "import_seconds": statistics.median(a["import_s"] for a in api),
        "cli_seconds_with_csv": statistics.median(cli),
        "machine": {"cpu": cpu_name(), "cpus": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "date": time.strftime("%Y-%m-%d"),
    }
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"{points} points: {result['seconds']:.2f} s in iosim.sweep "
          f"({result['points_per_second']:.0f} points/s), "
          f"{result['cli_seconds_with_csv']:.2f} s for the CLI writing CSV "
          f"on {result['machine']['cpus']} CPUs ({result['machine']['cpu']})")


if __name__ == "__main__":
    main()
