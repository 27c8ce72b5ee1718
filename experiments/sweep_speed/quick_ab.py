"""A quick CPU-time A/B of `iosim.predict` (its DataFrame) between trees, in alternate runs.

    python experiments/sweep_speed/quick_ab.py TREE [TREE ...] [--rounds 5]

Each tree runs in its own fresh process (PYTHONPATH the tree), one after the other, `--rounds`
times. Each run prints the CPU ms per call, the best of 7 rounds of 50 calls, for:
the record problem (b4 h32 N4096 d128); the same problem causal; the mean over 24 distinct
problems called in turn (nothing remembered of one problem serves the next); and
`predict_rows` of the record problem. The medians of the runs are printed per tree.
(Session 21's helpers' A/Bs, e.g. `trip21/quick_ab.log`, ran this script from /work/notes.)
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep_speed import PROBLEM_SETS  # noqa: E402

SNIP = r'''
import json, time
import iosim
from iosim.analysis import predict as P
from iosim.core.hardware import load
hw = load("h100"); four = ["naive", "fa1", "fa2", "fa3"]
rec = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
PROBLEM_SETS
cau, var = causal, varied
for p in [rec, cau] + var: P.predict(p, hw, four)
def best(f, n=50, k=7):
    o = []
    for _ in range(k):
        t = time.process_time()
        for _ in range(n): f()
        o.append((time.process_time() - t) / n)
    return min(o) * 1e3
def cyc():
    for p in var: P.predict(p, hw, four)
print(json.dumps({"record": best(lambda: P.predict(rec, hw, four)), "causal": best(lambda: P.predict(cau, hw, four)),
                  "varied": best(cyc, 2) / len(var), "rows": best(lambda: P.predict_rows(rec, hw, four))}))
'''.replace("PROBLEM_SETS\n", PROBLEM_SETS)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    res: dict = {t: [] for t in a.trees}
    for _ in range(a.rounds):
        for t in a.trees:
            out = subprocess.run([sys.executable, "-c", SNIP], cwd=t, env={**os.environ, "PYTHONPATH": t},
                                 capture_output=True, text=True, check=True).stdout
            res[t].append(json.loads(out))
    for t in a.trees:
        med = {k: statistics.median(x[k] for x in res[t]) for k in res[t][0]}
        print(t, " ".join(f"{k} {v:.3f}" for k, v in med.items()), f"(CPU ms, medians of {a.rounds} runs)")


if __name__ == "__main__":
    main()
