"""The counts22 branch's BlockMap against another tree's (its row and column arrays, dtype and
bytes, and its closed-form sums) on 20,000 random maps: lengths 1..5000, block sizes ragged and
not, causal or not, offsets of both signs.

    python experiments/sweep_speed/counts22/blockmaps_equal.py NEW_TREE OLD_TREE
"""

import importlib.util
import sys

import numpy as np


def load(path: str, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    sys.modules[name] = m
    spec.loader.exec_module(m)
    return m


def same(x: np.ndarray, y: np.ndarray) -> bool:
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def main() -> None:
    sys.path.insert(0, sys.argv[1])
    new = load(sys.argv[1] + "/iosim/schedules/base.py", "newbase")
    old = load(sys.argv[2] + "/iosim/schedules/base.py", "oldbase")
    rng = np.random.default_rng(2)
    for _ in range(20000):
        nq, nk = int(rng.integers(1, 5000)), int(rng.integers(1, 5000))
        bm, bn = int(rng.choice([16, 32, 64, 80, 128, 192, 7])), int(rng.choice([16, 32, 64, 128, 176, 5]))
        causal = bool(rng.integers(0, 2))
        off = int(rng.choice([0, nk - nq, int(rng.integers(-3000, 3000))]))
        a, b = new.BlockMap(nq, nk, bm, bn, causal, off), old.BlockMap(nq, nk, bm, bn, causal, off)
        case = (nq, nk, bm, bn, causal, off)
        for f in ("hi", "lo", "r", "c"):
            assert same(getattr(a, f), getattr(b, f)), (f, case)
        for f in ("row_tiles", "row_diag", "col_visits", "col_tiles", "col_diag"):
            assert same(getattr(a, f)(), getattr(b, f)()), (f, case)
        for f in ("sum_hi", "sum_lo", "sum_rc", "sum_rc_diag", "sum_r", "sum_c", "kv_rows_loaded",
                  "rows_visited"):
            assert getattr(a, f)() == getattr(b, f)(), (f, case)
        for qb in (1, 2, 3, 7):
            assert a.kv_rows_loaded(qb) == b.kv_rows_loaded(qb), ("kv_rows_loaded", qb, case)
            assert same(a.split_pairs(qb), b.split_pairs(qb)) and same(a.split_diag(qb), b.split_diag(qb))
    print("20,000 block maps equal")


if __name__ == "__main__":
    main()
