"""Where fa3.cu's FP8 main loop waits for P_{j-1} V_{j-1} (issue 24, session 14, third
engineer): in the SASS of a cubin, the loop body (from the backward branch's target to the
branch, the loop holding `WARPGROUP.DEPBAR.LE gsb0, 0x1`, the wait for S_j) and in it, from
the P V issue (the QGMMA that commits it, A from registers) to `WARPGROUP.DEPBAR.LE gsb0, 0x0`
(the wait for the P V group), going round the back edge where the wait sits at the next trip's
top: how many MUFU.EX2 (the softmax's exponentials), P packings (F2FP ... E4M3) and other waits
(DEPBAR) lie on that way.

    python3 experiments/fp8/speed14c/depbar_check.py KERNEL.cubin [--want-after-ex2 N]

Needs cuobjdump and nvdisasm on PATH (or CUOBJDUMP=...). Exit 1 when --want-after-ex2 is given
and fewer than N exponentials lie between the P V issue and its wait (the wait hoisted above
the softmax).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

LINE = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def sass(cubin: str) -> list[tuple[int, str]]:
    out = subprocess.run([os.environ.get("CUOBJDUMP", "cuobjdump"), "-sass", cubin],
                         check=True, capture_output=True, text=True).stdout
    return [(int(m[1], 16), m[2]) for m in map(LINE.match, out.splitlines()) if m]


def loop_body(ins: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The instructions of the loop that holds the S_j wait (DEPBAR gsb0 0x1): from the
    backward branch's target to the branch."""
    k = next(i for i, (_, t) in enumerate(ins) if "DEPBAR.LE gsb0, 0x1" in t)
    for i in range(k, len(ins)):
        m = re.search(r"BRA (0x[0-9a-f]+)$", ins[i][1])
        if m and int(m[1], 16) < ins[k][0]:
            top = int(m[1], 16)
            return [x for x in ins[:i + 1] if x[0] >= top]
    raise SystemExit("error: no backward branch after the S_j wait")


PV_ISSUE = re.compile(r"QGMMA\S* R\d+, R\d+, gdesc\[UR\d+\], R\d+, gsb0")  # A from registers: P


def report(body: list[tuple[int, str]]) -> dict[str, int]:
    """Counts along the loop from the P V issue (its committing QGMMA) to the P V wait, going
    round the back edge when the wait sits above the issue (the wait at the next trip's top)."""
    text = [t for _, t in body]
    pv = max(i for i, t in enumerate(text) if PV_ISSUE.search(t))
    w = next(i for i, t in enumerate(text) if "DEPBAR.LE gsb0, 0x0" in t)
    span = text[pv + 1:w] if w > pv else text[pv + 1:] + text[:w]
    return {"instructions": len(body), "pv_issue_at": pv, "pv_wait_at": w,
            "ex2_in_loop": sum("MUFU.EX2" in t for t in text),
            "ex2_issue_to_wait": sum("MUFU.EX2" in t for t in span),
            "f2fp_issue_to_wait": sum("F2FP" in t and "E4M3" in t for t in span),
            "depbar_issue_to_wait": sum("DEPBAR" in t for t in span)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cubin")
    ap.add_argument("--want-after-ex2", type=int, default=None,
                    help="fail unless at least this many MUFU.EX2 precede the P V wait")
    a = ap.parse_args(argv)
    r = report(loop_body(sass(a.cubin)))
    print(" ".join(f"{k}={v}" for k, v in r.items()))
    if a.want_after_ex2 is not None and r["ex2_issue_to_wait"] < a.want_after_ex2:
        print(f"P V wait hoisted: {r['ex2_issue_to_wait']} exponentials between the P V issue and its wait,"
              f" want >= {a.want_after_ex2}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
