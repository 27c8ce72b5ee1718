"""What fa3.cu's FP8 main loop does inside a consumer warpgroup's turn at the tensor cores
(issue 24, session 15): in the loop body (experiments/fp8/speed14c/depbar_check.py's), the
instructions from the turn's named-barrier wait (BAR.SYNC) to its hand-over (BAR.ARV), and of
them the FMULs (O's rescale: 64 at d = 128, plus alpha's units) and the mbarrier polls
(SYNCS.PHASECHK: waits for a K or V stage).

    python3 experiments/fp8/speed15/turn_check.py KERNEL.cubin

(sass_same.sh builds the cubins from fa3.cu at 4b5851f, where RESCALE_TOP and KV_WAIT_FIRST are.)

Needs cuobjdump and nvdisasm on PATH (or CUOBJDUMP=...).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "depbar_check", Path(__file__).resolve().parent.parent / "speed14c" / "depbar_check.py")
depbar = importlib.util.module_from_spec(spec)
spec.loader.exec_module(depbar)


def turn(cubin: str) -> dict[str, int]:
    text = [t for _, t in depbar.loop_body(depbar.sass(cubin))]
    sync = next(i for i, t in enumerate(text) if t.startswith("BAR.SYNC"))
    arv = next(i for i, t in enumerate(text) if t.startswith("BAR.ARV") and i > sync)
    span = text[sync + 1:arv]
    return {"turn_instructions": len(span), "turn_fmul": sum(t.startswith("FMUL") for t in span),
            "turn_polls": sum("SYNCS.PHASECHK" in t for t in span)}


if __name__ == "__main__":
    print(" ".join(f"{k}={v}" for k, v in turn(sys.argv[1]).items()))
