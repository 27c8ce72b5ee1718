"""numpy's power of 540 float64 entries (a _schedule p-norm's size) by a 0-d exponent (the
profile's sync_overlap): random entries in (0, 1), ones, zeros, and an add of the random ones
(microseconds a call, best of 9 x 5000).

    python experiments/sweep_speed/sched22/pow_zeros.py
"""
import timeit

import numpy as np


def t(f, n=5000):
    return min(timeit.repeat(f, number=n, repeat=9)) / n * 1e6


q = np.array(1.8466278582474316)
n = 540
r, o, z = np.random.default_rng(0).random(n), np.ones(n), np.zeros(n)
print(f"power: random {t(lambda: r ** q):.2f}, ones {t(lambda: o ** q):.2f}, zeros {t(lambda: z ** q):.2f} us; "
      f"add {t(lambda: r + o):.2f} us")
