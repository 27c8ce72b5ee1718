"""How the L2 flush before each timed repetition charges a streaming kernel
(iosim.gpu.bench.Timer.flush): the same device-to-device copy and read-only reductions (amax:
reads its input once, writes one number) timed after a zero-fill of twice the L2 (`write`, which
can leave the L2 full of dirty lines the timed kernel's misses write back) and after a read of it
(`read`, none left dirty), at sizes from under the L2 to 1 GiB. One row per (flush, op, bytes):
milliseconds (median) and bytes per second (the copy: read plus write).
Usage (GPU): python experiments/decode/flush_probe.py OUT.csv"""

from __future__ import annotations

import sys

import pandas as pd

from iosim.gpu.bench import FLUSHES, Timer, require_gpu

SIZES = [16 << 20, 128 << 20, 512 << 20, 1 << 30]  # bytes read


def main(out: str) -> None:
    torch = require_gpu("flush_probe.py")
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    rows = []
    big = torch.empty((1 << 30) // 2, dtype=torch.float16, device="cuda").normal_()
    dst = torch.empty_like(big)
    for flush in FLUSHES:
        timer = Timer(torch, l2, flush=flush)
        ms = timer(lambda: dst.copy_(big))
        rows.append(dict(flush=flush, op="copy", bytes=2 * big.numel() * 2, ms=ms))
        for n in SIZES:
            x = big[: n // 2]
            ms = timer(lambda x=x: x.amax())
            rows.append(dict(flush=flush, op="read", bytes=n, ms=ms))
    df = pd.DataFrame(rows).assign(gpu_name=torch.cuda.get_device_name(), l2_bytes=l2)
    df["bytes_per_s"] = df.bytes / (df.ms * 1e-3)
    df.to_csv(out, index=False)
    print(df.to_string(index=False))


if __name__ == "__main__":
    main(sys.argv[1])
