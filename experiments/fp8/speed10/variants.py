"""fa3's fp8 forward: tile and kernel variants, each checked then timed (issue 24's speed gap).

    python3 experiments/fp8/speed10/variants.py OUT.csv [NAME ...]
    python3 experiments/fp8/speed10/variants.py --once NAME      (one run, for Nsight Compute)

Each variant is the Plan of `iosim bench --schedule fa3 --dtype fp8_e4m3` (block scaling,
batch 16384/N, heads 2048/d) with tiles and extra kernel defines changed (VARIANTS); for each:
fresh random inputs, O and LSE NaN-poisoned, checked against the float32 reference with
bench's bound (iosim.gpu.bench.check), then timed with bench's timer (L2 flushed, median):
the whole Plan (quantisation and attention) and the attention kernel alone. Rows are written
as they finish; the Plan's own choice comes first and again last (the spread of one version).
"""

from __future__ import annotations

import csv
import sys
from dataclasses import replace
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from iosim.core.hardware import load  # noqa: E402
from iosim.core.problem import Problem  # noqa: E402
from iosim.gpu import bench  # noqa: E402
from iosim.gpu.launch import Launcher  # noqa: E402
from iosim.schedules import Tiles, plan  # noqa: E402

# name: (head_dim, N, causal, block_n, stages, extra defines of the attention kernel)
VARIANTS = {
    "d128_bn128": (128, 8192, False, 128, None, {}),
    "d128_bn128_nopp": (128, 8192, False, 128, None, {"PINGPONG": 0}),
    "d128_bn128_lazy": (128, 8192, False, 128, None, {"LAZY_RESCALE": 1}),
    "d128_bn192": (128, 8192, False, 192, None, {}),
    "d128_bn224": (128, 8192, False, 224, None, {}),
    "d128_bn192_lazy": (128, 8192, False, 192, None, {"LAZY_RESCALE": 1}),
    "d128_bn224_lazy": (128, 8192, False, 224, None, {"LAZY_RESCALE": 1}),
    "d128_bn224_lazy_s3": (128, 8192, False, 224, 3, {"LAZY_RESCALE": 1}),
    "d128_bn128_causal": (128, 8192, True, 128, None, {}),
    "d128_bn224_lazy_causal": (128, 8192, True, 224, None, {"LAZY_RESCALE": 1}),
    "d128_bn224_lazy_16k": (128, 16384, False, 224, None, {"LAZY_RESCALE": 1}),
    "d256_bn128": (256, 8192, False, 128, None, {}),
    "d256_bn128_lazy": (256, 8192, False, 128, None, {"LAZY_RESCALE": 1}),
    "d64_bn128": (64, 8192, False, 128, None, {}),
    "d64_bn128_lazy": (64, 8192, False, 128, None, {"LAZY_RESCALE": 1}),
    "d128_bn128_again": (128, 8192, False, 128, None, {}),
}


def problem(d: int, n: int, causal: bool) -> Problem:
    return Problem(batch=16384 // n, heads=2048 // d, kv_heads=2048 // d, seqlen_q=n,
                   seqlen_k=n, head_dim=d, causal=causal, dtype="fp8_e4m3", fp8_scaling="block")


def variant_plan(hw, d, n, causal, bn, stages, extra):
    pl = plan("fa3", problem(d, n, causal), hw, Tiles(block_n=bn, stages=stages))
    ks = tuple(replace(k, defines={**k.defines, **extra}) if k is pl.main else k
               for k in pl.kernels)
    return replace(pl, kernels=ks)


def run(name: str, hw, timer, seed: int) -> dict:
    d, n, causal, bn, stages, extra = VARIANTS[name]
    pl = variant_plan(hw, d, n, causal, bn, stages, extra)
    p = pl.problem
    r = {"variant": name, "head_dim": d, "seqlen": n, "causal": causal, "block_n": bn,
         "stages": pl.main.defines["STAGES"], "extra": " ".join(f"{k}={v}" for k, v in extra.items())}
    got = bench.checked_inputs(torch, "fa3", p, seed, (pl.main.block_m, pl.main.block_n))
    (q, k, v), (ref, lse_ref), bound, _ = got
    try:
        launcher = Launcher(pl, q, k, v)
        err, ok = bench.check(torch, launcher, ref, lse_ref, bound)
    except Exception as e:  # a compile or launch failure is a row too
        r["status"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:150]}"
        return r
    r.update(max_rel_err=err, err_bound=bound, status="ok" if ok else "failed_check")
    if ok:
        r["time_ms"] = timer(launcher)
        r["attn_ms"] = timer(launcher.only(pl.main.name))
        f = p.fa_flops()
        r["tflops"] = f / (r["time_ms"] * 1e-3) / 1e12
        r["attn_tflops"] = f / (r["attn_ms"] * 1e-3) / 1e12
    return r


def main(out: str, names: list[str]) -> None:
    bench.require_gpu("variants.py")
    name = torch.cuda.get_device_name(0)
    hw = load(bench.profile_for(name))
    timer = bench.Timer(torch, hw.l2_bytes)
    cols = ["variant", "head_dim", "seqlen", "causal", "block_n", "stages", "extra", "status",
            "max_rel_err", "err_bound", "time_ms", "tflops", "attn_ms", "attn_tflops", "gpu_name"]
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, cols)
        w.writeheader()
        for i, v in enumerate(names or list(VARIANTS)):
            r = run(v, hw, timer, 1000 + i) | {"gpu_name": name}
            w.writerow(r)
            f.flush()
            print(f"{v:26s} {r['status']:12s} err {r.get('max_rel_err', float('nan')):.3g}"
                  f"/{r.get('err_bound', float('nan')):.3g}  plan {r.get('tflops', float('nan')):7.1f}"
                  f"  attn {r.get('attn_tflops', float('nan')):7.1f} TFLOP/s", flush=True)
            torch.cuda.empty_cache()


def once(name: str) -> None:
    """Run variant `name`'s kernels once on fresh NaN-poisoned outputs (what ncu profiles)."""
    bench.require_gpu("variants.py")
    hw = load(bench.profile_for(torch.cuda.get_device_name(0)))
    pl = variant_plan(hw, *VARIANTS[name])
    q, k, v = bench.inputs(torch, pl.problem, 1)
    launcher = Launcher(pl, q, k, v)
    launcher.poison()
    launcher()
    torch.cuda.synchronize()


if __name__ == "__main__":
    if sys.argv[1] == "--once":
        once(sys.argv[2])
    else:
        main(sys.argv[1], sys.argv[2:])
