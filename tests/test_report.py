"""The report's figure data, the error table and the row reader, without a browser or a GPU."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pandas as pd
import pytest

from iosim import Problem, load_hw, predict
from iosim.accuracy import error_table, join
from iosim.hardware import InputError
from iosim.io import read_rows
from iosim.report import (
    MEAS,
    PRED,
    accuracy_figure,
    default_choice,
    filter_options,
    io_figure,
    prepare,
    report_command,
    roofline_figure,
    time_figure,
    whatif_figures,
    write_report,
)

MEASURED_COLS = ["hw", "schedule", "direction", "batch", "heads", "kv_heads", "seqlen_q", "seqlen_k",
                 "head_dim", "dtype", "causal", "time_ms", "tflops", "dram_read_bytes_ncu",
                 "dram_write_bytes_ncu", "max_rel_err", "status", "gpu_name"]
NS, DS = [512, 1024, 2048], [64, 128]


@pytest.fixture(scope="module")
def h100():
    return load_hw("h100")


@pytest.fixture(scope="module")
def pred(h100):
    """3 N x 2 head_dim x 2 causal = 12 problems x 4 schedules (naive, fa1, fa2, fa3) = 48 rows."""
    return pd.concat([predict(Problem(batch=2, heads=8, seqlen_q=n, head_dim=d, causal=c), h100)
                      for n, d, c in itertools.product(NS, DS, [False, True])], ignore_index=True)


@pytest.fixture(scope="module")
def measured(pred):
    """fa2 and naive measured at 1.25x the prediction, bf16 non-causal d=128 only (3 rows each),
    hw written as the short name; one torch_flash peer row; one failed fa2 row (d=64)."""
    m = pred[pred.schedule.isin(["fa2", "naive"]) & ~pred.causal & (pred.head_dim == 128)].copy()
    m["time_ms"] = m.time_pred_ms * 1.25
    m["tflops"] = m.tflops_pred / 1.25
    m["dram_read_bytes_ncu"], m["dram_write_bytes_ncu"] = m.dram_read_bytes, m.dram_write_bytes
    m["max_rel_err"], m["status"], m["gpu_name"], m["hw"] = 1e-3, "ok", "NVIDIA H100 80GB HBM3", "h100"
    peer = m[m.schedule == "fa2"].head(1).assign(schedule="torch_flash", dram_read_bytes_ncu=np.nan,
                                                 dram_write_bytes_ncu=np.nan)
    bad = pred[(pred.schedule == "fa2") & (pred.head_dim == 64) & ~pred.causal].head(1).copy()
    bad = bad.assign(time_ms=np.nan, tflops=np.nan, dram_read_bytes_ncu=np.nan, dram_write_bytes_ncu=np.nan,
                     max_rel_err=np.nan, status="wrong_result", gpu_name="NVIDIA H100 80GB HBM3")
    return pd.concat([m, peer, bad], ignore_index=True)[MEASURED_COLS]


def traces(fig, kind=None, schedule=None):
    out = [t for t in fig.data if isinstance(t.meta, dict) and "dims" in t.meta]
    return [t for t in out if (kind is None or t.meta["kind"] == kind)
            and (schedule is None or t.meta["schedule"] == schedule)]


# ---------------------------------------------------------------- roofline


def test_roofline_roofs_are_the_profiles_datasheet_peaks(pred, measured, h100):
    fig = roofline_figure(pred, join(pred, measured, how="left"), h100, {})
    roofs = {t.meta["roof"]: t for t in fig.data if isinstance(t.meta, dict) and "roof" in t.meta}
    assert sorted(roofs) == ["fp32", "hbm", "l2", "sfu", "tensor"]  # one dtype (bf16) in the data
    # Bandwidth roofs: y (TFLOP/s) = intensity (FLOP/B) x bandwidth (B/s) / 1e12, up to the ridge.
    for k, bw in (("hbm", 3.35e12), ("l2", 1.1e13)):
        xs, ys = roofs[k].x, roofs[k].y
        assert [y / x for x, y in zip(xs, ys, strict=True)] == pytest.approx([bw / 1e12] * 2)
        assert ys[-1] == pytest.approx(989.4)  # meets the bf16 tensor ceiling at the ridge
    assert list(roofs["tensor"].y) == pytest.approx([989.4, 989.4])  # bf16 dense, no efficiency
    assert list(roofs["fp32"].y) == pytest.approx([66.9, 66.9])
    assert list(roofs["sfu"].y) == pytest.approx([4.18, 4.18])
    assert "T exp/s" in roofs["sfu"].name and "3.35 TB/s" in roofs["hbm"].name


def test_roofline_points_per_schedule_hollow_predicted_filled_measured(pred, measured, h100):
    fig = roofline_figure(pred, join(pred, measured, how="left"), h100, {})
    for s in ["naive", "fa1", "fa2", "fa3"]:
        ts = traces(fig, "predicted", s)
        assert len(ts) == 4  # one per (head_dim, causal) configuration, each across N
        assert sum(len(t.x) for t in ts) == 12  # every predicted row is a point
        assert all(t.marker.symbol == PRED for t in ts)
        assert all([c[0] for c in t.customdata] == [str(n) for n in NS] for t in ts)
    for s, n in [("fa2", 3), ("naive", 3), ("torch_flash", 0), ("fa1", 0)]:
        ts = traces(fig, "measured", s)
        assert sum(len(t.x) for t in ts) == n  # failed row left out; the peer has no bytes to place
        assert all(t.marker.symbol == MEAS for t in ts)
    # A predicted point sits at (tensor FLOP / DRAM bytes, tensor FLOP / time).
    r = pred[(pred.schedule == "fa3") & (pred.seqlen_k == 2048) & (pred.head_dim == 128) & pred.causal].iloc[0]
    t = next(t for t in traces(fig, "predicted", "fa3") if t.meta["dims"] == {
        "direction": "fwd", "dtype": "bf16", "causal": "True", "head_dim": "128", "batch": "2",
        "heads": "8", "kv_heads": "8"})
    assert t.x[-1] == pytest.approx(r.tensor_flops / (r.dram_read_bytes + r.dram_write_bytes))
    assert t.y[-1] == pytest.approx(r.tensor_flops / r.time_pred_ms / 1e9)
    assert "bound" in t.text[-1] and "N=2048×2048" in t.text[-1]
    assert fig.layout.xaxis.type == "log" and "FLOP per DRAM byte" in fig.layout.xaxis.title.text
    assert "TFLOP/s" in fig.layout.yaxis.title.text


def test_menus_and_default_view(pred, measured):
    pred, measured = prepare(pred), prepare(measured)  # `h100` -> `h100-sxm5-80gb`
    opts = filter_options(pred, measured)
    assert opts == {"causal": ["False", "True"], "head_dim": ["64", "128"], "seqlen_k": ["512", "1024", "2048"]}
    chosen = default_choice(opts, measured, pred)
    assert chosen == {"causal": "False", "head_dim": "128", "seqlen_k": "__all__"}  # most measured
    fig = time_figure(pred, measured, chosen)
    shown = [t for t in traces(fig) if t.visible]
    assert {(t.meta["kind"], t.meta["schedule"]) for t in shown} == {
        *(("predicted", s) for s in ["naive", "fa1", "fa2", "fa3"]),
        ("measured", "fa2"), ("measured", "naive"), ("measured", "torch_flash")}
    assert all(t.meta["dims"]["head_dim"] == "128" and t.meta["dims"]["causal"] == "False" for t in shown)
    assert fig.layout.meta == {"trace_dims": ["hw", "direction", "dtype", "causal", "head_dim", "batch",
                                              "heads", "kv_heads"], "point_dims": []}


# ---------------------------------------------------------------- IO, time, accuracy, what-if


def test_io_figure_series(pred, measured):
    left = join(pred, measured, how="left")
    fig = io_figure(pred, left, {})
    names = {t.name for t in traces(fig)}
    assert {"fa2 2-level HBM", "fa2 L2-aware DRAM", "fa2 ncu DRAM", "naive ncu DRAM"} <= names
    t = next(t for t in traces(fig, "predicted", "naive") if t.name.endswith("2-level HBM")
             and t.meta["dims"]["head_dim"] == "64" and t.meta["dims"]["causal"] == "False")
    rows = pred[(pred.schedule == "naive") & (pred.head_dim == 64) & ~pred.causal].sort_values("seqlen_k")
    assert list(t.x) == NS
    assert list(t.y) == list(rows.hbm_read_bytes_2level + rows.hbm_write_bytes_2level)
    guides = [t for t in fig.data if isinstance(t.meta, dict) and "guide" in t.meta]
    assert [g.meta["guide"] for g in guides] == [2, 1]
    assert guides[0].y[1] / guides[0].y[0] == pytest.approx((2048 / 512) ** 2)
    assert "(tokens)" in fig.layout.xaxis.title.text and "(bytes)" in fig.layout.yaxis.title.text


def test_time_and_tflops_figures(pred, measured):
    fig = time_figure(pred, measured, {}, "tflops")
    meas = traces(fig, "measured")
    assert {t.meta["schedule"] for t in meas} == {"fa2", "naive", "torch_flash"}
    assert all(t.marker.symbol == MEAS and t.line.dash == "solid" for t in meas)
    assert all(t.marker.symbol == PRED and t.line.dash == "dash" for t in traces(fig, "predicted"))
    assert sum(len(t.x) for t in meas) == 7  # 3 fa2 + 3 naive + 1 peer; the failed row is out
    assert "TFLOP/s" in fig.layout.yaxis.title.text
    assert time_figure(pred, measured, {}).layout.yaxis.title.text == "time per call (ms)"


def test_accuracy_figure(pred, measured):
    fig = accuracy_figure(join(pred, measured, how="left"), {})
    pts = traces(fig)
    assert sorted(t.meta["schedule"] for t in pts) == ["fa2", "naive"]  # peers have no prediction
    for t in pts:
        assert list(t.y) == pytest.approx([x / 1.25 for x in t.x])
    line = next(t for t in fig.data if isinstance(t.meta, dict) and t.meta.get("guide") == "y=x")
    assert list(line.x) == list(line.y)


def test_whatif_figure(h100):
    rows = []
    for smem, n in itertools.product([100_000, 166_000, 233_472], [1024, 4096]):
        df = predict(Problem(batch=1, heads=8, seqlen_q=n), h100.with_changes(smem_per_sm_bytes=smem),
                     ["fa2", "fa3"])
        rows.append(df.assign(set_smem_per_sm_bytes=smem))
    p = pd.concat(rows, ignore_index=True)
    (fig,) = whatif_figures(p, {})
    ts = traces(fig)
    assert len(ts) == 4  # (fa2, fa3) x (N=1024, 4096)
    assert all(list(t.x) == [100_000, 166_000, 233_472] for t in ts)
    assert {t.name for t in ts} == {"fa2 N=1024", "fa2 N=4096", "fa3 N=1024", "fa3 N=4096"}
    assert fig.layout.meta["trace_dims"] == ["seqlen_k"]
    assert whatif_figures(p[p.set_smem_per_sm_bytes == 100_000], {}) == []  # one value: no chart
    # join keeps only rows on the real hardware (the 233472-byte ones)
    j = join(p, p.assign(time_ms=1.0, status="ok"))
    assert len(j) == 4 and set(j.set_smem_per_sm_bytes) == {233_472}


# ---------------------------------------------------------------- error table


def _hand_frames():
    base = {"hw": "h100-sxm5-80gb", "direction": "fwd", "batch": 1, "heads": 8, "kv_heads": 8,
            "head_dim": 128, "dtype": "bf16", "causal": False}
    pred = pd.DataFrame([
        {**base, "schedule": "fa2", "seqlen_q": n, "seqlen_k": n, "time_pred_ms": t}
        for n, t in [(1024, 1.0), (2048, 2.0), (4096, 3.0), (8192, 9.0)]
    ] + [{**base, "schedule": "fa1", "seqlen_q": 1024, "seqlen_k": 1024, "time_pred_ms": 1.1}])
    meas = pd.DataFrame([
        {**base, "schedule": "fa2", "seqlen_q": 1024, "seqlen_k": 1024, "time_ms": 1.25, "status": "ok"},  # -20%
        {**base, "schedule": "fa2", "seqlen_q": 2048, "seqlen_k": 2048, "time_ms": 2.0, "status": "ok"},   # 0%
        {**base, "schedule": "fa2", "seqlen_q": 4096, "seqlen_k": 4096, "time_ms": 2.0, "status": "ok"},   # +50%
        {**base, "schedule": "fa2", "seqlen_q": 8192, "seqlen_k": 8192, "time_ms": 1.0, "status": "wrong_result"},
        {**base, "schedule": "fa1", "seqlen_q": 1024, "seqlen_k": 1024, "time_ms": 1.0, "status": "ok"},   # +10%
        {**base, "schedule": "torch_flash", "seqlen_q": 1024, "seqlen_k": 1024, "time_ms": 0.5, "status": "ok"},
    ])
    return pred, meas


def test_error_table_exact_numbers():
    pred, meas = _hand_frames()
    meas["hw"] = "h100"  # short profile name meets the full one
    t = error_table(pred, meas).set_index("schedule")
    assert list(t.index) == ["fa1", "fa2"]  # no prediction for torch_flash: not in the table
    fa2 = t.loc["fa2"]
    assert fa2.n == 3  # the wrong_result row does not count
    assert fa2.mape_pct == pytest.approx((20 + 0 + 50) / 3)
    assert fa2.mean_err_pct == pytest.approx((-20 + 0 + 50) / 3)
    assert fa2.worst_ape_pct == pytest.approx(50.0)
    assert fa2.worst_points.startswith("fwd B=1 H=8 N=4096 d=128 bf16: pred 3 ms vs 2 ms (+50.0%)")
    assert t.loc["fa1"].n == 1 and t.loc["fa1"].mape_pct == pytest.approx(10.0)
    assert t.loc["fa2"].hw == "h100-sxm5-80gb"


def test_error_table_from_csv_types(tmp_path):
    pred, meas = _hand_frames()
    meas["causal"] = meas["causal"].astype(int)  # 0/1 in a CSV still joins with False/True
    path = tmp_path / "m.csv"
    meas.to_csv(path, index=False)
    t = error_table(pred, read_rows(path))
    assert t.set_index("schedule").loc["fa2"].n == 3
    assert error_table(pred, meas.assign(status="failed")).empty


# ---------------------------------------------------------------- input errors


def test_read_rows_bad_input(tmp_path, pred):
    with pytest.raises(InputError, match="data file not found"):
        read_rows(tmp_path / "nope.csv")
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(InputError, match=r"empty\.csv: empty file"):
        read_rows(tmp_path / "empty.csv")
    (tmp_path / "head.csv").write_text(",".join(pred.columns) + "\n")
    with pytest.raises(InputError, match="has a header but no rows"):
        read_rows(tmp_path / "head.csv")
    pred.drop(columns=["head_dim", "causal"]).to_csv(tmp_path / "cols.csv", index=False)
    with pytest.raises(InputError, match=r"missing columns: head_dim, causal \(required: hw, schedule"):
        read_rows(tmp_path / "cols.csv")
    pred.to_parquet(tmp_path / "p.parquet")
    back = read_rows(tmp_path / "p.parquet")
    assert len(back) == len(pred) and back.causal.dtype == bool


def test_report_command_bad_input(tmp_path, pred):
    ok = tmp_path / "sweep.csv"
    pred.to_csv(ok, index=False)
    out = tmp_path / "r.html"
    pred.drop(columns=["time_pred_ms"]).to_csv(tmp_path / "neither.csv", index=False)
    with pytest.raises(InputError, match="neither predictions .* nor measurements"):
        report_command([tmp_path / "neither.csv"], out)
    pred.drop(columns=["dram_read_bytes"]).to_csv(tmp_path / "nocount.csv", index=False)
    with pytest.raises(InputError, match="missing columns: dram_read_bytes"):
        report_command([tmp_path / "nocount.csv"], out)
    pred.assign(hw="tpu-v9").to_csv(tmp_path / "tpu.csv", index=False)
    with pytest.raises(InputError, match="unknown hardware profile 'tpu-v9'"):
        report_command([tmp_path / "tpu.csv"], out)
    with pytest.raises(InputError, match="unknown hardware profile 'z80'"):
        report_command([ok], out, hw=["z80"])
    (tmp_path / "empty.csv").write_text("")
    with pytest.raises(InputError, match="empty file"):
        report_command([ok, tmp_path / "empty.csv"], out)
    assert not out.exists()


def test_write_report_self_contained(tmp_path, pred, measured):
    m = tmp_path / "measured.csv"
    measured.to_csv(m, index=False)
    s = tmp_path / "sweep.csv"
    pred.to_csv(s, index=False)
    out = tmp_path / "r.html"
    report_command([s, m], out, hw=["h100", "a100"])
    text = out.read_text()
    assert text.count("<script type='text/javascript'>") == 1  # plotly.js once, inline
    assert not re.search(r"<(script|link|img|iframe)[^>]*(src|href)\s*=\s*[\"']?(https?:)?//", text)
    assert "iosim 0.1.0" in text and str(s) in text and str(m) in text
    for h in ["1. Roofline", "2. IO against N", "3. Time and TFLOP/s", "4. Accuracy", "5. What-if"]:
        assert h in text
    assert text.count('class="plotly-graph-div"') == 6  # 2 rooflines, IO, time, TFLOP/s, accuracy
    assert "Roofline: a100-sxm4-80gb" in text and 'data-dim="head_dim"' in text
    write_report(pred, [], tmp_path / "pred_only.html", [str(s)])
    assert "No measured data given" in (tmp_path / "pred_only.html").read_text()
