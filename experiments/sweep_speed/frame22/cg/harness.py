"""Instruction counts of Python snippets in one callgrind run: for each (name, snippet), the
snippet called 20 times, callgrind's counters zeroed, the snippet called `k` times, the
counters dumped with its name (cgmark.c, built as parts.py says; its path in $CGMARK); the
cyclic collector off while counting (its passes land on whichever snippet allocates past its
threshold: noise of some 10%)."""

import ctypes
import gc
import os

_lib = ctypes.CDLL(os.environ.get("CGMARK", "/tmp/libcgmark.so"))
_lib.cg_dump.argtypes = [ctypes.c_char_p]


def measure(items, k=200):
    for name, f in items:
        for _ in range(20):
            f()
        gc.collect()
        gc.disable()
        _lib.cg_zero()
        for _ in range(k):
            f()
        _lib.cg_dump(name.encode())
        gc.enable()
