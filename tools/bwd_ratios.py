"""The backward's closing numbers from a committed measured_bwd.csv: a schedule's (default fa2)
TFLOP/s ratio to torch's flash and cuDNN backward measured in the same run, per (d, causal),
fa1's TFLOP/s and its ratio to fa2 (where the file has fa1 rows), and naive's HBM floor ratio.
Usage: python tools/bwd_ratios.py experiments/bwd_grid/h100/measured_bwd.csv [SCHEDULE]"""

import sys

from iosim.analysis.measured import ratios
from iosim.core.rows import read_rows


def report(path: str, s: str = "fa2") -> str:
    """What the command prints (tools/update_readme.py puts it in the README)."""
    out = []
    df = read_rows(path)
    df = df[df.direction == "bwd"]
    out.append(f"status counts: {df.groupby(['schedule', 'status']).size().to_dict()}")
    w = ratios(df, (s,))
    for (d, causal), g in w.groupby(level=["head_dim", "causal"]):
        parts = []
        for peer in ("flash", "cudnn"):
            r = g.get(f"{s}/{peer}")
            if r is None or r.dropna().empty:
                parts.append(f"{peer}: none")
                continue
            r = r.dropna()
            big = r[r.index.get_level_values("seqlen_q") >= 2048]
            parts.append(f"{peer} {r.min():.2f}-{r.max():.2f} (N>=2048: {big.min():.2f}-{big.max():.2f})")
        ts = g[s].dropna() if s in g else []
        tf = f"{s} {ts.min():.0f}-{ts.max():.0f} TFLOP/s" if len(ts) else f"{s}: none"
        out.append(f"d={d} causal={causal}: {tf}; {s}/" + f"; {s}/".join(parts))
        if s != "fa2" and "fa2" in g and not g["fa2"].dropna().empty:
            r = (g[s] / g["fa2"]).dropna()
            out.append(f"d={d} causal={causal}: {s}/fa2 {r.min():.2f}-{r.max():.2f}")
        if "fa1" in g and not g["fa1"].dropna().empty:
            fa1 = g["fa1"].dropna()
            r = (g["fa1"] / g["fa2"]).dropna() if "fa2" in g else fa1.iloc[:0]
            ratio = f"; fa1/fa2 {r.min():.2f}-{r.max():.2f}" if len(r) else "; fa1/fa2: none"
            out.append(f"d={d} causal={causal}: fa1 {fa1.min():.0f}-{fa1.max():.0f} TFLOP/s{ratio}")
    if "naive/HBM floor" in w:
        f = w["naive/HBM floor"].dropna()
        big = f[f.index.get_level_values("seqlen_q") >= 4096]
        out.append(f"naive HBM floor / measured time: {f.min():.2f}-{f.max():.2f} (N>=4096: "
                   f"{big.min():.2f}-{big.max():.2f})")
    out.append(w.round(2).to_string())
    return "\n".join(out)


if __name__ == "__main__":
    print(report(*sys.argv[1:3]))
