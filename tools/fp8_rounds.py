"""fa3's fp8 attention-kernel variants timed in interleaved rounds beside the Plan's kernel
(experiments/fp8/speed12/variants.py's CSV): per variant the median TFLOP/s over its rounds,
their spread (max - min, percent of the median), and against the `base` variant of its shape
(head_dim, N; the Plan's kernel, timed in the same rounds) the median of the per-round ratios
and the number of rounds it was faster; the variants that failed their check, not timed.
Usage: python tools/fp8_rounds.py experiments/fp8/h100/speed12/round1/variants.csv"""

import sys

import pandas as pd


def report(path: str) -> str:
    df = pd.read_csv(path, dtype={"defines": str}).fillna({"defines": ""})
    ok = df[df.status == "ok"].copy()
    shape = list(zip(ok.head_dim, ok.seqlen, ok["round"]))
    base = ok[ok.kind == "base"].set_index(["head_dim", "seqlen", "round"]).attn_tflops
    ok["ratio"] = [t / base.get(s, float("nan")) for t, s in zip(ok.attn_tflops, shape)]
    g = ok.groupby("variant", sort=False)
    out = g[["head_dim", "seqlen", "block_n", "stages", "defines"]].first()
    out["attn"] = g.attn_tflops.median()
    out["spread %"] = (g.attn_tflops.max() - g.attn_tflops.min()) / out.attn * 100
    out["rounds"] = g.size()
    out["/ base"] = g.ratio.median()
    out["won"] = g.ratio.apply(lambda x: int((x > 1).sum()))
    bad = df[df.status != "ok"][["variant", "status"]]
    text = out.round(3).to_string()
    return text + ("" if bad.empty else "\nnot timed:\n" + bad.to_string(index=False))


if __name__ == "__main__":
    print(report(sys.argv[1]))
