"""A DRAM round trip in SM cycles (the hardware profiles' pipeline.load_latency_cycles),
measured from the earlier paged decode gather (decode_paged_fwd with PAGE_AHEAD=0: rows with
a page size and no `page_ahead` column), where each trip waits for two dependent round trips
(KernelSpec.sync_loads: a row's block-table entry, then its K/V row, first reads after the
timer's L2 flush) and nothing else binds: one CTA an SM, at least MIN_TRIPS trips a CTA (its
launch, first tiles and combine then a few percent of its time), and the K/V read at most
MAX_FLOOR of the copy bandwidth (floor_ratio_queued: the HBM floor over the time). Round trip
= time (launches queued ahead) / trips a CTA / 2, per clock at the profile's clock_hz; prints
the rows and their median.

Usage: python tools/round_trip.py experiments/decode/h200/fused/bench_read.csv [--hw h200-sxm-141gb]"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.kernels import SPECS
from iosim.schedules import Tiles, plan

MIN_TRIPS = 128
MAX_FLOOR = 0.8


def round_trips(path: str, hw_name: str) -> pd.DataFrame:
    hw = load(hw_name)
    d = pd.read_csv(path, low_memory=False)
    if "page_ahead" in d:
        d = d[d.page_ahead == 0]
    d = d[(d.schedule == "decode") & (d.status == "ok") & d.page_size.notna()]
    rows = []
    for r in d.itertuples():
        p = Problem(batch=int(r.batch), heads=int(r.heads), kv_heads=int(r.kv_heads),
                    seqlen_q=int(r.seqlen_q), seqlen_k=int(r.seqlen_k), head_dim=int(r.head_dim),
                    dtype=r.dtype, causal=bool(r.causal), page_size=int(r.page_size))
        k = plan("decode", p, hw, Tiles(kv_splits=int(r.splits), page_ahead=False)).main
        trips = float(k.trips.max())
        waits = SPECS[k.name].sync_loads(k.defines)
        if k.ctas > hw.sm_count or trips < MIN_TRIPS or r.floor_ratio_queued > MAX_FLOOR:
            continue
        cycles = r.time_queued_ms * 1e-3 * hw.clock_hz / trips
        rows.append(dict(batch=p.batch, seqlen_k=p.seqlen_k, page_size=p.page_size,
                         splits=int(r.splits), ctas=k.ctas, trips=trips, waits=waits,
                         floor_ratio=r.floor_ratio_queued, cycles_a_trip=cycles,
                         round_trip_cycles=cycles / waits))
    return pd.DataFrame(rows)


def report(path: str, hw: str = "h200-sxm-141gb") -> str:
    """The rows and their median, as main prints them (empty rows: a line saying so)."""
    df = round_trips(path, hw)
    if df.empty:
        return (f"{path}: no paged decode row of the earlier gather at one CTA an SM, >= "
                f"{MIN_TRIPS} trips a CTA and floor ratio <= {MAX_FLOOR}")
    return (df.to_string(index=False, float_format=lambda x: f"{x:.4g}")
            + f"\nmedian: {df.round_trip_cycles.median():.0f} cycles a round trip at "
              f"{load(hw).clock_hz / 1e6:.0f} MHz ({len(df)} rows)")


def main(argv: list[str]) -> None:
    if not argv or argv[0].startswith("-"):
        print("error: give a decode bench file (iosim bench --schedule decode, paged rows of the "
              "earlier gather), e.g. experiments/decode/h200/fused/bench_read.csv", file=sys.stderr)
        raise SystemExit(2)
    hw = argv[argv.index("--hw") + 1] if "--hw" in argv else "h200-sxm-141gb"
    if not Path(argv[0]).is_file():
        print(f"error: {argv[0]}: no such file (a decode bench file, e.g. "
              "experiments/decode/h200/fused/bench_read.csv)", file=sys.stderr)
        raise SystemExit(2)
    if round_trips(argv[0], hw).empty:
        print(f"error: {report(argv[0], hw)}", file=sys.stderr)
        raise SystemExit(2)
    print(report(argv[0], hw))


if __name__ == "__main__":
    main(sys.argv[1:])
