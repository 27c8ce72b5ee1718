"""`bound` names the limiter: the rate whose doubling (latency and launch: halving) shortens the
predicted time most, as `iosim explain`'s what-ifs (the whole Plan predicted again through a
changed profile) say; `busiest` is the unit with the largest fluid time, a separate column."""

from __future__ import annotations

import pytest

from iosim.analysis.explain import explain, relax, total_ms
from iosim.analysis.predict import row
from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.model import memory, timing
from iosim.schedules import plan

CASES = [  # (schedule, batch, heads, N, d, causal, direction): large and small, every kernel
    ("fa2", 2, 16, 8192, 128, False, "fwd"),  # the issue's: it said "shared memory", 2x of which gave 1.00x
    ("fa3", 4, 32, 4096, 128, False, "fwd"),  # ... "L2", 2x of which gave 1.00x
    ("fa2", 1, 1, 256, 64, False, "fwd"),
    ("fa3", 1, 2, 1024, 64, True, "fwd"),
    ("naive", 4, 32, 4096, 64, True, "fwd"),
    ("fa1", 4, 16, 2048, 128, False, "fwd"),
    ("fa2", 2, 16, 4096, 128, True, "bwd"),
    ("naive", 1, 4, 512, 128, False, "bwd"),
    ("fa1", 2, 8, 2048, 64, False, "bwd"),
    ("standard", 4, 16, 1024, 64, False, "fwd"),
]


def problem(b, h, n, d, causal, direction):
    return Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=causal, direction=direction)


@pytest.mark.parametrize("hw_name", ["h100", "h200"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_bound_is_the_largest_what_if(case, hw_name):
    """explain's binding limit is the what-if with the largest speed-up, and no other relief
    speeds the Plan up more; predict's bound column says the same."""
    hw = load(hw_name)
    s, *shape = case
    e = explain(s, problem(*shape), hw)
    reliefs = [w for w in e["what_if"] if w["relief"]]
    assert {w["relief"] for w in reliefs} == set(timing.RELIEFS)
    top = max(w["speedup"] for w in reliefs)
    named = next(w for w in reliefs if w["relief"] == e["bound"])
    assert named["speedup"] >= top * (1 - 1e-9), (e["bound"], reliefs)
    assert reliefs[0]["relief"] == e["bound"]
    assert row(plan(s, problem(*shape), hw), hw)["bound"] == e["bound"]
    assert e["busiest"] in timing.UNITS + timing.LEVELS


@pytest.mark.parametrize("case", CASES[:6], ids=lambda c: "-".join(map(str, c)))
def test_relaxed_rates_are_the_relaxed_profile(case):
    """Each kernel's relaxed time (timing.Rates.relaxed) is the time of the Plan predicted
    again through the profile with that rate doubled (explain.relax): one what-if, two ways."""
    hw = load("h100")
    s, *shape = case
    p = problem(*shape)
    pl = plan(s, p, hw)
    kts = timing.predict(pl, hw, memory.estimate(pl, hw))
    for x in timing.RELIEFS:
        h2 = hw.with_changes(**relax(hw, x, "bf16"))
        want = total_ms(plan(s, p, h2), h2)
        assert sum(k.relaxed_time(x) for k in kts) * 1e3 == pytest.approx(want, rel=1e-9), x
        assert all(k.lower[x] <= k.relaxed_time(x) * (1 + 1e-12) for k in kts), x  # bounds hold


def test_latency_and_launch_can_bind():
    """The limiter is not always a unit: a lone CTA's dependent chain (8 CTAs for 132 SMs), a
    tiny kernel's launch (one CTA of one trip at d = 64; at d = 128 its chain, its first loads'
    round trip and its stores' drain, halved, save more than half the launch overhead)."""
    hw = load("h100")
    got = {row(plan("fa2", problem(b, h, n, d, False, "fwd"), hw), hw)["bound"]
           for b, h, n, d in [(1, 1, 1024, 128), (1, 1, 128, 64)]}
    assert got == {"latency", "launch"}


def test_doubling_the_busiest_unit_need_not_help():
    """The issue's fa2 case: shared memory is the busiest unit, yet twice its rate gives 1.00x;
    the bound is what does help."""
    hw = load("h100")
    e = explain("fa2", problem(2, 16, 8192, 128, False, "fwd"), hw)
    sram = next(w for w in e["what_if"] if w["relief"] == "sram")
    assert e["busiest"] == "sram" and sram["speedup"] < 1.01 and e["bound"] != "sram"
    assert e["what_if"][0]["speedup"] > 1.1
