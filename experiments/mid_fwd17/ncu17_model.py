"""ncu17's kernels beside the model (issue 23, session 17 `model17b`). From the repo root, no GPU:
    python experiments/mid_fwd17/ncu17_model.py > experiments/mid_fwd17/h100/ncu17/model.txt

Part 1, per point and kernel: Nsight Compute's duration, its busiest SM's active time (cycles
over the SM clock ncu saw: sm__cycles_elapsed.max / duration), what the kernel lasts beyond it,
and the model's busy time (the prediction less the profile's launch overhead) at the same
problem, in us.
Part 2, the fa1 forward and naive GEMM kernels' warps: CTAs and warps a sub-partition on the
busiest SM (smsp__warps_launched.max), its active cycles and the least busy SM's (one CTA
against two in one launch), each warp's instructions a loop trip (the busiest sub-partition's
instructions over its warps and the CTAs' trips), and over every sub-partition of the launch
(not the busiest one: where some SMs hold two CTAs, mostly those with one) the cycles a warp
spends an instruction issued (smsp__average_warp_latency_per_inst_issued) and its `not_selected`
stalls an issue (waiting for another warp of its sub-partition to issue); the busiest SM's
tensor pipe busy share a sub-partition.
"""
import pandas as pd

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.model import memory, timing
from iosim.schedules import plan

HW = load("h100-sxm5-80gb.calibrated")
CSV = "experiments/mid_fwd17/h100/ncu17/ncu17.csv"
KEYS = ["schedule", "direction", "batch", "heads", "seqlen", "head_dim", "causal"]

d = pd.read_csv(CSV)
print(f"{CSV} beside the model ({HW.name}, launch overhead {HW.launch_overhead_s * 1e6:.2f} us); "
      "times in us")
print(f"{'point':30s} {'kernel':14s} {'ncu':>6s} {'SM':>6s} {'beyond':>6s} {'model':>6s} {'SM-model':>8s}")
warps = []
for key, g in d.groupby(KEYS, sort=False):
    s, dr, b, h, n, hd, c = key
    p = Problem(batch=int(b), heads=int(h), seqlen_q=int(n), head_dim=int(hd), causal=bool(c),
                direction=dr)
    pl = plan(s, p, HW)
    kps = {k.name: k for k in pl.kernels}
    pred = {k.name: t.seconds for k, t in zip(pl.kernels, timing.predict(pl, HW, memory.estimate(pl, HW)))}
    point = f"{s} {dr} B={b} H={h} N={n} d={hd}" + (" causal" if c else "")
    for k, gk in g.groupby("kernel", sort=False):
        v = dict(zip(gk.metric, gk.value))
        ns = v["gpu__time_duration.sum"]
        busy = v["sm__cycles_active.max"] / (v["sm__cycles_elapsed.max"] / ns) / 1e3
        model = (pred[k] - HW.launch_overhead_s) * 1e6
        print(f"{point:30s} {k:14s} {ns / 1e3:6.2f} {busy:6.2f} {ns / 1e3 - busy:6.2f} {model:6.2f} "
              f"{busy - model:+8.2f}")
        if k in ("fa1_fwd", "naive_pv", "naive_qk"):
            kp = kps[k]
            per_warp = kp.threads // 32 // 4  # one CTA's warps a sub-partition
            w = v["smsp__warps_launched.max"]
            ctas = max(1, round(w / per_warp))
            trips = float(kp.trips.max())
            inst = v["smsp__inst_executed.max"] / w / trips
            tensor = v["sm__pipe_tensor_op_hmma_cycles_active.max"] / 4 / v["sm__cycles_active.max"]
            warps.append((point, k, ctas, int(w), int(v["sm__cycles_active.min"]),
                          int(v["sm__cycles_active.max"]), trips, inst,
                          v["smsp__average_warp_latency_per_inst_issued.ratio"],
                          v["smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio"],
                          tensor))
print()
print(f"{'point':30s} {'kernel':9s} {'CTAs':>4s} {'warps':>5s} {'least':>7s} {'most':>7s} "
      f"{'trips':>5s} {'inst/trip':>9s} {'cyc/inst':>8s} {'not_sel':>7s} {'tensor':>6s}")
for pt, k, ctas, w, lo, hi, trips, inst, lat, ns, tensor in warps:
    print(f"{pt:30s} {k:9s} {ctas:4d} {w:5d} {lo:7d} {hi:7d} {trips:5.0f} {inst:9.0f} {lat:8.2f} "
          f"{ns:7.2f} {tensor:6.0%}")
print("(CTAs and warps: launched on the busiest SM and sub-partition; inst/trip: a warp's, the "
      "busiest sub-partition's instructions over its warps and the longest CTA's trips; cyc/inst "
      "and not_sel: over every sub-partition)")
