"""core/memo.py's Memo.get: a hit checked by map(is_, ...) (before session 22) against the held
tuple's equality (now), on a key of two held objects, in us a get (best of 5 rounds of 200,000).

    python experiments/sweep_speed/session22/memo_get.py
"""

import timeit
from operator import is_

from iosim.core.memo import MISS, Memo

memo = Memo()
a, b = object(), object()
key = ("k", id(a), id(b))
memo.put(key, (a, b), 5)
d = memo._d


def before(key, *held):
    e = d.get(key)
    return e[1] if e is not None and all(map(is_, e[0], held)) else MISS


for name, f in (("map(is_)", before), ("tuple ==", memo.get)):
    assert f(key, a, b) == 5
    best = min(timeit.repeat(lambda f=f: f(key, a, b), number=200_000, repeat=5)) / 200_000 * 1e6
    print(f"{name}: {best:.3f} us a get")
