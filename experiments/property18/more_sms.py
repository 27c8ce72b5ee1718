"""Two problems where the model predicts a bigger GPU slower (tests/test_timing.py's
test_more_sms_or_bandwidth_never_slower, which CI runs on derandomized examples only; random
draws found these, session 18). No GPU:
    python experiments/property18/more_sms.py > experiments/property18/more_sms.txt
Each line: profile, schedule, problem, SM count (the tensor peaks grown with it, as the test
grows them), the Plan's predicted seconds (the smaller GPU's DRAM estimate, as the test's first
assertion), in us."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
from test_timing import PROFILES, grown  # noqa: E402

from iosim.core.problem import Problem  # noqa: E402
from iosim.model import memory, timing  # noqa: E402
from iosim.schedules import Tiles, plan  # noqa: E402

CASES = [("a100-sxm4-80gb", "fa2", dict(batch=2, heads=1, seqlen_q=16384, head_dim=64, causal=True),
          (1, 127 / 108, 128 / 108, 2)),
         ("h100-sxm5-80gb", "fa1", dict(batch=3, heads=32, seqlen_q=100, head_dim=256, causal=True),
          (1, 1.25, 1.5, 2))]
for name, s, fields, factors in CASES:
    hw = PROFILES[name]
    p = Problem(**fields)
    pl = plan(s, p, hw)
    dram = memory.estimate(pl, hw)
    for f in factors:
        big = grown(hw, "sm_count", f)
        pl2 = plan(s, p, big, Tiles(split_rows=pl.main.defines.get("SPLIT_ROWS")))
        us = sum(t.seconds for t in timing.predict(pl2, big, dram)) * 1e6
        print(f"{hw.name} {s} {fields} sms={big.sm_count} {us:.2f} us")
