"""A/B of busy.py's timings: each tree in its own process, alternating, best of rounds (CPU
time). python experiments/model20/ab.py [ROUNDS] [BASE_TREE] [grid]"""
import os
import re
import subprocess
import sys
from pathlib import Path

here = Path(__file__).resolve()
tree = str(here.parents[2])
rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
base = sys.argv[2] if len(sys.argv) > 2 else "/work/main"
best: dict = {}
for _ in range(rounds):
    for name, root in (("base", base), ("this", tree)):
        out = subprocess.run([sys.executable, str(here.parent / "busy.py"), *sys.argv[3:]], capture_output=True, text=True,
                             env={**os.environ, "PYTHONPATH": root}, check=True).stdout
        for label, v in re.findall(r"^(.*?) ([\d.]+) ms$", out, re.M):
            best[(name, label)] = min(best.get((name, label), 1e9), float(v))
for label in dict.fromkeys(k[1] for k in best):
    b, t = best[("base", label)], best[("this", label)]
    print(f"{label:14s} base {b:.4f} ms  this {t:.4f} ms  x{b / t:.2f}")
