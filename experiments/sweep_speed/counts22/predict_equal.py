"""iosim.predict's DataFrames (default schedules, and fa1_paper, decode where they plan) and
predict_rows' rows for 432 problems on three GPUs, both directions, pickled by one tree and
compared with another's: values (floats to the bit), dtypes, column order, attrs.

    PYTHONPATH=TREE python experiments/sweep_speed/counts22/predict_equal.py dump OUT.pkl
    python experiments/sweep_speed/counts22/predict_equal.py compare A.pkl B.pkl
"""

import itertools
import pickle
import sys


def dump(out: str) -> None:
    import iosim
    from iosim.analysis import predict as P
    from iosim.core.hardware import InputError, load
    got = {}
    for gpu in ("h100", "h200", "a100"):
        hw = load(gpu)
        for n, d, causal, direction, (b, h, kv) in itertools.product(
                (1, 128, 1000, 4096, 5000, 32768), (64, 128, 256), (False, True), ("fwd", "bwd"),
                ((1, 8, 8), (4, 32, 32), (2, 32, 8))):
            p = iosim.Problem(batch=b, heads=h, kv_heads=kv, seqlen_q=n, head_dim=d, causal=causal,
                              direction=direction)
            for names in (None, ["naive", "fa1", "fa2", "fa3", "fa1_paper"]):
                try:
                    df = P.predict(p, hw, names)
                    rows = P.predict_rows(p, hw, names)
                except InputError as e:
                    got[gpu, repr(p), str(names)] = ("error", str(e))
                    continue
                got[gpu, repr(p), str(names)] = (
                    list(df.columns), [str(t) for t in df.dtypes],
                    [[(type(v).__name__, repr(v)) for v in df[c].tolist()] for c in df.columns],
                    repr(df.attrs), [[(k, type(v).__name__, repr(v)) for k, v in r.items()] for r in rows[0]],
                    repr(rows[1]))
    with open(out, "wb") as f:
        pickle.dump(got, f)
    print(len(got), "predictions")


def compare(a: str, b: str) -> None:
    x, y = (pickle.load(open(f, "rb")) for f in (a, b))
    bad = [k for k in x if x[k] != y.get(k)]
    print(f"{len(x)} predictions (and refusals), {len(bad)} differ" + (f": {bad[:3]}" if bad else ""))
    sys.exit(1 if bad or x.keys() != y.keys() else 0)


if __name__ == "__main__":
    dump(sys.argv[2]) if sys.argv[1] == "dump" else compare(sys.argv[2], sys.argv[3])
