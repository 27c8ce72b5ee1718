"""fa3's fp8 forward, attention kernel alone (issue 24, session 15): the Plan's kernel beside
EXP2_H2 (fa3.cu at 40e79ec: pairs of S elements through a packed-half exponential, off the MUFU),
each checked first on fresh NaN-poisoned data, then timed in interleaved rounds. The machinery
(check, rounds, CSV columns, --summary) is experiments/fp8/speed13/variants.py's, the Plans
experiments/fp8/speed14/'s.

    python3 experiments/fp8/speed15h/variants.py OUT.csv [--set SET] [--rounds R] [--budget S] [NAME ...]
    python3 experiments/fp8/speed15h/variants.py --summary OUT.csv

Kinds (defines over the Plan's): `base` the Plan; `h1`, `h2` EXP2_H2=1, 2 (1 or 2 of every 4
n8 tiles of S through the f16x2 polynomial: a quarter or half of the exponentials off the MUFU);
`h2s` EXP2_H2=2 with EXP2_H2_F32SUM=1 (the row sum of each pair's halves in fp32); `hm2`
EXP2_H2=2 with EXP2_H2_MUFU=1 (those pairs through ex2.approx.f16x2: two MUFU.EX2.F16 a pair;
EXP2_H2=4 spills at d = 128); `h1o` EXP2_H2=1 on the one-tile grid (d = 256: on the Plan's
persistent grid every EXP2_H2 makes ptxas serialise the wgmmas, warning C7511;
sass_same.log). Set c1: d = 128 base, h1, h2, h2s; d = 64 base, h1, h2; d = 256 base, h1o;
N = 4096, 8192, 16384. Set c1m: c1 with hm2 at d = 128 (run.sh takes it only where
mufu_rate.py measured ex2.approx.f16x2 faster per result than ex2.approx.ftz.f32).

Every kind runs fa3.cu at 40e79ec (SOURCE: the file call c1 ran; EXP2_H2 is no longer in
kernels/fa3.cu), as kernels/fa3_s15h.cu: `git show 40e79ec:kernels/fa3.cu >
experiments/fp8/speed15h/fa3_s15h.cu` before the call (not committed), copied by run.sh.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("v14", HERE.parent / "speed14" / "variants.py")
v14 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(v14)
v13 = v14.v13

KINDS = {"base": ({}, {}), "h1": ({}, {"EXP2_H2": 1}), "h2": ({}, {"EXP2_H2": 2}),
         "h2s": ({}, {"EXP2_H2": 2, "EXP2_H2_F32SUM": 1}),
         "hm2": ({}, {"EXP2_H2": 2, "EXP2_H2_MUFU": 1}),
         "h1o": ({"persistent": False}, {"EXP2_H2": 1})}
SETS = {"c1": {128: ("base", "h1", "h2", "h2s"), 64: ("base", "h1", "h2"), 256: ("base", "h1o")},
        "c1m": {128: ("base", "h1", "h2", "h2s", "hm2"), 64: ("base", "h1", "h2"),
                256: ("base", "h1o")}}


def variants(name: str) -> dict[str, tuple[int, int, str]]:
    return {f"{kind}_d{d}_{n // 1024}k": (d, n, kind)
            for d, kinds in SETS[name].items() for n in v14.SEQLENS for kind in kinds}


SOURCE = "fa3_s15h.cu"  # kernels/fa3.cu at 40e79ec


def variant_plan(hw, d: int, n: int, kind: str):
    """speed14's Plan of the kind, its attention kernel built from SOURCE."""
    pl = v14.variant_plan(hw, d, n, kind)
    return replace(pl, kernels=tuple(replace(k, source=SOURCE) if k is pl.main else k
                                     for k in pl.kernels))


v14.KINDS = KINDS  # speed14's variant_plan reads its module's KINDS
v13.variant_plan = variant_plan
v13.KINDS = {k: (None, None, e) for k, (_, e) in KINDS.items()}  # the `defines` column
v13.SETS, v13.variants = SETS, variants
v13.VARIANTS = {k: v for s in SETS for k, v in variants(s).items()}

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--set" not in args and args[:1] != ["--summary"]:
        args += ["--set", "c1"]
    v13.cli(args)
