"""Tile and kernel-variant sweep of the fa2 backward (kernels/fa2_bwd.cu) beside torch's flash
backward, on the GPU machine: `. benchmarks/gpu_env.sh; python3 benchmarks/fa2_bwd_tune.py SET OUT.csv`.

For every problem of SET (bf16, batch = 16384/N, heads = 2048/d): fresh random inputs (a new
seed per problem), the float32 reference gradients and the same-dtype SDPA backward's error
(iosim.gpu.backward: the bound is bench.error_bound, as `iosim bench --direction bwd` uses);
torch's flash backward checked and timed; then each variant of SET for that head_dim: the
Plan's kernels with its tiles (and extra -D defines on the main kernel, e.g. MINB for
__launch_bounds__ in the first call's kernel, or `_source`: another copy of the main kernel
in kernels/), NaN-poisoned, checked against the reference (a failed check is a row with
its error, never timed), then timed (CUDA events, L2 flushed, median). The first variant is
timed again last, as a measure of the run's drift. OUT is rewritten with every row so far
after each row (an interrupted run keeps what it measured).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.gpu import backward, bench
from iosim.schedules import Tiles, plan

# (name, (block_m, block_n, warps, stages) or None for the table's, extra defines of fa2_bwd).
# The sets are the four calls of reports/data/h100/dev/fa2_bwd/, in order. The switches of
# `decide`, `fuse` and `final` (FB_FUSE1, FB_FUSE2, FB_PREGS, FB_RED4, MINB, FB_P1U,
# FB_FUSE23, FB_EXPPOLY) were in the working tree's kernel then; the kernel kept what won
# (kernels/fa2_bwd.cu ignores them now). `before` needs the kernel of commit 720cde7 as
# kernels/fa2_bwd_v0.cu: `git show 720cde7:kernels/fa2_bwd.cu > kernels/fa2_bwd_v0.cu`.
V = tuple
SETS: dict[str, dict] = {
    # first call: tiles, occupancy and kernel variants, d = 64 and 128
    "decide": {
        "problems": [(n, d, c) for d in (64, 128) for n in (2048, 16384) for c in (False, True)],
        64: [V(("base", None, {})), V(("pregs", None, {"FB_PREGS": 1})),
             V(("fuse2", None, {"FB_FUSE2": 1})), V(("red4", None, {"FB_RED4": 1})),
             V(("pregs+fuse2+red4", None, {"FB_PREGS": 1, "FB_FUSE2": 1, "FB_RED4": 1})),
             V(("fuse1", None, {"FB_FUSE1": 1})),
             V(("fuse1+fuse2+red4", None, {"FB_FUSE1": 1, "FB_FUSE2": 1, "FB_RED4": 1})),
             V(("64x64x4 3cta", (64, 64, 4, 2), {"MINB": 3})),
             V(("64x64x4 3cta red4", (64, 64, 4, 2), {"MINB": 3, "FB_RED4": 1})),
             V(("64x128x8 2cta", (64, 128, 8, 2), {"MINB": 2})),
             V(("64x128x8", (64, 128, 8, 2), {})),
             V(("128x128x8x3", (128, 128, 8, 3), {}))],
        128: [V(("base", None, {})), V(("pregs", None, {"FB_PREGS": 1})),
              V(("fuse2", None, {"FB_FUSE2": 1})), V(("red4", None, {"FB_RED4": 1})),
              V(("pregs+fuse2+red4", None, {"FB_PREGS": 1, "FB_FUSE2": 1, "FB_RED4": 1})),
              V(("fuse1 u1", None, {"FB_FUSE1": 1, "FB_P1U": 1})),
              V(("128x64x8", (128, 64, 8, 2), {})),
              V(("128x64x8 red4", (128, 64, 8, 2), {"FB_RED4": 1})),
              V(("64x128x8x3", (64, 128, 8, 3), {})),
              V(("64x64x4", (64, 64, 4, 2), {}))],
    },
}
F1 = {"FB_FUSE1": 1}  # Sᵀ and dPᵀ in one k loop, interleaved MMA by MMA
F1B = {"FB_FUSE1": 2, "FB_P1U": 4}  # the same, one k slice of each in turn, fully unrolled
F1U1 = {"FB_FUSE1": 1, "FB_P1U": 1}
SETS["fuse"] = {  # second call: the fused phase 1 (the first call's winner) without spills
    "problems": [(n, d, c) for d in (64, 128, 256) for n in (2048, 8192, 16384)
                 for c in (False, True) if n != 8192 or d == 64],
    64: [V(("base", None, {})), V(("fuse1", None, F1)), V(("fuse1b", None, F1B)),
         V(("fuse1b+fuse23", None, {**F1B, "FB_FUSE23": 1})),
         V(("fuse1b+red4", None, {**F1B, "FB_RED4": 1})),
         V(("fuse1b 3 stages", (128, 128, 8, 3), F1B))],
    128: [V(("base", None, {})), V(("fuse1 u1", None, F1U1)),
          V(("fuse1 u1+fuse23", None, {**F1U1, "FB_FUSE23": 1})),
          V(("fuse1 u1+red4", None, {**F1U1, "FB_RED4": 1})),
          V(("fuse1 u1 3 stages", (64, 128, 8, 3), F1U1))],
    256: [V(("base", None, {})), V(("fuse1", None, F1)), V(("fuse1b", None, {"FB_FUSE1": 2})),
          V(("fuse1 u1", None, F1U1))],
}
V0 = {"_source": "fa2_bwd_v0.cu"}  # the kernel before this sweep (git show 720cde7:kernels/fa2_bwd.cu)
SETS["final"] = {  # third call: the kept kernel beside the one before, and the FMA-pipe exp2
    "problems": SETS["fuse"]["problems"],
    **{d: [V(("final", None, {})), V(("before", None, V0)),
           V(("final+exppoly/2", None, {"FB_EXPPOLY": 2}))] for d in (64, 128, 256)},
}
SETS["rot"] = {  # fourth call: not causal, each key block starting at its own query block
    "problems": SETS["fuse"]["problems"],
    **{d: [V(("final", None, {})), V(("no rotation", None, {"FB_NOROT": 1})),
           V(("before", None, V0))] for d in (64, 128, 256)},
}
# The switches of `split` and `cta2` (FB_SPLIT1, FB_NTOUT, FB_RASTER, FB_LSE1, FB_MINB) are in
# reports/data/h100/dev/fa2_bwd/switches_split_cta2.patch (`git apply` it to run these sets);
# none won, the kernel has none of them.
# fifth call (d = 64 not causal at N >= 8192, issue 11's last gap): Sᵀ and dPᵀ in separate k
# loops with the exponentials of Pᵀ between dPᵀ's k slices (FB_SPLIT1; =2: masked steps
# keep the fused loop), LSE/D read once per
# column tile (FB_NTOUT), and CTA rasterisation over FB_RASTER (batch, head) slices.
SETS["split"] = {
    "problems": [(n, 64, c) for n in (2048, 8192, 16384) for c in (False, True)],
    64: [V(("final", None, {})), V(("split1", None, {"FB_SPLIT1": 1})),
         V(("ntout", None, {"FB_NTOUT": 1})), V(("raster2", None, {"FB_RASTER": 2})),
         V(("raster4", None, {"FB_RASTER": 4})), V(("raster8", None, {"FB_RASTER": 8})),
         V(("split1 fused masked", None, {"FB_SPLIT1": 2}))],
}
# sixth call: two CTAs an SM (their barriers and phases interleave). 128x64x4 fits twice only
# with one LSE/D slot (FB_LSE1: loaded after phase 1 of the step before; `_smem`: the Plan's
# shared memory less its second LSE/D slot); 64x64x4 (239 registers: two CTAs). (The run's
# CSV has a ctas_per_sm column, "? AttributeError": the occupancy query it tried, since removed.)
SETS["cta2"] = {
    "problems": [(n, 64, c) for n in (2048, 8192, 16384) for c in (False, True)],
    64: [V(("final", None, {})),
         V(("128x64x4 2cta lse1", (128, 64, 4, 2), {"FB_LSE1": 1, "FB_MINB": 2, "_smem": -1024})),
         V(("64x64x4 2cta", (64, 64, 4, 2), {"FB_MINB": 2})),
         V(("64x64x4 2cta lse1", (64, 64, 4, 2), {"FB_LSE1": 1, "FB_MINB": 2, "_smem": -512})),
         V(("lse1", None, {"FB_LSE1": 1, "_smem": -1024}))],
}
# seventh call (session 5): what Nsight Compute showed binding at d = 64 (ncu_source_d64_n8192:
# ~14% of warp samples in the dQ atomics' tail, long-scoreboard stalls while the red
# instructions held their registers). FB_BULK: dQ_i through a per-warp shared staging tile and
# TMA bulk reductions (cp.reduce.async.bulk, no registers held; +40 KB shared memory); FB_SKEW:
# dQ's k loop two steps per dV/dK step, so dQ is stored while dV/dK still run; FB_RED1: one
# address for a warp's red instructions; FB_PF32: dSᵀ from the fp32 Pᵀ; FB_LSEH: LSE/D read
# once per column tile. The switches are in reports/data/h100/dev/fa2_bwd/switches_bulk.patch
# (`git apply` it to the kernel of commit b0c3980 to run `bulk` or `confirm`); FB_PF32 and
# FB_LSEH won and are the kernel now, the rest lost.
BULK = {"FB_BULK": 1, "_smem": 8 * 32 * 40 * 4}
SETS["bulk"] = {
    "problems": [(n, 64, c) for n in (2048, 8192, 16384) for c in (False, True)]
    + [(n, 128, c) for n in (2048, 16384) for c in (False, True)],
    64: [V(("final", None, {})), V(("bulk", None, BULK)), V(("skew", None, {"FB_SKEW": 1})),
         V(("bulk+skew", None, {**BULK, "FB_SKEW": 1})), V(("red1", None, {"FB_RED1": 1})),
         V(("red1+skew", None, {"FB_RED1": 1, "FB_SKEW": 1})), V(("pf32", None, {"FB_PF32": 1})),
         V(("pf32+lseh", None, {"FB_PF32": 1, "FB_LSEH": 1})),
         V(("bulk+skew+pf32", None, {**BULK, "FB_SKEW": 1, "FB_PF32": 1}))],
    128: [V(("final", None, {})), V(("bulk", None, BULK)), V(("bulk+skew", None, {**BULK, "FB_SKEW": 1})),
          V(("red1", None, {"FB_RED1": 1})), V(("pf32", None, {"FB_PF32": 1}))],
}
# eighth call: pf32+lseh (the winner of `bulk`) made the kernel, beside the kernel before it
# (`git show b0c3980:kernels/fa2_bwd.cu > kernels/fa2_bwd_v1.cu`) and with FB_RED1. The kernel
# kept after it forms the Pᵀ/dSᵀ store offsets once per warp (rows 8 and 16 apart are constant
# offsets): the same instructions less address arithmetic, and no register spills with nvcc or
# NVRTC; `SKIP_TESTS=1 SKIP_SANITIZER=1 bash benchmarks/bwd_gpu.sh` measured that one.
SETS["confirm"] = {
    "problems": [(n, d, c) for d in (64, 128, 256) for n in (2048, 8192, 16384) for c in (False, True)],
    **{d: [V(("new", None, {})), V(("new+red1", None, {"FB_RED1": 1})),
           V(("before", None, {"_source": "fa2_bwd_v1.cu"}))] for d in (64, 128, 256)},
}
# ninth call: the GEMM k slices moved into kernels/bwd_mma.cuh (shared with fa1.cu's
# backward), beside the kernel before (`git show 3734d80:kernels/fa2_bwd.cu >
# kernels/fa2_bwd_v2.cu`): ptxas schedules d = 64 differently (same size, same registers).
SETS["shared"] = {
    "problems": [(n, 64, c) for n in (2048, 8192, 16384) for c in (False, True)],
    64: [V(("shared", None, {})), V(("before", None, {"_source": "fa2_bwd_v2.cu"}))],
}
BASE_AGAIN = True


def problems(spec) -> list[Problem]:
    return [Problem(batch=16384 // n, heads=2048 // d, seqlen_q=n, head_dim=d, dtype="bf16",
                    causal=c, direction="bwd") for n, d, c in spec]


def variant_plan(p: Problem, hw, tiles, extra: dict):
    t = Tiles(block_m=tiles[0], block_n=tiles[1], warps=tiles[2], stages=tiles[3]) if tiles else Tiles()
    pl = plan("fa2", p, hw, t)
    defines = {a: b for a, b in extra.items() if not a.startswith("_")}
    source = extra.get("_source")  # another copy of the kernel, in kernels/
    ks = tuple(replace(k, defines={**k.defines, **defines}, source=source or k.source,
                       smem_bytes=k.smem_bytes + extra.get("_smem", 0))
               if k.name == "fa2_bwd" else k for k in pl.kernels)
    return replace(pl, kernels=ks)


def main() -> None:
    which, out = sys.argv[1], Path(sys.argv[2])
    spec = SETS[which]
    torch = bench.require_gpu()
    info = bench.gpu_info(torch)
    hw = load(bench.profile_for(info["gpu_name"]))
    timer = bench.Timer(torch, hw.l2_bytes)
    t0 = time.time()
    summary, all_rows = [], []
    for p in problems(spec["problems"]):
        seed = int.from_bytes(os.urandom(4), "little") >> 1
        q, k, v = bench.inputs(torch, p, seed)
        do = backward.grad_output(torch, p, seed)
        ref, s_max = backward.reference_grads(torch, q, k, v, do, p)
        same = backward.grad_err(torch, backward.sdpa_grads(torch, q, k, v, do, p), ref, p)
        base = dict(gpu_name=info["gpu_name"], sm_clock_mhz=info["sm_clock_mhz"], seed=seed,
                    batch=p.batch, heads=p.heads, seqlen=p.seqlen_q, head_dim=p.head_dim,
                    causal=p.causal, ref_err_same_dtype=same)
        flash = backward._peer(torch, timer, q, k, v, do, p, "torch_flash",
                               ref, bench.error_bound("fa2", p, same, s_max))
        all_rows.append(dict(base, variant="torch_flash", **flash))
        flash_ms = flash.get("time_ms", float("nan"))
        vs = list(spec[p.head_dim]) + ([spec[p.head_dim][0]] if BASE_AGAIN else [])
        for i, (name, tiles, extra) in enumerate(vs):
            r = dict(base, variant=name + (" (again)" if i == len(vs) - 1 and BASE_AGAIN else ""))
            try:
                pl = variant_plan(p, hw, tiles, extra)
                main_k = next(k for k in pl.kernels if k.name == "fa2_bwd")
                r.update(block_m=main_k.block_m, block_n=main_k.block_n,
                         warps=main_k.defines["NUM_WARPS"], stages=main_k.defines["STAGES"],
                         extra=" ".join(f"{a}={b}" for a, b in extra.items()))
                bound = bench.error_bound("fa2", p, same, s_max)
                launcher = backward.BackwardLauncher(pl, hw, q, k, v, do)
                launcher.poison()
                launcher()
                torch.cuda.synchronize()
                err = backward.grad_err(torch, launcher.outputs(), ref, p)
                r.update(max_rel_err=err, err_bound=bound,
                         status="ok" if err <= bound else "failed_check")
                if err <= bound:
                    r["time_ms"] = timer(launcher)
                    r["tflops"] = p.fa_flops() / (r["time_ms"] * 1e-3) / 1e12
                    r["vs_flash"] = flash_ms / r["time_ms"]
                del launcher
            except Exception as e:  # a crash is a row too, never timed
                r["status"] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
            all_rows.append(r)
            pd.DataFrame(all_rows).to_csv(out, index=False)  # the whole file, every row
            summary.append((r["variant"], r.get("tflops"), r.get("vs_flash"), r["status"]))
        del q, k, v, do, ref
        torch.cuda.empty_cache()
        print(f"d={p.head_dim} N={p.seqlen_q} causal={p.causal}: flash "
              f"{flash.get('tflops', float('nan')):.1f} TF/s ({time.time() - t0:.0f} s)", flush=True)
        for name, tf, ratio, st in summary[-len(vs):]:
            print(f"   {name:28s} {tf or float('nan'):7.1f} {ratio or float('nan'):6.3f} "
                  f"{st[:60]}", flush=True)

if __name__ == "__main__":
    main()
