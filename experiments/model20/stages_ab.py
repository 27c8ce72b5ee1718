"""stages.py A/B: this tree and a base tree alternately, each `--rounds` rounds a run, the least
of each stage over the runs (CPU ms). python experiments/model20/stages_ab.py [RUNS] [BASE_TREE]"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

here = Path(__file__).resolve()
tree = here.parents[2]
runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
base = sys.argv[2] if len(sys.argv) > 2 else "/work/main"
best: dict = {}
with tempfile.TemporaryDirectory() as d:
    for _ in range(runs):
        for name, root in (("base", base), ("this", str(tree))):
            out = Path(d) / f"{name}.json"
            subprocess.run([sys.executable, str(tree / "experiments/sweep_speed/stages.py"), "--rounds", "7",
                            "--grid-rounds", "3", "--out", str(out)], check=True, capture_output=True,
                           env={**os.environ, "PYTHONPATH": root})
            for part, v in json.loads(out.read_text()).items():
                if isinstance(v, dict) and "ms" in v:
                    for stage, ms in v["ms"].items():
                        key = (name, part, stage)
                        best[key] = min(best.get(key, 1e99), ms)
for part in ("one", "batch", "grid"):
    for stage in ("whole", "model_time_alone", "limiter_search"):
        b, t = best[("base", part, stage)], best[("this", part, stage)]
        print(f"{part:6s} {stage:17s} base {b:9.4f} ms  this {t:9.4f} ms  x{b / t:.2f}")
