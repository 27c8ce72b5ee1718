"""The columns, rows put back in order and frame of `predict_many` (session 19's rest19), in CPU
ms (`time.process_time`, the best of rounds) in this tree's process: stages.py's grid (1,920
problems x naive, fa1, fa2, fa3 on an H100, 7,680 rows), the whole call without the limiter
and with it, and the call with `table.templates` and `table._model` remembered after a first
call (what is left: the shape keys, `table.columns` less the model, `table.take`, the order,
`table.as_frame`). A/B: run it alternately in two trees,

    PYTHONPATH=<tree> python experiments/sweep_speed/columns_ab.py [--rounds 9] [--area-rounds 25]
"""

from __future__ import annotations

import argparse
import json
import time

import iosim
from iosim.analysis import predict as P
from iosim.analysis import table
from iosim.core.hardware import load

FOUR = ["naive", "fa1", "fa2", "fa3"]


def best(f, rounds: int) -> float:
    out = []
    for _ in range(rounds):
        t0 = time.process_time()
        f()
        out.append(time.process_time() - t0)
    return min(out) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--area-rounds", type=int, default=25)
    args = ap.parse_args()
    grid = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c)
            for n in (256, 512, 1024, 2048, 4096, 8192, 16384, 32768) for d in (64, 128, 256)
            for c in (False, True) for b in (1, 2, 4, 8, 16, 32, 64, 128)
            for h in (8, 16, 32, 64, 128)]  # stages.py's
    hw = load("h100")
    run = lambda limiter=False: P.predict_many(grid, hw, FOUR, limiter=limiter)  # noqa: E731
    run()
    out = {"whole_no_limiter": best(run, args.rounds),
           "whole_limiter": best(lambda: run(True), max(3, args.rounds // 2))}
    plans, model, made, ran = table.templates, table._model, {}, {}

    def templates(problems, hw, s, *a, **k):
        if s not in made:
            made[s] = plans(problems, hw, s, *a, **k)
        return made[s]

    def remembered(shapes, m, u, limiter):
        if limiter not in ran:
            ran[limiter] = model(shapes, m, u, limiter)
        return ran[limiter]

    table.templates, table._model = templates, remembered
    run()
    out["area_no_limiter"] = best(run, args.area_rounds)
    print(json.dumps({k: round(v, 2) for k, v in out.items()}))


if __name__ == "__main__":
    main()
