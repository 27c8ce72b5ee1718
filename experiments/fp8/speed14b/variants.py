"""fa3's fp8 forward, attention kernel alone (issue 24, session 14, second call set): the Plan's
kernel beside fa3.cu's softmax turns (SOFTMAX_TURN=1), each checked on fresh NaN-poisoned data,
then timed in interleaved rounds. The machinery (check, rounds, CSV columns, --summary) is
experiments/fp8/speed13/variants.py's, the kinds and their Plans experiments/fp8/speed14/'s.

    python3 experiments/fp8/speed14b/variants.py OUT.csv [--set SET] [--rounds R] [--budget S] [NAME ...]
    python3 experiments/fp8/speed14b/variants.py --summary OUT.csv

Kinds (over speed14/variants.py's): `smx` the Plan with SOFTMAX_TURN=1 (d = 128: the one-tile
grid with ping-pong); `smx_st3` the same with a three-stage K/V ring; at d = 256 (whose Plan is
the persistent grid, where SOFTMAX_TURN is refused) `onetile` the Plan on the one-tile grid and
`smx1t` that with SOFTMAX_TURN=1. Set r1: d = 128 (base, smx, smx_st3) and d = 256 (base, onetile,
smx1t) at N = 4096, 8192, 16384. Call c2 ran r1 at commit d6741b5 (96bfce3 before the rebase onto 78778b5), whose fa3.cu had SOFTMAX_TURN;
it measured slower everywhere and kernels/fa3.cu is main's again, which ignores the define: rerun
the set at that commit.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("v14", HERE.parent / "speed14" / "variants.py")
v14 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(v14)
v13 = v14.v13

KINDS = {**v14.KINDS,
         "smx": ({}, {"SOFTMAX_TURN": 1}),
         "smx_st3": ({"stages": 3}, {"SOFTMAX_TURN": 1}),
         "smx1t": ({"persistent": False}, {"SOFTMAX_TURN": 1})}
SETS = {"r1": {128: ("base", "smx", "smx_st3"), 256: ("base", "onetile", "smx1t")}}


def variants(name: str) -> dict[str, tuple[int, int, str]]:
    return {f"{kind}_d{d}_{n // 1024}k": (d, n, kind)
            for d, kinds in SETS[name].items() for n in v14.SEQLENS for kind in kinds}


v14.KINDS = KINDS  # speed14's variant_plan reads its module's KINDS
v13.KINDS = {k: (None, None, e) for k, (_, e) in KINDS.items()}  # the `defines` column
v13.SETS, v13.variants = SETS, variants
v13.VARIANTS = {k: v for s in SETS for k, v in variants(s).items()}

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--set" not in args and args[:1] != ["--summary"]:
        args += ["--set", "r1"]
    v13.cli(args)
