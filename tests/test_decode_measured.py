"""Today's model against the committed decode measurements, and what the runs say about the
kernels beside torch: experiments/decode/h100/decode.csv (H100, the older decode_bench.py run:
decode, paged decode and the sliding-window forwards) and experiments/decode/h200/bench.csv
(H200, `iosim bench --schedule decode` through experiments/decode/run.sh: decode contiguous and
paged beside torch's SDPA and compiled FlexAttention, the split sweep; variants.csv: other tiles
at batch 1), and experiments/decode/h100/fused (H100, experiments/decode/fused.sh: the combine
fused into the split kernel, the L2 flush's cost, page sizes, windows, MHA), re-predicted with
the GPU's calibrated profile (none of these rows were fitted). Rows of the earlier two-kernel
decode are re-predicted with the combine kernel's launch (analysis.measured.decode_run_ms)."""

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from iosim.analysis.measured import decode_run_ms
from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.schedules import Tiles, plan

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


# ------------------------------------------------------------------ H200, iosim bench rows
H200_DIR = CSV.parents[1] / "h200"
H200 = load("h200")
KEYS = ["batch", "seqlen_k"]


@pytest.fixture(scope="module")
def h200():
    """The run's rows; ours (the Plan's split count), contiguous and paged, by (batch, KV)."""
    df = pd.read_csv(H200_DIR / "bench.csv")
    ours = df[(df.schedule == "decode") & df.kv_splits.isna()]
    return df, ours[ours.page_size.isna()].set_index(KEYS), ours[ours.page_size.notna()].set_index(KEYS)


def test_h200_every_row_checked_and_the_peers_beside_it(h200):
    df, flat, paged = h200
    assert len(flat) == len(paged) == 9 and (df[df.schedule == "decode"].status == "ok").all()
    sdpa = df[df.schedule.isin(["torch_flash", "torch_cudnn"])]
    assert (sdpa[sdpa.page_size.isna()].status == "ok").all()  # flash and cuDNN at every point
    assert (sdpa[sdpa.page_size.notna()].status == "unsupported: torch SDPA takes no paged K/V cache").all()
    assert sdpa[sdpa.page_size.notna()].time_ms.isna().all()
    # FlexAttention, contiguous and paged (through its block mask), checked at every point but
    # batch 32 x 128k, where its compile failed: a row that says so, not a crash
    flex = df[df.schedule == "torch_flex"].set_index(KEYS)
    big = flex.index == (32, 131072)
    assert (flex[~big].status == "ok").all() and len(flex[~big]) == 16
    assert flex[big].status.str.startswith("failed_compile: ").all() and flex[big].time_ms.isna().all()


def test_h200_decode_beside_torch_and_flex(h200):
    df, flat, paged = h200
    ok = df[df.status == "ok"]
    sdpa = ok[ok.schedule.isin(["torch_flash", "torch_cudnn", "torch_efficient", "torch_math"])]
    ratio = sdpa[sdpa.page_size.isna()].groupby(KEYS).time_ms.min() / flat.time_ms
    assert len(ratio) == 9 and (ratio >= 0.98).all() and (ratio >= 1).sum() >= 7, ratio
    flex = ok[ok.schedule == "torch_flex"]
    assert (flex[flex.page_size.isna()].set_index(KEYS).time_ms / flat.time_ms).dropna().min() >= 1.4
    assert (flex[flex.page_size.notna()].set_index(KEYS).time_ms / paged.time_ms).dropna().min() >= 1.4


def test_h200_with_launches_queued_cudnn_is_ahead_at_batch_one_128k(h200):
    """Timed with the launches queued ahead (the host's launch cost left out), the best torch
    backend is within 7% of ours everywhere but ahead where batch 1 reads 128k (cuDNN's host
    cost, larger than ours, is what put ours ahead as timed)."""
    df, flat, _ = h200
    ok = df[(df.status == "ok") & df.schedule.isin(["torch_flash", "torch_cudnn"]) & df.page_size.isna()]
    q = ok.groupby(KEYS).time_queued_ms.min() / flat.time_queued_ms
    assert len(q) == 9 and (q >= 0.93).all() and q.loc[(1, 131072)] < 0.95, q


def test_h200_bandwidth_at_long_caches_and_the_batch_one_miss(h200):
    """K/V bandwidth over the copy bandwidth of the run: from batch 8 on, at least 95% at KV >= 32k;
    batch 1 reaches 85% at 128k but not at 32k (issue 25's target), timed either way: with the
    launches queued ahead the host's launch cost is left out, and the gap stays."""
    _, flat, _ = h200
    long = flat[flat.index.get_level_values("seqlen_k") >= 32768]
    many = long[long.index.get_level_values("batch") >= 8]
    assert len(many) == 4 and (many.floor_ratio >= 0.95).all()
    assert flat.loc[(1, 131072)].floor_ratio >= 0.85
    one = flat.loc[(1, 32768)]
    assert one.floor_ratio < 0.7 and one.floor_ratio_queued < 0.7


def test_h200_batch_one_other_tiles_and_split_counts_do_not_close_the_gap():
    """variants.csv (batch 1, KV 32k and 128k; deeper rings, 128-key tiles, 8 warps, 16 and 32
    splits forced): none reaches 70% at 32k, even the split kernel alone (attn_ms, the combine
    left out); the combine alone takes 5 to 15 us."""
    v = pd.read_csv(H200_DIR / "variants.csv")
    assert (v.status == "ok").all() and v.variant.nunique() == 5 and len(v) == 30
    short = v[v.seqlen_k == 32768]
    assert (short.hbm_floor_ms / short.time_queued_ms).max() < 0.7
    assert (short.hbm_floor_ms / short.attn_ms).max() < 0.75
    assert v.other_kernels_ms.between(0.004, 0.015).all()


def test_h200_split_choice(h200):
    """The split count the Plan takes today, timed among the forced counts of the two sweeps
    (bench.csv; splits.csv, a later call: batch 8 at 2, 3 splits, batch 1 at 31, 33), within 5%
    of the best of them (issue 25's target), launches queued (the host's launch cost left out:
    it varies by a few microseconds from call to call) and as timed. The grid's own rows ran
    FlashAttention's rule (29 splits at batch 1, 4 at batch 8)."""
    df, flat, _ = h200
    more = pd.read_csv(H200_DIR / "splits.csv")
    forced = pd.concat([df[(df.schedule == "decode") & df.kv_splits.notna()], more])
    for col in ("time_queued_ms", "time_ms"):
        t = forced.groupby([*KEYS, "kv_splits"])[col].min()
        best = t.groupby(level=KEYS).min()
        assert len(best) == 4
        for (b, nk), t_best in best.items():
            p = Problem(batch=b, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=nk, head_dim=128)
            s = plan("decode", p, H200).main.defines["NUM_SPLITS"]
            assert t[(b, nk, s)] <= 1.05 * t_best, (col, b, nk, s, t.loc[(b, nk)].round(4).to_dict())
    # FlashAttention's count (the grid's rows) at batch 1: 5-10% over the best forced
    old = (flat.time_ms / forced.groupby(KEYS).time_ms.min()).dropna().loc[1] - 1
    assert ((old > 0.05) & (old <= 0.10)).all(), old


def test_h200_model_holds_decode_from_batch_8(h200):
    """Today's model on the H200 calibrated profile, fresh (no decode row was fitted): within
    6% MAPE from batch 8 on, contiguous (5% before session 14, when the H200 took the H100's HBM
    efficiency; with its own copy bandwidth's, 0.873, these rows, which read K/V at about the
    copy rate, are predicted 1-9% slow); paged within 6% (one paged row's time is 15% over its
    launches-queued time, noise the queued time does not have)."""
    _, flat, paged = h200
    for rows, mape in ((flat, 6.0), (paged, 6.0)):
        g = rows[rows.index.get_level_values("batch") >= 8].reset_index()
        err = [abs(decode_run_ms(r, H200) / r["time_ms"] - 1) * 100 for _, r in g.iterrows()]
        assert len(err) == 6 and np.mean(err) <= mape, np.round(err, 1)


def test_h200_paged_cache_beside_the_contiguous_one(h200):
    """64-token pages in a random order, launches queued ahead: within 5% of the contiguous
    cache from batch 8 on, within 15% at batch 1 (14% at 128k: over issue 25's 10%)."""
    _, flat, paged = h200
    r = paged.time_queued_ms / flat.time_queued_ms
    assert (r[r.index.get_level_values("batch") >= 8] <= 1.05).all()
    assert (r <= 1.15).all() and r.max() > 1.10, r


def test_h100_split_choice():
    """On the H100 run through `iosim bench` (experiments/decode/h100/bench.csv), which ran
    today's split rule: the Plan's count within 5% of the best forced count at batch 1 and 8,
    32k and 128k keys (launches queued and as timed)."""
    df = pd.read_csv(CSV.parent / "bench.csv")
    ours = df[df.schedule == "decode"]
    h100 = load("h100")
    for col in ("time_queued_ms", "time_ms"):
        forced = ours[ours.kv_splits.notna()].groupby(KEYS)[col].min()
        assert len(forced) == 4
        for (b, nk), t_best in forced.items():
            p = Problem(batch=b, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=nk, head_dim=128)
            s = plan("decode", p, h100).main.defines["NUM_SPLITS"]
            mine = ours[(ours.batch == b) & (ours.seqlen_k == nk) & ours.page_size.isna()
                        & ((ours.kv_splits == s) | (ours.kv_splits.isna() & (ours.splits == s)))]
            assert len(mine) and mine[col].min() <= 1.05 * min(t_best, mine[col].min()), (col, b, nk, s)


# ------------------------------------------------------------------ H100, the combine fused
# experiments/decode/h100/fused (experiments/decode/fused.sh): decode.cu with the combine in the
# last CTA; rows timed after a read of the flush buffer (`--flush read`, no dirty L2 line) unless
# said; the repeats, rings and windows from a second call on the same machine
FUSED = CSV.parent / "fused"


def _fused(name: str) -> pd.DataFrame:
    df = pd.read_csv(FUSED / name)
    return df[df.status == "ok"]


@pytest.fixture(scope="module")
def fused():
    df = _fused("bench_read.csv")
    ours = df[(df.schedule == "decode") & df.kv_splits.isna()]
    return df, ours[ours.page_size.isna()].set_index(KEYS), ours[ours.page_size.notna()]


def test_fused_kernel_checked_and_sanitized():
    """Every decode row passed its check (NaN-poisoned outputs, fresh data); the GPU tests
    passed and racecheck, synccheck found nothing on the ragged split + combine cases."""
    for name in ("bench_read.csv", "bench_write.csv", "stages.csv", "window.csv", "mha.csv",
                 "repeat_read.csv", "repeat_write.csv"):
        df = pd.read_csv(FUSED / name)
        ours = df[df.schedule.isin(["decode", "fa2", "fa3"])]
        assert len(ours) and (ours.status == "ok").all(), name
        assert set(df.flush) == ({"write"} if "write" in name else {"read"}), name
    assert "passed" in (FUSED / "gpu_tests.log").read_text()
    assert "failed" not in (FUSED / "gpu_tests.log").read_text()
    assert "0 hazards displayed (0 errors, 0 warnings)" in (FUSED / "sanitize_racecheck.log").read_text()
    log = (FUSED / "run.log").read_text()
    assert "racecheck exit: 0" in log and "synccheck exit: 0" in log


def test_write_flush_charges_every_timed_call_a_fixed_writeback():
    """The mechanism behind the earlier batch-1 gap (issue 25): a zero-fill of twice the L2
    before each repetition leaves dirty lines that the timed kernel's misses write back. A plain
    read-only reduction pays the same extra time from 128 MiB to 1 GiB (a fixed cost, not a
    bandwidth loss), under a third of it at 16 MiB (it evicts only part of the L2); the decode
    step pays the same at four shapes (launches queued ahead); a 2 GiB copy, whose own time
    dwarfs it, under 1%."""
    p = pd.read_csv(FUSED / "flush_probe.csv")
    t = p.pivot_table(index=["op", "bytes"], columns="flush", values="ms")
    extra = (t.write - t.read) * 1e3  # microseconds
    big = extra.loc["read"][extra.loc["read"].index >= 128 << 20]
    assert len(big) == 3 and big.between(8, 11).all() and big.max() - big.min() < 1, big
    assert extra.loc[("read", 16 << 20)] < big.min() / 3
    copy = t.loc["copy"].iloc[0]
    assert 0 < copy.write / copy.read - 1 < 0.01
    r, w = (pd.read_csv(FUSED / f"repeat_{f}.csv").set_index(KEYS) for f in ("read", "write"))
    ours = (w.time_queued_ms - r.time_queued_ms) * 1e3
    assert len(ours) == 4 and ours.between(0.9 * big.min(), 1.2 * big.max()).all(), ours
    # and it is what held batch 1 at 32k under 85% of the copy bandwidth
    assert w.loc[(1, 32768)].floor_ratio_queued < 0.75 < 0.85 < r.loc[(1, 32768)].floor_ratio_queued


def test_fused_bandwidth_at_every_batch(fused):
    """Issue 25's target: K/V bandwidth >= 85% of the copy bandwidth at KV >= 32k for every batch
    (as timed, and launches queued ahead), batch 1 included; again in the repeat and at the
    default ring of the ring sweep."""
    _, flat, _ = fused
    long = flat[flat.index.get_level_values("seqlen_k") >= 32768]
    assert len(long) == 6
    assert (long.floor_ratio >= 0.85).all() and (long.floor_ratio_queued >= 0.85).all()
    rep = _fused("repeat_read.csv")
    assert len(rep) == 4 and (rep.floor_ratio_queued >= 0.85).all()
    st = _fused("stages.csv")
    st = st[(st.stages_run == 3) & st.page_size.isna()]
    assert len(st) == 4 and (st.floor_ratio_queued >= 0.85).all()


def test_fused_beside_torch(fused):
    """Ahead of the best torch SDPA backend wherever the step is short (batch 1; batch 8 at 4k),
    launches queued or not; where both stream the cache at the copy bandwidth (batch 8 from 32k,
    batch 32), within 1% of it either way (0.8% at worst, launches queued: both at the HBM
    roofline, the difference inside the spread of repeated runs)."""
    df, flat, _ = fused
    sdpa = df[df.schedule.str.startswith("torch_") & df.page_size.isna()]
    for col in ("time_ms", "time_queued_ms"):
        ratio = sdpa.groupby(KEYS)[col].min() / flat[col]
        assert len(ratio) == 9 and (ratio >= 0.99).all(), (col, ratio.round(3))
        short = ratio[(ratio.index.get_level_values("batch") == 1) | (ratio.index == (8, 4096))]
        assert len(short) == 4 and (short > 1.0).all(), (col, short)
    mha = _fused("mha.csv")
    ours = mha[mha.schedule == "decode"].set_index(KEYS).time_queued_ms
    best = mha[mha.schedule.str.startswith("torch_")].groupby(KEYS).time_queued_ms.min()
    assert len(ours) == 4 and (best / ours >= 0.99).all()


def test_fused_split_choice(fused):
    """The Plan's split count (16 at batch 1) is the best measured among the forced counts."""
    df, flat, _ = fused
    forced = df[(df.schedule == "decode") & df.kv_splits.notna()]
    for (b, nk), g in forced.groupby(KEYS):
        mine = flat.loc[(b, nk)]
        assert mine.time_queued_ms <= 1.05 * g.time_queued_ms.min(), (b, nk)


def test_model_holds_the_fused_decode():
    """Today's model (the calibrated H100 profile; no decode row fitted) on the fused kernel's
    contiguous rows, GQA and MHA, launches queued ahead: every point within 5%. Without the
    fused combine's tail (five dependent round trips to L2 after the last split, decode.cu
    combine_last: the fence after its partial's stores, the count, the fence after the count's
    reset, the partial LSEs, the partial Os; `pipeline.l2_latency_cycles` each) the shortest
    step, batch 1 at 4k, is predicted 15% fast."""
    rows = pd.concat([_fused("bench_read.csv"), _fused("mha.csv")])
    ours = rows[(rows.schedule == "decode") & rows.kv_splits.isna() & rows.page_size.isna()]
    assert len(ours) == 13
    err = np.array([decode_run_ms(r, H100) / r["time_queued_ms"] - 1 for _, r in ours.iterrows()])
    assert np.abs(err).max() <= 0.05 and np.abs(err).mean() <= 0.04, np.round(err * 100, 1)
    one = ours[(ours.batch == 1) & (ours.seqlen_k == 4096)].iloc[0]
    p = Problem(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=4096, head_dim=128)
    k = plan("decode", p, H100).main
    assert k.tail_round_trips == 5
    tail_ms = 1e3 * 5 * H100.pipeline.l2_trip_cycles / H100.clock_hz
    assert (decode_run_ms(one, H100) - tail_ms) / one.time_queued_ms - 1 < -0.10


def test_paged_page_sizes_beside_the_contiguous_cache():
    """Pages in a random order, launches queued ahead (stages.csv, the default ring): 64- and
    256-token pages within 5% of the contiguous cache at batch 1 and 8, 32k and 128k (issue 25:
    10%); 16-token pages 12-16% over it (the earlier gather, each row's table entry read as its
    load issued; today's reads it a tile ahead: test_reading_the_table_ahead_closes_the_page_gap); a deeper ring
    (5, 6 stages) does not help any page size by more than 1%; at batch 32 (bench_read.csv)
    every page size within 5%."""
    s = _fused("stages.csv")
    s = s[s.schedule == "decode"]
    flat = s[s.page_size.isna()].set_index([*KEYS, "stages_run"]).time_queued_ms
    paged = s[s.page_size.notna()]
    ratio = pd.Series([r.time_queued_ms / flat[(r.batch, r.seqlen_k, r.stages_run)]
                       for r in paged.itertuples()],
                      index=pd.MultiIndex.from_frame(paged[[*KEYS, "page_size", "stages_run"]].astype(int)))
    three = ratio.xs(3, level="stages_run")
    assert len(three) == 12
    assert (three[three.index.get_level_values("page_size") >= 64] <= 1.05).all()
    sixteen = three.xs(16, level="page_size")
    assert sixteen.between(1.10, 1.20).all(), sixteen
    for st in (5, 6):
        assert (ratio.xs(st, level="stages_run") >= three - 0.01).all()
    df = _fused("bench_read.csv")
    big = df[(df.schedule == "decode") & (df.batch == 32)]
    flat32 = big[big.page_size.isna()].set_index("seqlen_k").time_queued_ms
    pg = big[big.page_size.notna()]
    assert len(pg) == 9 and (pg.time_queued_ms.values <= 1.05 * flat32.loc[pg.seqlen_k].values).all()


def test_sliding_window_decode_and_forwards():
    """A window of 4096 keys: decode reads only the window (its time the same at 32k and 128k
    keys, launches queued ahead) and is over 5x ahead of torch's SDPA, which takes the window as
    a boolean mask over the whole cache; the windowed fa2 and fa3 forwards are predicted within
    9% (7% before session 15's refit: its sync_overlap, 1.77 against 1.86, adds fa3's softmax
    and GEMMs more, and FA3's forward data want it so: the window of 4096 keys 6.4 -> 8.7% slow,
    the others 0.7-5.3%), and the model holds windowed decode from batch 8 (within 5%) but
    predicts batch 1 (33 splits over 65 tiles) 7-10% fast."""
    w = _fused("window.csv")
    dec = w[w.schedule == "decode"].set_index(KEYS)
    assert len(dec) == 4
    for b in (1, 8):
        t = dec.loc[b].time_queued_ms
        assert abs(t.loc[131072] / t.loc[32768] - 1) < 0.05
    torch = w[w.schedule.str.startswith("torch_") & (w.seqlen_q == 1)].groupby(KEYS).time_queued_ms.min()
    assert (torch / dec.time_queued_ms >= 5).all()
    fwd = w[w.schedule.isin(["fa2", "fa3"])]
    assert len(fwd) == 6 and fwd.window.notna().sum() == 4
    err = [abs(decode_run_ms(r, H100) / r["time_ms"] - 1) for _, r in fwd.iterrows()]
    assert max(err) <= 0.09, np.round(err, 3)
    derr = pd.Series([decode_run_ms(r, H100) / r["time_queued_ms"] - 1 for _, r in dec.reset_index().iterrows()],
                     index=dec.index)
    assert (derr.loc[8].abs() <= 0.05).all() and derr.loc[1].between(-0.12, -0.05).all(), derr


def test_validate_predicts_each_decode_point_with_its_own_cache_and_splits():
    """`iosim validate` on a decode bench file: every point its own (paged caches by page size,
    forced split counts, windows: Problem and Tiles fields of the row), not merged into the
    contiguous cache's; the Plan's own points (contiguous, GQA and MHA) within 5% MAPE, the
    worst within 5%; a window row predicted with its window and bottom-right diagonal (the
    windowed forwards within 6% MAPE: 5% before session 15's refit, fa3's three 3.0, 5.2 and
    8.7% slow since: test_sliding_window_decode_and_forwards)."""
    from iosim.analysis.validate import validate

    times, _ = validate([FUSED / "bench_read.csv", FUSED / "mha.csv"], None, ["page_size", "kv_splits"])
    dec = times[times.schedule == "decode"].set_index(["page_size", "kv_splits"])
    assert dec.loc[("", ""), "n"] == 13 and dec.loc[("", ""), "mape_pct"] <= 5
    assert dec.loc[("", ""), "worst_ape_pct"] <= 5
    assert all(dec.loc[(ps, ""), "n"] == 9 for ps in ("16", "64", "256"))
    assert all(dec.loc[("", s), "n"] == 2 for s in ("8", "12", "24", "32"))
    w, _ = validate([FUSED / "window.csv"])
    assert w[w.schedule == "decode"].n.iloc[0] == 4 and set(w.schedule) == {"decode", "fa2", "fa3"}
    assert (w[w.schedule != "decode"].mape_pct <= 6).all(), w.to_string()


# ------------------------------------------------------------------ H100, the table read ahead
# experiments/decode/h100/pages10 (two calls of experiments/decode/fused.sh: STEPS=tests,
# sanitize,pages, then tests,flush,window,b32): decode_paged_fwd reading the block table a tile
# ahead (PAGE_AHEAD=1) beside the earlier per-row read (PAGE_AHEAD=0) in one process
# (pages_probe.csv, pages_ncu.txt), then the bench grid, the windowed decode and batch 32 three
# times beside torch
PAGES10 = CSV.parent / "pages10"


def _probe() -> pd.DataFrame:
    df = pd.read_csv(PAGES10 / "pages_probe.csv")
    assert df.ok.all() and len(df) == 57
    return df


def _ratio(df, ps, ahead, order, splits_of, block_n=64) -> pd.Series:
    """A probe configuration's time over the contiguous cache's (the Plan's split count), per
    shape."""
    flat = df[df.page_size.isna() & (df.splits == splits_of)].set_index(KEYS).time_queued_ms
    sel = df[(df.page_size == ps) & (df.page_ahead == ahead) & (df.order == order)
             & (df.splits == splits_of) & (df.block_n == block_n)].set_index(KEYS).time_queued_ms
    return (sel / flat).dropna()


def test_pages10_checked_and_sanitized():
    """Both calls' GPU tests passed (both gathers, fresh NaN-poisoned data), racecheck and
    synccheck found nothing on the ragged paged cases, every probe configuration and every
    decode row passed its check, and every paged bench row ran the table read ahead."""
    for log in ("gpu_tests_1.log", "gpu_tests.log"):
        text = (PAGES10 / log).read_text()
        assert "passed" in text and "failed" not in text, log
    assert "0 hazards displayed (0 errors, 0 warnings)" in (PAGES10 / "sanitize_racecheck.log").read_text()
    assert "0 errors" in (PAGES10 / "sanitize_synccheck.log").read_text()
    _probe()
    for name in ("bench_read.csv", "window.csv", "b32_1.csv", "b32_2.csv", "b32_3.csv"):
        df = pd.read_csv(PAGES10 / name)
        ours = df[df.schedule == "decode"]
        assert len(ours) and (ours.status == "ok").all(), name
    df = pd.read_csv(PAGES10 / "bench_read.csv")
    paged = df[(df.schedule == "decode") & df.page_size.notna()]
    assert len(paged) == 27 and (paged.page_ahead == 1).all()


def test_reading_the_table_ahead_closes_the_page_gap():
    """One process, the same K/V data (pages_probe.csv; launches queued ahead, batch 8 at 32k
    and batch 1 at 32k and 128k: one CTA an SM): the table read a tile ahead puts 16-token pages
    within 5% of the contiguous cache (64 and 256 within 2%); the per-row read of the earlier
    kernel leaves them 10-15% behind, in a random page order and in order alike (the gather,
    not the order: in order the new kernel is within 2%); twice the splits (two CTAs an SM)
    does not beat the Plan's count."""
    df = _probe()
    for (b, nk), s0 in df[df.page_size.isna()].groupby(KEYS).splits.min().items():
        one = df[(df.batch == b) & (df.seqlen_k == nk)]
        new16 = _ratio(one, 16, 1, "random", s0)
        assert len(new16) == 1 and new16.iloc[0] <= 1.05, (b, nk, new16)
        for ps in (64, 256):
            assert _ratio(one, ps, 1, "random", s0).iloc[0] <= 1.02, (b, nk, ps)
        for order in ("random", "order"):
            assert _ratio(one, 16, 0, order, s0).iloc[0] >= 1.08, (b, nk, order)
        assert _ratio(one, 16, 1, "order", s0).iloc[0] <= 1.02
        twice = one[(one.page_size == 16) & (one.page_ahead == 1) & (one.splits == 2 * s0)]
        assert twice.time_queued_ms.iloc[0] >= 0.99 * one[(one.page_size == 16) & (one.page_ahead == 1)
                                                         & (one.order == "random") & (one.splits == s0)
                                                         & (one.block_n == 64)].time_queued_ms.iloc[0]


def _ncu_durations() -> list[float]:
    """gpu__time_duration of the probe's NCU_CASES under Nsight Compute (base clocks), in order:
    contiguous; 16-token pages per row, ahead, ahead in order; 256 ahead, per row."""
    import re

    text = (PAGES10 / "pages_ncu.txt").read_text()
    return [float(x) for x in re.findall(r"gpu__time_duration\.sum\s+us\s+([\d.]+)", text)]


def test_the_earlier_gather_is_bound_by_its_chain_not_the_bandwidth():
    """Under Nsight Compute (its base clocks stretch the SM's cycles, not the memory's), batch 8
    at 32k: the earlier gather is over 20% slower than the contiguous cache at 16- and 256-token
    pages alike, and reaches under 80% of its DRAM throughput; the table read ahead is within 3%
    at both. What binds it is the trip's own waits (cycles of the SM), not bandwidth: at boost
    clocks on the H100 its 256-token pages kept up (pages_probe.csv)."""
    flat, old16, new16, new16_in_order, new256, old256 = _ncu_durations()
    assert old16 >= 1.2 * flat and old256 >= 1.2 * flat
    assert max(new16, new16_in_order, new256) <= 1.03 * flat
    probe = _probe()
    b8 = probe[(probe.batch == 8) & (probe.page_size == 256) & (probe.order == "random")
               & (probe.splits == 2)].set_index("page_ahead").time_queued_ms
    assert b8.loc[0] <= 1.01 * b8.loc[1]


def test_the_earlier_gather_waits_two_round_trips_a_trip():
    """The committed rows of the earlier gather (experiments/decode/h200/fused, h100/fused: no
    `page_ahead`) at one CTA an SM where it, not the bandwidth, binds (batch 8 on the H200, the
    trips of a CTA: key tiles over splits; 32k and 128k keys; launches queued ahead): two of
    the profile's DRAM round trips a trip (KernelSpec.sync_loads' two waits), their median
    within 2.5% of two and each 1.75 to 2.25 of a round trip at every page size (the profile's
    round trip is tools/round_trip.py's median of these rows and three at batch 1: the fastest
    here, 128k keys in 64-token pages, is 1.80; 1.85 was the floor while the round trip was
    fitted, 1251 cycles, not measured); the model, which takes a trip of at least those two,
    is within 4% of each but that row (12% slow there: its trips are 10% shorter than the
    median's; within 8% while the round trip was fitted) and within 5% on average."""
    from iosim.analysis.measured import decode_run_ms

    spec = importlib.util.spec_from_file_location("round_trip", CSV.parents[3] / "tools/round_trip.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    measured = tool.round_trips(str(H200_DIR / "fused" / "bench_read.csv"), "h200-sxm-141gb")
    assert H100.pipeline.load_latency_cycles == pytest.approx(measured.round_trip_cycles.median(), abs=0.5)
    lat_ms = 1e3 * H100.pipeline.load_latency_cycles / H100.clock_hz
    h200 = load("h200")
    df = pd.read_csv(H200_DIR / "fused" / "bench_read.csv")
    old = df[(df.schedule == "decode") & (df.batch == 8) & df.page_size.notna() & (df.status == "ok")]
    assert len(old) == 9 and "page_ahead" not in old.columns
    pers = []
    for r in old[old.seqlen_k >= 32768].itertuples():
        trips = (r.seqlen_k // 64) / r.splits
        per = r.time_queued_ms / trips / lat_ms
        pers.append(per)
        assert 1.75 <= per <= 2.25, (r.seqlen_k, r.page_size, per)
    assert abs(np.median(pers) / 2 - 1) <= 0.025, pers
    errs = []
    for r in old[old.seqlen_k >= 32768].itertuples():
        err = decode_run_ms(pd.Series(r._asdict()), h200) / r.time_queued_ms - 1
        errs.append(abs(err))
        fastest = (r.seqlen_k, r.page_size) == (131072, 64)
        assert abs(err) <= (0.13 if fastest else 0.04), (r.seqlen_k, r.page_size, err)
    assert np.mean(errs) <= 0.05, errs


def test_pages10_bench_beside_the_contiguous_cache_and_the_model():
    """The bench grid (fresh data and caches a point, launches queued ahead): at batch 8 and 32
    every page size within 3% of the contiguous cache, and at batch 1 at 4k; at batch 1 and 128k
    every page size 15-20% behind it, and 16-token pages at 32k, though the probe's same shapes
    (one process, its K/V data kept) are within 5%: a miss of this run at one CTA an SM, held
    here so that its cause shows. The model (H100 profile) within 7% of every row but those
    (over, by 1.2-6.7%, the most at batch 8 and 4k's contiguous cache, 6.5% before the kernel's
    edges, session 17: at the rows the bandwidth binds this run read K/V at 1.03-1.04 of its
    copy bandwidth, the profile's HBM efficiency is the copy's)."""
    df = pd.read_csv(PAGES10 / "bench_read.csv")
    ours = df[(df.schedule == "decode") & (df.status == "ok")]
    flat = ours[ours.page_size.isna()].set_index(KEYS).time_queued_ms
    paged = ours[ours.page_size.notna()]
    ratio = pd.Series(paged.time_queued_ms.values / flat.loc[list(zip(paged.batch, paged.seqlen_k))].values,
                      index=pd.MultiIndex.from_frame(paged[[*KEYS, "page_size"]].astype(int)))
    assert (ratio.loc[[8, 32]] <= 1.03).all() and (ratio.xs((1, 4096), level=KEYS) <= 1.03).all()
    assert ratio.xs((1, 131072), level=KEYS).between(1.15, 1.20).all()
    assert ratio.loc[(1, 32768, 16)] > 1.15 and ratio.loc[(1, 32768, 64)] <= 1.03
    miss = {(1, 131072, 16), (1, 131072, 64), (1, 131072, 256), (1, 32768, 16)}
    for r in ours.itertuples():
        key = (r.batch, r.seqlen_k, None if pd.isna(r.page_size) else int(r.page_size))
        err = decode_run_ms(pd.Series(r._asdict()), H100) / r.time_queued_ms - 1
        assert (err < -0.09) if key in miss else abs(err) <= 0.07, (key, err)


def test_batch_32_beside_cudnn_three_times():
    """Batch 32 at 4k and 128k (one split: 256 CTAs, two an SM; nothing to combine), three runs
    of the same call: cuDNN's SDPA is ahead of ours by 0.3-1.6% at every one, launches queued
    ahead (both at the HBM rate: this kernel reads its K/V at over 0.98 of the copy bandwidth
    at 4k, over 1.02 at 128k)."""
    for i in (1, 2, 3):
        df = pd.read_csv(PAGES10 / f"b32_{i}.csv")
        ok = df[df.status == "ok"].set_index(["schedule", "seqlen_k"])
        for nk in (4096, 131072):
            ours = ok.loc[("decode", nk)]
            r = ok.loc[("torch_cudnn", nk)].time_queued_ms / ours.time_queued_ms
            assert 0.984 <= r < 0.997, (i, nk, r)
            assert ours.floor_ratio_queued > (1.02 if nk == 131072 else 0.98)


STATE11, GRID11 = (CSV.parent / "state11", CSV.parent / "grid11")


def tool(name: str):
    """A tools/ script as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, CSV.parents[3] / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seq_ratio(folder: Path, name: str) -> pd.Series:
    """`iosim bench` at batch 1, 128k: each page size's queued time over the contiguous one's."""
    s = pd.read_csv(folder / name)
    s = s[(s.schedule == "decode") & (s.status == "ok") & (s.batch == 1)]
    flat = s[s.page_size.isna()].time_queued_ms.iloc[0]
    s = s[s.page_size.notna()]
    return pd.Series(s.time_queued_ms.values / flat, index=s.page_size.astype(int).values)


def test_the_bench_grids_paged_miss_is_the_runs_history_not_the_kernel():
    """Batch 1, 128k keys, the same Plan (16 splits, the table read a tile ahead) in `iosim
    bench`: alone in a process every page size within 2% of the contiguous cache; after a
    batch-32 point in the same process (as the grid orders them) 16- and 64-token pages
    18-21% behind, issued or queued: in two calls, the second with the paged caches in one pool
    allocated at the start of the run (so not where each point's caches landed). In one process
    with its own data, 1.5 s of copies first (the heat of a batch-32 point) changes nothing,
    the SM clock stays at 1980 MHz, and the pages are within 1% at 128k."""
    for folder in (STATE11, GRID11):
        assert (seq_ratio(folder, "seq_alone.csv") <= 1.02).all(), folder
        after = seq_ratio(folder, "seq_after32.csv")
        assert list(after.index) == [16, 64] and after.between(1.18, 1.22).all(), (folder, after)
    p = pd.read_csv(STATE11 / "pages_state.csv")
    assert p.sm_mhz_min.min() == 1980 and set(p.state) == {"cold", "hot", "steady"}
    big = p[(p.batch == 1) & (p.seqlen_k == 131072)]
    med = big.groupby(["state", "mode", "case"]).ms.median().unstack("case")
    assert (med.drop(columns="contiguous").div(med.contiguous, axis=0) <= 1.01).all().all()
    grid = pd.read_csv(GRID11 / "bench_read.csv")  # the grid with the pool: the same miss
    ours = grid[(grid.schedule == "decode") & (grid.status == "ok") & (grid.batch == 1)]
    at = ours[ours.seqlen_k == 131072].set_index(ours[ours.seqlen_k == 131072].page_size.fillna(0))
    assert (at.time_queued_ms.drop(0) / at.time_queued_ms[0]).between(1.15, 1.22).all()


def test_the_k_v_l2_hints_at_batch_32_beside_cudnn():
    """The K/V loads' L2 hints (kernels/decode.cu: 256-byte prefetch, evict-first; the Plan's
    kernel since grid11) against the same kernel without them and cuDNN, in one process, three
    interleaved rounds, launches queued ahead: the hints take 0.2-0.4% off at batch 32 (first
    call: each alone and both), which brings the kernel to cuDNN's time within 0.05% (second
    call), and leave batch 1 as it was (16 splits; 8 splits: the SM's own stream rate)."""
    def over_cudnn(folder, name):
        a = pd.read_csv(folder / name)
        med = a.groupby(["batch", "seqlen_k", "mode", "case"]).ms.median().unstack("case")
        return med.div(med.torch_cudnn, axis=0)

    first = over_cudnn(STATE11, "b32_ab.csv").xs("q", level="mode")
    assert (first.pf256_ef < first.base).all() and (first.base - first.pf256_ef).max() < 0.005
    second = over_cudnn(GRID11, "confirm_ab.csv").xs("q", level="mode")
    b32, b1 = second.loc[32], second.loc[1]
    assert (b32.default < b32.plain).all() and (b32.default - 1).abs().max() < 0.0005
    assert ((b1.default / b1.plain - 1).abs() < 0.004).all()
    assert ((b1.default_s8 / b1.plain_s8 - 1).abs() < 0.004).all()
    src = (CSV.parents[3] / "kernels" / "decode.cu").read_text()  # the kernel's defaults
    assert "#define KV_PREFETCH 256\n" in src and "#define KV_EVICT_FIRST 1\n" in src


def test_an_sms_dram_stream_rate_is_the_profiles():
    """pipeline.sm_dram_bytes_per_clk of the H100 and H200 profiles is what
    tools/sm_dram_rate.py measures on the H100's committed rows (CTAs alone on at most half the
    SMs); the H200's rows (the same SM) give within 2% of it, and the L2 hints leave it
    (grid11/confirm_ab.csv: 8 splits at batch 1 with and without them, above)."""
    rate = tool("sm_dram_rate").rates
    h100 = rate(str(CSV.parent / "bench.csv"), "h100-sxm5-80gb").bytes_per_clk.median()
    h200 = rate(str(CSV.parents[1] / "h200" / "bench.csv"), "h200-sxm-141gb").bytes_per_clk.median()
    for name in ("h100", "h200"):
        assert load(name).pipeline.sm_dram_bytes_per_clk == pytest.approx(h100, rel=1e-3)
    assert abs(h200 / h100 - 1) < 0.02


def test_the_sm_dram_ceiling_binds_pipelined_loads_only():
    """Decode at batch 1 and 8 splits (64 CTAs, one an SM, a cp.async ring): the H200 through
    the H100 profile predicts each CTA's K/V at the SM's DRAM stream rate, within 6% of the
    measured rows (without the ceiling: HBM's share, over 35% fast); at 16 splits on the H100
    (128 CTAs, 23 GB/s an SM needed) it changes nothing; FA1 (synchronous loads: its round
    trips bind first) is predicted as without it."""
    from iosim.analysis.predict import row

    def without(prof):
        return prof.model_copy(update={"pipeline": prof.pipeline.model_copy(
            update={"sm_dram_bytes_per_clk": None})})

    def ms(schedule, p, prof, t=Tiles()):
        return row(plan(schedule, p, prof, t), prof)["time_pred_ms"]

    d = pd.read_csv(CSV.parents[1] / "h200" / "fused" / "bench_read.csv")
    s8 = d[(d.schedule == "decode") & (d.kv_splits == 8) & (d.status == "ok")]
    assert len(s8) == 2
    for _, r in s8.iterrows():
        assert abs(decode_run_ms(r, H200) / r.time_queued_ms - 1) < 0.06, r.seqlen_k
        assert decode_run_ms(r, without(H200)) / r.time_queued_ms - 1 < -0.35, r.seqlen_k
    p = Problem(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=131072)
    assert ms("decode", p, H100) == pytest.approx(ms("decode", p, without(H100)), rel=1e-12)
    fa1 = Problem(batch=2, heads=16, seqlen_q=4096, seqlen_k=4096, head_dim=64)
    assert ms("fa1", fa1, H100) == pytest.approx(ms("fa1", fa1, without(H100)), rel=1e-12)


ALLOC12, ALLOCAB12, AFTER32AB12, GRIDAB12 = (CSV.parent / n for n in
                                             ("alloc12", "allocab12", "after32ab12", "gridab12"))


def paged_over_contiguous(path: Path) -> pd.Series:
    """A decode grid's paged rows: queued time over the contiguous row of the same shape."""
    g = pd.read_csv(path)
    g = g[(g.schedule == "decode") & (g.status == "ok")]
    flat = g[g.page_size.isna()].set_index(["batch", "seqlen_k"]).time_queued_ms
    paged = g[g.page_size.notna()].set_index(["batch", "seqlen_k", "page_size"]).time_queued_ms
    return paged / flat.reindex(paged.index.droplevel(2)).values


def test_the_paged_miss_is_a_slow_phase_that_an_idle_before_each_problem_removes():
    """The batch-1 paged miss of the grids is a slow phase of the GPU after a heavy point, not the
    pages: in one call (gridab12) the grid without an idle has batch 1 at 128k 18-22% behind
    the contiguous cache, and with 2 s idle before each problem every paged point of every
    batch, context and page size is within 4% (queued); right after a batch-32 paged point the
    contiguous cache too ran 17% slow, and a round later was back (after32ab12); pages spread
    over a 16 GiB pool ran within 3% of the contiguous cache on a fresh machine (allocab12),
    and on another the same cache measured fast and slow in turn (alloc12)."""
    r0 = paged_over_contiguous(GRIDAB12 / "bench_settle0.csv")
    r2 = paged_over_contiguous(GRIDAB12 / "bench_settle2.csv")
    assert len(r0) == len(r2) == 27
    assert r0.loc[(1, 131072)].between(1.15, 1.25).all()
    assert r2.max() <= 1.04 and (pd.read_csv(GRIDAB12 / "bench_settle2.csv").settle_s == 2).all()
    a = pd.read_csv(AFTER32AB12 / "after32_ab.csv")
    a = a[(a["mode"] == "q") & (a["where"] == "contig") & (a.case == "default")]
    fresh = a[a.state == "fresh"].ms.iloc[0]
    after = a[a.state == "after32"].sort_values("round").ms.to_numpy()
    assert after[0] > 1.15 * fresh and abs(after[1:] / fresh - 1).max() < 0.01
    b = pd.read_csv(ALLOCAB12 / "alloc_ab.csv")
    med = b[(b["mode"] == "q") & (b.case == "default")].groupby("where").ms.median()
    assert med["spread16_p16"] / med["contig"] < 1.03
    c = pd.read_csv(ALLOC12 / "alloc.csv")
    own = c[(c.case == "own_p16") & (c["mode"] == "nq")].ms
    assert own.min() < 0.19 and own.max() > 0.21  # one cache, fast then slow


def test_decode_targets_in_the_grid_with_the_idle():
    """Issue 25's targets in gridab12 (--settle 2, H100): decode at or ahead of the best torch
    backend at every contiguous point issued (queued: within 0.3%), its KV bandwidth at least
    85% of the copy bandwidth at KV >= 32k (queued), pages within 10% of the contiguous cache."""
    g = pd.read_csv(GRIDAB12 / "bench_settle2.csv")
    ok = g[(g.status == "ok") & g.page_size.isna()]
    keys = ["batch", "seqlen_k"]
    ours = ok[ok.schedule == "decode"].set_index(keys)
    torch = ok[ok.schedule.str.startswith("torch_")].groupby(keys)
    assert (torch.time_ms.min() / ours.time_ms >= 1.0).all()
    assert (torch.time_queued_ms.min() / ours.time_queued_ms >= 0.997).all()
    assert (ours[ours.index.get_level_values("seqlen_k") >= 32768].floor_ratio_queued >= 0.85).all()
    assert paged_over_contiguous(GRIDAB12 / "bench_settle2.csv").max() <= 1.10
