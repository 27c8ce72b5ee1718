"""ncu16's kernels beside the model: per point and kernel, Nsight Compute's duration, its busiest
SM's active time (cycles over the SM clock ncu saw: sm__cycles_elapsed.max / duration), what the
kernel lasts beyond it, and the model's busy time (the prediction less the profile's launch
overhead) at the same problem. From the repo root, no GPU:
    python experiments/small_fwd16/ncu16_model.py > experiments/small_fwd16/h100/ncu16/model.txt
"""
import pandas as pd

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.model import memory, timing
from iosim.schedules import plan

HW = load("h100-sxm5-80gb.calibrated")
CSV = "experiments/small_fwd16/h100/ncu16/ncu16.csv"

d = pd.read_csv(CSV)
print(f"{CSV} beside the model ({HW.name}, launch overhead {HW.launch_overhead_s * 1e6:.2f} us); "
      "times in us")
print(f"{'point':28s} {'kernel':18s} {'ncu':>6s} {'SM':>6s} {'beyond':>6s} {'model':>6s} {'SM-model':>8s}")
rows = []
for key, g in d.groupby(["schedule", "direction", "batch", "heads", "seqlen", "head_dim", "causal"],
                        sort=False):
    s, dr, b, h, n, hd, c = key
    p = Problem(batch=int(b), heads=int(h), seqlen_q=int(n), head_dim=int(hd), causal=bool(c),
                direction=dr)
    pl = plan(s, p, HW)
    pred = {k.name: t.seconds for k, t in zip(pl.kernels, timing.predict(pl, HW, memory.estimate(pl, HW)))}
    for k, gk in g.groupby("kernel", sort=False):
        v = dict(zip(gk.metric, gk.value))
        ns = v["gpu__time_duration.sum"]
        busy = v["sm__cycles_active.max"] / (v["sm__cycles_elapsed.max"] / ns) / 1e3
        model = (pred[k] - HW.launch_overhead_s) * 1e6
        rows.append((ns / 1e3 - busy, busy - model))
        print(f"{s} {dr} B={b} H={h} N={n} d={hd:<4d} {k:18s} {ns / 1e3:6.2f} {busy:6.2f} "
              f"{ns / 1e3 - busy:6.2f} {model:6.2f} {busy - model:+8.2f}")
beyond, miss = zip(*rows)
print(f"{len(rows)} kernels: beyond the busiest SM {min(beyond):.2f}-{max(beyond):.2f} us (mean "
      f"{sum(beyond) / len(rows):.2f}); busiest SM less the model's busy time "
      f"{min(miss):+.2f}..{max(miss):+.2f} us (mean {sum(miss) / len(rows):+.2f})")
