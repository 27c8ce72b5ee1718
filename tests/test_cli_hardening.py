"""Issue 13's reproductions, each as it was reported, and a fuzz test of every command's options:
bad input is one line and exit status 2, never a traceback; what cannot run says so."""

from __future__ import annotations

import contextlib
import io
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iosim.cli import main
from iosim.core.hardware import PROFILE_DIR, InputError, load
from iosim.core.problem import Problem
from iosim.schedules import plan
from iosim.schedules.base import BlockMap

ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str) -> tuple[int, str, str]:
    """Run `iosim ARGS` in this process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main([str(a) for a in args])
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 2)
    return code, out.getvalue(), err.getvalue()


def bad(*args: str, needle: str = "") -> str:
    """Exit status 2, one line on stderr naming `needle`, no traceback."""
    code, out, err = cli(*args)
    assert code == 2, (args, code, out, err)
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert "Traceback" not in out + err and needle in err, err
    return err


# ------------------------------------------------------------------ tracebacks and surprises
def test_sweep_set_without_values_is_one_line(tmp_path):
    bad("sweep", "--set", "sm_count", "-o", tmp_path / "s.csv", needle="FIELD=VALUES")


@pytest.mark.parametrize("args,needle", [(["--seqlen", "0"], "--seqlen"),
                                         (["--kv-heads", "3"], "must divide"),
                                         (["--seqlen-k", "-5"], "--seqlen-k")])
def test_sweep_with_no_valid_point_is_one_line(tmp_path, args, needle):
    bad("sweep", *args, "-o", tmp_path / "s.csv", needle=needle)


def test_unwritable_outputs_are_one_line(tmp_path):
    bad("sweep", "-o", "/proc/x.csv", needle="cannot write /proc/x.csv")
    code, _, err = cli("sweep", "--seqlen", "512", "-o", tmp_path / "s.csv")
    assert code == 0, err
    bad("report", tmp_path / "s.csv", "-o", "/proc/r.html", needle="cannot write /proc/r.html")


@pytest.mark.parametrize("cmd,name,allowed", [("sweep", "x.json", ".csv"), ("sweep", "x", ".csv"),
                                              ("report", "r.pdf", ".html")])
def test_unknown_output_extensions_are_refused(tmp_path, cmd, name, allowed):
    inputs = [ROOT / "experiments/fwd_grid/h100/measured.csv"] if cmd == "report" else []
    bad(cmd, *inputs, "-o", tmp_path / name, needle=allowed)
    assert not (tmp_path / name).exists()


def test_sweep_output_takes_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        code, _, err = cli("sweep", "--seqlen", "512", "-o", tmp_path / "s.csv")
    finally:
        os.umask(old)
    assert code == 0, err
    assert stat.S_IMODE((tmp_path / "s.csv").stat().st_mode) == 0o640  # not mkstemp's 0600


@pytest.mark.parametrize("args", [[], ["hw"]])
def test_bare_command_prints_help_and_no_error(args):
    r = subprocess.run([sys.executable, "-c", "from iosim.cli import main; main()", *args],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "Usage" in r.stdout and "error:" not in r.stdout + r.stderr


# ------------------------------------------------------------------ huge N
def test_counts_stay_exact_beyond_int64():
    """N = 7e9 (over int64 for N²·d): the closed forms are Python integers, equal to the
    formula; an array as long as N/block_m is never built for them."""
    n, bm, bn = 7_000_000_000, 128, 64
    b = BlockMap(n, n, bm, bn, causal=True)
    # top-left causal, bm = 2·bn: whole query block i (of tm - 1) sees keys < (i+1)·bm, so
    # Σ rows·keys = bm² · Σ_{i<tm-1} (i+1); the last block (bm rows here) sees all n keys
    full = -(-n // bm) - 1
    assert b.sum_rc() == bm * bm * full * (full + 1) // 2 + (n - bm * full) * n
    assert b.sum_rc() > 2**63
    assert "r_arr" not in b._memo and "hi_arr" not in b._memo  # no per-block array was built
    p = Problem(batch=1, heads=1, seqlen_q=2**31 - 1, head_dim=128)
    flops = plan("fa2", p, load("h100-sxm5-80gb")).work.tensor_flops
    assert flops == 4 * (2**31 - 1) ** 2 * 128 and flops > 2**63


def test_seqlen_beyond_int32_is_refused_at_once():
    bad("predict", "--seqlen", "10000000000", needle="--seqlen")


# ------------------------------------------------------------------ what cannot run says so
def test_predict_prints_what_it_can_and_one_line_per_schedule_it_cannot():
    code, out, err = cli("predict", "--dtype", "fp32")
    assert code == 0, err
    assert "fa3: not predicted:" in out and "shared memory" in out
    assert all(re.search(rf"\n *{s} ", out) for s in ("naive", "fa1", "fa2"))
    code, out, _ = cli("predict", "--head-dim", "512")
    assert code == 0 and "naive" in out and out.count("not predicted: head_dim=512") == 4


def test_fits_column_from_hbm_capacity(tmp_path):
    code, out, _ = cli("predict", "--seqlen", "131072", "--schedule", "naive,fa2", "--hw", "h100")
    assert code == 0
    assert "naive: cannot run: its tensors need" in out and "fa2: cannot run" not in out
    code, _, err = cli("sweep", "--seqlen", "4096,131072", "--schedule", "naive",
                       "-o", tmp_path / "s.csv")
    df = pd.read_csv(tmp_path / "s.csv")
    assert code == 0 and list(df.sort_values("seqlen_q").fits) == [True, False]
    # the footprint of naive's forward: Q, K, V, O, S and P at full size
    r = df[df.seqlen_q == 131072].iloc[0]
    assert r.hbm_footprint_bytes == 4 * 32 * (4 * 131072 * 128 + 2 * 131072**2) * 2


def test_report_marks_what_cannot_run_and_what_is_hypothetical(tmp_path):
    code, _, err = cli("sweep", "--seqlen", "4096,131072", "--dtype", "bf16,fp8_e4m3",
                       "--schedule", "naive,fa2", "-o", tmp_path / "s.csv")
    assert code == 0, err
    code, _, err = cli("report", tmp_path / "s.csv", "-o", tmp_path / "r.html")
    page = (tmp_path / "r.html").read_text()
    assert code == 0, err
    assert "cannot run: its tensors do not fit in HBM" in page
    assert "hypothetical: no kernel runs it" in page


def test_backing_says_real_published_or_hypothetical():
    code, out, _ = cli("predict", "--dtype", "fp8_e4m3", "--format", "csv")
    df = pd.read_csv(io.StringIO(out)).set_index("schedule").backing
    # fp8 fa3: our kernels (d = 64, 128, 256); fa3's backward at d = 256 too (kernels/fa3_bwd.cu)
    assert code == 0 and df.fa2 == "hypothetical" and df.fa3 == "kernel"
    code, out, _ = cli("predict", "--direction", "bwd", "--head-dim", "256", "--format", "csv")
    df = pd.read_csv(io.StringIO(out)).set_index("schedule").backing
    assert code == 0 and df.fa3 == "kernel" and df.fa2 == "kernel"
    code, out, _ = cli("predict", "--format", "csv")
    df = pd.read_csv(io.StringIO(out)).set_index("schedule").backing
    assert (df[["naive", "fa1", "fa2", "fa3"]] == "kernel").all()
    code, out, _ = cli("predict", "--dtype", "fp8_e4m3")
    assert "hypothetical: no kernel" in out


def test_causal_align_changes_only_unequal_lengths():
    def tensor(*extra):
        code, out, err = cli("predict", "--causal", "--format", "csv", "--seqlen", "1024", *extra)
        assert code == 0, err
        return pd.read_csv(io.StringIO(out)).set_index("schedule").tensor_flops
    same = [tensor("--causal-align", a) for a in ("top-left", "bottom-right")]
    assert (same[0] == same[1]).all()
    tl, br = (tensor("--seqlen-k", "4096", "--causal-align", a) for a in ("top-left", "bottom-right"))
    # standard: the papers' benchmark masks top-left only, so it is left out bottom-right
    assert "standard" not in br.index and "standard" in tl.index
    tl = tl.drop("standard")
    assert (br.drop("naive") > tl.drop("naive")).all()  # more keys visible from the bottom right
    assert br.naive == tl.naive  # naive's GEMMs compute the full products either way


def test_sweep_takes_both_alignments_where_they_differ(tmp_path):
    code, _, err = cli("sweep", "--seqlen", "1024", "--seqlen-k", "1024,4096", "--causal", "both",
                       "--causal-align", "both", "--schedule", "fa2", "-o", tmp_path / "s.csv")
    df = pd.read_csv(tmp_path / "s.csv")
    assert code == 0, err
    # bottom-right only where it differs from top-left: causal, Nq != Nk
    br = df[df.causal_align == "bottom-right"]
    assert len(br) == 1 and br.causal.all() and (br.seqlen_k == 4096).all() and len(df) == 5


# ------------------------------------------------------------------ CLI conventions
def test_help_and_version():
    code, out, _ = cli("-h")
    assert code == 0 and "Usage" in out
    code, out, _ = cli("predict", "-h")
    assert code == 0 and "--causal-align" in out and "<bool>" not in out
    code, out, _ = cli("--version")
    assert code == 0 and out.startswith("iosim ")


@pytest.mark.parametrize("spelling", ["--causal", "--causal=yes", "--causal true", "--causal 1",
                                      "--causal YES"])
def test_one_boolean_grammar(spelling, tmp_path):
    code, out, err = cli("predict", "--format", "csv", *spelling.split())
    assert code == 0, err
    assert pd.read_csv(io.StringIO(out)).causal.all()
    code, _, err = cli("sweep", *spelling.split(), "--seqlen", "512", "-o", tmp_path / "s.csv")
    assert code == 0 and pd.read_csv(tmp_path / "s.csv").causal.all(), err
    code, out, _ = cli("predict", "--format", "csv", "--no-causal")
    assert code == 0 and not pd.read_csv(io.StringIO(out)).causal.any()


def test_messages_name_the_options_typed():
    bad("predict", "--seqlen", "0", needle="--seqlen:")
    bad("predict", "--head-dim", "-8", needle="--head-dim:")
    err = bad("sweep", "--seqlen-k", "x", "-o", "s.csv")
    assert "--seqlen-k" in err and "seqlen_k" not in err


def test_predict_table_fits_120_columns_and_wide_shows_all():
    code, out, _ = cli("predict")
    assert code == 0 and max(len(line) for line in out.splitlines()[1:]) <= 120
    code, wide, _ = cli("predict", "--wide")
    assert code == 0 and "roof ms" in wide and "roof ms" not in out


def test_progress_bar_forced_when_piped(tmp_path):
    r = subprocess.run([sys.executable, "-c", "from iosim.cli import main; main()", "sweep",
                        "--seqlen", "512..2048", "--progress", "-o", str(tmp_path / "s.csv")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "pt" in r.stderr  # tqdm's bar, though stderr is a pipe
    r = subprocess.run([sys.executable, "-c", "from iosim.cli import main; main()", "sweep",
                        "--seqlen", "512..2048", "-o", str(tmp_path / "s2.csv")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and r.stderr == ""


def test_sweep_summary_does_not_mix_gpus(tmp_path):
    code, out, _ = cli("sweep", "--hw", "h100-sxm5-80gb,a100", "-o", tmp_path / "s.csv")
    assert code == 0
    assert "median predicted TFLOP/s on h100-sxm5-80gb:" in out
    assert "median predicted TFLOP/s on a100-sxm4-80gb:" in out


# ------------------------------------------------------------------ profiles users write
def test_example_profile_loads_with_a_warning_for_missing_sources():
    code, out, err = cli("predict", "--hw", ROOT / "docs/hwprofile-example.toml",
                         "--schedule", "fa2")
    assert code == 0 and "h100-whatif-2x-smem" in out
    assert err.startswith("warning: ") and "no [sources] entry for" in err


def test_shipped_profiles_must_cite_every_source(tmp_path):
    import tomllib

    from iosim.core.hardware import _validate

    data = tomllib.loads((PROFILE_DIR / "h100-sxm5-80gb.toml").read_text())
    del data["sources"]["sm_count"]
    with pytest.raises(InputError, match="sm_count"):
        _validate(data, "shipped")  # what load() does for a file in hwprofiles/


def test_profile_fields_are_checked_against_each_other(tmp_path):
    text = (ROOT / "docs/hwprofile-example.toml").read_text()
    broken = tmp_path / "broken.toml"
    broken.write_text(text.replace("smem_per_block_optin_bytes = 465920",
                                   "smem_per_block_optin_bytes = 999999"))
    bad("predict", "--hw", broken, needle="smem_per_block_optin_bytes = 999999 is over smem_per_sm_bytes")


@pytest.mark.parametrize("name,want", [("H100-SXM5-80GB", "h100-sxm5-80gb"),
                                       ("A1", "a100-sxm4-80gb"), ("h2", "h200-sxm-141gb")])
def test_profile_names_any_case_and_unique_prefix(name, want):
    assert load(name).name.split(".")[0] == want


def test_ambiguous_profile_prefix_is_refused():
    bad("predict", "--hw", "h", needle="ambiguous")


def test_profiles_cite_what_a_reader_can_find():
    for f in PROFILE_DIR.glob("*.toml"):
        assert "KINDS.md" not in f.read_text(), f


# ------------------------------------------------------------------ fuzz: every command
HOSTILE = ["", " ", "0", "-1", "1", "7", "64", "4096", "1e400", "nan", "inf", "-inf", "abc",
           "1,,2", ",", "1..", "..4", "8..2", "1..10:0", "1..10:-1", "2..1e300", "1..1e12:1",
           "both", "all", "yes", "no", "fp8_e4m3", "bf16,fp64", "naive,fa9", "h", "h100",
           "a100,h200", "/proc/x", "/proc/x.csv", "x.json", "x", "../../etc/passwd",
           "sm_count", "sm_count=", "efficiency.hbm=2", "smem_per_sm_bytes=1", "=",
           "99999999999999999999999", "0x10", "１２", "\u00e9\u00e8", "-", "--", "top-left",
           "bottom-right", "seqlen_q>=8192", "fwd", "bwd", "both,fwd",
           # duplicate list values, zero sizes, case, impossible what-ifs, code in a filter
           "64,64", "512,512.0", "h100,h100", "h100,h100-sxm5-80gb.calibrated", "fa2,FA2", "BF16",
           "0,512", "0..8", "512.5", "sm_count=0", "sm_count=1e29", "max_threads_per_sm=1",
           "efficiency.hbm=nan", "clock_hz=-1", '@pd.io.common.os.system("touch PWNED")',
           "__import__('os').system('touch PWNED')"]


def _commands():
    import typer.main

    from iosim.cli import app

    out = []

    def walk(cmd, path):
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                walk(sub, [*path, name])
        else:
            out.append((path, cmd.params))

    walk(typer.main.get_command(app), [])
    return out


COMMANDS = _commands()


@st.composite
def invocations(draw, files: list[str]):
    """A command, then a random subset of its options (and arguments), each with a random or
    hostile value, in a random order."""
    path, params = draw(st.sampled_from(COMMANDS))
    chunks: list[list[str]] = []
    for prm in params:
        if not draw(st.booleans()):
            continue
        if type(prm).__name__ == "TyperArgument":
            chunks.append(draw(st.lists(st.sampled_from(files + HOSTILE[:8]), max_size=2)))
            continue
        name = draw(st.sampled_from(prm.opts + list(getattr(prm, "secondary_opts", []))))
        if getattr(prm, "is_flag", False):
            chunks.append([name])
        else:
            chunks.append([name, draw(st.sampled_from(HOSTILE + files))])
    return list(path) + [a for c in draw(st.permutations(chunks)) for a in c]


@pytest.fixture(scope="module")
def fuzz_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz")
    (d / "garbage.csv").write_text("a,b\n1,2\n")
    (d / "empty.csv").write_text("")
    (d / "notes.toml").write_text("name = 3\n")
    code, _, err = cli("sweep", "--seqlen", "512,1024", "-o", d / "sweep.csv")
    assert code == 0, err
    measured = ROOT / "experiments/fwd_grid/h100/measured.csv"
    # measured columns that are not numbers, not finite, or not whole; problems that are invalid
    m = pd.read_csv(measured).head(12)
    bad_rows = {"text_time.csv": ("time_ms", "fast"), "inf_time.csv": ("time_ms", float("inf")),
                "nan_time.csv": ("time_ms", float("nan")), "half_seqlen.csv": ("seqlen_q", 512.5),
                "zero_heads.csv": ("heads", 0), "kv3.csv": ("kv_heads", 3)}
    for name, (col, v) in bad_rows.items():
        x = m.copy()
        x[col] = x[col].astype(object)
        x.loc[x.index[1:], col] = v
        x.to_csv(d / name, index=False)
    # profiles that describe no GPU
    base = (PROFILE_DIR / "h100-sxm5-80gb.toml").read_text()
    for name, (key, v) in {"threads1.toml": ("max_threads_per_sm", "1"),
                           "smbool.toml": ("sm_count", "true"), "sm1e29.toml": ("sm_count", "1e29"),
                           "regs1.toml": ("max_registers_per_thread", "1")}.items():
        (d / name).write_text(base.replace(f"\n{key} = ", f"\n{key} = {v}  # was ", 1))
    return [str(d / n) for n in ("garbage.csv", "empty.csv", "notes.toml", "sweep.csv", *bad_rows,
                                 "threads1.toml", "smbool.toml", "sm1e29.toml", "regs1.toml")] + \
        [str(measured), str(d / "out.csv"), str(d / "out.html"), str(d / "out.json"), str(d / "out.txt")]


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_every_command_exits_0_or_2_without_traceback(fuzz_files, data, monkeypatch, tmp_path):
    """Every command and option of the CLI (read from the app itself, so new ones are covered
    too) with random and hostile values: exit status 0 or 2, never a traceback."""
    monkeypatch.chdir(tmp_path)
    # `tune` compiles every candidate tile with nvcc where it is on PATH (minutes): here it ranks
    # without, as on a machine with no CUDA toolkit (tests/test_kernel_compile.py compiles)
    monkeypatch.setattr("iosim.gpu.compile.nvcc_available", lambda: False)
    args = data.draw(invocations(fuzz_files))
    if args[:1] in (["bench"], ["tune"]) and "--verify" in args:
        args.remove("--verify")  # needs a GPU and minutes: refused without one anyway
    code, out, err = cli(*args)
    assert code in (0, 2), (args, code, err[-2000:])
    assert "Traceback" not in out + err, (args, err[-2000:])
    assert not (tmp_path / "PWNED").exists(), args  # nothing typed is ever run
    if code == 2:
        assert err.strip().splitlines()[-1].startswith("error: "), (args, err)


# ------------------------------------------------------------------ issue 19's classes, one each
@pytest.mark.parametrize("name,needle", [("text_time.csv", "'time_ms', row 2: 'fast' is not a number"),
                                         ("half_seqlen.csv", "'seqlen_q', row 2: 512.5"),
                                         ("zero_heads.csv", "'heads', row 2: 0"),
                                         ("kv3.csv", "row 2: kv_heads=3 must divide")])
def test_bad_measured_columns_are_one_line_naming_file_row_and_column(fuzz_files, tmp_path, name, needle):
    f = next(p for p in fuzz_files if p.endswith(name))
    for cmd in (["validate", f], ["calibrate", f, "--hw", "h100-sxm5-80gb", "-o", tmp_path / "c.toml"],
                ["report", f, "-o", tmp_path / "r.html"]):
        err = bad(*cmd, needle=needle)
        assert "--seqlen" not in err and "--heads" not in err  # no option the user never typed


@pytest.mark.parametrize("name", ["inf_time.csv", "nan_time.csv"])
def test_non_finite_times_are_never_measurements(fuzz_files, tmp_path, name):
    f = next(p for p in fuzz_files if p.endswith(name))  # one finite row, the rest inf or NaN
    code, out, err = cli("validate", f, "--format", "csv")
    assert code == 0, err
    assert pd.read_csv(io.StringIO(out)).n.sum() == 1  # only the finite row was checked
    code, _, err = cli("calibrate", f, "--hw", "h100-sxm5-80gb", "-o", tmp_path / "c.toml")
    assert code in (0, 2) and "Traceback" not in err


def test_a_gate_over_no_checked_rows_fails(tmp_path):
    m = pd.read_csv(ROOT / "experiments/fwd_grid/h100/measured.csv").head(6)
    m["time_ms"] = float("nan")
    m.to_csv(tmp_path / "m.csv", index=False)
    bad("validate", tmp_path / "m.csv", "--max-mape", "50", needle="can be checked")
    bad("validate", ROOT / "experiments/fwd_grid/h100/measured.csv", "--max-mape", "nan",
        needle="--max-mape")


@pytest.mark.parametrize("name,field", [("threads1.toml", "max_threads_per_sm"), ("smbool.toml", "sm_count"),
                                        ("sm1e29.toml", "sm_count"), ("regs1.toml", "max_registers_per_thread")])
def test_profiles_that_describe_no_gpu_are_refused(fuzz_files, name, field):
    f = next(p for p in fuzz_files if p.endswith(name))
    for cmd in (["predict", "--hw", f], ["hw", "show", f], ["sweep", "--hw", f, "-o", f + ".csv"]):
        bad(*cmd, needle=field)


@pytest.mark.parametrize("args,needle", [
    (["predict", "--hw", "h100,h100"], "same profile"),
    (["predict", "--hw", "h100,h100-sxm5-80gb.calibrated", "--compare"], "same profile"),
    (["tune", "--seqlen", "0"], "--seqlen: 0 is not allowed"),
    (["tune", "--head-dim", "0"], "--head-dim: 0 is not allowed"),
    (["bench", "-o", "b.csv", "--seqlen", "0"], "--seqlen: 0 is not allowed"),
    (["sweep", "--seqlen", "512,0", "-o", "s.csv"], "--seqlen: 0 is not allowed"),
    (["sweep", "--set", "efficiency.hbm=nan", "-o", "s.csv"], "not a finite number"),
    (["predict", "--schedule", "naive", "--block-n", "1000000", "--stages", "100"], "shared memory"),
    (["explain", "--schedule", "naive", "--block-n", "1000000"], "shared memory"),
    (["predict", "--schedule", "naive", "--block-n", "48"], "warp grid")])
def test_issue_19_reproductions_are_one_line(tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    bad(*args, needle=needle)


def test_sliding_window_options():
    # predicted by the schedules that model it, the others said why; bad combinations one line
    code, out, _ = cli("predict", "--seqlen", "8192", "--causal", "--window", "1024")
    assert code == 0 and "window=1024" in out and "naive: not predicted" in out
    assert re.search(r"^\s+fa2\s", out, re.M) and re.search(r"^\s+fa3\s", out, re.M)
    bad("predict", "--window", "1024", needle="needs the causal mask")
    bad("predict", "--causal", "--window", "-1", needle="--window")
    bad("predict", "--causal", "--window", "64", "--direction", "bwd", needle="forward pass only")
    bad("predict", "--causal", "--window", "64", "--schedule", "fa1", needle="sliding window")


def test_page_size_options():
    code, out, _ = cli("predict", "--seqlen", "1", "--seqlen-k", "65536", "--kv-heads", "8",
                       "--page-size", "16")
    assert code == 0 and "page=16" in out and re.search(r"^\s+decode\s", out, re.M)
    assert "fa2: not predicted: --page-size" in out
    bad("predict", "--page-size", "0", needle="--page-size")
    bad("predict", "--seqlen", "1", "--page-size", "16", "--schedule", "fa2", needle="decode")


def test_ragged_batch_options():
    code, out, _ = cli("predict", "--seqlen", "1", "--batch", "3", "--seqlens-k", "100,5000,70000",
                       "--kv-heads", "8", "--schedule", "decode")
    assert code == 0 and "seqlens_k=100,5000,70000" in out and "published" in out
    bad("predict", "--seqlen", "1", "--batch", "2", "--seqlens-k", "100,5000,70000",
        needle="3 lengths for batch 2")
    bad("predict", "--seqlen", "1", "--batch", "2", "--seqlens-k", "100,x", needle="--seqlens-k")
    bad("predict", "--seqlen", "1", "--batch", "2", "--seqlens-k", "100,200", "--schedule", "fa2",
        needle="ragged batch")


def test_sweep_takes_windows_and_page_sizes(tmp_path):
    out = tmp_path / "w.csv"
    code, _, err = cli("sweep", "--seqlen", "8192", "--causal", "--window", "1024,4096",
                       "--schedule", "fa2,fa3", "-o", out, "--no-progress")
    assert code == 0, err
    df = pd.read_csv(out)
    assert sorted(df.window) == [1024, 1024, 4096, 4096]
    # a wider window visits more key blocks: more bytes, more time
    for _, g in df.groupby("schedule"):
        g = g.sort_values("window")
        assert g.hbm_read_bytes_2level.is_monotonic_increasing and g.time_pred_ms.is_monotonic_increasing
    out = tmp_path / "p.csv"
    code, _, err = cli("sweep", "--seqlen", "1", "--seqlen-k", "65536", "--page-size", "16,64",
                       "--schedule", "decode", "-o", out, "--no-progress")
    assert code == 0, err
    assert sorted(pd.read_csv(out).page_size) == [16, 64]
    bad("sweep", "--seqlen", "1", "--page-size", "x", "-o", tmp_path / "x.csv", needle="--page-size")
