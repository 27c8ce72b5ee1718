"""One convention for every command that prints a table (issue 19): `--format table|json|csv`
and `-o FILE` whose extension (.txt, .json, .csv) says the format; the two must agree; enum
values in any case; `hw list` aligned; `tune` says what it does first and `--verify` without a
GPU fails before any compile."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from test_cli_hardening import bad, cli
from test_writes_and_filters import bench_csv

FAST_TUNE = ["tune", "--seqlen", "1024", "--head-dim", "64", "--block-m", "128", "--warps", "4"]


def commands(tmp_path) -> dict[str, list[str]]:
    m = tmp_path / "m.csv"
    bench_csv(m)
    s1, s2 = tmp_path / "s1.csv", tmp_path / "s2.csv"
    assert cli("sweep", "--seqlen", "512", "-o", s1)[0] == 0
    assert cli("sweep", "--seqlen", "512", "--hw", "a100", "-o", s2)[0] == 0
    return {"predict": ["predict"], "hw list": ["hw", "list"], "validate": ["validate", str(m)],
            "explain": ["explain"], "compare": ["compare", str(s1), str(s2)], "tune": FAST_TUNE}


@pytest.mark.parametrize("name", ["predict", "hw list", "validate", "explain", "compare", "tune"])
def test_every_table_command_writes_each_format_by_extension(tmp_path, name):
    cmd = commands(tmp_path)[name]
    for ext in ("txt", "json", "csv"):
        out = tmp_path / f"out.{ext}"
        code, stdout, err = cli(*cmd, "-o", out)
        assert code == 0, err
        assert f"to {out}" in stdout
        text = out.read_text()
        if ext == "json":
            assert json.loads(text)
        elif ext == "csv":
            assert len(pd.read_csv(out)) >= 1
        else:
            assert text.strip() and not text.lstrip().startswith(("[", "{"))
        # the same content on stdout with --format
        code, printed, _ = cli(*cmd, "--format", ext.replace("txt", "table"))
        assert code == 0 and printed.strip()
    bad(*cmd, "-o", tmp_path / "x.json", "--format", "csv", needle="disagrees")
    bad(*cmd, "-o", tmp_path / "x.xlsx", needle="allowed: .txt, .csv, .json")


def test_enum_values_in_any_case():
    code, out, err = cli("predict", "--dtype", "BF16", "--schedule", "FA2,Fa3", "--format", "JSON",
                         "--direction", "FWD", "--causal-align", "Bottom-Right")
    assert code == 0, err
    assert [r["schedule"] for r in json.loads(out)] == ["fa2", "fa3"]


def test_hw_list_columns_are_aligned():
    code, out, _ = cli("hw", "list")
    lines = out.splitlines()
    assert code == 0 and len(lines) >= 6
    for col in ("GPU", "SMs"):  # every row's cell starts (or ends) where the header's does
        start = lines[0].index(col)
        assert all(ln[start - 1] == " " for ln in lines[1:]), col
    end = len(lines[0])
    assert all(len(ln) == end for ln in lines)  # right-aligned numbers end together


def test_tune_says_what_it_does_before_the_compiles(monkeypatch):
    import iosim.analysis.tune as tune

    seen = []
    monkeypatch.setattr(tune, "resources", lambda pl, hw: seen.append(pl) or None)
    code, out, err = cli(*FAST_TUNE)
    assert code == 0, err
    assert out.splitlines()[0].startswith("tune: ") and "configurations of fa2" in out.splitlines()[0]
    assert seen  # the message came before the compile step ran


def test_tune_verify_without_a_gpu_fails_before_compiling(monkeypatch):
    import iosim.analysis.tune as tune
    import iosim.gpu.bench as gbench

    def no_gpu(command="iosim bench"):
        from iosim.core.hardware import InputError

        raise InputError(f"{command} needs an NVIDIA GPU: no CUDA device found")

    monkeypatch.setattr(gbench, "require_gpu", no_gpu)
    monkeypatch.setattr(tune, "rank", lambda *a, **k: pytest.fail("ranked (and compiled) first"))
    bad("tune", "--verify", needle="iosim tune --verify needs")
