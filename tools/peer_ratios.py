"""Print fa2's TFLOP/s ratio to each torch SDPA backend measured in the same run, naive's HBM
floor ratio, and the model's error table, from a committed measured.csv.
Usage: python tools/peer_ratios.py experiments/fwd_grid/h100/measured.csv [experiments/fwd_ncu/h100/measured_ncu.csv]"""

import sys

from iosim.analysis.accuracy import error_table
from iosim.analysis.measured import ratios
from iosim.core.rows import read_rows

PEERS = ["torch_flash", "torch_cudnn", "torch_efficient", "torch_math"]

df = read_rows(sys.argv[1])
w = ratios(df)
for (d, causal), g in w.groupby(level=["head_dim", "causal"]):
    parts = []
    for peer in PEERS:
        r = (g["fa2"] / g[peer]).dropna()
        big = r[r.index.get_level_values("seqlen_q") >= 2048]
        parts.append(f"{peer[6:]} {r.min():.2f}-{r.max():.2f} (N>=2048: {big.min():.2f}-{big.max():.2f})")
    print(f"d={d} causal={causal}: " + "; ".join(parts))
print(f"naive HBM floor / measured time: {w['naive/HBM floor'].min():.2f}-{w['naive/HBM floor'].max():.2f}")
print(f"fa1 TFLOP/s: {w['fa1'].min():.1f}-{w['fa1'].max():.1f}")
print(error_table(df, df)[["hw", "schedule", "n", "mape_pct", "worst_ape_pct"]].to_string(index=False))
ok = df[(df.schedule == "naive") & (df.status == "ok")]
print(f"cuBLAS QK+PV time / naive forward time: {(ok.cublas_ms / ok.time_ms).min():.2f}-"
      f"{(ok.cublas_ms / ok.time_ms).max():.2f}")
if len(sys.argv) > 2:  # a measured_ncu.csv: the L2-aware DRAM estimate against Nsight Compute
    n = read_rows(sys.argv[2])
    n = n[n.status == "ok"].assign(read_err=lambda x: x.dram_read_bytes / x.dram_read_bytes_ncu - 1,
                                   write_err=lambda x: x.dram_write_bytes / x.dram_write_bytes_ncu - 1)
    print(n.groupby("schedule")[["read_err", "write_err"]].agg(["min", "max"]).round(3).to_string())
