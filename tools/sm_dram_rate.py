"""The rate one SM streams from DRAM (the hardware profiles' pipeline.sm_dram_bytes_per_clk),
measured from decode rows where each CTA is alone on its SM and the CTAs fill at most half the
SMs, so that DRAM's bandwidth is far from binding and what one SM pulls is what bounds it:
contiguous caches, at least MIN_MIB of K/V per CTA (its fixed costs, a few microseconds, then
under 1% of its time). Rate = K/V bytes a CTA / time (with the launches queued ahead where a
row has it); per clock at the profile's clock_hz (the clock every per-clock rate of the model
uses). Prints the rows and their median.

Usage: python tools/sm_dram_rate.py experiments/decode/h100/bench.csv [--hw h100-sxm5-80gb]"""

from __future__ import annotations

import sys

import pandas as pd

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.schedules import Tiles, plan

MIN_MIB = 16


def rates(path: str, hw_name: str) -> pd.DataFrame:
    hw = load(hw_name)
    d = pd.read_csv(path, low_memory=False)
    d = d[(d.schedule == "decode") & (d.status == "ok")]
    for col in ("page_size", "window"):
        if col in d:
            d = d[d[col].isna()]
    rows = []
    for r in d.itertuples():
        p = Problem(batch=int(r.batch), heads=int(r.heads), kv_heads=int(r.kv_heads),
                    seqlen_q=int(r.seqlen_q), seqlen_k=int(r.seqlen_k), head_dim=int(r.head_dim),
                    dtype=r.dtype, causal=bool(r.causal))
        k = plan("decode", p, hw, Tiles(kv_splits=int(r.splits))).main
        per_cta = r.kv_bytes / k.ctas
        if k.ctas > hw.sm_count // 2 or per_cta < MIN_MIB * 2**20:
            continue
        t = getattr(r, "time_queued_ms", float("nan"))
        t = r.time_ms if pd.isna(t) else t
        rows.append(dict(batch=p.batch, seqlen_k=p.seqlen_k, splits=int(r.splits), ctas=k.ctas,
                         mib_a_cta=per_cta / 2**20, ms=t, gb_s_an_sm=per_cta / (t * 1e-3) / 1e9,
                         bytes_per_clk=per_cta / (t * 1e-3) / hw.clock_hz))
    return pd.DataFrame(rows)


def main(argv: list[str]) -> None:
    hw = argv[argv.index("--hw") + 1] if "--hw" in argv else "h100-sxm5-80gb"
    df = rates(argv[0], hw)
    print(df.to_string(index=False, float_format=lambda x: f"{x:.4g}"))
    print(f"median: {df.gb_s_an_sm.median():.2f} GB/s an SM, "
          f"{df.bytes_per_clk.median():.2f} bytes per clock at {load(hw).clock_hz / 1e6:.0f} MHz")


if __name__ == "__main__":
    main(sys.argv[1:])
