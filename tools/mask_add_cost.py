"""What the causal mask costs PyTorch's unfused attention, measured or published against the
model: per (head_dim, N), the causal time minus the non-causal time of the same problem, and the
model's (its causal Plan's time minus its non-causal Plan's). Two sources: the papers' standard
attention (experiments/papers/published.csv, the FA3 paper's forward figures: `standard`) and
PyTorch's SDPA math backend measured on our H100 grid (experiments/fwd_grid/h100/measured.csv:
`torch_math`, fp32 passes). The mask is added by a broadcast add, which PyTorch runs on its
non-vectorised elementwise kernel (iosim.schedules.standard._mask_add).
Usage: python tools/mask_add_cost.py"""

import pandas as pd

from iosim.analysis.predict import row
from iosim.analysis.validate import preferred
from iosim.core import hardware
from iosim.core.problem import Problem
from iosim.core.rows import read_rows
from iosim.schedules import plan, standard


def pairs(df: pd.DataFrame, predict) -> pd.DataFrame:
    """Causal minus non-causal time per (head_dim, N) pair of rows, measured and predicted."""
    out = []
    for (d, n), g in df.groupby(["head_dim", "seqlen_q"]):
        if set(g.causal) != {True, False}:
            continue
        c, nc = g[g.causal].iloc[0], g[~g.causal].iloc[0]
        p = Problem(batch=int(c.batch), heads=int(c.heads), seqlen_q=int(n), head_dim=int(d),
                    dtype=c["dtype"], causal=True)
        pred = predict(p) - predict(p.model_copy(update={"causal": False}))
        out.append({"head_dim": d, "seqlen_q": n, "measured_ms": c.time_ms - nc.time_ms,
                     "model_ms": pred, "err_pct": 100 * (pred / (c.time_ms - nc.time_ms) - 1)})
    return pd.DataFrame(out)


def report() -> str:
    pub = read_rows("experiments/papers/published.csv")
    pub = pub[(pub.schedule == "standard") & (pub.direction == "fwd")]
    h100 = preferred("h100-sxm5-80gb")
    paper = pairs(pub, lambda p: row(plan("standard", p, h100), h100)["time_pred_ms"])
    grid = pd.read_csv("experiments/fwd_grid/h100/measured.csv")
    grid = grid[(grid.schedule == "torch_math") & (grid.status == "ok")]
    cal = hardware.load("h100")
    math = pairs(grid, lambda p: row(standard.torch_math(p, cal), cal)["time_pred_ms"])
    parts = []
    for name, t in (("the papers' standard attention (FA3 Fig. 5, H100, fp16; measured = published)", paper),
                    ("torch_math (our H100 grid, bf16 inputs, fp32 passes)", math)):
        parts.append(f"{name}: causal minus non-causal time, ms; mean error "
                     f"{t.err_pct.mean():+.1f}%, mean |error| {t.err_pct.abs().mean():.1f}%\n"
                     + t.round(3).to_string(index=False))
    return "\n\n".join(parts)


if __name__ == "__main__":
    print(report())
