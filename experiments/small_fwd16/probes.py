"""The numbers experiments/small_fwd16/README.md quotes beside variants.txt and model.txt. From the
repo root, no GPU:
    python experiments/small_fwd16/probes.py > experiments/small_fwd16/probes.txt
- ends: timing.shared_end and timing.list_schedule on fa2's causal period at N = 1024, d = 128
  (the model's CTA durations beside another CTA and alone, us), 264 places, against a
  simulation of processor sharing at two an SM (tests/test_timing.py's, 10 random placements);
- tail: the wave grid's causal fa2 forwards past a wave (test_mechanisms' rows);
- trip: the model's FA1 forward trip terms, d = 128, B = 1 H = 16 N = 512 (cycles);
- cpu: CPU seconds of predict_many on 300 causal problems x 4 schedules (best of 5).
"""
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import test_mechanisms as M  # noqa: E402
from test_timing import shared_makespan  # noqa: E402

from iosim.analysis.predict import predict_many  # noqa: E402
from iosim.core.hardware import load  # noqa: E402
from iosim.core.problem import Problem  # noqa: E402
from iosim.model import memory, timing  # noqa: E402
from iosim.schedules import plan  # noqa: E402

HW = load("h100-sxm5-80gb.calibrated")


def ends() -> None:
    dc = np.array([52.8, 46.3, 39.9, 33.4, 27.0, 20.5, 14.1, 7.6])  # shared, 32..4 trips
    d1 = np.array([33.7, 29.6, 25.5, 21.4, 17.3, 13.2, 9.2, 5.1])  # alone
    rng = np.random.default_rng(0)
    print("heads  shared_end  simulation  list_schedule  (us)")
    for reps in (33, 34, 40, 66, 67, 100, 256):
        sim = np.mean([shared_makespan(dc, d1, reps, 132, rng) for _ in range(10)])
        print(f"{reps:5d} {timing.shared_end(dc, d1, reps, 264, 132):11.1f} {sim:11.1f} "
              f"{timing.list_schedule(dc, reps, 264):14.1f}")


def tail() -> None:
    j = M._small_rows()
    slots = j.occ * M.H100.sm_count
    g = j[(j.schedule == "fa2") & (j.direction == "fwd") & j.causal & (j.occ == 2) & (j.ctas > slots)]
    print(g[["batch", "seqlen_q", "head_dim", "ctas", "err"]].round(2).to_string(index=False))
    print(f"MAPE {g.err.abs().mean():.2f} worst {g.err.abs().max():.2f}")


def trip() -> None:
    got = {}
    orig = timing.Trip._time

    def spy(self, policy, port, level, n, q, latency):
        out = orig(self, policy, port, level, n, q, latency)
        if policy == timing.POLICIES["drift"] and not got:
            i = int(np.argmax(np.atleast_1d(self.tensor)))
            got.update(latency=latency[i], port=port[i], warp=self.warp_mma[i] + self.warp_other[i],
                       sram=self.sram[i], dispatch=self.dispatch[i], trip=np.ravel(out)[i])
        return out
    timing.Trip._time = spy
    p = Problem(batch=1, heads=16, seqlen_q=512, head_dim=128, direction="fwd")
    pl = plan("fa1", p, HW)
    timing._HELD.clear()
    timing.predict(pl, HW, memory.estimate(pl, HW), limiter_too=False)
    timing.Trip._time = orig
    print(" ".join(f"{k} {v * HW.clock_hz:.0f}" for k, v in got.items()))


def cpu() -> None:
    ps = [Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=True) for b in (1, 2, 4, 8, 16, 32)
          for h in (1, 4, 8, 16, 32) for n in (512, 1024, 2048, 4096, 8192) for d in (64, 128)]
    names = ["fa2", "fa1", "naive", "fa3"]
    predict_many(ps, HW, names)
    best = min(_timed(ps, names) for _ in range(5))
    print(f"{len(ps)} causal problems x {len(names)} schedules: {best:.3f} CPU s")


def _timed(ps, names) -> float:
    timing._HELD.clear()
    t = time.process_time()
    predict_many(ps, HW, names)
    return time.process_time() - t


for name, fn in (("ends", ends), ("tail", tail), ("trip", trip), ("cpu", cpu)):
    if len(sys.argv) < 2 or name in sys.argv[1:]:
        print(f"-- {name}")
        fn()
