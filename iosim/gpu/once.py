"""Run one point's kernels once (what `iosim bench --ncu` profiles under Nsight Compute)."""

from __future__ import annotations

import json
import sys

from iosim.core.hardware import load
from iosim.core.problem import Direction, Problem
from iosim.gpu.bench import inputs, require_gpu
from iosim.gpu.launch import Launcher
from iosim.schedules import Tiles, plan


def main(arg: str) -> None:
    a = json.loads(arg)
    torch = require_gpu()
    hw, s, seed = load(a.pop("hw")), a.pop("schedule"), a.pop("seed")
    # decode's forced split count, fa3 backward's dQ reduction (DQ_BULK), fa3 fp8's lazy
    # rescale and persistent grid, if any
    tiles = Tiles(kv_splits=a.pop("kv_splits", None), dq_bulk=a.pop("dq_bulk", None),
                  split_cols=a.pop("split_cols", None),  # fa1 backward's key rows a CTA
                  lazy_rescale=a.pop("lazy_rescale", None), persistent=a.pop("persistent", None))
    p = Problem(**a)
    q, k, v = inputs(torch, p, seed)
    if p.direction is Direction.bwd:  # the forward runs first, then the backward's kernels
        from iosim.gpu.backward import BackwardLauncher, grad_output

        launcher = BackwardLauncher(plan(s, p, hw, tiles), hw, q, k, v, grad_output(torch, p, seed))
    else:
        launcher = Launcher(plan(s, p, hw, tiles), q, k, v)
    launcher.poison()
    launcher()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1])
