"""Nothing measured is lost and nothing a user types is run as code (issue 19's first part):
every command that writes a file refuses an existing one without --force and one that holds
measurements always; `--holdout-where` is read by a grammar, never evaluated."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest
from test_cli_hardening import bad, cli

from iosim.core.hardware import InputError
from iosim.core.output import holds_measurements
from iosim.core.where import select
from iosim.schedules.knobs import write_entries

BENCH_HEADER = "hw,schedule,direction,batch,heads,kv_heads,seqlen_q,seqlen_k,head_dim,dtype,causal,time_ms,tflops,status\n"


def bench_csv(path: Path) -> str:
    """A file as `iosim bench` writes it (two measured rows); returns its hash."""
    path.write_text(BENCH_HEADER + "h100-sxm5-80gb,fa2,fwd,4,16,16,4096,4096,128,bf16,False,1.5,300,ok\n"
                    "h100-sxm5-80gb,fa1,fwd,4,16,16,4096,4096,128,bf16,False,3.0,150,ok\n")
    return hashlib.sha256(path.read_bytes()).hexdigest()


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("force", [[], ["--force"]])
@pytest.mark.parametrize("command", [["sweep", "--seqlen", "512"], ["predict"],
                                     ["tune", "--seqlen", "1024", "--head-dim", "64"]])
def test_no_command_replaces_measurements_even_with_force(tmp_path, command, force):
    m = tmp_path / "m.csv"
    before = bench_csv(m)
    bad(*command, "-o", m, *force, needle="holds measurements")
    assert sha(m) == before  # the 2 measured rows are still there, byte for byte


def test_existing_output_needs_force_and_force_replaces(tmp_path):
    out = tmp_path / "p.json"
    out.write_text("[]")
    bad("predict", "-o", out, needle="--force")
    assert out.read_text() == "[]"
    code, _, err = cli("predict", "-o", out, "--force")
    assert code == 0, err
    assert len(json.loads(out.read_text())) == 6  # naive, standard, fa1, fa1_paper, fa2, fa3


def test_sweep_default_output_is_not_silently_replaced(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    Path("sweep.csv").write_text("mine\n")
    bad("sweep", "--seqlen", "512", needle="exists")
    assert Path("sweep.csv").read_text() == "mine\n"


def test_report_and_calibrate_refuse_existing_outputs(tmp_path):
    rows = tmp_path / "s.csv"
    assert cli("sweep", "--seqlen", "512,1024", "-o", rows)[0] == 0
    page = tmp_path / "r.html"
    page.write_text("keep")
    bad("report", str(rows), "-o", page, needle="--force")
    assert page.read_text() == "keep"
    prof = tmp_path / "c.toml"
    prof.write_text("keep")
    bad("calibrate", tmp_path / "m.csv" if bench_csv(tmp_path / "m.csv") else "", "--hw",
        "h100-sxm5-80gb", "-o", prof, needle="--force")
    assert prof.read_text() == "keep"


def test_a_model_pick_never_replaces_a_measured_pick(tmp_path):
    tiles = tmp_path / "tiles.json"
    pick = {"schedule": "fa2", "hw": "h100", "direction": "fwd", "head_dim": 64, "block_m": 128,
            "block_n": 64, "warps": 4, "stages": 2, "score": 1.0, "how": "measured on H100"}
    tiles.write_text(json.dumps({"tiles": [pick]}))
    assert holds_measurements(tiles)
    model = dict(pick, block_n=128, how="model")
    kept = write_entries(tiles, [model])
    assert kept == [pick] and json.loads(tiles.read_text())["tiles"] == [pick]
    newer = dict(pick, block_n=32, how="measured on H100")
    assert write_entries(tiles, [newer]) == [pick]  # measured over measured: only with force
    assert write_entries(tiles, [newer], force=True) == []
    assert json.loads(tiles.read_text())["tiles"] == [newer]
    other = dict(model, head_dim=128)  # a new key is added beside the measured pick
    write_entries(tiles, [other])
    assert json.loads(tiles.read_text())["tiles"] == [newer, other]


@pytest.mark.parametrize("expr", ['@pd.io.common.os.system("touch PWNED")',
                                  '__import__("os").system("touch PWNED")',
                                  'seqlen_q.__class__.__init__', '[c for c in ().__class__.__bases__]',
                                  '(lambda: 1)()', 'seqlen_q > @x'])
def test_holdout_where_is_never_run_as_code(tmp_path, monkeypatch, expr):
    monkeypatch.chdir(tmp_path)
    bench_csv(tmp_path / "m.csv")
    bad("calibrate", "m.csv", "--hw", "h100-sxm5-80gb", "-o", "c.toml", "--holdout-where", expr,
        needle="--holdout-where")
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "c.toml").exists()


def test_filter_grammar_selects_what_it_says():
    df = pd.DataFrame({"seqlen_q": [512, 8192, 16384, 4096], "causal": [True, False, True, False],
                       "schedule": ["fa2", "fa1", "fa2", "naive"], "head_dim": [64, 128, 256, 128]})
    cases = {"seqlen_q>=8192": [0, 1, 1, 0], "seqlen_q>=8192 and causal": [0, 0, 1, 0],
             "not causal": [0, 1, 0, 1], "(seqlen_q < 1000) | (head_dim == 256)": [1, 0, 1, 0],
             "schedule in ['fa1', 'naive']": [0, 1, 0, 1], "schedule not in ['fa2']": [0, 1, 0, 1],
             "512 < seqlen_q <= 8192": [0, 1, 0, 1], "head_dim == 128 or schedule == 'fa2'": [1, 1, 1, 1],
             "(seqlen_q > -1) & ~causal": [0, 1, 0, 1]}
    for expr, want in cases.items():
        assert list(select(df, expr)) == [bool(w) for w in want], expr
    for expr in ["nope > 1", "seqlen_q", "seqlen_q + 1 > 2", "schedule in 'fa2'", "seqlen_q >"]:
        with pytest.raises(InputError, match="--holdout-where"):
            select(df, expr)
