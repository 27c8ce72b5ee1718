"""Today's model against the committed decode measurements (experiments/decode/h100/decode.csv,
H100): decode, paged decode and the sliding-window forwards, re-predicted with the calibrated
profile (none of these rows were fitted), and what the run says about the kernels beside torch."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from iosim.analysis.measured import decode_run_ms
from iosim.core.hardware import load

CSV = Path(__file__).resolve().parents[1] / "experiments" / "decode" / "h100" / "decode.csv"
H100 = load("h100")  # the calibrated profile, as predict uses it


def predicted_ms(r) -> float:
    return decode_run_ms(r, H100)


@pytest.fixture(scope="module")
def rows():
    df = pd.read_csv(CSV)
    return df[(df.status == "ok") & df.impl.isin(["decode", "decode_paged", "fa2", "fa3"])]


@pytest.mark.parametrize("impl,mape", [("decode", 6.0), ("decode_paged", 5.0), ("fa2", 8.0),
                                       ("fa3", 8.0)])
def test_model_holds_the_measured_decode_and_window_rows(rows, impl, mape):
    """Decode with a batch of 8 or more sequences (the cache streamed at the copy bandwidth's
    pace), and the window forwards."""
    g = rows[(rows.impl == impl) & ((rows.batch >= 8) | ~rows.impl.str.startswith("decode"))]
    assert len(g) >= 3
    err = [abs(predicted_ms(r) / r["time_ms"] - 1) * 100 for _, r in g.iterrows()]
    assert np.mean(err) <= mape, (impl, np.round(err, 1))


def test_batch_one_decode_is_slower_than_the_model_by_a_bounded_gap(rows):
    """One sequence: the kernel reads its cache below the bandwidth the model grants it (0.69 of
    the copy bandwidth at 32k, issue 25), and since issue 23's calibration (launch 5.6 us, no
    longer its 10 us bound, which absorbed a few CTAs' memory latency here) every such row is
    predicted fast, by at most 45% (8k: the kernel's time moved between runs, 0.026 to 0.041
    ms). A kernel or model that closes the gap fails here: tighten this then."""
    g = rows[rows.impl.str.startswith("decode") & (rows.batch == 1)]
    assert len(g) >= 3
    err = np.array([predicted_ms(r) / r["time_ms"] - 1 for _, r in g.iterrows()])
    assert (err < 0).all() and (err > -0.45).all(), np.round(err * 100, 1)


def test_decode_kernel_beside_torch_and_the_hbm_floor():
    df = pd.read_csv(CSV)
    ok = df[df.status == "ok"]
    keys = ["batch", "heads", "kv_heads", "seqlen_k"]
    ours = ok[ok.impl == "decode"].set_index(keys).time_ms
    best = ok[ok.impl.str.startswith("torch_")].groupby(keys).time_ms.min()
    ratio = (best / ours).dropna()
    assert len(ratio) == 13 and (ratio >= 0.97).all() and (ratio >= 1).sum() >= 12
    # K/V bandwidth over the copy bandwidth: at least 85% at KV >= 32k from batch 8 on and at
    # 128k for every batch; GQA batch 1 at 32k falls short (0.69 of a 0.07 ms step: not
    # examined further)
    dec = ok[ok.impl == "decode"]
    long = dec[(dec.seqlen_k >= 32768) & ((dec.batch >= 8) | (dec.seqlen_k >= 131072))]
    assert len(long) == 6 and (long.kv_bw_fraction >= 0.85).all(), long.kv_bw_fraction
    short = dec[(dec.batch == 1) & (dec.seqlen_k == 32768) & (dec.kv_heads == 8)]
    assert (short.kv_bw_fraction < 0.85).all()  # the miss, held so a fix shows up here
    # a paged cache (16-256-token pages) within 10% of the contiguous one of the same run
    paged = ok[ok.impl == "decode_paged"].join(ours.rename("flat"), on=keys)
    assert len(paged) == 12 and (paged.time_ms <= 1.1 * paged.flat).all()
