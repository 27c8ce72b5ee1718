"""Run one point's kernels once (what `iosim bench --ncu` profiles under Nsight Compute)."""

from __future__ import annotations

import json
import sys

from ..hardware import load
from ..problem import Problem
from ..schedules import plan
from .bench import inputs, require_gpu
from .launch import Launcher


def main(arg: str) -> None:
    a = json.loads(arg)
    torch = require_gpu()
    hw, s, seed = load(a.pop("hw")), a.pop("schedule"), a.pop("seed")
    p = Problem(**a)
    q, k, v = inputs(torch, p, seed)
    launcher = Launcher(plan(s, p, hw), q, k, v)
    launcher.poison()
    launcher()
    torch.cuda.synchronize()


if __name__ == "__main__":
    main(sys.argv[1])
