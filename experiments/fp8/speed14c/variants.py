"""fa3's fp8 forward, attention kernel alone (issue 24, session 14, third engineer): main's kernel
beside fa3.cu's PV_WAIT_TOP=1 (the wait for P_{j-1} V_{j-1} at the next trip's top, so the
softmax of S_j runs under that GEMM), each checked first on fresh NaN-poisoned data, then timed
in interleaved rounds. The machinery (check, rounds, CSV columns, --summary) is
experiments/fp8/speed13/variants.py's, the Plans experiments/fp8/speed14/'s.

    python3 experiments/fp8/speed14c/variants.py OUT.csv [--set SET] [--rounds R] [--budget S] [NAME ...]
    python3 experiments/fp8/speed14c/variants.py --summary OUT.csv

Kinds: `base` the Plan with PV_WAIT_TOP=0 (the define's default: main's kernel at 0bd94f1,
SASS identical, experiments/fp8/speed14c/sass_same.log), `top` the Plan with PV_WAIT_TOP=1;
tiles and grid the Plan's (d = 256: the persistent grid, lazy rescale). Set c1: both at d = 64,
128, 256 and N = 4096, 8192, 16384.
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

KINDS = {"base": ({}, {"PV_WAIT_TOP": 0}), "top": ({}, {"PV_WAIT_TOP": 1})}
SETS = {"c1": {d: ("base", "top") for d in (128, 64, 256)}}


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
        args += ["--set", "c1"]
    v13.cli(args)
