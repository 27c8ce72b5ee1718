"""Queued launches of k empty kernels (1 CTA of 32 threads) and of k tiny ones (132 CTAs), timed
as iosim bench times a forward (read flush, queued ahead): the first kernel's cost and each
following kernel's gap."""
import cupy as cp, torch, numpy as np, json, sys
from iosim.gpu import bench
src = r'''extern "C" __global__ void empty(float* x) { if (threadIdx.x == 1000) x[0] = 1.f; }'''
fn = cp.RawKernel(src, "empty")
buf = cp.zeros(1, dtype=cp.float32)
t = bench.Timer(torch, 50 * 2**20, lead_cycles=bench.QUEUE_AHEAD_CYCLES, flush="read")
out = {}
for grid in (1, 132, 264, 1024):
    for k in (1, 2, 3, 4, 6, 8, 12):
        def f(k=k, grid=grid):
            for _ in range(k):
                fn((grid,), (32,), (buf,))
        ms = [t(f) for _ in range(3)]
        out[f"{grid}x{k}"] = float(np.median(ms)) * 1e3
        print(grid, k, out[f"{grid}x{k}"], flush=True)
json.dump(out, open(sys.argv[1], "w"), indent=1)
