"""Where the warps of fa3's fp8 attention kernel stall, per SASS instruction: Nsight Compute's
source page (`ncu -i REP --page source --csv --print-source sass`, warp-state sampling with the
stall reason of each sample) summed by reason, by region of the consumer's main loop and by
opcode, and the instructions that carry most samples.

    python3 experiments/fp8/speed14b/src_stalls.py SRC_SASS.csv [--top N]
    (SRC_SASS.csv may be TGZ:MEMBER, a member of a tar.gz, e.g. ncu.tgz:./src_base_d128_8k.csv)

Regions follow the SASS itself (the one-tile kernel's main loop, from the BAR.SYNC of its GEMM
turn to the branch back to it): `turn` (to the BAR.ARV after the loop's last QGMMA: S GEMM issued,
V waited for, O rescaled, P V issued, turn handed over), `softmax` (from there to the branch
back: the waits on the GEMMs, the softmax, the pack of P), and `other` (prologue, first and last
trips, producer, epilogue; stalls.txt of call c2 ran an earlier region rule: use src_stalls.txt). A sample's reason is the column stall_<reason>; `selected`
is a sample that issued.
"""

from __future__ import annotations

import io
import re
import sys

import pandas as pd


def read(path: str) -> str:
    """A file's text, or a tar.gz member's (TGZ:MEMBER)."""
    if ".tgz:" in path:
        import tarfile

        tgz, member = path.split(":", 1)
        with tarfile.open(tgz) as t:
            return t.extractfile(member).read().decode()
    return open(path).read()


def load(path: str) -> pd.DataFrame:
    lines = read(path).splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith('"Address"'))
    df = pd.read_csv(io.StringIO("\n".join(lines[start:])), dtype=str)
    stall = [c for c in df.columns if c.startswith("stall_") and "(Not Issued)" not in c]
    for c in stall + ["Warp Stall Sampling (All Samples)", "Instructions Executed"]:
        df[c] = pd.to_numeric(df[c].str.replace(",", ""), errors="coerce").fillna(0)
    df["addr"] = df["Address"].apply(lambda a: int(str(a), 16) if re.fullmatch(r"(0x)?[0-9a-fA-F]+", str(a)) else -1)
    df["op"] = df["Source"].str.strip().str.replace(r"^@!?U?P[T0-9]+\s+", "", regex=True).str.split(r"[\s.]").str[0]
    return df.sort_values("addr").reset_index(drop=True), stall


def regions(df: pd.DataFrame) -> pd.Series:
    """The consumer's main loop: the backward branch whose target is a BAR.SYNC (the GEMM turn's
    wait); in it `turn` up to the first BAR.ARV after its last QGMMA, `softmax` after that."""
    src = df["Source"].str.strip()
    reg = pd.Series("other", index=df.index)
    at = dict(zip(df.addr, src))
    for i, s in src.items():
        m = re.search(r"BRA (0x[0-9a-f]+)", s)
        lo = int(m.group(1), 16) if m else None
        if lo is None or lo >= df.addr[i] or not at.get(lo, "").startswith("BAR.SYNC"):
            continue
        inside = (df.addr >= lo) & (df.addr <= df.addr[i])
        last_mma = df[inside & src.str.contains("QGMMA")].addr.max()
        arv = df[inside & src.str.contains(r"BAR\.ARV") & (df.addr > last_mma)].addr
        turn_end = arv.min() if len(arv) else last_mma
        reg[inside & (df.addr <= turn_end)] = "turn"
        reg[inside & (df.addr > turn_end)] = "softmax"
        break
    return reg


def report(path: str, top: int = 30) -> str:
    out = []
    say = out.append
    df, stall = load(path)
    df["region"] = regions(df)
    tot = df[stall].sum()
    n = tot.sum()
    pd.set_option("display.width", 250)
    say(f"samples: {int(n)}  instructions: {len(df)}")
    say("by reason (share of all samples):")
    say((tot / n).sort_values(ascending=False).round(3).to_string())
    say("\nby region x reason (share of all samples; reasons >= 1% overall):")
    keep = [c for c in stall if tot[c] / n >= 0.01]
    r = df.groupby("region")[keep].sum() / n
    r["all"] = df.groupby("region")[stall].sum().sum(axis=1) / n
    r["instructions executed"] = df.groupby("region")["Instructions Executed"].sum()
    say(r.round(3).to_string())
    say("\nby opcode x reason (share of all samples; top 15 opcodes):")
    o = df.groupby("op")[keep].sum() / n
    o["all"] = o.sum(axis=1)
    say(o.sort_values("all", ascending=False).head(15).round(3).to_string())
    say(f"\ntop {top} instructions by samples (offset in the kernel, region, share of all samples):")
    df["all"] = df[stall].sum(axis=1)
    t = df.sort_values("all", ascending=False).head(top)
    for _, row in t.iterrows():
        reasons = ", ".join(f"{c[6:]} {row[c] / n:.3f}" for c in sorted(stall, key=lambda c: -row[c])[:3] if row[c])
        say(f"  {row['addr'] - df.addr.min():#7x} {row['region']:8s} {row['all'] / n:.3f}  {row['Source'].strip()[:70]:70s} {reasons}")
    return "\n".join(out)


if __name__ == "__main__":
    a = sys.argv[1:]
    if not a or a[0].startswith("-"):
        sys.exit("error: usage: src_stalls.py SRC_SASS.csv [--top N]")
    print(report(a[0], int(a[a.index("--top") + 1]) if "--top" in a else 30))
