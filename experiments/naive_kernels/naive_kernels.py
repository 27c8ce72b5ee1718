"""Where standard attention's time goes, kernel by kernel, at the GPU's own clocks.

On the GPU machine (after `. experiments/gpu_env.sh naive_kernels`):
    python3 experiments/naive_kernels/naive_kernels.py OUT.csv
profiles every naive point below under `ncu --clock-control none` (the clocks the bench runs at;
ncu's default locks them to base, which slows the compute-bound GEMMs more than the
bandwidth-bound softmax): each kernel's duration, DRAM bytes and speed of light, warp stalls and
occupancy. One long table, as experiments/ncu_mechanism writes (point, kernel, metric, value),
written as it goes.
"""

from __future__ import annotations

import sys

import pandas as pd

sys.path.insert(0, "experiments/ncu_mechanism")
from ncu_mechanism import profile  # noqa: E402

SECTIONS = ["SpeedOfLight", "WarpStateStats", "Occupancy", "LaunchStats"]
# (schedule, batch, heads, seqlen, head_dim, causal), direction: the validation's worst naive
# points (large N at d = 64, 32 x N = 512) and one of each head_dim
POINTS = [
    (("naive", 1, 32, 16384, 64, False), "fwd"), (("naive", 2, 32, 8192, 64, False), "fwd"),
    (("naive", 1, 16, 16384, 128, False), "fwd"), (("naive", 4, 16, 4096, 128, False), "fwd"),
    (("naive", 8, 8, 2048, 256, False), "fwd"), (("naive", 32, 16, 512, 128, True), "fwd"),
    (("naive", 32, 32, 512, 64, True), "fwd"), (("naive", 32, 8, 512, 256, False), "fwd"),
    (("naive", 1, 32, 16384, 64, False), "bwd"), (("naive", 4, 32, 4096, 64, True), "bwd"),
    (("naive", 32, 8, 512, 256, False), "bwd"), (("naive", 4, 16, 4096, 128, False), "bwd"),
]
NAMES = {"fwd": "naive_qk|naive_softmax|naive_pv", "bwd": "naive_bwd_.*"}


def main(path: str) -> None:
    frames = []
    for pt, direction in POINTS:
        try:
            frames.append(profile(pt, direction, SECTIONS, NAMES[direction],
                                  ("--clock-control", "none")))
            print("ok", pt, direction, flush=True)
        except Exception as e:  # one failing point keeps the others
            print("FAILED", pt, direction, str(e)[:300], flush=True)
        if frames:
            pd.concat(frames).to_csv(path, index=False)  # as it goes: nothing measured is lost


if __name__ == "__main__":
    main(sys.argv[1])
