"""naive's forward kernels timed in their sequence (issue 23, session 18): which of naive_qk,
naive_softmax and naive_pv the model has short on the small block's forward rows at d = 128
and 256 (predicted 6% fast on average, the worst 13.6%), d = 64 beside them.

Each point's three kernels are checked once on fresh random data (outputs NaN-poisoned, the
check of `iosim bench`), then timed as prefixes of the forward, queued ahead and the L2
flushed by a read before each repetition (the small block's `--flush read --queued`): qk;
qk + softmax; qk + softmax + pv. A kernel's time in its sequence is the difference of two
prefixes, so softmax and pv find what the kernel before them left in L2, as in the whole
forward. On the GPU machine (after `. experiments/gpu_env.sh naive_fwd18`):
    python3 experiments/naive_fwd18/prefix.py OUT.csv
Offline, beside the model (each kernel's predicted time, its launch overhead included):
    python experiments/naive_fwd18/prefix.py --model experiments/naive_fwd18/h100/prefix.csv
"""
from __future__ import annotations

import csv
import sys

# (batch, heads, seqlen, head_dim): the small block's naive forward shapes (causal alike in the
# naive kernels' GEMMs; non-causal only), worst first, d = 64 beside them
POINTS = [(3, 8, 1024, 128), (1, 16, 1024, 128), (3, 8, 768, 128), (1, 8, 1024, 128),
          (3, 8, 768, 256), (1, 1, 1024, 128), (3, 8, 512, 128), (1, 8, 768, 128),
          (3, 2, 1024, 128), (1, 4, 1024, 128), (1, 16, 512, 128), (3, 8, 384, 256),
          (1, 8, 256, 128), (3, 8, 1024, 64), (1, 16, 1024, 64), (3, 8, 768, 64),
          (1, 1, 1024, 64), (3, 8, 256, 64), (1, 16, 256, 128)]
NAMES = ("naive_qk", "naive_softmax", "naive_pv")
FIELDS = ["batch", "heads", "seqlen", "head_dim", "status", "max_rel_err", "whole_ms",
          "qk_ms", "qk_softmax_ms", "all_ms"]


def measure(out: str) -> None:
    import torch

    from iosim.core.hardware import load
    from iosim.core.problem import Problem
    from iosim.gpu import bench
    from iosim.gpu.launch import Launcher
    from iosim.schedules import plan

    hw = load("h100-sxm5-80gb")
    timer = bench.Timer(torch, hw.l2_bytes, lead_cycles=bench.QUEUE_AHEAD_CYCLES, flush="read")
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, FIELDS)
        w.writeheader()
        for b, h, n, d in POINTS:
            p = Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, direction="fwd")
            pl = plan("naive", p, hw)
            got = bench.checked_inputs(torch, "naive", p, 0, (pl.main.block_m, pl.main.block_n))
            (q, k, v), (ref, lse_ref), bound, r = got
            launcher = Launcher(pl, q, k, v)
            err, ok = bench.check(torch, launcher, ref, lse_ref, bound)
            row = {"batch": b, "heads": h, "seqlen": n, "head_dim": d, "max_rel_err": err,
                   "status": "ok" if ok else "failed_check"}
            if ok:  # a failed check is reported, never timed
                qk, sm, pv = (launcher.only(x) for x in NAMES)
                row["qk_ms"] = timer(qk)
                row["qk_softmax_ms"] = timer(lambda qk=qk, sm=sm: (qk(), sm()))
                row["all_ms"] = timer(lambda qk=qk, sm=sm, pv=pv: (qk(), sm(), pv()))
                row["whole_ms"] = timer(launcher)
            w.writerow(row)
            f.flush()
            print(row, flush=True)


def model(path: str) -> None:
    import pandas as pd

    from iosim.core.hardware import load
    from iosim.core.problem import Problem
    from iosim.model import memory, timing
    from iosim.schedules import plan

    hw = load("h100-sxm5-80gb.calibrated")
    m = pd.read_csv(path)
    print(f"{path} beside the model ({hw.name}); per kernel in its sequence, us: measured / "
          "predicted (launch overhead included), error %")
    print(f"{'B':>2} {'H':>3} {'N':>5} {'d':>4}  {'qk':>18} {'softmax':>18} {'pv':>18} {'forward':>18}")
    for r in m[m.status == "ok"].itertuples():
        p = Problem(batch=r.batch, heads=r.heads, seqlen_q=r.seqlen, head_dim=r.head_dim,
                    direction="fwd")
        pl = plan("naive", p, hw)
        pred = [t.seconds * 1e6 for t in timing.predict(pl, hw, memory.estimate(pl, hw))]
        meas = [r.qk_ms * 1e3, (r.qk_softmax_ms - r.qk_ms) * 1e3, (r.all_ms - r.qk_softmax_ms) * 1e3]
        meas.append(r.all_ms * 1e3)
        pred.append(sum(pred))
        cells = [f"{a:6.2f} /{b:6.2f} {(b / a - 1) * 100:+4.0f}" for a, b in zip(meas, pred)]
        print(f"{r.batch:2d} {r.heads:3d} {r.seqlen:5d} {r.head_dim:4d}  " + " ".join(cells))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--model":
        model(sys.argv[2])
    elif len(sys.argv) == 2 and not sys.argv[1].startswith("-"):
        measure(sys.argv[1])
    else:
        print(__doc__.strip().splitlines()[-3:], file=sys.stderr)
        sys.exit(2)
