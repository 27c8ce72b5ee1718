"""Where the model's time goes: cpu_ab.py's two prediction benchmarks cut into their stages.

In this tree's process, CPU time (`time.process_time`), each stage the best of `--rounds`
rounds (a stage alone, its inputs made before the clock starts). Writes
experiments/sweep_speed/stages.json:

- batch: cpu_ab.py's 216 problems x (naive, fa1, fa2, fa3), `predict_many`: the problems'
  shape keys (`schedules.shape`), the templates' Plans (`plan(..., check=True)`, one per shape),
  their counts as a + b x pairs (`table._shapes` of fresh Plans, all at once, less the Plans), the DRAM
  estimate and cycle model of every (template, pairs) without the limiter and the limiter's
  search on top (`table._model`), the other columns (`table.columns` less the model, coded as
  predict_many asks: a template's values once) and the output (`table.as_frame`); the whole
  call, and the rest of it (the stages' sum taken off);
- grid: cpu_ab.py's grid of 1,920 problems (7,680 rows), cut as the batch (the best of
  `--grid-rounds`);
- one: cpu_ab.py's `predict_rows` of one problem, four schedules, cut alike (the Plans, their
  counts, the model with every relief in one pass, the other columns, the rows as dicts:
  `table.as_rows`), and the whole call.

The shape keys are what predict_many asks: each problem's Problem.shape_key() once, then
`schedules.shapes` a schedule (the layout once per shape and what it reads of batch x heads;
before session 16's fast16b, `schedules.shape` of every (schedule, problem)).

    python experiments/sweep_speed/stages.py [--rounds 15] [--grid-rounds 7]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

import iosim
from iosim import schedules
from iosim.analysis import predict as P
from iosim.analysis import table
from iosim.core.hardware import load
from iosim.schedules import plan

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sweep_speed import cpu_name  # noqa: E402

FOUR = ["naive", "fa1", "fa2", "fa3"]


def best(f, rounds: int, n: int = 1) -> float:
    """The least CPU seconds of `rounds` rounds of n calls, per call."""
    out = []
    for _ in range(rounds):
        t0 = time.process_time()
        for _ in range(n):
            f()
        out.append((time.process_time() - t0) / n)
    return min(out)


def cut(problems: list, rounds: int, n: int) -> dict:
    """The stages of predicting `problems` x FOUR on an H100 (ms per call)."""
    hw = load("h100")
    temps = [t for s in FOUR for t in table.templates(problems, hw, s)[0]]
    shapes = [t.facts or table._shape(t.plan, hw, len(t.problems) > 1) for t in temps]
    for t, sh in zip(temps, shapes):
        t.facts = sh
    m = np.array([len(t.problems) for t in temps])
    du, dm, _ = table._distinct(np.arange(len(temps)).repeat(m),
                                np.array([table.pairs(p) for t in temps for p in t.problems]))
    many = len(problems) > 1  # predict_many's coded columns; predict_rows' plain ones
    cols = table.columns(temps, coded=many)

    def planned():
        return [table.predictable(plan(t.plan.schedule, t.problems[0], hw, check=True), hw)
                for t in temps]

    def counted():
        return table._shapes([(pl, hw, len(t.problems) > 1, None) for pl, t in zip(planned(), temps)])

    if len(problems) == 1:
        whole = best(lambda: P.predict_rows(problems[0], hw, FOUR), rounds, n)
    else:
        whole = best(lambda: P.predict_many(problems, hw, FOUR), rounds, n)
    def keyed():
        keys = [p.shape_key() for p in problems]
        return [schedules.shapes(x, problems, hw, keys=keys) for x in FOUR]

    s = {"keys": best(keyed, rounds, n),
         "plans": best(planned, rounds, n),
         "plans_and_counts": best(counted, rounds, n),
         "model_time_alone": best(lambda: table._model(shapes, dm, du, False), rounds, n),
         "model": best(lambda: table._model(shapes, dm, du, True), rounds, n),
         "columns": best(lambda: table.columns(temps, coded=many), rounds, n),
         # predict_many's frame; predict_rows' dicts
         "output": best(lambda: table.as_rows(cols) if len(problems) == 1 else table.as_frame(cols),
                        rounds, n)}
    ms = {"whole": whole * 1e3, "shape_keys": s["keys"] * 1e3, "plans": s["plans"] * 1e3,
          "counts": (s["plans_and_counts"] - s["plans"]) * 1e3,
          "model_time_alone": s["model_time_alone"] * 1e3,
          "limiter_search": (s["model"] - s["model_time_alone"]) * 1e3,
          "other_columns": (s["columns"] - s["model"]) * 1e3, "output": s["output"] * 1e3}
    # the rest of the whole call: grouping the problems by shape, the rows put back in order,
    # (one) the ratios to naive; and what the stages' best rounds leave out
    ms["rest"] = ms["whole"] - sum(v for k, v in ms.items() if k != "whole")
    return {"templates": len(temps), "rows": len(next(iter(cols.values()))),
            "kernel_rows": sum(int(n) * len(sh.inten) for n, sh in zip(dm, shapes)),
            "ms": ms}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--grid-rounds", type=int, default=7)
    ap.add_argument("--out", default=str(Path(__file__).with_name("stages.json")))
    args = ap.parse_args()
    problems = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c)
                for n in (512, 1024, 2048, 4096, 8192, 16384) for d in (64, 128)
                for c in (False, True) for b in (1, 4, 16) for h in (8, 32, 64)]  # cpu_ab.py's
    one = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
    P.predict_many(problems, load("h100"), FOUR)  # imports and caches warm
    grid = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c)
            for n in (256, 512, 1024, 2048, 4096, 8192, 16384, 32768) for d in (64, 128, 256)
            for c in (False, True) for b in (1, 2, 4, 8, 16, 32, 64, 128)
            for h in (8, 16, 32, 64, 128)]  # cpu_ab.py's
    out = {"batch": cut(problems, args.rounds, 1), "grid": cut(grid, args.grid_rounds, 1),
           "one": cut([one], args.rounds, 20), "rounds": args.rounds, "grid_rounds": args.grid_rounds, "machine": {"cpu": cpu_name(), "python": sys.version.split()[0]},
           "date": time.strftime("%Y-%m-%d")}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
