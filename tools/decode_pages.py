"""The paged decode kernel's two gathers beside the contiguous cache, and batch 32 beside cuDNN,
from experiments/decode/fused.sh's `pages` and `b32` steps (files in one folder):
  pages_probe.csv (experiments/decode/pages_probe.py: one process, the same K/V data, launches
    queued ahead): each configuration's time over the contiguous cache's of its shape: the block
    table read a tile ahead (`ahead`, today's kernel) or per row as each load issues (`per_row`,
    the earlier one), pages in a random order or in order; twice the splits (two CTAs an SM);
    128-key tiles with 8 warps;
  pages_ncu.txt: the probe's NCU_CASES at batch 8, 32k under Nsight Compute (its base clocks):
    the duration over the contiguous cache's and the DRAM throughput;
  b32_1..3.csv: batch 32 beside torch's SDPA, three runs: cuDNN's time over ours.
Usage: python tools/decode_pages.py experiments/decode/h100/pages10"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

KEYS = ["batch", "seqlen_k"]
# pages_probe.py's NCU_CASES, in order
NCU = ["contiguous", "16 per_row", "16 ahead", "16 ahead, in order", "256 ahead", "256 per_row"]


def fmt(df: pd.DataFrame) -> str:
    return df.to_string(index=False, float_format=lambda x: f"{x:.4g}")


def probe(d: Path) -> list[str]:
    p = pd.read_csv(d / "pages_probe.csv")
    flat = p[p.page_size.isna()]
    s0 = flat.groupby(KEYS).splits.min()
    base = flat.set_index([*KEYS, "splits"]).time_queued_ms
    rows = []
    for (b, nk), s in s0.items():
        one = p[(p.batch == b) & (p.seqlen_k == nk) & p.page_size.notna()]
        row = {"batch": b, "seqlen_k": nk, "contiguous_ms": base[(b, nk, s)]}
        for r in one.itertuples():
            gather = "ahead" if r.page_ahead == 1 else "per_row"
            col = f"{int(r.page_size)} {gather}"
            if r.order == "order":
                col += " in_order"
            if r.splits != s:
                col += " 2x_splits"
            if r.block_n != 64:
                col += f" bn{int(r.block_n)}"
            row[col] = r.time_queued_ms / base[(b, nk, s)]
        rows.append(row)
    t = pd.DataFrame(rows).set_index(KEYS).T
    return [f"{p.gpu.iloc[0]}: paged over contiguous (the Plan's splits), one process, launches "
            "queued ahead; ahead: the table read a tile ahead (today's kernel), per_row: read as "
            "each load issues (the earlier one):", t.to_string(float_format=lambda x: f"{x:.4g}")]


def ncu(d: Path) -> list[str]:
    text = (d / "pages_ncu.txt").read_text()
    dur = [float(x) for x in re.findall(r"gpu__time_duration\.sum\s+us\s+([\d.]+)", text)]
    dram = [float(x) for x in re.findall(r"dram__throughput\.avg\.pct_of_peak_sustained_elapsed\s+%\s+([\d.]+)", text)]
    t = pd.DataFrame({"case": NCU, "us": dur, "over_contiguous": [x / dur[0] for x in dur],
                      "dram_pct_of_peak": dram})
    return ["batch 8, 32k under Nsight Compute (base clocks): duration and DRAM throughput:", fmt(t)]


def b32(d: Path) -> list[str]:
    rows = []
    for f in sorted(d.glob("b32_*.csv")):
        df = pd.read_csv(f)
        ok = df[df.status == "ok"].set_index(["schedule", "seqlen_k"])
        for nk in sorted({k for _, k in ok.index}):
            ours, cudnn = ok.loc[("decode", nk)], ok.loc[("torch_cudnn", nk)]
            rows.append({"run": f.stem, "seqlen_k": nk, "decode_q_ms": ours.time_queued_ms,
                         "cudnn_q_ms": cudnn.time_queued_ms,
                         "cudnn/decode_q": cudnn.time_queued_ms / ours.time_queued_ms,
                         "cudnn/decode": cudnn.time_ms / ours.time_ms,
                         "decode_q_bw": ours.floor_ratio_queued})
    return ["batch 32 (one split, two CTAs an SM) beside cuDNN's SDPA, three runs (bw: over the "
            "copy bandwidth):", fmt(pd.DataFrame(rows))]


def main(d: Path) -> str:
    parts = []
    if (d / "pages_probe.csv").exists():
        parts += probe(d)
    if (d / "pages_ncu.txt").exists():
        parts += ncu(d)
    if any(d.glob("b32_*.csv")):
        parts += b32(d)
    return "\n".join(parts)


if __name__ == "__main__":
    print(main(Path(sys.argv[1])))


def report(d: str) -> str:
    """main's text for the folder `d` (tools/update_readme.py)."""
    return main(Path(d))
