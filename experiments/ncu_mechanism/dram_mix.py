"""DRAM bandwidth by read/write mix: the rate the memory system gives a stream that writes a
share of what it moves (fa1's one-CTA-a-head backward reads and writes dQacc back every step:
about 29% of its DRAM bytes are writes). Each op on buffers of 4 GiB (far past the L2), timed
by CUDA events, the median of 20 after 3 warm-ups; bytes counted as the op must move them.

    python3 experiments/ncu_mechanism/dram_mix.py OUT.csv
"""

from __future__ import annotations

import sys

import pandas as pd
import torch

N = 1 << 30  # float32 elements a buffer: 4 GiB


def timed(fn, reps: int = 20) -> float:
    for _ in range(3):
        fn()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e-3)
    return float(pd.Series(ts).median())


def main(out: str) -> None:
    x, y, z = (torch.rand(N, device="cuda") for _ in range(3))
    e = 4 * N  # bytes a buffer
    ops = {  # name: (callable, bytes read, bytes written)
        "read (sum)": (lambda: x.sum(), e, 0),
        "read 2 write 1 (add out)": (lambda: torch.add(x, y, out=z), 2 * e, e),
        "read 1 write 1, another buffer (copy)": (lambda: z.copy_(x), e, e),
        "read 1 write 1, in place (add_)": (lambda: x.add_(1.0), e, e),
        "write (fill)": (lambda: z.fill_(1.0), 0, e),
    }
    rows = []
    for name, (fn, r, w) in ops.items():
        s = timed(fn)
        rows.append(dict(gpu=torch.cuda.get_device_name(), op=name, read_bytes=r, write_bytes=w,
                         write_share=w / (r + w), seconds=s, bytes_per_s=(r + w) / s))
        print(rows[-1], flush=True)
    pd.DataFrame(rows).to_csv(out, index=False)


if __name__ == "__main__":
    main(sys.argv[1])
