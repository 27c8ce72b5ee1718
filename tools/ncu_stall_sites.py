"""Where a kernel's warps wait: the SASS instructions with the most Nsight Compute stall samples
(`ncu --page source --print-source sass --csv`, as experiments/fa3_bwd/ncu_source.sh writes it),
each with its share of all samples, its main stall reason and the instruction before it (the
one a wait on a register or a barrier usually belongs to), and the share per stall reason.
Usage: python tools/ncu_stall_sites.py experiments/fa3_bwd/h100/ncu_source_d128.csv [TOP]"""

import io
import sys

import pandas as pd

SAMPLES = "Warp Stall Sampling (All Samples)"


def read(path: str) -> pd.DataFrame:
    lines = open(path).read().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"Address"'))
    df = pd.read_csv(io.StringIO("\n".join(lines[start:])))
    reasons = [c for c in df.columns if c.startswith("stall_") and "Not Issued" not in c]
    df[[SAMPLES, *reasons]] = df[[SAMPLES, *reasons]].apply(pd.to_numeric, errors="coerce").fillna(0)
    return df.assign(reason=df[reasons].idxmax(axis=1).str.removeprefix("stall_"))


def report(path: str, top: str = "12") -> str:
    df = read(path)
    total = df[SAMPLES].sum()
    reasons = [c for c in df.columns if c.startswith("stall_") and "Not Issued" not in c]
    by_reason = (df[reasons].sum() / total * 100).sort_values(ascending=False)
    out = [f"{int(total):,} samples; by stall reason (%): " + ", ".join(
        f"{r.removeprefix('stall_')} {v:.1f}" for r, v in by_reason.items() if v >= 1.0), ""]
    for i in df[SAMPLES].nlargest(int(top)).index:
        before = df.Source[i - 1].strip() if i > 0 else ""
        out.append(f"{df[SAMPLES][i] / total * 100:5.1f}%  {df.reason[i]:<14} {df.Source[i].strip()[:60]:<60}"
                   f"  after: {before[:48]}")
    return "\n".join(out)


if __name__ == "__main__":
    print(report(*sys.argv[1:3]))
