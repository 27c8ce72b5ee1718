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


def test_a_profile_is_parsed_once_per_version_of_its_file(tmp_path, capsys):
    # loaded again: the same frozen profile (a cost function's loop hits the model's caches
    # kept by profile); the file changed: read again, whatever the clock's resolution (its size
    # is in the key too); the warning of a user's unsourced field at every load
    assert hardware.load("h100") is hardware.load("h100")
    text = (hardware.PROFILE_DIR / "h100-sxm5-80gb.toml").read_text()
    path = tmp_path / "mine.toml"
    path.write_text(text.replace('sm_count = "NVIDIA', 'x = "'))
    first = hardware.load(path)
    assert hardware.load(path) is first and first.sm_count == 132
    assert capsys.readouterr().err.count("no [sources] entry for sm_count") == 2
    path.write_text(text.replace('sm_count = "NVIDIA', 'x = "').replace("sm_count = 132", "sm_count = 66"))
    assert hardware.load(path).sm_count == 66


def test_predict_json_has_the_shared_columns():
    r = iosim("predict", "--format", "json", "--seqlen", "1024")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert [x["schedule"] for x in rows] == ["naive", "standard", "fa1", "fa1_paper", "fa2", "fa3"]
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
    (["--schedule", "fa9"], "--schedule: 'fa9' is not allowed"),
    (["--head-dim", "512", "--schedule", "fa1,fa2"], "head_dim=512"),  # no schedule can run it
    (["--hw", "a100", "--schedule", "fa3"], "Hopper"),
    (["--hw", "/nonexistent.toml"], "not found"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    r = iosim("predict", *args)
    assert r.returncode == 2
    assert needle in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


@pytest.mark.parametrize("old,new,needle", [
    ("max_threads_per_sm = 2048", "max_threads_per_sm = 1", "max_threads_per_sm"),
    ("max_threads_per_sm = 2048", "max_threads_per_sm = 1000", "max_threads_per_sm"),  # not warps
    ("max_registers_per_thread = 255", "max_registers_per_thread = 1", "max_registers_per_thread"),
    ("max_registers_per_thread = 255", "max_registers_per_thread = 256", "max_registers_per_thread"),
    ("sm_count = 132", "sm_count = true", "sm_count"),
    ("sm_count = 132", "sm_count = 1e29", "sm_count"),
    ("sm_count = 132", "sm_count = 132.0", "sm_count"),
    ("sm_count = 132", "sm_count = 100000000000000000000000000000", "sm_count"),
    ("clock_hz = 1.83e+09", "clock_hz = inf", "clock_hz"),
    ("clock_hz = 1.83e+09", "clock_hz = nan", "clock_hz"),
    ("hbm_bandwidth_bytes_per_s = 3.35e12", "hbm_bandwidth_bytes_per_s = -3.35e12", "hbm_bandwidth"),
    ("hbm_bandwidth_bytes_per_s = 3.35e12", "hbm_bandwidth_bytes_per_s = true", "hbm_bandwidth"),
    ("l2_bandwidth_bytes_per_s = 1.1e13", "l2_bandwidth_bytes_per_s = 0", "l2_bandwidth"),
    ("launch_overhead_s = 4.0e-6", "launch_overhead_s = nan", "launch_overhead_s"),
    ("bf16 = 9.894e14", "bf16 = inf", "tensor_flops_per_clk_per_sm.bf16"),
    ("bf16 = 9.894e14", "bf16 = 0", "tensor_flops_per_clk_per_sm.bf16"),
    ("hbm = 0.90 ", "hbm = true ", "efficiency.hbm"),
])
@pytest.mark.parametrize("cmd", [["hw", "show"], ["predict", "--hw"]])
def test_profile_that_describes_no_gpu_is_refused(tmp_path, old, new, needle, cmd):
    text = (hardware.PROFILE_DIR / "h100-sxm5-80gb.toml").read_text()
    assert old in text
    path = tmp_path / "bad gpu.toml"
    path.write_text(text.replace(old, new, 1))
    r = iosim(*cmd, str(path))
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr


def test_sweep_and_predict_share_the_default_profile(tmp_path):
    """One default: `predict` and `sweep` with no --hw predict the same time, and say which."""
    out = tmp_path / "s.csv"
    r = iosim("sweep", "--schedule", "fa2", "-o", str(out))
    assert r.returncode == 0, r.stderr
    p = iosim("predict", "--schedule", "fa2", "--format", "json")
    assert p.returncode == 0, p.stderr
    pred = json.loads(p.stdout)[0]
    import pandas as pd

    swept = pd.read_csv(out).iloc[0]
    assert swept.hw == pred["hw"] == hardware.load("h100").name
    assert swept.time_pred_ms == pytest.approx(pred["time_pred_ms"], rel=1e-9)  # json: 10 digits
    assert f"profile {pred['hw']}:" in r.stdout


def test_user_toml_may_quote_per_sm_tensor_rates(tmp_path):
    """A profile may give the per-SM fact instead of the device peak, not both."""
    text = (hardware.PROFILE_DIR / "h100-sxm5-80gb.toml").read_text()
    per_sm = text.replace("[tensor_flops_per_s]", "[tensor_flops_per_clk_per_sm]").replace(
        "bf16 = 9.894e14", "bf16 = 4096")
    path = tmp_path / "per_sm.toml"
    path.write_text(per_sm.split("fp16 = ")[0] + "bf16 = 4096\n" + per_sm.split("fp8_e4m3 = 1.9789e15\n")[1])
    p = hardware.load(path)
    assert p.tensor_flops_per_s["bf16"] == pytest.approx(4096 * p.sm_count * p.clock_hz)
    path.write_text(text + "\n[tensor_flops_per_clk_per_sm]\nbf16 = 4096\n")
    r = iosim("hw", "show", str(path))
    assert r.returncode == 2 and "not both" in r.stderr
