"""fa3's fp8 forward, attention kernel alone (issue 24, session 15): the Plan's kernel beside
two of FA3's orders (hopper/mainloop_fwd_sm90_tma_gmma_ws.hpp; README.md beside this file),
each checked first on fresh NaN-poisoned data, then timed in interleaved rounds. The machinery
(check, rounds, CSV columns, --summary) is experiments/fp8/speed13/variants.py's, the Plans
experiments/fp8/speed14/'s.

    python3 experiments/fp8/speed15/variants.py OUT.csv [--set SET] [--rounds R] [--budget S] [NAME ...]
    python3 experiments/fp8/speed15/variants.py --summary OUT.csv

Kinds (defines over the Plan's; d = 128: PV_WAIT_TOP=1, d = 256: the persistent grid, lazy
rescale): `base` the Plan; `rtop` RESCALE_TOP=1 (O's rescale after the P V wait, before the
turn); `w0` KV_WAIT_FIRST=1 (only the first consumer warpgroup waits on the K/V stages, before
its turn); `rtop_w0` both; `top_rtop_w0` (d = 256) both with PV_WAIT_TOP=1. Set c1: d = 128
base, rtop, w0, rtop_w0; d = 256 base, top_rtop_w0 (its other mixes spill:
experiments/fp8/speed15/sass_same.log); N = 4096, 8192, 16384. Set c2 (after call c1 found
every c1 variant slower): d = 128 base beside `bn224`, FA3's key tile for row-major V (224: 0
spills with PV_WAIT_TOP=1), last in call c2 after the grid.

Every kind runs fa3.cu at 4b5851f (SOURCE: the file both calls ran; the switches are no longer
in kernels/fa3.cu), as kernels/fa3_s15.cu: `git show 4b5851f:kernels/fa3.cu >
experiments/fp8/speed15/fa3_s15.cu` before the call (not committed), copied by run.sh.
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

KINDS = {"base": ({}, {}), "rtop": ({}, {"RESCALE_TOP": 1}), "w0": ({}, {"KV_WAIT_FIRST": 1}),
         "rtop_w0": ({}, {"RESCALE_TOP": 1, "KV_WAIT_FIRST": 1}),
         "top_rtop_w0": ({}, {"PV_WAIT_TOP": 1, "RESCALE_TOP": 1, "KV_WAIT_FIRST": 1}),
         "bn224": ({"block_n": 224}, {})}
SETS = {"c1": {128: ("base", "rtop", "w0", "rtop_w0"), 256: ("base", "top_rtop_w0")},
        "c2": {128: ("base", "bn224")}}


def install(kinds: dict, sets: dict, source: str) -> None:
    """speed13's machinery (v13) and speed14's Plans (v14) with these kinds and sets, each kind's
    attention kernel built from kernels/`source` (also speed15h's)."""
    def variants(name: str) -> dict[str, tuple[int, int, str]]:
        return {f"{kind}_d{d}_{n // 1024}k": (d, n, kind)
                for d, ks in sets[name].items() for n in v14.SEQLENS for kind in ks}

    def variant_plan(hw, d: int, n: int, kind: str):
        pl = v14.variant_plan(hw, d, n, kind)
        return replace(pl, kernels=tuple(replace(k, source=source) if k is pl.main else k
                                         for k in pl.kernels))

    v14.KINDS = kinds  # speed14's variant_plan reads its module's KINDS
    v13.variant_plan = variant_plan
    v13.KINDS = {k: (None, None, e) for k, (_, e) in kinds.items()}  # the `defines` column
    v13.SETS, v13.variants = sets, variants
    v13.VARIANTS = {k: v for s in sets for k, v in variants(s).items()}


def cli(args: list[str]) -> None:
    if "--set" not in args and args[:1] != ["--summary"]:
        args += ["--set", "c1"]
    v13.cli(args)


SOURCE = "fa3_s15.cu"  # kernels/fa3.cu at 4b5851f

if __name__ == "__main__":
    install(KINDS, SETS, SOURCE)
    cli(sys.argv[1:])
