"""predict_many on cpu_ab.py's grid (1,920 problems x four schedules: 7,680 rows), with and
without the limiter: each tree in fresh processes, alternately, each process the best of 5
calls after one warm-up, CPU ms; the least over the runs.
python experiments/model20/grid_ab.py [RUNS] [BASE_TREE]"""
import os
import subprocess
import sys
from pathlib import Path

CHILD = """
import sys, time
import iosim
from iosim.analysis import predict as P
from iosim.core.hardware import load
hw = load("h100"); four = ["naive", "fa1", "fa2", "fa3"]
probs = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c)
         for n in (256, 512, 1024, 2048, 4096, 8192, 16384, 32768) for d in (64, 128, 256)
         for c in (False, True) for b in (1, 2, 4, 8, 16, 32, 64, 128) for h in (8, 16, 32, 64, 128)]
lim = sys.argv[1] == "1"
P.predict_many(probs, hw, four, limiter=lim)
out = []
for _ in range(5):
    t0 = time.process_time(); P.predict_many(probs, hw, four, limiter=lim); out.append(time.process_time() - t0)
print(min(out) * 1e3)
"""
tree = str(Path(__file__).resolve().parents[2])
runs = int(sys.argv[1]) if len(sys.argv) > 1 else 4
base = sys.argv[2] if len(sys.argv) > 2 else "/work/main"
res: dict = {}
for _ in range(runs):
    for name, root in (("base", base), ("this", tree)):
        for lim in ("1", "0"):
            v = float(subprocess.run([sys.executable, "-c", CHILD, lim], capture_output=True, text=True,
                                     env={**os.environ, "PYTHONPATH": root}, check=True).stdout)
            res.setdefault((name, lim), []).append(v)
for lim, label in (("1", "limiter"), ("0", "no limiter")):
    b, t = min(res[("base", lim)]), min(res[("this", lim)])
    print(f"grid {label:10s} base {b:8.2f} ms  this {t:8.2f} ms  x{b / t:.2f}")
