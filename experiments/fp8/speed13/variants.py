"""fa3's fp8 forward, attention kernel alone: the persistent grid (issue 24, session 13) beside
the session-12 kernel (main's kernels/fa3.cu at 2bbaea6, as fa3_s12.cu beside this file: `git show 2bbaea6:kernels/fa3.cu > experiments/fp8/speed13/fa3_s12.cu`, not committed) and beside this
tree's kernel on the one-tile grid, each checked, then timed in interleaved rounds.

    python3 experiments/fp8/speed13/variants.py OUT.csv [--set SET] [--rounds R] [--budget S] [NAME ...]
    python3 experiments/fp8/speed13/variants.py --summary OUT.csv

A variant is the Plan of `iosim bench --schedule fa3 --dtype fp8_e4m3` (block scaling, batch
16384/N, heads 2048/d, non-causal) with its grid, source or defines changed; `base_*` is the Plan
as it is (this tree's: the persistent grid at d = 256). `s12`: the one-tile grid and kernels/fa3_s12.cu
(run.sh copies it there from this folder: the kernel the session-12 rows ran, whose copying
thread writes the factors, its warp scanning the V factors before Q's copy); `onetile`: this tree's kernel on the
one-tile grid (at 370a0f2 and f6e1806, d27f240 and e58de19 before the rebase onto f80ab87, the factors from the producer's warp 1, Q's copy before the
lazy V factors' scan; since 0a9e07f the one-tile grid compiles to `s12`'s SASS: sass_same.sh);
`pers`: the persistent grid; `lazy`: the Plan's grid with LAZY_RESCALE=1 (d = 128). Each variant: fresh random inputs,
O and LSE NaN-poisoned, checked against the float32 reference with bench's bound
(iosim.gpu.bench.check); one that fails is a row saying so and is never timed. Then R rounds,
each timing every checked variant's attention kernel once (bench's timer: L2 flushed before
each repetition, median of the repetitions), in the table's order in odd rounds and reversed in
even ones. --summary: tools/fp8_rounds.py's table (per variant the median TFLOP/s, the spread,
the median per-round ratio to the base of its shape and the rounds won).
"""

from __future__ import annotations

import csv
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from iosim.core.hardware import load  # noqa: E402
from iosim.core.problem import Problem  # noqa: E402
from iosim.schedules import Tiles, plan  # noqa: E402

# kernel variants: (persistent grid or the Plan's (None), kernels/ source or the Plan's,
# attention-kernel defines over the Plan's)
KINDS = {
    "base": (None, None, {}),
    "s12": (False, "fa3_s12.cu", {}),
    "onetile": (False, None, {}),
    "pers": (True, None, {}),
    "lazy": (None, None, {"LAZY_RESCALE": 1}),
}
SEQLENS = (4096, 8192, 16384)
# round1 ran at commit 370a0f2 (d27f240 before the rebase onto f80ab87), whose Plan took the persistent grid at every head_dim (its
# `base` is `pers` here; its `onetile` at d = 128 had the factors' warp, since confined to
# LAZY_RESCALE and PERSISTENT); round2: the Plan's persistent grid at d = 256 only, the one-tile
# grid with the copying thread's factors at d = 128 and 64 beside the persistent one again,
# and the lazy rescale on the one-tile grid at d = 128
SETS = {"round1": {256: ("base", "s12", "onetile"), 128: ("base", "s12", "onetile", "lazy"),
                   64: ("base", "s12")},
        "round2": {256: ("base", "s12", "onetile"), 128: ("base", "s12", "pers", "lazy"),
                   64: ("base", "s12", "pers")}}


def variants(name: str) -> dict[str, tuple[int, int, str]]:
    return {f"{kind}_d{d}_{n // 1024}k": (d, n, kind)
            for d, kinds in SETS[name].items() for n in SEQLENS for kind in kinds}


VARIANTS = {k: v for s in SETS for k, v in variants(s).items()}
COLUMNS = ["variant", "kind", "round", "head_dim", "seqlen", "block_n", "stages", "grid", "defines",
           "source", "status", "max_rel_err", "err_bound", "attn_ms", "attn_tflops", "gpu_name"]


def problem(d: int, n: int) -> Problem:
    return Problem(batch=16384 // n, heads=2048 // d, kv_heads=2048 // d, seqlen_q=n,
                   seqlen_k=n, head_dim=d, causal=False, dtype="fp8_e4m3", fp8_scaling="block")


def variant_plan(hw, d: int, n: int, kind: str):
    persistent, src, extra = KINDS[kind]
    pl = plan("fa3", problem(d, n), hw, Tiles(persistent=persistent))

    def change(k):
        if k is not pl.main:
            return k
        return replace(k, defines={**k.defines, **extra}, source=src or k.source)

    return replace(pl, kernels=tuple(change(k) for k in pl.kernels))


def prepare(torch, bench, hw, name: str, seed: int):
    """(the Launcher or None, the variant's columns): built, compiled and checked on fresh
    NaN-poisoned outputs."""
    from iosim.gpu.launch import Launcher

    d, n, kind = VARIANTS[name]
    pl = variant_plan(hw, d, n, kind)
    k = pl.main
    r = {"variant": name, "kind": kind, "head_dim": d, "seqlen": n, "block_n": k.block_n,
         "stages": k.defines["STAGES"], "grid": "x".join(map(str, k.grid)), "source": k.source,
         "defines": " ".join(f"{a}={b}" for a, b in KINDS[kind][2].items())}
    got = bench.checked_inputs(torch, "fa3", pl.problem, seed, (k.block_m, k.block_n))
    if isinstance(got, dict):
        return None, r | {"status": got["status"]}
    (q, kk, v), (ref, lse_ref), bound, _ = got
    try:
        launcher = Launcher(pl, q, kk, v)
        err, ok = bench.check(torch, launcher, ref, lse_ref, bound)
    except Exception as e:  # a compile or launch failure is a row too
        return None, r | {"status": f"error: {type(e).__name__}: {str(e).splitlines()[0][:150]}"}
    r.update(max_rel_err=err, err_bound=bound, status="ok" if ok else "failed_check")
    return (launcher if ok else None), r


def main(out: str, names: list[str], rounds: int, budget: float) -> None:
    """Check every variant of `names`, then time the checked ones in interleaved rounds."""
    from iosim.gpu import bench

    torch = bench.require_gpu("variants.py")
    gpu = torch.cuda.get_device_name(0)
    hw = load(bench.profile_for(gpu))
    timer = bench.Timer(torch, hw.l2_bytes)
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        ready = []
        for i, name in enumerate(names):
            launcher, r = prepare(torch, bench, hw, name, 2000 + i)
            print(f"check {name:22s} {r['status']:12s} err {r.get('max_rel_err', float('nan')):.3g}"
                  f" / bound {r.get('err_bound', float('nan')):.3g}", flush=True)
            if launcher is None:
                w.writerow(r | {"round": 0, "gpu_name": gpu})
            else:  # the Launcher stays referenced: it owns the buffers the kernel reads
                ready.append((launcher, launcher.only(launcher.plan.main.name), r))
        for rnd in range(1, rounds + 1):
            for _, attn, r in ready if rnd % 2 else ready[::-1]:
                ms = timer(attn, budget_s=budget)
                flops = problem(r["head_dim"], r["seqlen"]).fa_flops()
                w.writerow(r | {"round": rnd, "attn_ms": ms, "attn_tflops": flops / (ms * 1e-3) / 1e12,
                                "gpu_name": gpu})
                f.flush()
            print(f"round {rnd} done", flush=True)
    print(summary(out))


def summary(path: str) -> str:
    sys.path.insert(0, str(ROOT / "tools"))
    from fp8_rounds import report

    return report(path)


def cli(argv: list[str]) -> None:
    args, opts = [], {"--rounds": "5", "--budget": "0.25", "--set": "round2"}
    it = iter(argv)
    for a in it:
        if a in opts:
            opts[a] = next(it)
        else:
            args.append(a)
    if args and args[0] == "--summary":
        print(summary(args[1]))
        return
    unknown = [n for n in args[1:] if n not in VARIANTS]
    if not args or unknown or opts["--set"] not in SETS:
        sys.exit(f"error: usage: variants.py OUT.csv [--set {'|'.join(SETS)}] [--rounds R] "
                 f"[--budget S] [NAME ...]; unknown {unknown or opts['--set']}; known: {', '.join(VARIANTS)}")
    main(args[0], args[1:] or list(variants(opts["--set"])), int(opts["--rounds"]), float(opts["--budget"]))


if __name__ == "__main__":
    cli(sys.argv[1:])
