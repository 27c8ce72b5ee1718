"""fa3's TFLOP/s and its ratios to torch cuDNN, torch flash and our fa2, measured in the same run,
per (head_dim, causal, N), from a bench CSV (rows that failed their check show as missing).
Usage: python tools/fa3_ratios.py experiments/fa3/h100/measured_fa3.csv"""

import sys

import pandas as pd

df = pd.read_csv(sys.argv[1])
ok = df[df.status == "ok"]
t = ok.pivot_table(index=["head_dim", "causal", "seqlen_q"], columns="schedule", values="tflops")
if "fa3" not in t:  # every fa3 row failed: the peers' numbers still show
    t["fa3"] = float("nan")
cols = {"fa3": t["fa3"]}
for peer in ("torch_cudnn", "torch_flash", "fa2"):
    if peer in t:
        cols[f"fa3/{peer.removeprefix('torch_')}"] = t["fa3"] / t[peer]
for peer in ("torch_cudnn", "torch_flash", "fa2"):
    if peer in t:
        cols[peer.removeprefix("torch_")] = t[peer]
out = pd.DataFrame(cols)
pd.set_option("display.width", 160)
print(out.round(2).to_string())
print("\nN >= 4096, min-max:")
big = out[out.index.get_level_values("seqlen_q") >= 4096]
print(big.groupby(level=["head_dim", "causal"]).agg(["min", "max"]).round(2).to_string())
bad = df[df.schedule == "fa3"]
bad = bad[bad.status != "ok"]
if len(bad):
    print(f"\nfa3 rows not ok: {len(bad)}:", bad.status.astype(str).str[:80].value_counts().to_dict())
