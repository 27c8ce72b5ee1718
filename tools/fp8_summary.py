"""fa3's fp8_e4m3 forward beside bf16 fa3 and torch's best bf16 SDPA backend, measured in the same
run, per (head_dim, causal, N), from a bench CSV: TFLOP/s of the whole Plan (quantisation from
bf16 with one scale per tile, then attention) and of the attention kernel alone (`attn_ms`), and
the ratios. Rows with other scalings or the Hadamard rotation are left out; rows that failed their
check show as missing.
Usage: python tools/fp8_summary.py experiments/fp8/h200/measured_fp8.csv"""

import sys

import pandas as pd


def report(path: str) -> str:
    df = pd.read_csv(path)
    ok = df[df.status == "ok"].copy()
    quant = ok.get("fp8_scaling", pd.Series("", index=ok.index)).fillna("")
    plain = ok.get("hadamard", pd.Series(False, index=ok.index)).astype(str) != "True"
    ok = ok[plain & quant.isin(["", "block"])]
    key = ["head_dim", "causal", "seqlen_q"]
    fp8 = ok[(ok.schedule == "fa3") & (ok.dtype == "fp8_e4m3")].set_index(key)
    bf16 = ok[(ok.schedule == "fa3") & (ok.dtype == "bf16")].set_index(key)
    torch = ok[ok.schedule.isin(["torch_cudnn", "torch_flash", "torch_efficient"])]
    best = torch.groupby(key).tflops.max()
    out = pd.DataFrame({"fp8": fp8.tflops, "fp8 attn": fp8.tflops * fp8.time_ms / fp8.attn_ms,
                        "bf16 fa3": bf16.tflops, "best torch": best})
    out["fp8/bf16 fa3"] = out["fp8"] / out["bf16 fa3"]
    out["fp8/best torch"] = out["fp8"] / out["best torch"]
    return out.round(2).to_string()


if __name__ == "__main__":
    print(report(sys.argv[1]))
