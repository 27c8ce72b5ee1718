"""`iosim sweep` and `iosim.analysis.sweep`: grammar, what-if hardware, skipped points, bad input."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd
import pytest
from typer.testing import CliRunner

import iosim
from iosim.analysis.sweep import parse_set, parse_values, sweep_result
from iosim.cli import app
from iosim.core.hardware import InputError
from iosim.core.rows import COUNT_COLUMNS, PROBLEM_COLUMNS


@pytest.mark.parametrize("text, want", [
    ("512", [512]),
    ("64,128,256", [64, 128, 256]),
    ("512..4096", [512, 1024, 2048, 4096]),
    ("512..5000", [512, 1024, 2048, 4096]),
    ("100..400:100", [100, 200, 300, 400]),
    ("1..8, 3", [1, 2, 4, 8, 3]),
    ("8..8", [8]),
])
def test_range_grammar(text, want):
    assert parse_values(text) == want


def test_range_grammar_floats():
    assert parse_values("1e12..4e12", float) == [1e12, 2e12, 4e12]
    assert parse_values("0.5..0.9:0.2", float) == pytest.approx([0.5, 0.7, 0.9])


@pytest.mark.parametrize("text, msg", [
    ("", "empty"), ("64,,128", "empty"), ("4096..512", "inverted"), ("1..8:0", "step"),
    ("abc", "not a whole number"), ("1.5", "not a whole number"), ("0..8", "above 0"),
])
def test_range_grammar_errors(text, msg):
    with pytest.raises(InputError, match=msg):
        parse_values(text, name="seqlen")


def test_set_errors():
    with pytest.raises(InputError, match="unknown hardware field 'smem_per_sm'"):
        parse_set(["smem_per_sm=1"])
    with pytest.raises(InputError, match="not FIELD=VALUES"):
        parse_set(["smem_per_sm_bytes"])
    with pytest.raises(InputError, match="not a whole number"):
        parse_set(["smem_per_sm_bytes=big"])
    assert parse_set(["efficiency.hbm=0.8,0.9", "sm_count=66..132:66"]) == \
        {"efficiency.hbm": [0.8, 0.9], "sm_count": [66, 132]}


def test_python_api_grid_and_columns():
    df = iosim.sweep({"seqlen": "512..2048", "head_dim": [64, 128], "causal": "both",
                      "schedule": "all", "hw": "h100-sxm5-80gb,a100-sxm4-80gb"})
    assert set(PROBLEM_COLUMNS + COUNT_COLUMNS + ["time_pred_ms", "tflops_pred", "bound",
                                                  "block_m", "block_n"]) <= set(df.columns)
    # 3 N x 2 d x 2 causal x (6 schedules on H100 + 5 on A100: fa3 needs Hopper)
    assert len(df) == 3 * 2 * 2 * 11
    assert not ((df.hw == "a100-sxm4-80gb") & (df.schedule == "fa3")).any()
    assert (df.time_pred_ms >= df.time_roofline_ms).all()


def test_sweep_row_equals_predict():
    df = iosim.sweep({"seqlen": "4096", "schedule": "fa2"})
    p = iosim.Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
    one = iosim.predict(p, iosim.load_hw("h100"), ["fa2"])
    for c in COUNT_COLUMNS + ["time_pred_ms", "bound"]:
        assert df[c].iloc[0] == one[c].iloc[0], c


def test_what_if_fields_become_columns():
    res = sweep_result({"seqlen": "8192", "head_dim": "128", "schedule": "fa1,fa2",
                        "set": ["smem_per_sm_bytes=233472,466944",
                                "smem_per_block_optin_bytes=232448,465920",
                                "efficiency.hbm=0.5,0.9"]})
    df = res.rows
    # 2 schedules x 2 efficiencies x the 3 SRAM pairs that describe a GPU: a CTA cannot opt in to
    # 465920 B on an SM of 233472 B, and that pair is skipped with the reason
    assert len(df) == 2 * 2 * 3 and res.points == 16
    assert any("smem_per_block_optin_bytes = 465920 is over" in why for why in res.skipped)
    # each swept field is a `set_<field>` column, the name `iosim report` and `accuracy.baseline` read
    assert res.whatif == ["set_smem_per_sm_bytes", "set_smem_per_block_optin_bytes", "set_efficiency.hbm"]
    assert set(res.whatif) <= set(df.columns)
    fa1 = df[df.schedule == "fa1"]
    # FA1's tiles grow with the SRAM (Bc = ceil(M/4d), capped by registers): fewer HBM bytes
    small = fa1[fa1.set_smem_per_block_optin_bytes == 232448].hbm_read_bytes_2level.min()
    assert fa1[fa1.set_smem_per_block_optin_bytes == 465920].hbm_read_bytes_2level.max() <= small
    # half the HBM efficiency never speeds anything up
    slow = df[df["set_efficiency.hbm"] == 0.5].time_pred_ms.to_numpy()
    fast = df[df["set_efficiency.hbm"] == 0.9].time_pred_ms.to_numpy()
    assert (slow >= fast).all()


def test_unplannable_points_are_reported_not_fatal():
    res = sweep_result({"seqlen": "1024", "head_dim": "128,512", "heads": "32,12",
                        "kv_heads": "8", "schedule": "fa2"})
    assert len(res.rows) == 1  # heads=32, d=128
    text = res.summary()
    assert "kv_heads=8 must divide heads=12" in text
    assert "head_dim=512 is not supported" in text
    assert res.points == 4


def test_a_window_backward_is_skipped_with_its_reason():
    """fa1's shape holds its layout (what it plans from batch x heads): a problem fa1 cannot plan
    (a sliding window backward) is skipped with the reason, as for the other schedules."""
    res = sweep_result({"seqlen": "1024", "window": "256", "causal": "true", "direction": "both",
                        "schedule": "fa1,fa2"})
    assert sorted(res.rows["schedule"]) == ["fa2"]  # fa1 models no window; neither, a backward
    assert res.skipped == {"fa1: --window: the forward pass only": 1,
                           "fa1: fa1 does not model a sliding window": 1,
                           "fa2: --window: the forward pass only": 1}


def test_parallel_matches_serial():
    grid = {"seqlen": "512..8192", "head_dim": "64,128", "causal": "both", "batch": "1,4"}
    a = sweep_result(grid, workers=1).rows
    b = sweep_result(grid, workers=2).rows
    pd.testing.assert_frame_equal(a, b)


runner = CliRunner()


def test_cli_sweep_csv_and_parquet(tmp_path):
    out = tmp_path / "s.csv"
    r = runner.invoke(app, ["sweep", "--seqlen", "512..2048", "--causal", "both",
                            "--hw", "h100-sxm5-80gb,a100-sxm4-80gb", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "skipped 6: fa3 on a100-sxm4-80gb" in r.output
    df = pd.read_csv(out)
    assert len(df) == 3 * 2 * 11
    pytest.importorskip("pyarrow")
    pq = tmp_path / "s.parquet"
    r = runner.invoke(app, ["sweep", "--seqlen", "1024", "--set", "sm_count=66,132", "-o", str(pq)])
    assert r.exit_code == 0, r.output
    df = pd.read_parquet(pq)
    assert sorted(df.set_sm_count.unique()) == [66, 132]


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-c", "from iosim.cli import main; main()", *args],
                          capture_output=True, text=True, cwd=cwd)


@pytest.mark.parametrize("args, msg", [
    (["--seqlen", "4096..512"], "inverted"),
    (["--seqlen", ""], "empty"),
    (["--head-dim", "x"], "not a whole number"),
    (["--set", "smem_per_sm=1"], "unknown hardware field"),
    (["--set", "sm_count=many"], "not a whole number"),
    (["--set", "efficiency.hbm=2"], "efficiency.hbm"),
    (["--causal", "maybe"], "not allowed"),
    (["--schedule", "fa9"], "not allowed"),
    (["--hw", "nope"], "unknown hardware profile"),
    (["-o", "/nonexistent-dir/x.csv"], "does not exist"),
])
def test_cli_bad_input_one_line_exit_2(tmp_path, args, msg):
    out = [] if "-o" in args else ["-o", str(tmp_path / "x.csv")]
    r = run_cli("sweep", *args, *out)
    assert r.returncode == 2, r.stderr
    assert msg in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "x.csv").exists()
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write anywhere")
def test_cli_unwritable_output(tmp_path):
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o500)
    r = run_cli("sweep", "-o", str(d / "x.csv"))
    assert r.returncode == 2 and "permission denied" in r.stderr


def test_predict_still_works():
    r = runner.invoke(app, ["predict", "--seqlen", "2048", "--format", "csv"])
    assert r.exit_code == 0
    assert "time_pred_ms" in r.output.splitlines()[0]
