"""Every Plan of a grid of problems, canonical (each kernel's every field: arrays as dtype and
bytes, Traffic as its reads and writes in order and SRAM bytes, Work as its three counts, the
types of the values too), pickled by one tree and compared with another's: the counts22 branch
builds its Plans faster, not different ones.

    PYTHONPATH=TREE python experiments/sweep_speed/counts22/plans_equal.py dump OUT.pkl
    python experiments/sweep_speed/counts22/plans_equal.py compare A.pkl B.pkl
"""

import itertools
import pickle
import sys

import numpy as np


def canon(x):
    from iosim.core.traffic import Traffic, Work
    if isinstance(x, np.ndarray):
        return ("array", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, Traffic):
        return ("traffic", [(n, type(v).__name__, v) for n, v in x.reads.items()],
                [(n, type(v).__name__, v) for n, v in x.writes.items()], type(x.sram).__name__, x.sram)
    if isinstance(x, Work):
        return ("work", [(type(v).__name__, v) for v in (x.tensor_flops, x.exp_ops, x.alu_flops)])
    if isinstance(x, dict):
        return ("dict", [(k, canon(v)) for k, v in x.items()])
    if isinstance(x, (tuple, list)):
        return (type(x).__name__, [canon(v) for v in x])
    return (type(x).__name__, x)


def dump(out: str) -> None:
    from dataclasses import fields

    import iosim
    from iosim.core.hardware import InputError, load
    from iosim.schedules import SCHEDULES, plan
    got = {}
    for gpu in ("h100", "a100"):
        hw = load(gpu)
        for n, d, causal, direction, (b, h, kv), dtype in itertools.product(
                (1, 100, 1056, 4096, 5000, 16384), (64, 128, 256), (False, True), ("fwd", "bwd"),
                ((1, 8, 8), (4, 32, 32), (2, 32, 8)), ("bf16", "fp8_e4m3")):
            p = iosim.Problem(batch=b, heads=h, kv_heads=kv, seqlen_q=n, head_dim=d, causal=causal,
                              direction=direction, dtype=dtype)
            for s in SCHEDULES:
                try:
                    pl = plan(s, p, hw)
                except (InputError, ValueError) as e:
                    got[gpu, p, s] = ("error", str(e))
                    continue
                got[gpu, p, s] = (pl.schedule, pl.hw, pl.notes, canon(pl.traffic), canon(pl.work),
                                  [[(f.name, canon(getattr(k, f.name))) for f in fields(k)] for k in pl.kernels])
    with open(out, "wb") as f:
        pickle.dump({repr(k): v for k, v in got.items()}, f)
    print(len(got), "plans")


def compare(a: str, b: str) -> None:
    x, y = (pickle.load(open(f, "rb")) for f in (a, b))
    bad = [k for k in x if x[k] != y.get(k)]
    print(f"{len(x)} plans (and refusals), {len(bad)} differ" + (f": {bad[:5]}" if bad else ""))
    sys.exit(1 if bad or x.keys() != y.keys() else 0)


if __name__ == "__main__":
    dump(sys.argv[2]) if sys.argv[1] == "dump" else compare(sys.argv[2], sys.argv[3])
