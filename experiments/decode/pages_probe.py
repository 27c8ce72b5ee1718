"""What binds a paged decode step: decode_paged_fwd against decode_fwd on the same problem,
one GPU, one process. Per shape (GQA 32/8, d = 128, bf16, Nq = 1): the contiguous cache, then
pages of 16, 64 and 256 tokens with
  * the table read a tile ahead (PAGE_AHEAD=1, kernels/decode.cu) or per row as its load
    issues (PAGE_AHEAD=0, the earlier kernel),
  * the pages in a random order (as iosim bench lays them out) or in order (page i of a
    sequence at i: the same layout and gather, no jumps),
  * the Plan's split count and twice it (two CTAs an SM where one fills the GPU),
each checked against float32 attention once (NaN-poisoned outputs, fresh data), then timed
with the launches queued ahead, after a read flush of the L2 (iosim.gpu.bench.Timer).
`--ncu` launches NCU_CASES once each at batch 8, 32k keys (for Nsight Compute to profile).

    python3 experiments/decode/pages_probe.py OUT.csv
    ncu --kernel-name regex:decode ... python3 experiments/decode/pages_probe.py --ncu
"""

from __future__ import annotations

import os
import sys

import pandas as pd

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.gpu import bench
from iosim.gpu.compile import compile_kernel
from iosim.gpu.launch import Launcher
from iosim.schedules import Tiles, plan

SHAPES = [(8, 32768), (1, 131072), (1, 32768)]  # (batch, seqlen_k)
PAGES = (16, 64, 256)
# (page_size, PAGE_AHEAD, order, split factor, (block_n, warps) or None)
NCU_CASES = [(None, 1, "random", 1, None), (16, 0, "random", 1, None), (16, 1, "random", 1, None),
             (16, 1, "order", 1, None), (256, 1, "random", 1, None), (256, 0, "random", 1, None)]


def in_order(torch, p, k, v) -> dict:
    """launch.paged_cache's layout with page i of sequence b at b·NP + i (no random order)."""
    ps, nk, b = p.page_size, p.seqlen_k, p.batch
    npg = -(-nk // ps)

    def pages(x):
        x = torch.nn.functional.pad(x, (0, 0, 0, npg * ps - nk))
        x = x.view(b, p.kv_heads, npg, ps, p.head_dim).permute(0, 2, 3, 1, 4)
        return x.reshape(b * npg, ps, p.kv_heads, p.head_dim).contiguous()

    bt = torch.arange(b * npg, dtype=torch.int32, device=k.device).view(b, npg)
    return {"Kc": pages(k), "Vc": pages(v), "BlockTable": bt}


def launcher(torch, hw, base, q, k, v, ps, ahead, order, splits, tiles) -> Launcher:
    """The Plan's kernel on `base` with these pages (None: contiguous), table reads, page order,
    split count and tiles."""
    p = base.model_copy(update={"page_size": ps})
    bn, w = tiles or (None, None)
    pl = plan("decode", p, hw, Tiles(kv_splits=splits, block_n=bn, warps=w))
    lz = Launcher(pl, q, k, v)
    if ps is not None:
        if order == "order":
            lz.buf.update(in_order(torch, p, k, v))
        kp = pl.main
        lz.kernels = [(kp, compile_kernel(kp.source, kp.name, {**kp.defines, "PAGE_AHEAD": ahead},
                                          "bf16"))]
    return lz


def ncu_once() -> None:
    torch = bench.require_gpu()
    hw = load(bench.profile_for(torch.cuda.get_device_name()))
    base = Problem(batch=8, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=32768, head_dim=128,
                   dtype="bf16", causal=False)
    q, k, v = bench.inputs(torch, base, seed=1)
    s0 = plan("decode", base, hw).main.defines["NUM_SPLITS"]
    for ps, ahead, order, f, tiles in NCU_CASES:
        lz = launcher(torch, hw, base, q, k, v, ps, ahead, order, f * s0, tiles)
        print("ncu case", ps, ahead, order, f * s0, tiles, flush=True)
        lz()
        torch.cuda.synchronize()
        del lz


def main(out: str) -> None:
    torch = bench.require_gpu()
    hw = load(bench.profile_for(torch.cuda.get_device_name()))
    timer = bench.Timer(torch, hw.l2_bytes, lead_cycles=bench.QUEUE_AHEAD_CYCLES, flush="read")
    bw = bench.copy_bandwidth(torch, timer)
    rows = []
    for b, nk in SHAPES:
        base = Problem(batch=b, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=nk, head_dim=128,
                       dtype="bf16", causal=False)
        q, k, v = bench.inputs(torch, base, seed=int.from_bytes(os.urandom(4), "little"))
        ref, lse_ref, same, s_max = bench.reference(torch, q, k, v, base)
        bound = bench.error_bound("decode", base, same, s_max)
        s0 = plan("decode", base, hw).main.defines["NUM_SPLITS"]
        cases = [(None, 1, "random", s0, None), (None, 1, "random", 2 * s0, None)]
        cases += [(ps, a, o, s0, None) for ps in PAGES for a in (1, 0) for o in ("random", "order")]
        cases += [(ps, 1, "random", 2 * s0, None) for ps in PAGES]
        cases += [(16, 1, "random", s0, (128, 8)), (16, 0, "random", 2 * s0, None)]
        for ps, ahead, order, splits, tiles in cases:
            p = base.model_copy(update={"page_size": ps})
            lz = launcher(torch, hw, base, q, k, v, ps, ahead, order, splits, tiles)
            pl = lz.plan
            err, ok = bench.check(torch, lz, ref, lse_ref, bound)
            ms = timer(lz) if ok else float("nan")
            kv = bench.kv_bytes(p)
            rows.append(dict(gpu=torch.cuda.get_device_name(), batch=b, seqlen_k=nk,
                             page_size=ps, page_ahead=ahead if ps else None, order=order if ps else None,
                             splits=pl.main.defines["NUM_SPLITS"],
                             block_n=pl.main.block_n, warps=pl.main.threads // 32,
                             ctas=pl.main.ctas, err=err, ok=ok, time_queued_ms=ms,
                             bw_over_copy=kv / (ms * 1e-3) / bw, copy_bw=bw))
            del lz
        del q, k, v, ref
        torch.cuda.empty_cache()
    df = pd.DataFrame(rows)
    df.to_csv(out, index=False)
    cols = ["batch", "seqlen_k", "page_size", "page_ahead", "order", "splits", "block_n", "ok",
            "time_queued_ms", "bw_over_copy"]
    print(df[cols].to_string(index=False))


if __name__ == "__main__":
    ncu_once() if sys.argv[1] == "--ncu" else main(sys.argv[1])
