"""The issue's sweep grid (19,800 points) in one process, `sweep_result(grid, workers=1)` twice,
points per CPU second of each call: the tree at 7318be2 and this one in alternate fresh
processes, three times (cpu_ab.json's sweep row moved 0.95 between them; this checks it).

    python experiments/sweep_speed/session24/sweep_ab.py <7318be2 worktree> /work/main > experiments/sweep_speed/session24/sweep_ab.log
"""

import subprocess
import sys

CHILD = """
import time
from iosim.analysis import sweep
grid = {"seqlen": "256..131072", "head_dim": "64,128,256", "causal": "both", "batch": "1..32",
        "heads": "8..128", "schedule": "all", "direction": "fwd", "hw": "h100,a100"}
got = []
for _ in range(2):
    t0 = time.process_time()
    n = len(sweep.sweep_result(grid, workers=1).rows)
    got.append(round(n / (time.process_time() - t0)))
print(n, "points;", "first call", got[0], "second call", got[1], "points per CPU s")
"""

for _ in range(3):
    for tree in sys.argv[1:]:
        r = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True,
                           env={"PYTHONPATH": tree, "PATH": "/usr/bin:/bin"})
        print(tree, r.stdout.strip(), flush=True)
