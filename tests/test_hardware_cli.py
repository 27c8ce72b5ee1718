"""Profiles load with a source for every number; bad input is one line and exit status 2."""

import json
import subprocess
import sys

import pytest

from iosim.core import hardware
from iosim.core.hardware import InputError


def iosim(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from iosim.cli import main; main()", *args],
                          capture_output=True, text=True)


@pytest.mark.parametrize("name", ["a100-sxm4-80gb", "h100-sxm5-80gb", "h200-sxm-141gb"])
def test_profiles_load_with_sources(name):
    p = hardware.load(name)
    assert p.name == name
    assert set(type(p).model_fields) - {"name", "sources", "provenance", "arch"} <= set(p.sources)


def test_user_profile_by_path_and_what_if(tmp_path, capsys):
    text = (hardware.PROFILE_DIR / "h100-sxm5-80gb.toml").read_text()
    path = tmp_path / "mine.toml"
    path.write_text(text.replace('name = "h100-sxm5-80gb"', 'name = "mine"'))
    assert hardware.load(path).name == "mine"
    assert hardware.load(path).with_changes(sm_count=66).sm_count == 66
    path.write_text(text.replace("sm_count = 132", "sm_count = 132\nsm_cnt = 1"))
    with pytest.raises(InputError, match="unknown key 'sm_cnt'"):
        hardware.load(path)
    # a user's profile may leave a source out: loaded, with one warning naming the field
    path.write_text(text.replace('sm_count = "NVIDIA', 'x = "'))
    capsys.readouterr()
    assert hardware.load(path).sm_count == 132
    assert "no [sources] entry for sm_count" in capsys.readouterr().err


def test_predict_json_has_the_shared_columns():
    r = iosim("predict", "--format", "json", "--seqlen", "1024")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["schedule"] for x in rows] == ["naive", "fa1", "fa2", "fa3"]
    for col in ("hw", "block_m", "block_n", "hbm_read_bytes_2level", "dram_read_bytes",
                "sram_bytes", "tensor_flops", "exp_ops", "alu_flops", "time_roofline_ms",
                "time_pred_ms", "tflops_pred", "bound"):
        assert col in rows[0]


def test_predict_both_directions_csv():
    r = iosim("predict", "--format", "csv", "--direction", "both", "--schedule", "fa2,naive")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 5 and lines[0].startswith("hw,schedule,direction")


@pytest.mark.parametrize("args,needle", [
    (["--hw", "nope"], "unknown hardware profile"),
    (["--seqlen", "0"], "--seqlen: "),  # the option the user typed, not the field name
    (["--batch", "-1"], "batch"),
    (["--kv-heads", "5"], "must divide heads"),
    (["--dtype", "fp64"], "fp64"),
    (["--schedule", "fa9"], "unknown schedule"),
    (["--head-dim", "512", "--schedule", "fa1,fa2"], "head_dim=512"),  # no schedule can run it
    (["--hw", "a100", "--schedule", "fa3"], "Hopper"),
    (["--hw", "/nonexistent.toml"], "not found"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    r = iosim("predict", *args)
    assert r.returncode == 2
    assert needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
