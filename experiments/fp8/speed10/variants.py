"""fa3's fp8 forward: kernel and tile variants beside main's kernel, each checked, then timed in
interleaved rounds (issue 24's speed gap at d = 128).

    python3 experiments/fp8/speed10/variants.py OUT.csv [--main-kernels DIR] [--rounds R] [NAME ...]
    python3 experiments/fp8/speed10/variants.py --once NAME      (one run, for Nsight Compute)
    python3 experiments/fp8/speed10/variants.py --summary OUT.csv

A variant is the Plan of `iosim bench --schedule fa3 --dtype fp8_e4m3` (block scaling, batch
16384/N, heads 2048/d) with its tiles and attention-kernel defines changed (VARIANTS); `main`
variants compile kernels/ from DIR instead (a copy of main's kernels/, for the kernel as it was;
their Plan keeps main's 128-key tiles). Each variant: fresh random inputs, O and LSE NaN-poisoned,
checked against the float32 reference with bench's bound (iosim.gpu.bench.check). Then R rounds,
each timing every checked variant once (bench's timer: L2 flushed before each repetition,
median): the whole Plan (quantisation and attention) and the attention kernel alone; a row per
variant and round, so that drift (clocks, temperature) shows and medians over rounds compare.
"""

from __future__ import annotations

import csv
import sys
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from iosim.core.hardware import load  # noqa: E402
from iosim.core.problem import Problem  # noqa: E402
from iosim.schedules import Tiles, plan  # noqa: E402

# name: (head_dim, N, causal, block_n, extra defines of the attention kernel, main's kernels)
# (block_n None: the Plan's). main_*: main's kernel at main's 128-key tiles; new_*: this tree's
# Plan (128x192 at d = 128; its kernel is main's, the same PTX). The candidate's variants (EXP_EMU,
# four softmax chains) are those of commit 722ca2b (experiments/fp8/h100/speed11/candidate).
VARIANTS = {
    "main_d128": (128, 8192, False, 128, {}, True),
    "new_d128": (128, 8192, False, None, {}, False),
    "main_d128_4k": (128, 4096, False, 128, {}, True),
    "new_d128_4k": (128, 4096, False, None, {}, False),
    "main_d128_16k": (128, 16384, False, 128, {}, True),
    "new_d128_16k": (128, 16384, False, None, {}, False),
    "main_d128_causal": (128, 8192, True, 128, {}, True),
    "new_d128_causal": (128, 8192, True, None, {}, False),
    "main_d128_causal_16k": (128, 16384, True, 128, {}, True),
    "new_d128_causal_16k": (128, 16384, True, None, {}, False),
}
COLUMNS = ["variant", "round", "head_dim", "seqlen", "causal", "block_n", "defines", "kernels",
           "status", "max_rel_err", "err_bound", "time_ms", "tflops", "attn_ms", "attn_tflops",
           "gpu_name"]


def problem(d: int, n: int, causal: bool) -> Problem:
    return Problem(batch=16384 // n, heads=2048 // d, kv_heads=2048 // d, seqlen_q=n,
                   seqlen_k=n, head_dim=d, causal=causal, dtype="fp8_e4m3", fp8_scaling="block")


NEW_DEFINES = ()  # this tree's attention-kernel defines that main's kernel does not take


def variant_plan(hw, name: str):
    d, n, causal, bn, extra, main = VARIANTS[name]
    pl = plan("fa3", problem(d, n, causal), hw, Tiles(block_n=bn))

    def defines(k):
        out = {**k.defines, **extra}
        return {n: v for n, v in out.items() if not (main and n in NEW_DEFINES)}

    ks = tuple(replace(k, defines=defines(k)) if k is pl.main else k for k in pl.kernels)
    return replace(pl, kernels=ks)


@contextmanager
def kernels_from(path: str | None):
    """Compile kernels/ from `path` (main's copy) inside the block; the module cache keys on the
    source text, so builds of the two trees never mix."""
    from iosim.gpu import compile as comp

    if path is None:
        yield
        return
    old = comp.kernels_dir
    comp.kernels_dir = lambda: Path(path).resolve()
    try:
        yield
    finally:
        comp.kernels_dir = old


def prepare(torch, bench, hw, name: str, seed: int, main_dir: str | None):
    """(launcher or None, the variant's first columns): built, compiled and checked."""
    from iosim.gpu.launch import Launcher

    d, n, causal, _, extra, main = VARIANTS[name]
    pl = variant_plan(hw, name)
    r = {"variant": name, "head_dim": d, "seqlen": n, "causal": causal,
         "block_n": pl.main.defines["BLOCK_N"], "kernels": "main" if main else "this tree",
         "defines": " ".join(f"{k}={pl.main.defines[k]}" for k in NEW_DEFINES
                             if k in pl.main.defines)}
    if main and main_dir is None:
        return None, r | {"status": "skipped: no --main-kernels"}
    (q, k, v), (ref, lse_ref), bound, _ = bench.checked_inputs(
        torch, "fa3", pl.problem, seed, (pl.main.block_m, pl.main.block_n))
    try:
        with kernels_from(main_dir if main else None):
            launcher = Launcher(pl, q, k, v)
            err, ok = bench.check(torch, launcher, ref, lse_ref, bound)
    except Exception as e:  # a compile or launch failure is a row too
        return None, r | {"status": f"error: {type(e).__name__}: {str(e).splitlines()[0][:150]}"}
    r.update(max_rel_err=err, err_bound=bound, status="ok" if ok else "failed_check")
    return (launcher if ok else None), r


def main(out: str, names: list[str], main_dir: str | None, rounds: int) -> None:
    from iosim.gpu import bench

    torch = bench.require_gpu("variants.py")
    gpu = torch.cuda.get_device_name(0)
    hw = load(bench.profile_for(gpu))
    timer = bench.Timer(torch, hw.l2_bytes)
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        ready = []
        for i, name in enumerate(names or list(VARIANTS)):
            launcher, r = prepare(torch, bench, hw, name, 1000 + i, main_dir)
            print(f"check {name:22s} {r['status']:12s} err {r.get('max_rel_err', float('nan')):.3g}"
                  f" / bound {r.get('err_bound', float('nan')):.3g}", flush=True)
            torch.cuda.empty_cache()
            if launcher is None:
                w.writerow(r | {"round": 0, "gpu_name": gpu})
            else:
                ready.append((launcher, r))
        for rnd in range(1, rounds + 1):
            for launcher, r in ready:
                p, attn = launcher.plan.problem, launcher.only(launcher.plan.main.name)
                t, ta = timer(launcher), timer(attn)
                f_ = p.fa_flops()
                w.writerow(r | {"round": rnd, "time_ms": t, "attn_ms": ta, "gpu_name": gpu,
                                "tflops": f_ / (t * 1e-3) / 1e12, "attn_tflops": f_ / (ta * 1e-3) / 1e12})
                f.flush()
    print(summary(out))


def summary(path: str) -> str:
    """Per variant: the medians over the rounds of TFLOP/s, whole Plan and attention alone, and
    their spread (max - min over the rounds, in percent of the median)."""
    import pandas as pd

    df = pd.read_csv(path)
    ok = df[df.status == "ok"]
    g = ok.groupby("variant", sort=False)
    out = pd.DataFrame({"plan": g.tflops.median(), "attn": g.attn_tflops.median(),
                        "attn spread %": (g.attn_tflops.max() - g.attn_tflops.min())
                        / g.attn_tflops.median() * 100,
                        "rounds": g.size(), "err": g.max_rel_err.first(), "bound": g.err_bound.first()})
    bad = df[df.status != "ok"][["variant", "status"]]
    return out.round(3).to_string() + ("" if bad.empty else "\n" + bad.to_string(index=False))


def once(name: str, main_dir: str | None) -> None:
    """Run variant `name`'s kernels once on fresh NaN-poisoned outputs (what ncu profiles)."""
    from iosim.gpu import bench
    from iosim.gpu.launch import Launcher

    torch = bench.require_gpu("variants.py")
    hw = load(bench.profile_for(torch.cuda.get_device_name(0)))
    pl = variant_plan(hw, name)
    q, k, v = bench.inputs(torch, pl.problem, 1)
    with kernels_from(main_dir if VARIANTS[name][5] else None):
        launcher = Launcher(pl, q, k, v)
    launcher.poison()
    launcher()
    torch.cuda.synchronize()


def cli(argv: list[str]) -> None:
    args, opts = [], {"--main-kernels": None, "--rounds": "3"}
    it = iter(argv)
    for a in it:
        if a in opts:
            opts[a] = next(it)
        else:
            args.append(a)
    if args[0] == "--summary":
        print(summary(args[1]))
    elif args[0] == "--once":
        once(args[1], opts["--main-kernels"])
    else:
        main(args[0], args[1:], opts["--main-kernels"], int(opts["--rounds"]))


if __name__ == "__main__":
    cli(sys.argv[1:])
