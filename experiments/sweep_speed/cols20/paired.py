"""table.as_frame, as_rows and columns' glue (_shapes and _model answering from memory) of
predict's problem (four schedules), this tree's table.py against another's (--base, loaded in
the same process, so both see the same load): CPU us, the best of 5 rounds of 1,000, the two
alternately, `--repeat` times.

    PYTHONPATH=. python experiments/sweep_speed/cols20/paired.py --base /work/main/iosim/analysis/table.py
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time

import iosim
from iosim.analysis import predict as P
from iosim.analysis import table
from iosim.core.hardware import load
from iosim.schedules import plan


def best(f, n=1000, k=5) -> float:
    out = []
    for _ in range(k):
        t0 = time.process_time()
        for _ in range(n):
            f()
        out.append((time.process_time() - t0) / n)
    return round(min(out) * 1e6, 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--base", required=True)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    spec = importlib.util.spec_from_file_location("table_base", args.base)
    base = importlib.util.module_from_spec(spec)
    sys.modules["table_base"] = base
    spec.loader.exec_module(base)
    p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
    hw = load("h100")
    four = ["naive", "fa1", "fa2", "fa3"]
    cols = P._columns(p, hw, four, P.Tiles(), None)[0]
    plans = [table.predictable(plan(s, p, hw, P.Tiles(), check=True), hw) for s in four]
    for mod in (base, table):  # _shapes and _model from memory: the glue alone
        shapes, model, memo = mod._shapes, mod._model, {}
        mod._shapes = lambda todo, s=shapes, memo=memo: memo["s"] if "s" in memo else memo.setdefault("s", s(todo))
        mod._model = lambda *a, md=model, memo=memo: memo["m"] if "m" in memo else memo.setdefault("m", md(*a))
    for _ in range(args.repeat):
        for name, mod in (("base", base), ("tree", table)):
            temps = lambda mod=mod: [mod.Template(pl, hw, [pl.problem]) for pl in plans]  # noqa: E731
            print(name, {"as_frame_us": best(lambda mod=mod: mod.as_frame(cols)),
                         "as_rows_us": best(lambda mod=mod: mod.as_rows(cols)),
                         "columns_glue_us": best(lambda mod=mod, t=temps: mod.columns(t()))}, flush=True)


if __name__ == "__main__":
    main()
