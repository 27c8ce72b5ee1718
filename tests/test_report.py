"""The report's rows (iosim.report_data) and figures (iosim.report), without a browser or a
GPU, on data made by the real commands: a what-if sweep (`iosim sweep --set`), a sweep beside
the committed H100 measurements; and the error tables and bad input."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from iosim.analysis.accuracy import error_table
from iosim.cli import app
from iosim.core import hardware
from iosim.core.hardware import InputError
from iosim.core.rows import read_rows
from iosim.report.data import (
    ALL,
    STOCK,
    VARIANT,
    Budget,
    combinations,
    default_choice,
    filter_options,
    prepare_data,
    roof_profile,
)
from iosim.report.figures import (
    MEAS,
    PRED,
    accuracy_figure,
    decode_figures,
    io_figure,
    roofline_figure,
    theorem2_figure,
    time_figure,
    whatif_figures,
)
from iosim.report.page import build_html, limits_text
from iosim.report.page import report as report_command

REPO = Path(__file__).resolve().parents[1]
MEASURED = REPO / "experiments" / "fwd_grid" / "h100" / "measured.csv"
runner = CliRunner()


def sweep(tmp: Path, name: str, *args: str) -> Path:
    out = tmp / name
    r = runner.invoke(app, ["sweep", *args, "--no-progress", "-o", str(out)])
    assert r.exit_code == 0, r.output
    return out


@pytest.fixture(scope="module")
def whatif_csv(tmp_path_factory) -> Path:
    """The issue's what-if sweep, shorter in N: 5 N x 4 schedules x 3 HBM x 2 SRAM = 120 rows."""
    return sweep(tmp_path_factory.mktemp("whatif"), "w.csv", "--seqlen", "512..8192",
                 "--schedule", "naive,fa1,fa2,fa3",
                 "--set", "hbm_bandwidth_bytes_per_s=3.35e12,4.8e12,8e12",
                 "--set", "smem_per_sm_bytes=233472,458752")


@pytest.fixture(scope="module")
def mixed_csv(tmp_path_factory) -> Path:
    """A sweep of both GPUs and directions (B = 4, H = 32), to show beside the H100 bench
    (batch = 16384/N, heads = 2048/d, forward only)."""
    return sweep(tmp_path_factory.mktemp("mixed"), "s.csv", "--seqlen", "512..16384",
                 "--head-dim", "64,128,256", "--causal", "both", "--direction", "both",
                 "--schedule", "all", "--hw", "h100-sxm5-80gb,a100-sxm4-80gb")


@pytest.fixture(scope="module")
def whatif(whatif_csv):
    return prepare_data([read_rows(whatif_csv)], [])


@pytest.fixture(scope="module")
def mixed(mixed_csv):
    return prepare_data([read_rows(mixed_csv)], [read_rows(MEASURED)])


def default(data):
    return default_choice(data, filter_options(data))


def series(fig, kind=None, visible=None):
    out = [t for t in fig.data if "kind" in t["meta"]]
    return [t for t in out if (kind is None or t["meta"]["kind"] == kind)
            and (visible is None or t["visible"] == visible)]


def roofs(fig, visible=None):
    return [t for t in fig.data if "roof" in t["meta"] and (visible is None or t["visible"] == visible)]


# ---------------------------------------------------------------- what-if sweeps


def test_whatif_sweep_variants_are_separate_series_named_by_what_changed(whatif_csv, whatif):
    assert {"set_hbm_bandwidth_bytes_per_s", "set_smem_per_sm_bytes"} <= set(pd.read_csv(whatif_csv).columns)
    assert sorted(set(whatif.pred[VARIANT])) == sorted([
        STOCK, "smem_per_sm=458.8 kB", "hbm_bandwidth=4.8 TB/s", "hbm_bandwidth=8 TB/s",
        "hbm_bandwidth=4.8 TB/s, smem_per_sm=458.8 kB", "hbm_bandwidth=8 TB/s, smem_per_sm=458.8 kB"])
    chosen = default(whatif)
    assert chosen == {VARIANT: ALL, "seqlen_k": ALL}  # every variant drawn at first
    fig = time_figure(whatif, chosen)
    shown = series(fig, "predicted", visible=True)
    assert len(shown) == 4 * 6 and len({t["name"] for t in shown}) == 24
    for t in shown:  # one line per variant across N: no zig-zag between variants
        assert t["x"] == [512, 1024, 2048, 4096, 8192]
    fa2 = {t["meta"]["dims"][VARIANT]: t["y"] for t in shown if t["meta"]["schedule"] == "fa2"}
    assert "fa2 predicted · hbm_bandwidth=8 TB/s" in {t["name"] for t in shown}
    # more bandwidth never makes a kernel slower
    assert all(a >= b for a, b in zip(fa2[STOCK], fa2["hbm_bandwidth=8 TB/s"], strict=True))


def test_whatif_roofline_draws_each_variants_roofs(whatif):
    fig = roofline_figure(whatif, {"h100-sxm5-80gb": roof_profile("h100-sxm5-80gb")}, default(whatif))
    hbm = {t["meta"]["rate"]: t["meta"]["dims"][VARIANT] for t in roofs(fig) if t["meta"]["roof"] == "hbm"}
    assert sorted(hbm) == [3.35e12, 4.8e12, 8e12]
    assert hbm[8e12] == ["hbm_bandwidth=8 TB/s", "hbm_bandwidth=8 TB/s, smem_per_sm=458.8 kB"]
    # choosing the 8 TB/s variant shows its points under its own roofs only
    pick = {VARIANT: "hbm_bandwidth=8 TB/s", "seqlen_k": ALL}
    fig = roofline_figure(whatif, {"h100-sxm5-80gb": roof_profile("h100-sxm5-80gb")}, pick)
    shown = {t["meta"]["roof"]: t["meta"]["rate"] for t in roofs(fig, visible=True)}
    eff = roof_profile("h100-sxm5-80gb").efficiency.hbm
    assert shown["hbm"] == 8e12 and shown["hbm_achievable"] == pytest.approx(8e12 * eff)
    pts = series(fig, "predicted", visible=True)
    assert pts and all(t["meta"]["dims"][VARIANT] == pick[VARIANT] for t in pts)


def test_whatif_sweep_beside_measurements_opens_where_both_are(whatif_csv):
    data = prepare_data([read_rows(whatif_csv)], [read_rows(MEASURED)])
    chosen = default(data)
    assert chosen["head_dim"] == "128" and chosen["causal"] == "False"  # the sweep's d, measured too
    for fig in [*whatif_figures(data, chosen), time_figure(data, chosen)]:
        assert sum(len(t["x"]) for t in series(fig, visible=True)) > 0
    assert series(time_figure(data, chosen), "measured", visible=True)


@pytest.fixture(scope="module")
def sram_sweep(tmp_path_factory):
    """Theorem 2's what-if: N = 8192, d = 64, the SRAM a CTA may use from 64 KiB to 1 MiB."""
    src = sweep(tmp_path_factory.mktemp("sram"), "m.csv", "--seqlen", "8192", "--head-dim", "64",
                "--schedule", "naive,fa1,fa1_paper,fa2",
                "--set", "smem_per_block_optin_bytes=65536..1048576",
                "--set", "smem_per_sm_bytes=1049600")
    return src, prepare_data([read_rows(src)], [])


def test_theorem2_chart_when_the_sweep_varies_the_sram(sram_sweep, whatif):
    src, data = sram_sweep
    fig = theorem2_figure(data, default(data))
    assert fig.layout["xaxis"]["type"] == fig.layout["yaxis"]["type"] == "log"
    lines = {t["meta"]["schedule"]: t for t in series(fig, visible=True)}
    assert set(lines) == {"naive", "fa1", "fa1_paper", "fa2"}
    m = [65536 * 2**i for i in range(5)]
    # (fa2's tiles need 80 KiB: left out at 64 KiB)
    assert lines["fa1_paper"]["x"] == m and all(set(t["x"]) <= set(m) for t in lines.values())
    slope = {s: np.polyfit(np.log(t["x"]), np.log(t["y"]), 1)[0] for s, t in lines.items()}
    assert slope["fa1_paper"] == pytest.approx(-1, abs=0.1)  # Θ(N²d²/M)
    assert all(abs(slope[s]) < 0.1 for s in ("naive", "fa1", "fa2"))  # no M in their IO
    guide = [t for t in fig.data if t["meta"].get("guide") == -1 and t["visible"]]
    assert len(guide) == 1 and guide[0]["y"][0] / guide[0]["y"][1] == pytest.approx(16)
    # on the page, in the what-if section, after the what-if charts
    html = build_html(data, {"h100-sxm5-80gb": hardware.load("h100-sxm5-80gb")}, [str(src)])
    assert "Theorem 2: HBM accesses against the SRAM size M" in html
    # without fa1_paper, or when no SRAM field varies, no such chart
    assert theorem2_figure(whatif, default(whatif)) is None  # (naive, fa1, fa2, fa3 only)
    assert theorem2_figure(prepare_data([read_rows(src).drop(columns="set_smem_per_block_optin_bytes")],
                                        []), {}) is None


def test_whatif_charts_against_each_swept_field(whatif):
    figs = whatif_figures(whatif, default(whatif))
    assert [f.layout["title"]["text"] for f in figs] == [
        "What-if: predicted time against hbm_bandwidth_bytes_per_s",
        "What-if: predicted time against smem_per_sm_bytes"]
    hbm = series(figs[0], visible=True)
    assert len(hbm) == 4 * 2  # per schedule and SRAM size
    assert all(t["x"] == [3.35e12, 4.8e12, 8e12] for t in hbm)
    assert all(c[0] == "8192" for t in hbm for c in t["customdata"])  # at the largest N
    fa1 = next(t for t in hbm if t["meta"]["schedule"] == "fa1" and "233.5 kB" in t["name"])
    assert fa1["y"][0] > fa1["y"][-1]  # fa1 is HBM-bound: faster with more bandwidth


# ---------------------------------------------------------------- a sweep beside measurements


def test_default_view_is_where_the_measurements_are(mixed):
    opts = filter_options(mixed)
    assert opts["hw"] == ["a100-sxm4-80gb", "h100-sxm5-80gb"] and opts["direction"] == ["bwd", "fwd"]
    chosen = default(mixed)
    assert chosen["hw"] == "h100-sxm5-80gb" and chosen["direction"] == "fwd"  # measured: H100 forward
    j = mixed.joined
    here = j[(j.hw == chosen["hw"]) & (j.direction == "fwd") & (j.causal.map(str) == chosen["causal"])
             & (j.head_dim.map(str) == chosen["head_dim"])]
    assert len(here) > 0
    # each chart of the default view has visible points, measured ones where measured
    figs = {"time": time_figure(mixed, chosen), "tflops": time_figure(mixed, chosen, "tflops"),
            "io": io_figure(mixed, chosen), "accuracy": accuracy_figure(mixed, chosen),
            "roofline": roofline_figure(mixed, {"h100-sxm5-80gb": roof_profile("h100-sxm5-80gb"),
                                                "a100-sxm4-80gb": roof_profile("a100-sxm4-80gb")}, chosen)}
    for name, fig in figs.items():
        assert sum(len(t["x"]) for t in series(fig, visible=True)) > 0, name
    for name in ("time", "tflops", "roofline", "accuracy"):
        assert series(figs[name], "measured", visible=True), name
    # the bench's shapes and the sweep's are both series of the TFLOP/s chart
    names = {t["name"] for t in series(figs["tflops"], visible=True)}
    assert "fa2 predicted · B=4 H=32" in names
    assert "fa2 measured · B·N=16384 H·d=2048" in names and "fa2 predicted · B·N=16384 H·d=2048" in names
    assert "torch_cudnn measured · B·N=16384 H·d=2048" in names


def test_menus_offer_only_combinations_that_exist(mixed):
    opts = filter_options(mixed)
    combos = combinations(mixed, opts)
    have = {tuple(map(str, r)) for r in mixed.pred[["hw", "direction", "causal", "head_dim"]].itertuples(index=False)}
    assert len(combos) == len(have) == 2 * 2 * 2 * 3
    assert all((c["hw"], c["direction"], c["causal"], c["head_dim"]) in have for c in combos)
    # the N menu offers the N of the chosen configuration: the sweep's, and the bench's on the H100
    ns = {(c["hw"], c["direction"]): c["_n"] for c in combos if c["causal"] == "False" and c["head_dim"] == "128"}
    sweep_n = ["512", "1024", "2048", "4096", "8192", "16384"]
    assert ns[("a100-sxm4-80gb", "fwd")] == sweep_n
    bench = read_rows(MEASURED)
    bench_n = {str(n) for n in bench[(bench.head_dim == 128) & ~bench.causal].seqlen_k}
    assert ns[("h100-sxm5-80gb", "fwd")] == sorted(set(sweep_n) | bench_n, key=int)
    assert "dtype" not in opts and "batch" not in opts  # one value, or a series rather than a menu


def test_roofline_follows_the_hardware_menu(mixed):
    profiles = {n: roof_profile(n) for n in ("a100-sxm4-80gb", "h100-sxm5-80gb")}
    for hw in profiles:
        chosen = {**default(mixed), "hw": hw}
        fig = roofline_figure(mixed, profiles, chosen)
        assert {t["meta"]["dims"]["hw"] for t in roofs(fig, visible=True)} == {hw}
        assert {t["meta"]["dims"]["hw"] for t in series(fig, visible=True)} == {hw}
        assert fig.layout["meta"]["titles"][hw].startswith(f"Roofline: {hw}")


def test_roofline_units_and_ceilings(mixed):
    h100 = roof_profile("h100-sxm5-80gb")
    a100 = roof_profile("a100-sxm4-80gb")
    fig = roofline_figure(mixed, {"h100-sxm5-80gb": h100, "a100-sxm4-80gb": a100}, {})
    kinds = {(t["meta"]["dims"]["hw"], t["meta"]["roof"]) for t in roofs(fig)}
    assert not any(k == "fp32" for _, k in kinds)  # no FP32 roof on a tensor-FLOP/s axis
    assert ("h100-sxm5-80gb", "tensor_wgmma") in kinds and ("a100-sxm4-80gb", "tensor_wgmma") not in kinds
    assert ("a100-sxm4-80gb", "tensor_mma.sync") in kinds
    h = {t["meta"]["roof"]: t for t in roofs(fig) if t["meta"]["dims"]["hw"] == "h100-sxm5-80gb"
         and "head_dim" not in t["meta"]["dims"]}
    # achievable = datasheet x the profile's efficiency; y in TFLOP/s = intensity x bandwidth
    assert h["hbm_achievable"]["meta"]["rate"] == pytest.approx(h100.hbm_bandwidth_bytes_per_s * h100.efficiency.hbm)
    assert h["l2_achievable"]["meta"]["rate"] == pytest.approx(h100.l2_bandwidth_bytes_per_s * h100.efficiency.l2)
    assert h["tensor_mma.sync"]["y"][0] == pytest.approx(989.4 * h100.efficiency.tensor_mma_sync)
    t = h["hbm"]
    assert [y / x for x, y in zip(t["x"], t["y"], strict=True)] == pytest.approx([3.35] * 2)
    assert "measured" in h["hbm_achievable"]["hovertemplate"] or not h100.calibrated
    # SFU ceiling in tensor FLOP/s, per d: one exponential per ~4d tensor FLOPs forward, 10d backward
    sfu = [t for t in roofs(fig) if t["meta"]["roof"] == "sfu" and t["meta"]["dims"]["hw"] == "h100-sxm5-80gb"]
    assert len(sfu) == 2 * 3  # (fwd, bwd) x d
    for t in sfu:
        d, per_d = int(t["meta"]["dims"]["head_dim"]), 4 if t["meta"]["dims"]["direction"] == "fwd" else 10
        assert t["meta"]["rate"] == pytest.approx(h100.sfu_exp_per_s * per_d * d, rel=0.05)
    # IO and roofline ticks in SI units
    io = io_figure(mixed, {})
    assert io.layout["yaxis"]["exponentformat"] == "SI" and io.layout["yaxis"]["ticksuffix"] == "B"
    assert "TFLOP/s" in fig.layout["yaxis"]["title"]["text"]


def test_roofline_points_by_dram_and_l2_intensity_with_bound(mixed):
    chosen = {**default(mixed), "hw": "h100-sxm5-80gb"}
    fig = roofline_figure(mixed, {"h100-sxm5-80gb": roof_profile("h100-sxm5-80gb")}, chosen)
    p = mixed.pred
    r = p[(p.schedule == "fa2") & (p["shape"] == "B=4 H=32") & (p.seqlen_k == 4096) & (p.direction == "fwd")
          & (p.head_dim.map(str) == chosen["head_dim"]) & (p.causal.map(str) == chosen["causal"])
          & (p.hw == "h100-sxm5-80gb")].iloc[0]
    fa2 = [t for t in series(fig, "predicted", visible=True) if t["name"] == "fa2 predicted · B=4 H=32"]
    dram, l2 = fa2  # circles by DRAM bytes, diamonds by L2 bytes
    assert dram["marker"]["symbol"] == PRED and l2["marker"]["symbol"] == "diamond-open"
    i = [c[0] for c in dram["customdata"]].index("4096")
    assert dram["x"][i] == pytest.approx(r.tensor_flops / (r.dram_read_bytes + r.dram_write_bytes), rel=1e-3)
    assert l2["x"][i] == pytest.approx(r.tensor_flops / (r.hbm_read_bytes_2level + r.hbm_write_bytes_2level),
                                       rel=1e-3)
    assert dram["y"][i] == pytest.approx(r.tensor_flops / r.time_pred_ms / 1e9, rel=1e-3)
    assert dram["customdata"][i][2] == f"{r.bound} at {r.util_pct:.0f}%" and "bound" in dram["hovertemplate"]
    meas = series(fig, "measured", visible=True)
    assert meas and all(t["marker"]["symbol"] in (MEAS, "diamond") for t in meas)


def test_accuracy_tables_for_cycle_model_and_roofline(mixed):
    page = build_html(mixed, {"h100-sxm5-80gb": roof_profile("h100-sxm5-80gb"),
                              "a100-sxm4-80gb": roof_profile("a100-sxm4-80gb")}, ["s.csv", str(MEASURED)])
    assert "cycle-approximate model (time_pred_ms)" in page and "roofline (time_roofline_ms" in page
    fig = accuracy_figure(mixed, {})
    cyc = [t for t in series(fig) if t["name"].startswith("fa2 cycle model")]
    roof = [t for t in series(fig) if t["name"].startswith("fa2 roofline")]
    assert cyc and roof and roof[0]["marker"]["symbol"] == "x-thin-open"
    # y is today's prediction for the measured problem
    j = mixed.joined
    row = j[(j.schedule == "fa2") & (j.status == "ok")].iloc[0]
    t = next(t for t in cyc if t["meta"]["dims"]["head_dim"] == str(row.head_dim)
             and t["meta"]["dims"]["causal"] == str(row.causal))
    k = [c[0] for c in t["customdata"]].index(str(row.seqlen_k))
    assert t["x"][k] == pytest.approx(row.time_ms, rel=1e-3)
    assert t["y"][k] == pytest.approx(row.time_pred_ms, rel=1e-3)


def test_limits_text_says_what_binds_from_the_model(mixed):
    chosen = default(mixed)
    text = limits_text(mixed, chosen, {"h100-sxm5-80gb": roof_profile("h100-sxm5-80gb")})
    p = mixed.pred
    fa1 = p[(p.schedule == "fa1") & (p.hw == chosen["hw"]) & (p.direction == chosen["direction"])
            & (p.head_dim.map(str) == chosen["head_dim"]) & (p.causal.map(str) == chosen["causal"])]
    for shape, g in fa1.groupby("shape"):  # the sweep's B = 4, H = 32 and the bench's family
        top = g[g.seqlen_k == g.seqlen_k.max()].iloc[0]
        line = re.search(rf"<li><b>fa1</b> at N={top.seqlen_k} \({re.escape(shape)}\).*?</li>", text).group(0)
        bh = top.batch * top.heads  # FA1: one CTA per (batch, head) or per query-row split of one
        ctas = int(re.search(r"([\d,]+) CTAs for 132 SMs", line).group(1).replace(",", ""))
        assert ctas % bh == 0 and (f"one CTA per batch·head (B·H = {bh})" in line) == (ctas == bh)
        assert f"<b>{top.bound}</b>" in line  # the model's own bound, and how busy it says it is
        if top.util_pct < 50:
            assert "no unit saturates" in line and f"runs at {top.util_pct:.0f}% of its achievable rate" in line
            assert ("parallelism, not IO, limits it" in line) == (ctas < 132)
        else:
            assert f"bound by <b>{top.bound}</b>" in line


# ---------------------------------------------------------------- page budget


def test_thinning_keeps_within_budget_and_says_so(mixed_csv):
    budget = Budget(rows=200, n_values=3, shapes=1, variants=2)
    data = prepare_data([read_rows(mixed_csv)], [read_rows(MEASURED)], budget)
    assert len(data.pred) <= budget.rows and data.total_pred > len(data.pred)
    assert data.pred.groupby(["hw", "direction", "causal", "head_dim"])["shape"].nunique().max() == 1
    assert data.meas.seqlen_k.nunique() == 6  # measured N are kept
    assert len(data.notes) == 3 and any("of the 24 configurations" in n for n in data.notes)
    # measured first: the kept shape of a measured configuration is the bench's
    h100_fwd = data.pred[(data.pred.hw == "h100-sxm5-80gb") & (data.pred.direction == "fwd")]
    assert set(h100_fwd["shape"]) == {"B·N=16384 H·d=2048"}
    opts = filter_options(data)
    kept = {tuple(map(str, r)) for r in data.pred[["hw", "direction"]].drop_duplicates().itertuples(index=False)}
    assert {(c.get("hw"), c.get("direction")) for c in combinations(data, opts)} <= kept


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
    meas["hw"] = "h100-sxm5-80gb"
    t = error_table(pred, meas).set_index("schedule")
    assert list(t.index) == ["fa1", "fa2"]  # no prediction for torch_flash: not in the table
    fa2 = t.loc["fa2"]
    assert fa2.n == 3  # the wrong_result row does not count
    assert fa2.mape_pct == pytest.approx((20 + 0 + 50) / 3)
    assert fa2.mean_err_pct == pytest.approx((-20 + 0 + 50) / 3)
    assert fa2.worst_ape_pct == pytest.approx(50.0)
    assert "N=4096" in fa2.worst_points.split(";")[0] and "+50.0%" in fa2.worst_points.split(";")[0]
    assert t.loc["fa1"].n == 1 and t.loc["fa1"].mape_pct == pytest.approx(10.0)


def test_error_table_from_csv_types(tmp_path):
    pred, meas = _hand_frames()
    meas["causal"] = meas["causal"].astype(int)  # 0/1 in a CSV still joins with False/True
    path = tmp_path / "m.csv"
    meas.to_csv(path, index=False)
    t = error_table(pred, read_rows(path))
    assert t.set_index("schedule").loc["fa2"].n == 3
    assert error_table(pred, meas.assign(status="failed")).empty


# ---------------------------------------------------------------- input errors and the file


def test_read_rows_bad_input(tmp_path, whatif_csv):
    pred = pd.read_csv(whatif_csv)
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


def test_report_command_bad_input(tmp_path, whatif_csv):
    pred = pd.read_csv(whatif_csv)
    out = tmp_path / "r.html"
    pred.drop(columns=["time_pred_ms"]).to_csv(tmp_path / "neither.csv", index=False)
    with pytest.raises(InputError, match="neither predictions .* nor measurements"):
        report_command([tmp_path / "neither.csv"], out)
    pred.drop(columns=["dram_read_bytes"]).to_csv(tmp_path / "nocount.csv", index=False)
    with pytest.raises(InputError, match="missing columns: dram_read_bytes"):
        report_command([tmp_path / "nocount.csv"], out)
    pred.assign(hw="tpu-v9").to_csv(tmp_path / "tpu.csv", index=False)
    with pytest.raises(InputError, match="the data's hw 'tpu-v9' is no shipped profile.*--hw PATH.toml"):
        report_command([tmp_path / "tpu.csv"], out)
    with pytest.raises(InputError, match="unknown hardware profile 'z80'"):
        report_command([whatif_csv], out, hw=["z80"])
    with pytest.raises(InputError, match="--hw a100-sxm4-80gb: no row of the data is on that hardware"):
        report_command([whatif_csv], out, hw=["a100-sxm4-80gb"])
    assert not out.exists()
    r = subprocess.run([sys.executable, "-c", "from iosim.cli import main; main()", "report",
                        str(tmp_path / "nocount.csv"), "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "missing columns: dram_read_bytes" in r.stderr


def test_report_page_is_self_contained_and_names_no_missing_menu(tmp_path, mixed_csv):
    out = tmp_path / "r.html"
    r = runner.invoke(app, ["report", str(mixed_csv), str(MEASURED), "-o", str(out)])
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert text.count("<script type='text/javascript'>") == 1  # plotly.js once, inline
    assert not re.search(r"<(script|link|img|iframe)[^>]*(src|href)\s*=\s*[\"']?(https?:)?//", text)
    for h in ["1. Roofline", "2. IO against N", "3. Time and TFLOP/s", "4. Accuracy", "5. What-if"]:
        assert h in text
    menus = set(re.findall(r'data-dim="([^"]+)"', text))
    assert menus == {"hw", "direction", "causal", "head_dim", "seqlen_k"}
    # the text names exactly the menus that exist (no dtype menu here: one dtype)
    assert set(re.findall(r"Choose (.*?) in the menus above", text)) == {"hardware, direction, causal, head_dim d"}
    assert str(MEASURED) in text
    pred_only = tmp_path / "p.html"
    assert runner.invoke(app, ["report", str(mixed_csv), "-o", str(pred_only)]).exit_code == 0
    assert "No measured data given" in pred_only.read_text()


# ---------------------------------------------------------------- the roofline as users know it


def _h100_roofs(data, chosen):
    prof = roof_profile("h100-sxm5-80gb")
    fig = roofline_figure(data, {"h100-sxm5-80gb": prof}, chosen)
    return prof, fig, [t for t in roofs(fig, visible=True) if t["meta"]["dims"]["hw"] == "h100-sxm5-80gb"]


def test_roofline_has_the_roof_shape(mixed):
    chosen = {**default(mixed), "hw": "h100-sxm5-80gb"}
    prof, fig, shown = _h100_roofs(mixed, chosen)
    by = {t["meta"]["roof"]: t for t in shown}
    peak, wgmma, mma = (by[k]["meta"]["rate"] for k in ("tensor", "tensor_wgmma", "tensor_mma.sync"))
    assert peak == pytest.approx(prof.tensor_flops_per_s["bf16"])
    for lvl in ("hbm", "l2"):  # a bandwidth roof ends at its ridge point: peak / bandwidth
        sheet, ach = by[lvl], by[f"{lvl}_achievable"]
        assert sheet["x"][-1] == pytest.approx(peak / sheet["meta"]["rate"])
        assert sheet["y"][-1] == pytest.approx(peak / 1e12)
        assert ach["x"][-1] == pytest.approx(max(wgmma, mma) / ach["meta"]["rate"])
    # each compute ceiling starts where the fastest bandwidth roof of its kind meets it
    assert by["tensor"]["x"][0] == pytest.approx(peak / by["l2"]["meta"]["rate"])
    assert by["tensor_mma.sync"]["x"][0] == pytest.approx(mma / by["l2_achievable"]["meta"]["rate"])
    assert by["tensor"]["x"][-1] > max(x for t in series(fig, visible=True) for x in t["x"])
    # points: markers, not joined across N
    assert all(t["mode"] == "markers" for t in series(fig))


def test_roofline_what_if_ceilings_differ_in_style(whatif):
    _, fig, _ = _h100_roofs(whatif, default(whatif))
    hbm = [t for t in roofs(fig) if t["meta"]["roof"] == "hbm"]
    styles = {t["meta"]["rate"]: (t["line"]["color"], t["line"]["dash"]) for t in hbm}
    assert sorted(styles) == [3.35e12, 4.8e12, 8e12] and len(set(styles.values())) == 3


def test_roofline_sfu_and_tensor_ceilings_apart_at_d64(tmp_path):
    data = prepare_data([read_rows(sweep(tmp_path, "d64.csv", "--head-dim", "64", "--seqlen", "1024,4096"))], [])
    _, fig, shown = _h100_roofs(data, default(data))
    sfu = next(t for t in shown if t["meta"]["roof"] == "sfu")
    tensor = next(t for t in shown if t["meta"]["roof"] == "tensor")
    assert sfu["meta"]["rate"] == pytest.approx(tensor["meta"]["rate"], rel=0.02)  # the same height
    assert sfu["line"]["color"] != tensor["line"]["color"] and sfu["line"]["width"] > 2 * tensor["line"]["width"]
    assert sfu["textposition"] != tensor["textposition"] and "SFU" in sfu["text"][-1]
    assert fig.data.index(sfu) < fig.data.index(tensor)  # the band under the line


def test_log_axes_label_ticks_as_numbers(mixed):
    figs = [roofline_figure(mixed, {"h100-sxm5-80gb": roof_profile("h100-sxm5-80gb")}, {}),
            io_figure(mixed, {}), time_figure(mixed, {})]
    for fig in figs:
        for ax in ("xaxis", "yaxis"):
            a = fig.layout[ax]
            if a["type"] == "log":  # without a tickformat plotly writes 2000 as "2"
                assert a["tickformat"] in ("~r", "~s")
    assert figs[0].layout["yaxis"]["tickformat"] == "~r" and figs[1].layout["yaxis"]["tickformat"] == "~s"


def test_legend_lists_schedule_by_shape(mixed, whatif):
    chosen = default(mixed)
    fig = roofline_figure(mixed, {"h100-sxm5-80gb": roof_profile("h100-sxm5-80gb")}, chosen)
    entries = [t["name"] for t in fig.data if t.get("showlegend") and t["visible"] is True]
    assert len(entries) <= 20 and len(entries) == len(set(entries))
    assert {"fa2 · B=4 H=32", "fa2 · B·N=16384 H·d=2048"} <= set(entries)
    # every shown series is in a group that has an entry
    assert {t["legendgroup"] for t in series(fig, visible=True)} <= set(entries)
    time = time_figure(whatif, default(whatif))  # 24 series (4 schedules x 6 variants): 4 entries
    assert sorted(t["name"] for t in time.data if t.get("showlegend") and t["visible"]) == \
        ["fa1", "fa2", "fa3", "naive"]


def test_rows_that_cannot_run_say_so(tmp_path):
    csv = sweep(tmp_path, "big.csv", "--schedule", "naive,fa2", "--seqlen", "4096,131072")
    rows = pd.read_csv(csv)
    assert not rows.loc[(rows.schedule == "naive") & (rows.seqlen_k == 131072), "fits"].item()
    assert rows.loc[rows.schedule == "fa2", "fits"].all()
    out = tmp_path / "r.html"
    assert runner.invoke(app, ["report", str(csv), "-o", str(out)]).exit_code == 0
    text = out.read_text()
    line = re.search(r"<li><b>naive</b> at N=131072.*?</li>", text).group(0)
    assert "<b>cannot run</b>" in line and "is not a result" in line and "bound by" not in line
    assert "1 predicted rows <b>cannot run</b>" in text
    assert "cannot run" not in re.search(r"<li><b>fa2</b> at N=131072.*?</li>", text).group(0)


def test_report_of_a_sweep_made_with_a_users_toml(tmp_path):
    toml = tmp_path / "my gpu.toml"
    text = (REPO / "hwprofiles" / "h100-sxm5-80gb.toml").read_text()
    toml.write_text(re.sub(r'(?m)^name = .*$', 'name = "my-gpu"', text).replace("3.35e12", "5e12", 1))
    csv = sweep(tmp_path, "my.csv", "--hw", str(toml), "--seqlen", "1024,4096", "--schedule", "fa2")
    out = tmp_path / "r.html"
    r = subprocess.run([sys.executable, "-c", "from iosim.cli import main; main()", "report", str(csv),
                        "-o", str(out)], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "'my-gpu' is no shipped profile" in r.stderr and "--hw PATH.toml" in r.stderr
    r = runner.invoke(app, ["report", str(csv), "--hw", str(toml), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "Roofline: my-gpu" in out.read_text()


def test_report_hw_takes_the_calibrated_profile_its_help_names(tmp_path, whatif_csv):
    cal = roof_profile("h100-sxm5-80gb")
    assert cal.name == "h100-sxm5-80gb.calibrated"
    for name in ("h100", "h100-sxm5-80gb.calibrated"):
        out = tmp_path / f"{name}.html"
        r = runner.invoke(app, ["report", str(whatif_csv), "--hw", name, "-o", str(out)])
        assert r.exit_code == 0, r.output
        assert f"<code>{cal.name}</code>" in out.read_text()  # its ceilings drawn
    assert "h100" in runner.invoke(app, ["report", "--help"]).output


def test_report_package_has_no_cli_code():
    code = ("import sys, iosim.report.page, iosim.report.figures, iosim.report.image; "
            "print('typer' in sys.modules)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.stdout.strip() == "False", r.stderr
    assert not any("typer" in p.read_text() for p in (REPO / "iosim" / "report").glob("*.py"))


def test_image_options_bad_input(tmp_path, whatif_csv):
    r = subprocess.run([sys.executable, "-c", "from iosim.cli import main; main()", "report", str(whatif_csv),
                        "-o", str(tmp_path / "r.html"), "--image-dir", str(tmp_path), "--image-format", "jpg"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "png" in r.stderr


def test_images_are_not_replaced_without_force(tmp_path, whatif_csv):
    (tmp_path / "charts").mkdir()
    (tmp_path / "charts" / "3-roofline.png").write_bytes(b"mine")
    r = subprocess.run([sys.executable, "-c", "from iosim.cli import main; main()", "report", str(whatif_csv),
                        "-o", str(tmp_path / "r.html"), "--image-dir", str(tmp_path / "charts")],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "3-roofline.png: exists (allowed: --force" in r.stderr
    assert (tmp_path / "charts" / "3-roofline.png").read_bytes() == b"mine" and not (tmp_path / "r.html").exists()


def test_decode_charts_when_the_sweep_has_decode_rows(tmp_path_factory, whatif):
    """A decode sweep (one query row, context 4k-128k, batch 1 and 16, GQA 32/8): its step
    times sit at or above the HBM ceiling (no step moves its bytes faster than the datasheet
    bandwidth), and the serving view rises with the context; a sweep without decode: none."""
    src = sweep(tmp_path_factory.mktemp("decode"), "d.csv", "--seqlen", "1",
                "--seqlen-k", "4096..131072", "--batch", "1,16", "--heads", "32",
                "--kv-heads", "8", "--schedule", "decode")
    data = prepare_data([read_rows(src)], [])
    prof = hardware.load("h100")
    roof, serving = decode_figures(data, {prof.name: prof}, default(data))
    ceiling = next(t for t in roof.data if t["meta"].get("roof") == "hbm"
                   and t["line"]["dash"] == "solid")
    points = series(roof, "predicted", visible=True)
    assert points and all(y * 1e-3 >= x / ceiling["meta"]["rate"] * 0.999
                          for t in points for x, y in zip(t["x"], t["y"]))
    for t in series(serving, "predicted", visible=True):
        assert len(t["x"]) == 6 and list(t["y"]) == sorted(t["y"])  # longer context, longer step
    html = build_html(data, {prof.name: prof}, [str(src)])
    assert "Decode: time of a step against the bytes it moves" in html
    assert decode_figures(whatif, {prof.name: prof}, default(whatif)) == []
