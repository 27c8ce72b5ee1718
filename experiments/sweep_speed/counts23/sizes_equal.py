"""kernels.tensor_sizes of a grid of problems (batch, heads, kv_heads, lengths, head_dim,
dtype, paged or not) at 1 and 3 KV splits, every tensor's (name, bytes, type) in order,
pickled by one tree and compared with another's: counts23's table-driven tensor_sizes gives
the same dicts.

    PYTHONPATH=TREE python experiments/sweep_speed/counts23/sizes_equal.py dump OUT.pkl
    python experiments/sweep_speed/counts23/sizes_equal.py compare A.pkl B.pkl
"""

import itertools
import pickle
import sys


def dump(out: str) -> None:
    from iosim import kernels as K
    from iosim.core.problem import Problem
    got = []
    for b, h, kvh, nq, nk, d, dt, ps in itertools.product(
            (1, 3), (8, 32), (1, 8), (1, 1000, 4096), (1, 777, 4096), (64, 96, 128),
            ("fp16", "fp32", "fp8_e4m3", "bf16"), (None, 16)):
        try:
            p = Problem(batch=b, heads=h, kv_heads=kvh, seqlen_q=nq, seqlen_k=nk, head_dim=d,
                        dtype=dt, page_size=ps)
        except Exception:  # (not a problem: its own refusal)
            continue
        for s in (1, 3):
            got.append([(k, v, type(v).__name__) for k, v in K.tensor_sizes(p, s).items()])
    with open(out, "wb") as f:
        pickle.dump(got, f)
    print(f"{len(got)} (problem, splits)")


def compare(a: str, b: str) -> None:
    with open(a, "rb") as f:
        x = pickle.load(f)
    with open(b, "rb") as f:
        y = pickle.load(f)
    bad = sum(u != v for u, v in zip(x, y)) + abs(len(x) - len(y))
    print(f"{len(x)} (problem, splits), {bad} differ")


if __name__ == "__main__":
    {"dump": dump, "compare": compare}[sys.argv[1]](*sys.argv[2:])
