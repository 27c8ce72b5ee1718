"""The terms of one loop trip of a schedule's main kernel (the CTA-loop kernel with the longest
warp chain) against measured rows: per row, the model's trip terms in microseconds, the trip
they combine to, and the trip the measurement implies (the model's trip x measured / predicted,
which puts the whole error on the loop). Read it to see which term a group of rows' error
follows: `chain` (the round trips the warps wait for, `lat`, their bytes through the SM's load
path, `port`, and one warp's own instructions, `warp`), `share` (the CTA's share of L2/DRAM
time, the CTAs running at once x its bytes), `sm` (the SM's throughput: its busiest pipe x CTAs
resident).
Usage: python tools/trip_terms.py SCHEDULE DIRECTION CSV [CSV ...]
  e.g. python tools/trip_terms.py fa1 bwd experiments/bwd_grid/h100/measured_bwd.csv"""

import sys
from contextlib import contextmanager

import numpy as np
import pandas as pd

from iosim.analysis.validate import MEASURED_NEEDS, read_rows, repredict
from iosim.core.rows import gpu_ms
from iosim.model.timing import Trip, _max

US = 1e6


@contextmanager
def recording(into: list):
    """Trip.time, recording each call's terms of the loop-trip entry (one with bytes) with the
    longest warp chain: the main kernel's plain trip with the bandwidth shared (the first row of
    `level`'s share axis)."""
    orig = Trip.time

    def rec(self, policy, stages, port, level, n, sync_overlap, latency=0.0):
        out = orig(self, policy, stages, port, level, n, sync_overlap, latency)
        warp = self.warp_mma + self.warp_other
        lat = np.broadcast_to(latency, warp.shape)
        thr = n * _max(self.dispatch, self.sfu, self.alu, self.sram, self.issue, port)
        i = int(np.argmax(np.where(port > 0, warp, -1.0)))
        share, trip = (level[0], out[0]) if np.ndim(level) == 2 else (level, out)  # bandwidth shared
        into.append(dict(lat=lat[i], port=port[i], warp=warp[i], chain=lat[i] + port[i] + warp[i],
                         share=share[i], sm=thr[i], trip=trip[i]))
        return out

    Trip.time = rec
    try:
        yield
    finally:
        Trip.time = orig


def terms(schedule: str, direction: str, paths: list[str]) -> pd.DataFrame:
    """One row per measured row (status ok): problem, times, error and the trip terms."""
    m = pd.concat([read_rows(p, MEASURED_NEEDS) for p in paths], ignore_index=True)
    m = m[(m.schedule == schedule) & (m.direction == direction) & (m.status == "ok")]
    m = m.assign(time_ms=gpu_ms(m))  # what validate holds the model to (queued where timed so)
    rows = []
    for _, r in m.iterrows():
        got: list = []
        with recording(got):
            pred = float(repredict(pd.DataFrame([r])).time_pred_ms.iloc[0])
        t = {k: v * US for k, v in got[0].items()}
        rows.append(dict(hw=r.hw, B=r.batch, H=r.heads, N=r.seqlen_q, d=r.head_dim, causal=r.causal,
                         ms=r.time_ms, pred_ms=pred, err_pct=(pred / r.time_ms - 1) * 100, **t,
                         trip_measured=t["trip"] * r.time_ms / pred))
    return pd.DataFrame(rows)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        print("error: usage: python tools/trip_terms.py SCHEDULE DIRECTION CSV [CSV ...]",
              file=sys.stderr)
        sys.exit(2)
    pd.set_option("display.width", 250)
    print(terms(sys.argv[1], sys.argv[2], sys.argv[3:]).round(3).to_string(index=False))
