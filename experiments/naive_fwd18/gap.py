"""Queued launches of k empty kernels (one warp a CTA, 1 to 1,024 CTAs), timed as `iosim bench
--flush read --queued` times a forward (iosim.gpu.bench.Timer: L2 flushed by a read, the launches
queued ahead): what a first kernel costs beyond its work and what each following one adds.
On the GPU machine (after `. experiments/gpu_env.sh naive_fwd18`):
    python3 experiments/naive_fwd18/gap.py OUT.json
writes {"<CTAs>x<kernels>": microseconds, median of 3 timer calls}."""
import json
import sys

import cupy as cp
import numpy as np
import torch

from iosim.core.hardware import load
from iosim.gpu import bench

SRC = r'''extern "C" __global__ void empty(float* x) { if (threadIdx.x == 1000) x[0] = 1.f; }'''


def main(out: str) -> None:
    fn = cp.RawKernel(SRC, "empty")
    buf = cp.zeros(1, dtype=cp.float32)
    timer = bench.Timer(torch, load("h100-sxm5-80gb").l2_bytes, lead_cycles=bench.QUEUE_AHEAD_CYCLES, flush="read")
    res = {}
    for grid in (1, 132, 264, 1024):
        for k in (1, 2, 3, 4, 6, 8, 12):
            def launches(k=k, grid=grid):
                for _ in range(k):
                    fn((grid,), (32,), (buf,))
            res[f"{grid}x{k}"] = float(np.median([timer(launches) for _ in range(3)])) * 1e3
            print(grid, k, res[f"{grid}x{k}"], flush=True)
    with open(out, "w") as f:
        json.dump(res, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
