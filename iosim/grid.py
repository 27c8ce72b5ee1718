"""The grammar of grid options shared by `iosim sweep` and `iosim bench`.

Integers: a list `a,b,c`, powers of two `a..b` (from a, doubling, up to b), or `a..b:step`
(arithmetic); parts may be mixed: `512..4096,6144`. Booleans: `true`, `false` or `both`.
"""

from __future__ import annotations

from .hardware import InputError


def ints(text: str, name: str) -> list[int]:
    out: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        try:
            if ".." in part:
                lo_s, hi_s = part.split("..", 1)
                step = None
                if ":" in hi_s:
                    hi_s, st = hi_s.split(":", 1)
                    step = int(st)
                lo, hi = int(lo_s), int(hi_s)
                if lo <= 0 or hi < lo or (step is not None and step <= 0):
                    raise ValueError
                if step is None:
                    v = lo
                    while v <= hi:
                        out.append(v)
                        v *= 2
                else:
                    out.extend(range(lo, hi + 1, step))
            else:
                out.append(int(part))
        except ValueError:
            raise InputError(
                f"--{name}: bad range '{part}' (allowed: a,b,c; a..b for powers of two; "
                "a..b:step; with 0 < a <= b)"
            ) from None
    if not out:
        raise InputError(f"--{name}: empty range")
    return list(dict.fromkeys(out))


def bools(text: str, name: str) -> list[bool]:
    table = {"true": [True], "false": [False], "both": [False, True], "1": [True], "0": [False]}
    try:
        return table[str(text).strip().lower()]
    except KeyError:
        raise InputError(f"--{name}: '{text}' (allowed: true, false, both)") from None


def names(text: str, name: str, allowed: list[str]) -> list[str]:
    vals = list(allowed) if text == "all" else [s.strip() for s in str(text).split(",") if s.strip()]
    bad = [v for v in vals if v not in allowed]
    if bad or not vals:
        raise InputError(f"--{name}: unknown '{','.join(bad) or text}' (allowed: {', '.join(allowed)}, all)")
    return vals
