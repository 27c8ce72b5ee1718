"""Check and time kernels/fa2.cu on the GPU (dev script: CuPy + PyTorch on the device machine).

    PYTHONUNBUFFERED=1 python3 dev/fa2_check.py [--quick] [--sweep] [--no-bench] [--out DIR]

1. Correctness, for every (tiles, problem) it will time and a set of edge problems (ragged N,
   GQA, Nq != Nk, d = 64/128/256, causal both, bf16 and fp16): fresh torch.randn inputs, O and
   LSE poisoned with NaN, launch through iosim.gpu.compile, compare with a float32 reference on
   the upcast inputs (TF32 off). Bound: max|O-ref|/max|ref| <= 2 * (same metric of torch's own
   same-dtype SDPA) + max(1e-3, unit roundoff of the dtype); |LSE-ref| <= 1e-3 * max(1, |ref|). Fails loudly (exit 1).
2. Only for configurations whose check passed: timing beside torch's flash and cuDNN SDPA
   backends in the same run (CUDA events, warm-up, L2 flushed by writing 256 MB before every
   repetition, median of REPS), TFLOP/s = 4*B*H*N^2*d / t (halved when causal).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str, rel: str):
    """Import one module file of iosim without iosim/__init__ (whose dependencies, e.g.
    pydantic, the GPU machine may lack)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, ROOT / rel)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


import cupy as cp  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

_compile = _load("iosim_gpu_compile", "iosim/gpu/compile.py")
_tiles = _load("fa2_tiles", "dev/fa2_tiles.py")
compile_kernel, device_arch, launch = _compile.compile_kernel, _compile.device_arch, _compile.launch
Fa2Tiles, fa2_defines, fa2_smem_bytes = _tiles.Fa2Tiles, _tiles.fa2_defines, _tiles.fa2_smem_bytes
FA2_TILES = _tiles.FA2_TILES_BY_ARCH[device_arch()]  # recommended tiles for this GPU

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
DT = {"bf16": torch.bfloat16, "fp16": torch.float16}
REPS = 25
WARMUP = 3

# Candidate tiles per head_dim for --sweep (BLOCK_M, BLOCK_N, NUM_WARPS, STAGES).
SWEEP = {
    64: [Fa2Tiles(128, 64, 4, 2), Fa2Tiles(128, 128, 4, 2), Fa2Tiles(128, 128, 8, 2)],
    128: [
        Fa2Tiles(128, 32, 4, 2),
        Fa2Tiles(128, 64, 4, 2),
        Fa2Tiles(64, 64, 4, 2),
        Fa2Tiles(128, 64, 8, 2),
        Fa2Tiles(128, 128, 8, 2),
    ],
    256: [Fa2Tiles(128, 64, 8, 1), Fa2Tiles(128, 64, 8, 2)],
}


# ----------------------------------------------------------------------------- running fa2
def _dev(t):
    """CuPy view of a torch tensor (bf16 has no __cuda_array_interface__: view as int16)."""
    return cp.asarray(t.view(torch.int16) if t.dtype in (torch.bfloat16, torch.float16) else t)


def prepare_fa2(q, k, v, causal: bool, dtype: str, tiles: Fa2Tiles | None = None, out=None):
    """q (B,H,Nq,d), k/v (B,KVH,Nk,d) contiguous torch tensors; returns (launch_fn, O, LSE)."""
    B, H, Nq, d = q.shape
    KVH, Nk = k.shape[1], k.shape[2]
    t = tiles or FA2_TILES[d]
    kern = compile_kernel("fa2.cu", "fa2_fwd", fa2_defines(d, causal, t), dtype)
    if out is None:
        o = torch.empty_like(q)
        lse = torch.empty((B, H, Nq), device=q.device, dtype=torch.float32)
    else:
        o, lse = out
    grid = (math.ceil(Nq / t.block_m), H, B)
    args = (
        _dev(q),
        _dev(k),
        _dev(v),
        _dev(o),
        _dev(lse),
        cp.int32(Nq),
        cp.int32(Nk),
        cp.int32(H),
        cp.int32(KVH),
        cp.float32(1.0 / math.sqrt(d)),
    )
    smem = fa2_smem_bytes(d, t.block_m, t.block_n, t.stages)
    threads = t.num_warps * 32
    launch(kern, grid, threads, smem, args)  # first launch also raises the smem limit
    return (lambda: kern(grid, (threads, 1, 1), args, shared_mem=smem)), o, lse


def run_fa2(q, k, v, causal: bool, dtype: str, tiles: Fa2Tiles | None = None, out=None):
    _, o, lse = prepare_fa2(q, k, v, causal, dtype, tiles, out)
    return o, lse


# ----------------------------------------------------------------------------- reference
def reference(q, k, v, causal: bool):
    """float32 O and natural-log LSE on the upcast inputs, one (b, h) at a time."""
    B, H, Nq, d = q.shape
    KVH, Nk = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(d)
    o = torch.empty((B, H, Nq, d), device=q.device, dtype=torch.float32)
    lse = torch.empty((B, H, Nq), device=q.device, dtype=torch.float32)
    mask = None
    if causal:
        mask = torch.ones(Nq, Nk, device=q.device, dtype=torch.bool).triu(1)  # j > i hidden
    for b in range(B):
        for h in range(H):
            kh = h // (H // KVH)
            s = (q[b, h].float() @ k[b, kh].float().T) * scale
            if mask is not None:
                s.masked_fill_(mask, float("-inf"))
            lse[b, h] = torch.logsumexp(s, dim=-1)
            o[b, h] = torch.softmax(s, dim=-1) @ v[b, kh].float()
    return o, lse


def rel_err(x, ref):
    return ((x.float() - ref).abs().max() / ref.abs().max()).item()


def check(B, H, KVH, Nq, Nk, d, causal, dtype, tiles=None) -> dict:
    g = torch.Generator(device="cuda").manual_seed(torch.randint(0, 2**31, (1,)).item())
    q = torch.randn(B, H, Nq, d, device="cuda", dtype=DT[dtype], generator=g)
    k = torch.randn(B, KVH, Nk, d, device="cuda", dtype=DT[dtype], generator=g)
    v = torch.randn(B, KVH, Nk, d, device="cuda", dtype=DT[dtype], generator=g)
    o = torch.full_like(q, float("nan"))
    lse = torch.full((B, H, Nq), float("nan"), device="cuda", dtype=torch.float32)
    run_fa2(q, k, v, causal, dtype, tiles, out=(o, lse))
    torch.cuda.synchronize()
    ref_o, ref_lse = reference(q, k, v, causal)
    # torch's own same-dtype attention (default backend) against the same reference
    same = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=KVH != H)
    err_same = rel_err(same, ref_o)
    nan = bool(torch.isnan(o).any().item() or torch.isnan(lse).any().item())
    err_o = rel_err(o, ref_o) if not nan else float("nan")
    err_lse = ((lse - ref_lse).abs() / ref_lse.abs().clamp_min(1.0)).max().item() if not nan else float("nan")
    unit_roundoff = {"bf16": 2.0**-9, "fp16": 2.0**-12}[dtype]  # O is rounded to dtype once
    bound = 2 * err_same + max(1e-3, unit_roundoff)
    ok = (not nan) and err_o <= bound and err_lse <= 1e-3
    return dict(
        B=B,
        H=H,
        KVH=KVH,
        Nq=Nq,
        Nk=Nk,
        d=d,
        causal=int(causal),
        dtype=dtype,
        tiles=tuple(tiles or FA2_TILES[d]),
        err_o=err_o,
        err_same=err_same,
        bound=bound,
        err_lse=err_lse,
        nan=nan,
        ok=ok,
    )


# ----------------------------------------------------------------------------- timing
_FLUSH = None


def time_ms(fn) -> float:
    global _FLUSH
    if _FLUSH is None:
        _FLUSH = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
    for _ in range(WARMUP):
        fn()
    times = []
    for _ in range(REPS):
        _FLUSH.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    times.sort()
    return times[len(times) // 2]


def tflops(B, H, N, d, causal, ms):
    f = 4.0 * B * H * N * N * d / (2 if causal else 1)
    return f / (ms * 1e-3) / 1e12


def bench(N, d, causal, dtype="bf16", tiles=None) -> dict:
    B, H = 16384 // N, 2048 // d
    q = torch.randn(B, H, N, d, device="cuda", dtype=DT[dtype])
    k = torch.randn(B, H, N, d, device="cuda", dtype=DT[dtype])
    v = torch.randn(B, H, N, d, device="cuda", dtype=DT[dtype])
    out = (torch.empty_like(q), torch.empty((B, H, N), device="cuda", dtype=torch.float32))
    row = dict(N=N, d=d, causal=int(causal), B=B, H=H, tiles=tuple(tiles or FA2_TILES[d]))
    fn, _, _ = prepare_fa2(q, k, v, causal, dtype, tiles, out)
    row["fa2"] = tflops(B, H, N, d, causal, time_ms(fn))
    for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
        try:
            with sdpa_kernel(backend):
                ms = time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal))
            row[name] = tflops(B, H, N, d, causal, ms)
        except Exception as e:  # backend not available for this shape
            row[name] = float("nan")
            row[name + "_err"] = str(e).splitlines()[0][:80]
    row["vs_flash"] = row["fa2"] / row["flash"]
    return row


# ----------------------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer benchmark sizes")
    ap.add_argument("--sweep", action="store_true", help="time the SWEEP tile candidates too")
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--out", default=None, help="directory for results.json")
    a = ap.parse_args()
    print(
        f"GPU: {torch.cuda.get_device_name()}  arch: {device_arch()}  torch {torch.__version__}  cupy {cp.__version__}"
    )
    results = {"gpu": torch.cuda.get_device_name(), "checks": [], "bench": [], "sweep": []}

    # -- correctness: edge problems with the recommended tiles
    cases = []
    for dtype in ("bf16", "fp16"):
        for d in (64, 128, 256):
            for causal in (False, True):
                cases.append((2, 4, 4, 1000, 1000, d, causal, dtype))  # ragged
                cases.append((1, 8, 2, 3000, 3000, d, causal, dtype))  # ragged + GQA
    for causal in (False, True):
        cases.append((1, 4, 2, 700, 1500, 128, causal, "bf16"))  # Nq < Nk
        cases.append((1, 4, 4, 1500, 700, 128, causal, "bf16"))  # Nq > Nk
        cases.append((3, 2, 1, 1, 77, 64, causal, "fp16"))  # single query row
        cases.append((1, 2, 2, 4096, 4096, 128, causal, "bf16"))  # tile multiples
    sweep_tiles = [(d, t) for d, ts in SWEEP.items() for t in ts] if a.sweep else []
    for d, t in sweep_tiles:
        for causal in (False, True):
            cases.append((1, 4, 2, 1000, 1000, d, causal, "bf16", t))
    # compile everything up front, in parallel (NVRTC runs outside the GIL)
    from concurrent.futures import ThreadPoolExecutor

    keys = {(c[5], bool(c[6]), c[7], tuple(c[8]) if len(c) > 8 else tuple(FA2_TILES[c[5]])) for c in cases}
    with ThreadPoolExecutor(16) as ex:
        list(
            ex.map(
                lambda kk: compile_kernel(
                    "fa2.cu", "fa2_fwd", fa2_defines(kk[0], kk[1], Fa2Tiles(*kk[3])), kk[2]
                ),
                keys,
            )
        )
    print(f"compiled {len(keys)} variants")
    failed = 0
    print(
        f"{'B':>2} {'H':>2} {'KVH':>3} {'Nq':>5} {'Nk':>5} {'d':>3} {'c':>1} {'dt':>4} {'tiles':>18}"
        f" {'err_o':>9} {'bound':>9} {'err_lse':>9} ok"
    )
    for c in cases:
        r = check(*c)
        results["checks"].append(r)
        failed += not r["ok"]
        print(
            f"{r['B']:>2} {r['H']:>2} {r['KVH']:>3} {r['Nq']:>5} {r['Nk']:>5} {r['d']:>3} {r['causal']:>1}"
            f" {r['dtype']:>4} {str(r['tiles']):>18} {r['err_o']:9.2e} {r['bound']:9.2e}"
            f" {r['err_lse']:9.2e} {'ok' if r['ok'] else 'FAIL'}"
        )
    passed_tiles = {(r["d"], r["tiles"], r["causal"]) for r in results["checks"] if r["ok"]}
    failed_tiles = {(r["d"], r["tiles"], r["causal"]) for r in results["checks"] if not r["ok"]}
    ok_tiles = passed_tiles - failed_tiles

    def save():
        if a.out:
            Path(a.out).mkdir(parents=True, exist_ok=True)
            (Path(a.out) / "results.json").write_text(json.dumps(results, indent=1, default=str))

    save()
    if a.no_bench:
        return 1 if failed else 0

    # -- tile sweep (d=... at N=4096), only tiles whose check passed
    if a.sweep:
        print("\nsweep (bf16, N=4096): TFLOP/s")
        for d, t in sweep_tiles:
            for causal in (False, True):
                if (d, tuple(t), int(causal)) not in ok_tiles:
                    print(f"d={d} {tuple(t)} causal={int(causal)}: check FAILED, not timed")
                    continue
                r = bench(4096, d, causal, tiles=t)
                results["sweep"].append(r)
                print(
                    f"d={d:3} tiles={str(tuple(t)):18} causal={int(causal)} fa2={r['fa2']:6.1f}"
                    f" flash={r['flash']:6.1f} ratio={r['vs_flash']:.3f}"
                )
                save()

    # -- main table (recommended tiles)
    Ns = (2048, 8192) if a.quick else (1024, 2048, 4096, 8192, 16384)
    print()
    for d in (64, 128, 256):
        for causal in (False, True):
            if (d, tuple(FA2_TILES[d]), int(causal)) not in ok_tiles:
                print(f"d={d} causal={int(causal)}: check FAILED, not timed")
                continue
            for N in Ns:
                results["bench"].append(bench(N, d, causal))
                save()
    print(f"\nGPU: {torch.cuda.get_device_name()} (bf16, B=16384/N, H=2048/d); TFLOP/s, median of {REPS}")
    print(
        f"{'d':>4} {'causal':>6} {'N':>6} {'tiles':>18} {'fa2':>7} {'flash':>7} {'cudnn':>7} {'fa2/flash':>9}"
    )
    for r in results["bench"]:
        print(
            f"{r['d']:>4} {r['causal']:>6} {r['N']:>6} {str(r['tiles']):>18} {r['fa2']:7.1f}"
            f" {r['flash']:7.1f} {r['cudnn']:7.1f} {r['vs_flash']:9.3f}"
        )
    if failed:
        print(f"\n{failed} correctness checks FAILED")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
