"""The exponential off the MUFU in fa3's fp8 forward (fa3.cu's EXP2_H2 at 40e79ec; issue 24), from
committed files of experiments/fp8/speed15h:
- mufu.csv (mufu_rate.py): results per clock per SM of each form of the exponential and of the
  conversions around P, and each against ex2.approx.ftz.f32 (fa3.cu's fast_exp2);
- accuracy.csv (accuracy_h2.py): RMSE against float64 attention on the FA3 paper's outlier
  inputs per head_dim, causal, N and kind (the same inputs for every kind), each kind's over the
  Plan's kernel's (`base`); then the fp8 GPU tests' check per kind: cases passed of those run.
Usage: python tools/fp8_exp2.py experiments/fp8/h100/speed15h/c1/mufu.csv
       python tools/fp8_exp2.py experiments/fp8/h100/speed15h/c1/accuracy.csv"""

import sys

import pandas as pd


def rates(df: pd.DataFrame) -> str:
    f32 = df.set_index("form").results_per_clk_sm[0]
    out = df.set_index("name")[["results_per_op", "results_per_clk_sm"]]
    out["/ ex2.f32"] = out.results_per_clk_sm / f32
    return out.round(3).to_string()


def accuracy(df: pd.DataFrame) -> str:
    r = df[df.what == "rmse"]
    t = r.pivot_table(index=["head_dim", "causal", "seqlen"], columns="kind", values="rmse", sort=False)
    for k in t.columns.drop("base"):
        t[f"{k} / base"] = t[k] / t["base"]
    c = df[df.what == "check"].groupby("kind", sort=False).status
    checks = ", ".join(f"{k} {int((s == 'ok').sum())} of {len(s)}" for k, s in c)
    return t.to_string(float_format=lambda x: f"{x:.4g}") + f"\nfp8 GPU tests' check passed: {checks}"


def report(path: str) -> str:
    df = pd.read_csv(path)
    return rates(df) if "results_per_clk_sm" in df else accuracy(df)


if __name__ == "__main__":
    print(report(sys.argv[1]))
