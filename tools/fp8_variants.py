"""fa3's fp8 forward variants timed in interleaved rounds (experiments/fp8/speed10/variants.py's
CSV): per variant the medians over its rounds of TFLOP/s, the whole Plan and the attention kernel
alone, the spread of the latter (max - min over the rounds, percent of its median), and, for a
variant with a `main_` peer of the same shape (main's kernel at main's tiles, timed in the same
rounds), the ratios of both medians to the peer's.
Usage: python tools/fp8_variants.py experiments/fp8/h100/speed11/candidate/variants.csv"""

import sys

import pandas as pd

SHAPE = ["head_dim", "seqlen", "causal"]


def report(path: str) -> str:
    df = pd.read_csv(path, dtype={"defines": str}).fillna({"defines": ""})
    ok = df[df.status == "ok"]
    g = ok.groupby("variant", sort=False)
    out = g[SHAPE + ["block_n", "defines"]].first()
    out["plan"] = g.tflops.median()
    out["attn"] = g.attn_tflops.median()
    out["spread %"] = (g.attn_tflops.max() - g.attn_tflops.min()) / out.attn * 100
    out["rounds"] = g.size()
    peers = out[out.index.str.startswith("main_")].reset_index().set_index(SHAPE)
    shapes = list(out[SHAPE].itertuples(index=False, name=None))
    for col in ("plan", "attn"):
        out[f"{col} / main"] = [v / peers[col].get(s, float("nan")) for v, s in zip(out[col], shapes)]
    bad = df[df.status != "ok"][["variant", "status"]]
    text = out.round(3).to_string()
    return text + ("" if bad.empty else "\nnot timed:\n" + bad.to_string(index=False))


if __name__ == "__main__":
    print(report(sys.argv[1]))
