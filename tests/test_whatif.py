"""What-ifs mean what they say: every hardware field a user can `--set` moves the predicted time
in the physical direction (a bigger, faster or more efficient GPU is never slower), end to end:
the plan, the L2-aware DRAM estimate and the timing are all made again on the changed profile.

Fields left out, and why:
- `hbm_capacity_bytes`: decides only whether a problem fits (the `fits` column), not its time.
- `smem_per_block_optin_bytes`, `max_registers_per_thread`: they bound what one CTA may ask for,
  and the model does not count spills or re-pick tiles from them; shipped profiles sit at the
  architectural limits already (255 registers).
- `l2_bytes`, `sm_count` for kernels whose CTAs re-read their own data (FA1's Q/O/l/m, a naive
  softmax row too long for shared memory: `memory.same_cta_rereads`): a physically real
  exception. More CTAs at once put more bytes between a CTA's two reads, so more SMs can thrash
  an L2 of the same size; for those the timing alone is checked, at the same DRAM bytes.
Waves: with more SMs (or more CTA slots per SM) the number of waves cannot grow and no CTA gets
a smaller share of its SM, so quantisation is no reason for time to grow: it is asserted like
every other field.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from iosim.analysis.predict import row
from iosim.core import hardware
from iosim.core.hardware import InputError
from iosim.core.problem import Direction, Dtype, Problem
from iosim.model import memory, timing
from iosim.schedules import plan

PROFILES = {n: hardware.load(n) for n in ("h100", "h100-sxm5-80gb", "a100-sxm4-80gb")}
SCHEDS = ["naive", "fa1", "fa2", "fa3"]
# (field, factor > 1): the change makes the GPU bigger or faster
BIGGER = [("sm_count", 1.5), ("sm_count", 2), ("sm_count", 1000 / 132), ("clock_hz", 1.25),
          ("hbm_bandwidth_bytes_per_s", 2), ("l2_bandwidth_bytes_per_s", 2), ("l2_bytes", 2),
          ("smem_per_sm_bytes", 2), ("smem_bandwidth_bytes_per_clk_per_sm", 2),
          ("registers_per_sm", 2), ("max_threads_per_sm", 2), ("max_ctas_per_sm", 2),
          ("fp32_lanes_per_clk_per_sm", 2), ("sfu_lanes_per_clk_per_sm", 2),
          ("issue_per_clk_per_sm", 2), ("tensor_flops_per_clk_per_sm.bf16", 2),
          ("tensor_flops_per_s.bf16", 2), ("launch_overhead_s", 0.5)]  # less launch cost
EFFICIENCIES = [f"efficiency.{k}" for k in hardware.Efficiency.model_fields]
SETTABLE = {k for k, _ in BIGGER} | set(EFFICIENCIES)

problems = st.builds(
    Problem,
    batch=st.sampled_from([1, 2, 4]),
    heads=st.sampled_from([1, 8, 32]),
    seqlen_q=st.sampled_from([128, 1000, 4096, 8192, 16384]),
    head_dim=st.sampled_from([64, 128]),
    dtype=st.just(Dtype.bf16),
    causal=st.booleans(),
    direction=st.sampled_from([Direction.fwd, Direction.bwd]),
)


def value(hw, field: str):
    if "." in field:
        table, key = field.split(".", 1)
        return getattr(hw, table)[key] if isinstance(getattr(hw, table), dict) else getattr(getattr(hw, table), key)
    return getattr(hw, field)


def changed(hw, field: str, factor: float):
    v = value(hw, field)
    if field.startswith("efficiency."):  # a fraction: move it towards 1
        return hw.with_changes(**{field: v + (1 - v) * 0.5})
    new = v * factor
    return hw.with_changes(**{field: int(new) if isinstance(v, int) else new})


def seconds(pl, hw, dram=None) -> float:
    return sum(k.seconds for k in timing.predict(pl, hw, dram or memory.estimate(pl, hw)))


def test_every_settable_field_is_covered():
    """A new what-if field needs a direction here (or a reason in the docstring to leave it out)."""
    from iosim.analysis.sweep import hw_field_kind

    fields = hardware.HardwareProfile.model_fields
    scalar = {k for k, f in fields.items() if f.annotation in (int, float)}
    left_out = {"hbm_capacity_bytes", "smem_per_block_optin_bytes", "max_registers_per_thread"}
    for k in scalar:
        hw_field_kind(k)  # every one is settable
    assert scalar - left_out <= SETTABLE
    for k in EFFICIENCIES:
        assert hw_field_kind(k) is float


@settings(derandomize=True, database=None, max_examples=600, deadline=None)
@given(problems, st.sampled_from(sorted(PROFILES)), st.sampled_from(SCHEDS),
       st.sampled_from(BIGGER + [(k, 0) for k in EFFICIENCIES]))
def test_a_bigger_gpu_is_never_slower(p, hw_name, s, change):
    hw = PROFILES[hw_name]
    field, factor = change
    big = changed(hw, field, factor)
    assert value(big, field) != value(hw, field)
    try:
        pl = plan(s, p, hw)
    except InputError:  # fa3 off Hopper, tiles over SRAM: not a valid point
        return
    pl2 = plan(s, p, big)  # a bigger GPU runs whatever the smaller one ran
    a = seconds(pl, hw)
    # at the same DRAM bytes, the timing model alone: always
    assert seconds(pl2, big, memory.estimate(pl, hw)) <= a * (1 + 1e-9), (field, factor)
    if field in ("sm_count", "l2_bytes") and memory.same_cta_rereads(pl):
        return  # the real L2-thrash exception (module docstring)
    b = seconds(pl2, big)
    assert b <= a * (1 + 1e-9), (field, factor)
    assert row(pl2, big)["time_pred_ms"] <= row(pl, hw)["time_pred_ms"] * (1 + 1e-9)


@pytest.mark.parametrize("field", ["sm_count", "clock_hz"])
def test_device_rates_follow_sms_and_clock(field):
    """Per-SM facts stay per SM: twice the SMs or clock, twice every SM unit's device rate;
    the levels no SM owns (HBM, L2) stay put."""
    hw = PROFILES["h100"]
    big = changed(hw, field, 2)
    for rate in ("fp32_ops_per_s", "sfu_exp_per_s", "smem_bytes_per_s"):
        assert getattr(big, rate) == pytest.approx(2 * getattr(hw, rate))
    for d, peak in hw.tensor_flops_per_s.items():
        assert big.tensor_flops_per_s[d] == pytest.approx(2 * peak)
    assert big.tensor_flops_per_clk_per_sm == hw.tensor_flops_per_clk_per_sm
    assert big.hbm_bandwidth_bytes_per_s == hw.hbm_bandwidth_bytes_per_s
    assert big.l2_bandwidth_bytes_per_s == hw.l2_bandwidth_bytes_per_s


def test_issue_sweep_more_sms_faster():
    """The issue's reproduction: fa2 at N = 8192 on 132, 264, 1000 SMs gets faster each time."""
    p = Problem(batch=4, heads=32, seqlen_q=8192, head_dim=128)
    times = [row(plan("fa2", p, h), h)["time_pred_ms"]
             for h in (PROFILES["h100-sxm5-80gb"].with_changes(sm_count=n) for n in (132, 264, 1000))]
    assert times[0] > times[1] > times[2]


def test_shipped_peaks_are_the_datasheets():
    """The TOMLs quote device peaks; stored per SM, they come back unchanged."""
    import tomllib

    hw = PROFILES["h100-sxm5-80gb"]
    quoted = tomllib.loads((hardware.PROFILE_DIR / "h100-sxm5-80gb.toml").read_text())
    assert hw.tensor_flops_per_s == quoted["tensor_flops_per_s"]
    assert hw.with_changes(**{"tensor_flops_per_s.bf16": 5e14}).tensor_flops_per_s["bf16"] == pytest.approx(5e14)


@pytest.mark.parametrize("hw_name,s,problem", [
    # naive_pv's 128 CTAs on 108 SMs: with twice the shared memory all fit, 20 SMs holding two
    # (once 0.339 -> 0.433 ms)
    ("a100-sxm4-80gb", "naive", dict(batch=1, heads=1, seqlen_q=16384, head_dim=64)),
    ("a100-sxm4-80gb", "naive", dict(batch=1, heads=32, seqlen_q=512, head_dim=256)),  # waves
    ("h100-sxm5-80gb", "fa2", dict(batch=1, heads=32, seqlen_q=2048, head_dim=128))])
def test_more_cta_slots_never_slow_a_kernel(hw_name, s, problem):
    """CTAs resident on one SM overlap at least as well as the same CTAs run fewer at a time, so
    more CTA slots per SM (shared memory, registers) never lengthen the time. Found by walking
    a grid of 19,200 (problem, field) pairs, where these once got up to 12% slower."""
    p = Problem(**problem)
    hw = PROFILES[hw_name]
    for field in ("smem_per_sm_bytes", "registers_per_sm"):
        big = changed(hw, field, 2)
        assert seconds(plan(s, p, big), big) <= seconds(plan(s, p, hw), hw) * (1 + 1e-12), field


def test_a_faster_plain_trip_never_lengthens_a_ragged_causal_cta():
    """A masked trip is one of the CTA's trips: fa3 at N = 128 (a 192-row tile, 2/3 of a trip,
    masked) once got slower with a faster SFU because it counted more masked trips than trips."""
    p = Problem(batch=1, heads=1, seqlen_q=128, head_dim=64, causal=True)
    hw = PROFILES["h100-sxm5-80gb"]
    for field in ("sfu_lanes_per_clk_per_sm", "fp32_lanes_per_clk_per_sm"):
        big = changed(hw, field, 2)
        assert seconds(plan("fa3", p, big), big) <= seconds(plan("fa3", p, hw), hw) * (1 + 1e-12)
