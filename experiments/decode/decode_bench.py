"""Decode (Nq = 1) on the GPU: kernels/decode.cu beside torch's SDPA backends and the HBM floor.

Per point (batch, KV length, heads/KV heads; d = 128, bf16, one query row a sequence): fresh
inputs; our decode kernel checked on NaN-poisoned outputs against the float32 reference (the
bound tied to torch's same-dtype error, iosim.gpu.bench), then timed (CUDA events, L2 flushed,
median); each torch backend checked and timed the same way; the HBM floor is the K/V bytes over
the device-to-device copy bandwidth measured in this run (`copy_bw_bytes_per_s`, read + write
bytes a second). Also fa2 and fa3 forward at one prefill shape, causal and with sliding
windows (`WINDOWS`), checked and timed the same way. Writes one CSV row per (point, implementation) with the model's prediction
for ours, the paged cache at a few points (`decode_paged`: page sizes 16-256, pages in a random
order) and the split-count sweep of a few points (the same kernel compiled with other
NUM_SPLITS: what the heuristic's choice leaves on the table).

    python3 experiments/decode/decode_bench.py OUT.csv [--quick]
"""

from __future__ import annotations

import dataclasses
import sys

import pandas as pd

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.gpu import bench
from iosim.gpu.launch import Launcher
from iosim.model import memory, timing
from iosim.schedules import decode as dec
from iosim.schedules import plan

GRID = [  # (batch, heads, kv_heads, seqlen_k)
    *[(b, 32, 8, n) for b in (1, 8, 64) for n in (8192, 32768, 131072)],
    *[(b, 32, 32, n) for b in (1, 8) for n in (8192, 32768)],
]
SPLIT_SWEEP = [(1, 32, 8, 32768), (1, 32, 8, 131072)]
PAGED = [(1, 32, 8, 32768), (8, 32, 8, 32768), (1, 32, 8, 131072), (64, 32, 8, 8192)]
PAGE_SIZES = (16, 64, 256)
# sliding windows on the forwards (prefill): causal, then windows of 1024 and 4096 keys
WINDOWS = [(2, 16, 16384, w) for w in (None, 1024, 4096)]
PEERS = ("torch_flash", "torch_cudnn", "torch_efficient")


def kv_bytes(p: Problem) -> int:
    return 2 * p.batch * p.kv_heads * p.seqlen_k * p.head_dim * p.elem_bytes


def with_splits(pl, s: int):
    """The Plan's decode kernel with NUM_SPLITS forced to s (and the combine it then needs)."""
    p = pl.problem
    k = pl.kernels[0]
    t0, t1 = dec.key_tiles(p, k.block_n)
    if len(dec.splits_of(p, t0, t1, k.block_n, s)) != s:
        return None
    chunks = p.group // k.defines["HEADS_PER_CTA"]
    d = dict(k.defines, NUM_SPLITS=s)
    main = dec._decode_kernel(p, k.name, [(p, dec.runs_of(p, k.block_n, s), p.batch)], s,
                              k.block_m, k.block_n, k.threads // 32, k.stages, chunks,
                              k.smem_bytes, d)
    ks = (main,) + ((dec._combine_kernel(p, s),) if s > 1 else ())
    return dataclasses.replace(pl, kernels=ks, notes=pl.notes + f" (forced {s} splits)")


def ours(torch, timer, pl, seed: int) -> dict:
    p = pl.problem
    got = bench.checked_inputs(torch, "decode", p, seed)
    if isinstance(got, dict):
        return got
    (q, k, v), (ref, lse), bound, r = got
    launcher = Launcher(pl, q, k, v)
    err, ok = bench.check(torch, launcher, ref, lse, bound)
    r.update(max_rel_err=err, status="ok" if ok else "failed_check")
    if ok:
        r["time_ms"] = timer(launcher)
    return r


def save(rows: list[dict], out: str) -> None:
    """The rows so far (a run cut short by its time limit keeps what it measured)."""
    df = pd.DataFrame(rows)
    if "time_ms" in df:
        df["kv_bw_fraction"] = df.hbm_floor_ms / df.time_ms
    df.to_csv(out, index=False)


def main() -> None:
    out, quick = sys.argv[1], "--quick" in sys.argv
    torch = bench.require_gpu("decode_bench")
    gpu = torch.cuda.get_device_name()
    hw = load(bench.profile_for(gpu))
    cal = load(bench.profile_for(gpu).split("-")[0])  # the calibrated profile (as predict)
    timer = bench.Timer(torch, hw.l2_bytes)
    bw = bench.copy_bandwidth(torch, timer)
    rows = []
    seed = 1000
    for b, h, kvh, n in GRID[:4] if quick else GRID:
        p = Problem(batch=b, heads=h, kv_heads=kvh, seqlen_q=1, seqlen_k=n, head_dim=128)
        pl = plan("decode", p, hw)
        floor = kv_bytes(p) / bw * 1e3
        pred = sum(t.seconds for t in timing.predict(plan("decode", p, cal), cal,
                                                     memory.estimate(plan("decode", p, cal), cal)))
        base = dict(gpu_name=gpu, batch=b, heads=h, kv_heads=kvh, seqlen_q=1, seqlen_k=n,
                    head_dim=128, dtype="bf16", kv_bytes=kv_bytes(p), copy_bw_bytes_per_s=bw,
                    hbm_floor_ms=floor)
        seed += 1
        r = ours(torch, timer, pl, seed)
        rows.append({**base, "impl": "decode", "splits": pl.kernels[0].defines["NUM_SPLITS"],
                     "time_pred_ms": pred * 1e3, **r})
        for name in PEERS:
            seed += 1
            rows.append({**base, "impl": name, **bench.peer_point(torch, timer, name, p, seed)})
        torch.cuda.empty_cache()
        save(rows, out)
        print(pd.DataFrame(rows[-1 - len(PEERS):])[["impl", "status", "time_ms"]].to_string(), flush=True)
    for b, h, kvh, n in [] if quick else PAGED:
        for ps in PAGE_SIZES:
            p = Problem(batch=b, heads=h, kv_heads=kvh, seqlen_q=1, seqlen_k=n, head_dim=128,
                        page_size=ps)
            pl, pc = plan("decode", p, hw), plan("decode", p, cal)
            seed += 1
            pred = sum(t.seconds for t in timing.predict(pc, cal, memory.estimate(pc, cal)))
            rows.append(dict(gpu_name=gpu, batch=b, heads=h, kv_heads=kvh, seqlen_q=1, seqlen_k=n,
                             head_dim=128, dtype="bf16", kv_bytes=kv_bytes(p),
                             copy_bw_bytes_per_s=bw, hbm_floor_ms=kv_bytes(p) / bw * 1e3,
                             impl="decode_paged", page_size=ps,
                             splits=pl.kernels[0].defines["NUM_SPLITS"], time_pred_ms=pred * 1e3,
                             **ours(torch, timer, pl, seed)))
            torch.cuda.empty_cache()
        save(rows, out)
        print(pd.DataFrame([r for r in rows if r["impl"] == "decode_paged"][-3:])[
            ["seqlen_k", "page_size", "status", "time_ms"]].to_string(), flush=True)
    for b, h, n, w in [] if quick else WINDOWS:
        for s in ("fa2", "fa3"):
            p = Problem(batch=b, heads=h, seqlen_q=n, head_dim=128, causal=True, window=w)
            pl, pc = plan(s, p, hw), plan(s, p, cal)
            seed += 1
            pred = sum(t.seconds for t in timing.predict(pc, cal, memory.estimate(pc, cal)))
            r = bench.forward_point(torch, timer, pl, seed, bw, 0, False, {})
            rows.append(dict(gpu_name=gpu, batch=b, heads=h, kv_heads=h, seqlen_q=n, seqlen_k=n,
                             head_dim=128, dtype="bf16", kv_bytes=kv_bytes(p),
                             copy_bw_bytes_per_s=bw, impl=s, window=w if w is not None else -1,
                             time_pred_ms=pred * 1e3, **r))
        save(rows, out)
        print(pd.DataFrame(rows[-2:])[["impl", "window", "status", "time_ms", "time_pred_ms"]].to_string(),
              flush=True)
    for b, h, kvh, n in [] if quick else SPLIT_SWEEP:
        p = Problem(batch=b, heads=h, kv_heads=kvh, seqlen_q=1, seqlen_k=n, head_dim=128)
        pl = plan("decode", p, hw)
        chosen = pl.kernels[0].defines["NUM_SPLITS"]
        for s in sorted({1, 4, 8, 16, 32, 64, 128, chosen}):
            forced = with_splits(pl, s)
            if forced is None:
                continue
            seed += 1
            pred = sum(t.seconds for t in timing.predict(forced, hw, memory.estimate(forced, hw)))
            rows.append(dict(gpu_name=gpu, batch=b, heads=h, kv_heads=kvh, seqlen_q=1, seqlen_k=n,
                             head_dim=128, dtype="bf16", kv_bytes=kv_bytes(p),
                             copy_bw_bytes_per_s=bw, hbm_floor_ms=kv_bytes(p) / bw * 1e3,
                             impl="decode_split_sweep", splits=s, chosen=s == chosen,
                             time_pred_datasheet_ms=pred * 1e3, **ours(torch, timer, forced, seed)))
        save(rows, out)
        print(pd.DataFrame([r for r in rows if r["impl"] == "decode_split_sweep"][-8:])[
            ["seqlen_k", "splits", "status", "time_ms"]].to_string(), flush=True)
    save(rows, out)
    print(f"wrote {len(rows)} rows to {out}")


if __name__ == "__main__":
    main()
