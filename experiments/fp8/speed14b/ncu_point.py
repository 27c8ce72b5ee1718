"""One checked launch of a speed14b variant (experiments/fp8/speed14b/variants.py's names) for
Nsight Compute: fresh N(0, 1) inputs, the float32 reference, O and LSE NaN-poisoned, the
variant's Plan launched once (fp8_quant, then the attention kernel), the outputs checked.

    ncu ... python3 experiments/fp8/speed14b/ncu_point.py NAME SEED
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("v14b", HERE / "variants.py")
v = importlib.util.module_from_spec(spec)
spec.loader.exec_module(v)


def main(name: str, seed: int) -> None:
    import torch

    from iosim.core.hardware import load
    from iosim.gpu.bench import check, checked_inputs
    from iosim.gpu.launch import Launcher

    d, n, kind = v.v13.VARIANTS[name]
    pl = v.v13.variant_plan(load(os.environ.get("HW", "h100-sxm5-80gb")), d, n, kind)
    got = checked_inputs(torch, "fa3", pl.problem, seed, (pl.main.block_m, pl.main.block_n))
    (q, k, vv), (ref, lse_ref), bound, _ = got
    err, ok = check(torch, Launcher(pl, q, k, vv), ref, lse_ref, bound)
    print(f"check {name} err={err:.3e} bound={bound:.3e} ok={int(ok)}", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in v.v13.VARIANTS:
        sys.exit(f"error: usage: ncu_point.py NAME SEED; NAME one of {', '.join(v.v13.VARIANTS)}")
    main(sys.argv[1], int(sys.argv[2]))
