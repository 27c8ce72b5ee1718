"""fa3's backward with LSE/D loaded a step ahead (fa3pf) against the kernel before it (base),
both timed twice in one GPU call, alternately (run_ab.sh: round 1 with torch's backends beside
them, round 2 without), and the ratio of each to torch cuDNN's backward of round 1.
Usage: python experiments/fa3_bwd/h200/prefetch/ab.py [FOLDER]"""

import sys
from pathlib import Path

import pandas as pd

HERE = Path(__file__).parent
KEY = ["head_dim", "causal", "seqlen_q"]


def report(folder: str = str(HERE)) -> str:
    runs = []
    for tree in ("fa3pf", "base"):
        for r in (1, 2):
            d = pd.read_csv(Path(folder) / f"{tree}_r{r}.csv")
            runs.append(d[d.status == "ok"].assign(tree=tree, round=r))
    d = pd.concat(runs)
    fa3 = d[d.schedule == "fa3"].pivot_table(index=KEY, columns=["tree", "round"], values="tflops")
    fa3.columns = [f"{t} r{r}" for t, r in fa3.columns]
    out = fa3[["base r1", "fa3pf r1", "base r2", "fa3pf r2"]].copy()
    out["gain r1"] = out["fa3pf r1"] / out["base r1"]
    out["gain r2"] = out["fa3pf r2"] / out["base r2"]
    cudnn = d[(d.schedule == "torch_cudnn") & (d.tree == "fa3pf") & (d["round"] == 1)].set_index(KEY).tflops
    out["fa3pf/cudnn"] = out["fa3pf r1"] / cudnn
    out["base/cudnn"] = out["base r1"] / cudnn
    return out.round(3).to_string()


if __name__ == "__main__":
    print(report(*sys.argv[1:2]))
