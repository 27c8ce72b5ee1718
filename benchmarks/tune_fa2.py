"""The GPU verification of `iosim tune` for fa2 on H100, below the CLI (the GPU machine's typer
lacks what iosim.cli's help formatting uses): exactly what

    iosim tune --schedule fa2 --seqlen 1024..16384 --head-dim 64,128,256 --top 5 --verify \
        -o OUT/tune_fa2.csv --write OUT/tiles_h100.json

does, by the same function (iosim.tune.run). Usage: python benchmarks/tune_fa2.py OUT_DIR
"""

import sys
from pathlib import Path

from iosim.analysis.tune import run
from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.schedules import Tiles

out = Path(sys.argv[1])
problems = [Problem(batch=max(1, 16384 // n), heads=2048 // d, seqlen_q=n, head_dim=d)
            for d in (64, 128, 256) for n in (1024, 2048, 4096, 8192, 16384)]
run("fa2", problems, load("h100"), Tiles(), 5, True, out / "tune_fa2.csv", out / "tiles_h100.json")
