"""EXP2_H2's accuracy beside the Plan's kernel (issue 24, session 15): on the same inputs, each
kind of variants.py through `iosim.gpu.launch.Launcher` with the Plan's kernel defines plus the
kind's, built from variants.py's SOURCE (fa3.cu at 40e79ec, copied into kernels/ by run.sh).
  rmse rows: RMSE against float64 attention on the FA3 paper's outlier inputs
    (experiments/fp8/accuracy.py's inputs, reference and RMSE; block scaling), per head_dim,
    causal and kind; ragged N (a masked edge tile) at every head_dim.
  check rows: tests/test_gpu_fp8.py's check (fresh random inputs, outputs NaN-poisoned, the
    error bound of iosim.gpu.bench) for each of its CASES at the kind's head_dims, block scaling.

    python3 experiments/fp8/speed15h/accuracy_h2.py OUT.csv [KIND ...]
"""

from __future__ import annotations

import csv
import importlib.util
import os
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from iosim.core.hardware import load  # noqa: E402
from iosim.core.problem import Problem  # noqa: E402
from iosim.schedules import plan  # noqa: E402


def module(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


ACC = module("fp8_accuracy", ROOT / "experiments" / "fp8" / "accuracy.py")
V = module("v15h", Path(__file__).resolve().parent / "variants.py")
# kind -> head_dims it runs at (variants.py's KINDS give the defines)
KIND_DIMS = {"base": (64, 128, 256), "h1": (64, 128), "h2": (64, 128), "h2s": (128,),
             "h1o": (256,)}
COLUMNS = ["what", "kind", "head_dim", "causal", "seqlen", "case", "rmse", "max_rel_err",
           "err_bound", "status", "seed", "gpu_name"]


def kind_plan(hw, p: Problem, kind: str):
    tiles, extra = V.KINDS[kind]
    from iosim.schedules import Tiles

    pl = plan("fa3", p, hw, Tiles(**tiles))
    return replace(pl, kernels=tuple(replace(k, defines={**k.defines, **extra}, source=V.SOURCE)
                                     if k is pl.main else k for k in pl.kernels))


def rmse_rows(torch, hw, kinds, seed, gpu):
    from iosim.gpu.launch import Launcher

    for d in (128, 64, 256):
        for causal, n in ((False, 2048), (True, 2048), (False, 2000)):
            p = Problem(batch=1, heads=4, seqlen_q=n, head_dim=d, causal=causal, dtype="fp8_e4m3",
                        fp8_scaling="block")
            q, k, v = ACC.outlier_inputs(torch, p, seed)
            ref = ACC.reference64(torch, q, k, v, p)
            for kind in kinds:
                if d not in KIND_DIMS[kind]:
                    continue
                run = Launcher(kind_plan(hw, p, kind), q, k, v)
                run.poison()
                run()
                torch.cuda.synchronize()
                o = run.outputs()["O"]
                bad = bool(torch.isnan(o).any())
                yield {"what": "rmse", "kind": kind, "head_dim": d, "causal": causal, "seqlen": n,
                       "rmse": float("nan") if bad else ACC.rmse(torch, o, ref),
                       "status": "nan" if bad else "ok", "seed": seed, "gpu_name": gpu}


def check_rows(torch, hw, bench, kinds, seed, gpu):
    from iosim.gpu.launch import Launcher

    cases = module("t_gpu_fp8", ROOT / "tests" / "test_gpu_fp8.py").CASES
    for kind in kinds:
        for i, (b, h, kvh, nq, nk, d, causal, align) in enumerate(cases):
            if d not in KIND_DIMS[kind] or kind == "base":
                continue
            p = Problem(batch=b, heads=h, kv_heads=kvh, seqlen_q=nq, seqlen_k=nk, head_dim=d,
                        dtype="fp8_e4m3", causal=causal, causal_align=align)
            pl = kind_plan(hw, p, kind)
            q, k, v = bench.inputs(torch, p, seed=seed + i)
            ref, lse, same, s_max = bench.reference(torch, q, k, v, p, (pl.main.block_m, pl.main.block_n))
            bound = bench.error_bound("fa3", p, same, s_max)
            err, ok = bench.check(torch, Launcher(pl, q, k, v), ref, lse, bound)
            yield {"what": "check", "kind": kind, "head_dim": d, "causal": causal, "seqlen": nq,
                   "case": f"{b}x{h}x{kvh} {nq}x{nk} {align}", "max_rel_err": err, "err_bound": bound,
                   "status": "ok" if ok else "failed_check", "seed": seed + i, "gpu_name": gpu}


def main(out: str, kinds: list[str]) -> None:
    from iosim.gpu import bench

    torch = bench.require_gpu("accuracy_h2.py")
    gpu = torch.cuda.get_device_name(0)
    hw = load(bench.profile_for(gpu))
    seed = int.from_bytes(os.urandom(4), "little") >> 1
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        for rows in (rmse_rows(torch, hw, kinds, seed, gpu), check_rows(torch, hw, bench, kinds, seed, gpu)):
            for r in rows:
                w.writerow(r)
                f.flush()
                print(" ".join(f"{c}={r[c]:.4g}" if isinstance(r.get(c), float) else f"{c}={r.get(c)}"
                               for c in COLUMNS[:-2] if r.get(c) not in (None, "")), flush=True)


if __name__ == "__main__":
    args = sys.argv[1:]
    unknown = [k for k in args[1:] if k not in KIND_DIMS]
    if not args or unknown:
        sys.exit(f"error: usage: accuracy_h2.py OUT.csv [KIND ...]; unknown {unknown}; known: {', '.join(KIND_DIMS)}")
    main(args[0], args[1:] or list(KIND_DIMS))
