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
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("v15", HERE.parent / "speed15" / "variants.py")
v15 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(v15)  # speed15's install(): speed13's machinery, speed14's Plans

KINDS = {"base": ({}, {}), "h1": ({}, {"EXP2_H2": 1}), "h2": ({}, {"EXP2_H2": 2}),
         "h2s": ({}, {"EXP2_H2": 2, "EXP2_H2_F32SUM": 1}),
         "hm2": ({}, {"EXP2_H2": 2, "EXP2_H2_MUFU": 1}),
         "h1o": ({"persistent": False}, {"EXP2_H2": 1})}
SETS = {"c1": {128: ("base", "h1", "h2", "h2s"), 64: ("base", "h1", "h2"), 256: ("base", "h1o")},
        "c1m": {128: ("base", "h1", "h2", "h2s", "hm2"), 64: ("base", "h1", "h2"),
                256: ("base", "h1o")}}


SOURCE = "fa3_s15h.cu"  # kernels/fa3.cu at 40e79ec

if __name__ == "__main__":
    v15.install(KINDS, SETS, SOURCE)
    v15.cli(sys.argv[1:])
