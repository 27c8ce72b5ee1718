"""FA3 backward's dQ reduction from committed files. One file: experiments/fa3_bwd/dq_reduce.py's
CSV, TFLOP/s per variant (vector atomics, bulk reduce-add, deterministic) with cuDNN's beside
them, the variants' ratios to the atomics, and whether each variant's dQ accumulator had the same
bits on every run. Two files: a grid of fa3's backward (measured_bwd.csv) and the same grid in
its deterministic mode (`iosim bench --deterministic true`, measured_det.csv): the deterministic
mode's TFLOP/s and its ratio to the default kernel's.
Usage: python tools/fa3_dq.py experiments/fa3_bwd/h200/dq_reduce.csv
       python tools/fa3_dq.py experiments/fa3_bwd/h200/measured_bwd.csv experiments/fa3_bwd/h200/measured_det.csv"""

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
KEYS = ["head_dim", "causal", "seqlen_q"]


def _path(p: str) -> Path:
    return Path(p) if Path(p).exists() else ROOT / p


def variants(path: str) -> str:
    df = pd.read_csv(_path(path))
    out = [f"{df.gpu.iloc[0]}; status counts: {df.groupby(['variant', 'status']).size().to_dict()}"]
    ok = df[df.status == "ok"]
    w = ok.pivot_table(index=KEYS, columns="variant", values="tflops")
    for v in ("bulk", "deterministic", "torch_cudnn"):
        if v in w:
            w[f"{v}/atomic"] = w[v] / w["atomic"]
    bits = ok[ok.variant != "torch_cudnn"].groupby("variant").same_bits.agg(
        lambda s: f"{int(s.astype(str).str.lower().eq('true').sum())} of {len(s)}")
    out.append("same dQ accumulator bits on every run: " + "; ".join(f"{k} {v}" for k, v in bits.items()))
    for c in [c for c in w.columns if c.endswith("/atomic")]:
        for d, g in w[c].dropna().groupby(level="head_dim"):
            out.append(f"d={d}: {c} {g.min():.2f}-{g.max():.2f}")
    out.append(w.round(2).to_string())
    return "\n".join(out)


def det_cost(bwd: str, det: str) -> str:
    from iosim.core.rows import read_rows

    a, b = read_rows(_path(bwd)), read_rows(_path(det))
    a = a[(a.schedule == "fa3") & (a.status == "ok") & (a.get("deterministic", "") != "True")]
    b = b[(b.schedule == "fa3") & (b.status == "ok") & (b.deterministic == "True")]
    w = pd.concat([a.groupby(KEYS).tflops.first().rename("fa3"),
                   b.groupby(KEYS).tflops.first().rename("fa3 deterministic")], axis=1)
    w["deterministic/default"] = w["fa3 deterministic"] / w["fa3"]
    out = [f"{len(b)} deterministic rows ok, of {len(read_rows(_path(det)))}"]
    for (d, c), g in w["deterministic/default"].dropna().groupby(level=["head_dim", "causal"]):
        big = g[g.index.get_level_values("seqlen_q") >= 4096]
        out.append(f"d={d} causal={c}: deterministic/default {g.min():.2f}-{g.max():.2f} "
                   f"(N>=4096: {big.min():.2f}-{big.max():.2f})")
    out.append(w.round(2).to_string())
    return "\n".join(out)


def report(path: str, det: str | None = None) -> str:
    """What the command prints (tools/update_readme.py puts it in docs/results.md)."""
    return variants(path) if det is None else det_cost(path, det)


if __name__ == "__main__":
    print(report(*sys.argv[1:3]))
