"""fa3's fp8 forward, attention kernel alone (issue 24, session 14): the Plan's kernel beside
variants of tile, grid and kernel switches, each
checked on fresh NaN-poisoned data, then timed in interleaved rounds. The machinery (check,
rounds, CSV columns, --summary) is experiments/fp8/speed13/variants.py's; only the variants
differ.

    python3 experiments/fp8/speed14/variants.py OUT.csv [--set SET] [--rounds R] [--budget S] [NAME ...]
    python3 experiments/fp8/speed14/variants.py --summary OUT.csv

Kinds: `base` the Plan as it is in this tree; `old` session 13's kernel (fa3_s13.cu, main's
kernels/fa3.cu at 8eded77) at the tiles and grid its Plan took (FWD_TILES_FP8, FP8_PERSISTENT,
FP8_LAZY_RESCALE then); `pers` / `onetile` the Plan on the persistent / one-tile grid; `bnN` key
tiles of N rows; `polyK` EXP2_POLY=K (r1: fa3.cu's exp2 of K of every 8 S elements as a cubic
on the FMA/ALU pipes); `lazy` LAZY_RESCALE=1; `st3` a 3-stage K/V ring; `desc` DESC_INC=1; `noearly` EARLY_RESCALE=0 (O rescaled between
the two GEMMs, in the warpgroup's turn, as in session 13); `desc` DESC_INC=1. Round r1 ran at
commit bebbcd1 (fa3.cu with EXP2_POLY, the softmax of session 13: `base` there is session 13's
kernel), r2 at b753c47 (fa3.cu with the partial-chain softmax, EARLY_RESCALE and DESC_INC). After
r2 kernels/fa3.cu is session 13's file again: in this tree `base` is `old`, and the switches
EXP2_POLY, EARLY_RESCALE and DESC_INC are defines the kernel ignores (rerun a set at its commit).
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("v13", HERE.parent / "speed13" / "variants.py")
v13 = importlib.util.module_from_spec(spec)
spec.loader.exec_module(v13)

from iosim.schedules import Tiles, plan  # noqa: E402

# kind: (Tiles fields over the Plan's, attention-kernel defines over the Plan's)
OLD_TILES = {64: 128, 128: 192, 256: 128}  # session 13's key tiles (FWD_TILES_FP8)
OLD_PERSISTENT = {64: False, 128: False, 256: True}
KINDS = {
    "base": ({}, {}),
    "old": (None, {}),  # None: session 13's tiles and grid by head_dim, and its fa3.cu
    "lazy": ({}, {"LAZY_RESCALE": 1}),
    "pers": ({"persistent": True}, {}),
    "onetile": ({"persistent": False}, {}),
    "bn224": ({"block_n": 224}, {}),
    "bn224_poly2": ({"block_n": 224}, {"EXP2_POLY": 2}),
    "bn224_poly4": ({"block_n": 224}, {"EXP2_POLY": 4}),
    "noearly": ({}, {"EARLY_RESCALE": 0}),
    "st3": ({"stages": 3}, {}),
    "desc": ({}, {"DESC_INC": 1}),
    # r1 only (fa3.cu at bebbcd1 had EXP2_POLY; removed after r1 measured it slower everywhere)
    **{f"poly{k}": ({}, {"EXP2_POLY": k}) for k in (2, 3)},
}
SEQLENS = (4096, 8192, 16384)
# r1: session 14's first call (the Plan of session 13 as `base`)
# r2: the second call (`base`: this tree's Plan, the ILP softmax; `old`: session 13's kernel)
SETS = {"r1": {128: ("base", "pers", "bn224", "poly2", "poly3"), 256: ("base", "poly2"),
               64: ("base", "poly2")},
        "r2": {128: ("old", "base", "noearly", "st3", "desc"), 256: ("old", "base", "st3", "desc"),
               64: ("old", "base", "noearly")}}
# `old`'s source: main's kernels/fa3.cu at 8eded77 (session 13's), as fa3_s13.cu beside this
# file (`git show 8eded77:kernels/fa3.cu > experiments/fp8/speed14/fa3_s13.cu`; not committed)
# and copied into kernels/ by run.sh
OLD_SOURCE = "fa3_s13.cu"


def variants(name: str) -> dict[str, tuple[int, int, str]]:
    return {f"{kind}_d{d}_{n // 1024}k": (d, n, kind)
            for d, kinds in SETS[name].items() for n in SEQLENS for kind in kinds}


def variant_plan(hw, d: int, n: int, kind: str):
    tiles, extra = KINDS[kind]
    t = Tiles(block_n=OLD_TILES[d], persistent=OLD_PERSISTENT[d]) if tiles is None else Tiles(**tiles)
    pl = plan("fa3", v13.problem(d, n), hw, t)

    src = OLD_SOURCE if kind == "old" else pl.main.source

    def change(k):
        return replace(k, defines={**k.defines, **extra}, source=src) if k is pl.main else k

    return replace(pl, kernels=tuple(change(k) for k in pl.kernels))


# speed13's machinery with these variants
v13.KINDS = {k: (None, None, e) for k, (_, e) in KINDS.items()}  # its `defines` column
v13.SETS, v13.SEQLENS, v13.variant_plan, v13.variants = SETS, SEQLENS, variant_plan, variants
v13.VARIANTS = {k: v for s in SETS for k, v in variants(s).items()}

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--set" not in args and args[:1] != ["--summary"]:
        args += ["--set", "r1"]
    v13.cli(args)
