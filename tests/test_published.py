"""The model against the papers' published numbers (experiments/papers/published.csv): every
row names its source, fwd+bwd rows are predicted as both passes, and the time MAPE per (paper,
schedule, direction, GPU) stays within what it was when the table was committed."""

from pathlib import Path

import pandas as pd
import pytest

from iosim.analysis.validate import repredict, validate
from iosim.core.problem import Problem
from iosim.core.rows import read_rows

TABLE = Path(__file__).resolve().parents[1] / "experiments" / "papers" / "published.csv"

# MAPE (percent) with the model and hwprofiles of issue 23 (mma.sync dispatch, the calibration on
# the forward and backward grids and experiments/waves, fa1's backward waiting for its
# synchronous loads); the model was not tuned to them. A change that makes any group worse by
# over a point fails here. Against the table's commit: fa2 bwd 19.5 -> 5.9, fa2 fwd+bwd
# 12.9 -> 5.4, A100 fa1 fwd+bwd (FA2) 67.4 -> 36.0; worse: fa3 bwd 8.2 -> 16.2 (wgmma's rate,
# now fitted from fa3 forward rows, 0.90 of the peak, is the forward's), standard bwd
# 23.2 -> 26.3, A100 fa1 (FA1) 26.9 -> 31.5, H100 fa1 fwd+bwd (FA2) 94.4 -> 101.8: that figure
# ran the original FA1, whose backward is faster than kernels/fa1.cu's, which the model now
# follows (experiments/bwd_grid: 6% MAPE, from 18%). Issue 22: fa1's backward splits a head's key
# blocks across CTAs as the FlashAttention-1 library did (dQ by atomics): fa1 fwd+bwd (FA2)
# H100 101.8 -> 20.2, A100 36.0 -> 18.7.
MAPE_AT_COMMIT = {
    ("a100-sxm4-80gb", "fa1", "fwd+bwd", "FA1"): 31.5,
    ("a100-sxm4-80gb", "fa1", "fwd+bwd", "FA2"): 18.7,
    ("a100-sxm4-80gb", "fa2", "fwd+bwd", "FA2"): 10.5,
    ("h100-sxm5-80gb", "fa1", "fwd+bwd", "FA2"): 20.2,
    ("h100-sxm5-80gb", "fa2", "bwd", "FA3"): 5.9,
    ("h100-sxm5-80gb", "fa2", "fwd", "FA3"): 6.3,
    ("h100-sxm5-80gb", "fa2", "fwd+bwd", "FA2"): 5.4,
    ("h100-sxm5-80gb", "fa3", "bwd", "FA3"): 16.2,
    ("h100-sxm5-80gb", "fa3", "fwd", "FA3"): 9.2,
    # the papers' PyTorch baseline (iosim.schedules.standard), predicted since that schedule
    # came: under-predicted everywhere (the benchmark's packed-qkv copies are left out; FA1's
    # GPT-2 row ran with dropout, which its model has not)
    ("a100-sxm4-80gb", "standard", "fwd+bwd", "FA1"): 53.9,
    ("a100-sxm4-80gb", "standard", "fwd+bwd", "FA2"): 29.7,
    ("h100-sxm5-80gb", "standard", "bwd", "FA3"): 26.3,
    ("h100-sxm5-80gb", "standard", "fwd", "FA3"): 21.7,
    ("h100-sxm5-80gb", "standard", "fwd+bwd", "FA2"): 25.0,
}


@pytest.fixture(scope="module")
def times() -> pd.DataFrame:
    return validate([TABLE], by=["paper"])[0]


def test_every_row_names_its_source_and_value():
    df = pd.read_csv(TABLE)
    for col in ("paper", "source", "figure", "published_unit"):
        assert df[col].notna().all() and (df[col].str.strip() != "").all(), col
    assert (df.published_value > 0).all() and set(df.paper) == {"FA1", "FA2", "FA3"}
    assert df.read_off.isin([True, False]).all() and (df.precision > 0).all()
    # a TFLOP/s row's time is its FLOPs by FlashAttention's convention over the TFLOP/s
    t = df[df.published_unit == "TFLOP/s"]
    assert (t.tflops == t.published_value).all()


def test_mape_per_paper_within_committed_bounds(times):
    got = {(r.hw, r.schedule, r.direction, r.paper): r.mape_pct for r in times.itertuples()}
    assert set(got) == set(MAPE_AT_COMMIT)
    worse = {k: round(v, 1) for k, v in got.items() if v > MAPE_AT_COMMIT[k] + 1.0}
    assert not worse, f"MAPE against the papers grew: {worse}"


def test_a100_groups_say_uncalibrated_and_standard_is_predicted(times):
    assert (times[times.hw == "a100-sxm4-80gb"].calibrated == "no").all()
    assert (times[times.hw == "h100-sxm5-80gb"].calibrated == "yes").all()
    # the papers' baseline is a schedule (iosim.schedules.standard): its 68 rows are predicted
    assert "standard" not in times.attrs["skipped"]
    assert times[times.schedule == "standard"].n.sum() == 66  # (two give GFLOPs and HBM GB, no time)


def test_fwd_bwd_rows_are_the_sum_of_both_passes():
    row = read_rows(TABLE).query("direction == 'fwd+bwd' and schedule == 'fa2'").head(1)
    both = repredict(row).iloc[0]
    fields = dict(batch=int(both.batch), heads=int(both.heads), seqlen_q=int(both.seqlen_q),
                  head_dim=int(both.head_dim), dtype=str(both["dtype"]), causal=bool(both.causal))
    parts = [repredict(row.assign(direction=d)).iloc[0].time_pred_ms for d in ("fwd", "bwd")]
    assert both.time_pred_ms == pytest.approx(sum(parts), rel=1e-12)
    flops = 3.5 * Problem(**fields).fa_flops()
    assert both.tflops_pred == pytest.approx(flops / both.time_pred_ms / 1e9, rel=1e-12)
