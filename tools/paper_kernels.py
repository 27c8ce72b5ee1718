"""The papers' published speed, the model's and our kernels' on the same settings (issue 22).

    python tools/paper_kernels.py experiments/papers/published.csv [MEASURED.csv ...]

For each H100 figure of the FA2 and FA3 papers that publishes TFLOP/s of FlashAttention (fa1),
FlashAttention-2 (fa2) or FlashAttention-3 (fa3): per schedule, the published TFLOP/s, the
model's fresh prediction against them (MAPE of the time, as `iosim validate`) and our kernel's measured TFLOP/s
on the same N, d, causal and direction (the papers' batch x N = 16k and 2048 / d heads are the
committed grids' too; the papers ran fp16, our grids bf16; fp8 figures against our fp8 rows, the
whole Plan's time, quantisation included, where N matches), as a ratio to the paper's. fwd+bwd
figures take our forward and backward rows of the point (the FLOPs of both over the sum of the
times); fa1 only the fair kernel's rows (a split recorded). The measured files are read in the
order given; a later file's point replaces an earlier one's.
"""

from __future__ import annotations

import sys

import pandas as pd

MEASURED = ["experiments/fwd_grid/h100/measured.csv", "experiments/bwd_grid/h100/measured_bwd.csv",
            "experiments/fa1_fair/h100/measured_fa1.csv", "experiments/fa3/h100/measured_fa3.csv",
            "experiments/fa3_bwd/h100/recheck/measured_bwd.csv", "experiments/fa3_bwd/h100/dqwarp/measured_bwd.csv",
            "experiments/fp8/h100/recheck/measured_fp8.csv"]
POINT = ["schedule", "direction", "seqlen_q", "head_dim", "causal", "fp8"]


def _measured(paths: list[str]) -> pd.DataFrame:
    """Our H100 rows (status ok), the last file's where two hold a point; fp8 rows apart."""
    rows = []
    for i, path in enumerate(paths):
        df = pd.read_csv(path)
        df = df[(df.status == "ok") & df.schedule.isin(["fa1", "fa2", "fa3"])
                & df.hw.str.startswith("h100")]
        # fa1: the fair kernel's rows only (a query-row or key-block split recorded; the
        # committed H100 backward grid ran one CTA a head)
        split = df[[c for c in ("split_rows", "split_cols") if c in df]].notna().any(axis=1)
        df = df[(df.schedule != "fa1") | split]
        if "fp8_scaling" in df:  # the default quantisation only (per tile, no Hadamard)
            fp8 = df.dtype == "fp8_e4m3"
            df = df[~fp8 | ((df.fp8_scaling == "block") & (df.hadamard.astype(str) != "True"))]
        rows.append(df.assign(order=i, fp8=df.dtype == "fp8_e4m3",
                              batch_ok=df.batch * df.seqlen_q == 16384,
                              heads_ok=df.heads * df.head_dim == 2048))
    df = pd.concat(rows, ignore_index=True)
    df = df[df.batch_ok & df.heads_ok]
    df["flops"] = df.tflops * df.time_ms * 1e9  # FLOPs of the row (FlashAttention's convention)
    return df.sort_values("order").drop_duplicates(POINT, keep="last")


def _ours(m: pd.DataFrame, r) -> float:
    """Our kernel's TFLOP/s at the published row's point (NaN: not measured)."""
    def one(direction):
        hit = m[(m.schedule == r.schedule) & (m.direction == direction) & (m.seqlen_q == r.seqlen_q)
                & (m.head_dim == r.head_dim) & (m.causal == r.causal) & (m.fp8 == (r.dtype == "fp8_e4m3"))]
        return hit.iloc[0] if len(hit) else None

    parts = [one("fwd"), one("bwd")] if r.direction == "fwd+bwd" else [one(r.direction)]
    if any(p is None for p in parts):
        return float("nan")
    return sum(p.flops for p in parts) / sum(p.time_ms for p in parts) / 1e9


def report(published: str, *measured: str) -> str:
    from iosim.analysis.validate import repredict

    pub = pd.read_csv(published)
    pub = pub[(pub.published_unit == "TFLOP/s") & pub.hw.str.startswith("h100")
              & pub.schedule.isin(["fa1", "fa2", "fa3"])].reset_index(drop=True)
    pred = []
    for r in pub.itertuples(index=False):  # the model as validate re-predicts the row
        one = repredict(pd.DataFrame([r._asdict()]))
        pred.append(float(one.time_pred_ms.iloc[0]))
    pub["pred_ms"] = pred
    m = _measured(list(measured) or MEASURED)
    pub["ours_tflops"] = [_ours(m, r) for r in pub.itertuples(index=False)]
    out = []
    for (paper, fig, s), g in pub.groupby(["paper", "figure", "schedule"], sort=False):
        model = ((g.pred_ms - g.time_ms).abs() / g.time_ms * 100).mean()  # validate's, on time
        ratio = (g.ours_tflops / g.tflops).dropna()
        out.append({"paper": paper, "figure": fig, "schedule": s, "n": len(g),
                    "paper_tflops": f"{g.tflops.min():.0f}-{g.tflops.max():.0f}",
                    "model_mape_pct": round(model, 1),
                    "ours_n": len(ratio),
                    "ours_over_paper": f"{ratio.min():.2f}-{ratio.max():.2f}" if len(ratio) else ""})
    return pd.DataFrame(out).to_string(index=False)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python tools/paper_kernels.py PUBLISHED.csv [MEASURED.csv ...]")
    print(report(sys.argv[1], *sys.argv[2:]))
