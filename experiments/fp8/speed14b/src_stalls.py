"""Where the warps of fa3's fp8 attention kernel stall, per SASS instruction: Nsight Compute's
source page (`ncu -i REP --page source --csv --print-source sass`, warp-state sampling with the
stall reason of each sample) summed by reason, by region of the consumer's main loop and by
opcode, and the instructions that carry most samples.

    python3 experiments/fp8/speed14b/src_stalls.py SRC_SASS.csv [--top N]

Regions follow the SASS itself (the one-tile kernel's loop, from its turn's BAR.SYNC to the
backward branch): `turn` (BAR.SYNC of the GEMM turn to the turn's BAR.ARV: S GEMM issued, V
waited for, O rescaled, P V issued), `softmax` (from there to the loop's branch back), and
`other` (prologue, producer, epilogue). A sample's reason is the column stall_<reason>; `selected`
is a sample that issued.
"""

from __future__ import annotations

import io
import re
import sys

import pandas as pd


def load(path: str) -> pd.DataFrame:
    lines = open(path).read().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith('"Address"'))
    df = pd.read_csv(io.StringIO("\n".join(lines[start:])), dtype=str)
    stall = [c for c in df.columns if c.startswith("stall_") and "(Not Issued)" not in c]
    for c in stall + ["Warp Stall Sampling (All Samples)", "Instructions Executed"]:
        df[c] = pd.to_numeric(df[c].str.replace(",", ""), errors="coerce").fillna(0)
    df["addr"] = df["Address"].apply(lambda a: int(str(a), 16) if re.fullmatch(r"(0x)?[0-9a-fA-F]+", str(a)) else -1)
    df["op"] = df["Source"].str.strip().str.replace(r"^@!?U?P[T0-9]+\s+", "", regex=True).str.split(r"[\s.]").str[0]
    return df.sort_values("addr").reset_index(drop=True), stall


def regions(df: pd.DataFrame) -> pd.Series:
    """The main loop: the backward branch with the largest span whose body holds QGMMAs."""
    src = df["Source"].str.strip()
    best = None
    for i, s in src.items():
        m = re.search(r"BRA (0x[0-9a-f]+)", s)
        if m and int(m.group(1), 16) < df.addr[i]:
            lo = int(m.group(1), 16)
            body = df[(df.addr >= lo) & (df.addr <= df.addr[i])]
            if body.Source.str.contains("QGMMA").sum() >= 2 and (best is None or len(body) > best[2]):
                best = (lo, df.addr[i], len(body))
    reg = pd.Series("other", index=df.index)
    if best is None:
        return reg
    lo, hi, _ = best
    inside = (df.addr >= lo) & (df.addr <= hi)
    arv = df[inside & src.str.contains(r"BAR\.ARV")].addr
    turn_end = arv.iloc[-1] if len(arv) else lo  # the turn's hand-over (its last BAR.ARV)
    reg[inside & (df.addr <= turn_end)] = "turn"
    reg[inside & (df.addr > turn_end)] = "softmax"
    return reg


def main(path: str, top: int) -> None:
    df, stall = load(path)
    df["region"] = regions(df)
    tot = df[stall].sum()
    n = tot.sum()
    pd.set_option("display.width", 250)
    print(f"samples: {int(n)}  instructions: {len(df)}")
    print("by reason (share of all samples):")
    print((tot / n).sort_values(ascending=False).round(3).to_string())
    print("\nby region x reason (share of all samples; reasons >= 1% overall):")
    keep = [c for c in stall if tot[c] / n >= 0.01]
    r = df.groupby("region")[keep].sum() / n
    r["all"] = df.groupby("region")[stall].sum().sum(axis=1) / n
    r["instructions executed"] = df.groupby("region")["Instructions Executed"].sum()
    print(r.round(3).to_string())
    print("\nby opcode x reason (share of all samples; top 15 opcodes):")
    o = df.groupby("op")[keep].sum() / n
    o["all"] = o.sum(axis=1)
    print(o.sort_values("all", ascending=False).head(15).round(3).to_string())
    print(f"\ntop {top} instructions by samples:")
    df["all"] = df[stall].sum(axis=1)
    t = df.sort_values("all", ascending=False).head(top)
    for _, row in t.iterrows():
        reasons = ", ".join(f"{c[6:]} {row[c] / n:.3f}" for c in sorted(stall, key=lambda c: -row[c])[:3] if row[c])
        print(f"  {row['Address']:>8} {row['region']:8s} {row['all'] / n:.3f}  {row['Source'].strip()[:70]:70s} {reasons}")


if __name__ == "__main__":
    a = sys.argv[1:]
    if not a or a[0].startswith("-"):
        sys.exit("error: usage: src_stalls.py SRC_SASS.csv [--top N]")
    main(a[0], int(a[a.index("--top") + 1]) if "--top" in a else 30)
