"""Issue 26 before vectorising: a start without the heavy modules, sweeps that stream in chunks
(bounded memory, resumable), and the same sweep on a Dask cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pandas as pd
import pytest

from iosim.analysis import sweep as sw
from iosim.cli import main

HEAVY = ("pandas", "plotly", "typer", "scipy", "cupy", "torch")
GRID = {"seqlen": "256..8192", "head_dim": "64,128", "causal": "both", "batch": "1,4",
        "heads": "8,32", "hw": "h100,a100"}
KEY = ["hw", "schedule", "direction", "batch", "heads", "kv_heads", "seqlen_q", "seqlen_k",
       "head_dim", "dtype", "causal", "causal_align", "block_m", "block_n", "warps", "stages"]


def loaded(code: str) -> tuple[list[str], str]:
    """Run `code` in a fresh interpreter: (the HEAVY modules it has loaded, its stdout)."""
    probe = f"\nimport sys, json\nprint(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    r = subprocess.run([sys.executable, "-c", code + probe], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    *out, mods = r.stdout.strip().splitlines()
    return json.loads(mods), "\n".join(out)


def test_planning_and_prediction_import_nothing_heavy():
    mods, out = loaded("import iosim\nfrom iosim.schedules import plan\n"
                       "from iosim.analysis.predict import predict_rows\n"
                       "p = iosim.Problem(batch=2, heads=8, seqlen_q=2048, head_dim=64)\n"
                       "hw = iosim.load_hw('h100')\n"
                       "print(plan('fa2', p, hw).traffic.hbm_read)\n"
                       "print(len(predict_rows(p, hw)[0]))")
    assert mods == [], f"planning imported {mods}"
    traffic, n = out.splitlines()[-2:]
    assert int(traffic) > 0 and int(n) == 6  # a real plan, six schedules on the H100


def test_api_predict_still_returns_a_dataframe_and_imports_pandas_then():
    mods, out = loaded("import iosim\np = iosim.Problem(batch=2, heads=8, seqlen_q=2048, head_dim=64)\n"
                       "df = iosim.predict(p, iosim.load_hw('h100'))\nprint(type(df).__name__, len(df))")
    assert out.splitlines()[-1] == "DataFrame 6" and "pandas" in mods


def cli(*args: str) -> str:
    """Code that runs `iosim ARGS` in-process and fails on a non-zero exit status."""
    return (f"from iosim.cli import main\ntry:\n    main({list(args)!r})\n"
            "except SystemExit as e:\n    assert not e.code, e.code")


def test_import_iosim_imports_nothing_heavy():
    mods, _ = loaded("import iosim")
    assert mods == [], f"import iosim imported {mods}"


@pytest.mark.parametrize("args", [
    (), ("--direction", "both", "--causal", "both"), ("--wide",), ("--hw", "a100", "--schedule", "fa2,fa3"),
    ("--seqlen", "1", "--seqlen-k", "8192", "--page-size", "64"),
    ("--dtype", "fp8_e4m3", "--hadamard", "--causal", "--window", "512"),
])
def test_cli_predict_imports_only_what_it_needs(args):
    mods, out = loaded(cli("predict", *args))
    assert mods == ["typer"], f"iosim predict {' '.join(args)} imported {mods}"
    assert "pred ms" in out  # it printed the table


@pytest.mark.parametrize("args", [("--version",), ("--help",), ("hw", "list"), ("hw", "show", "h100")])
def test_cli_commands_without_the_model_start_without_numpy(args):
    """The model (numpy, the schedules) is imported by the commands that run it."""
    mods, out = loaded(cli(*args) + "\nimport sys\nprint(sorted({'numpy', 'iosim.analysis'} & set(sys.modules)))")
    assert mods == ["typer"] and out.splitlines()[-1] == "[]", f"iosim {' '.join(args)}: {out[-200:]}"


def test_cli_builds_only_the_command_it_runs(capsys):
    from iosim.cli import app, command

    assert list(command(["predict", "--seqlen", "1024"]).commands) == ["predict"]
    every = command([]).commands  # no command named: all of them, for the help and errors
    assert {c.name for c in app.registered_commands} | {"hw"} == set(every)
    assert list(command(["hw", "list"]).commands) == ["hw"]  # a group: alone, built whole
    assert set(command(["hw", "list"]).commands["hw"].commands) == {"list", "show"}
    with pytest.raises(SystemExit) as e:
        main(["predict", "--help"])
    assert e.value.code == 0 and "--seqlen" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["predct"])  # a misspelt command is still said so, by the whole group
    assert e.value.code == 2 and "predict" in capsys.readouterr().err


def test_stream_writes_what_the_in_memory_sweep_computes(tmp_path):
    want = sw.sweep_result(GRID, workers=1).rows.sort_values(KEY).reset_index(drop=True)
    # a column no row fills (fa1's backward split in a forward sweep): None or NaN, both empty
    def empty_as_nan(df):
        return df.astype({c: float for c in df.columns if df[c].isna().all()})

    want = empty_as_nan(want)
    for name in ("s.parquet", "s.csv"):
        res = sw.stream(GRID, tmp_path / name, workers=2, progress=False)
        got = empty_as_nan(sw._read_part(res.path).sort_values(KEY).reset_index(drop=True))
        pd.testing.assert_frame_equal(got, want, check_dtype=False)
        assert res.rows == len(want) and not sw.parts_dir(res.path).exists()
        assert res.points == 6 * 2 * 2 * 2 * 2 * 12  # 6 schedules x 2 GPUs; fa3 on the A100 skipped
        assert res.computed == res.points and res.points_per_second > 0


def test_the_grid_is_never_materialised():
    """A 3.8M-point grid yields its first chunk at once, having made only that chunk's problems
    (and the next chunk's first, which tells where the chunk's last shape ends)."""
    pts = sw.points({"seqlen": "16..160000:16", "head_dim": "64,128,256", "batch": "1..128",
                     "heads": "8..128:8", "schedule": "fa2", "hw": "h100"})
    t0 = time.perf_counter()
    n, (rows, _) = next(sw.run_chunks(pts, None))
    assert time.perf_counter() - t0 < 5
    assert n == sw.CHUNK_PROBLEMS == pts.problems_seen - 1 and len(rows[0]["hw"]) == n


def test_an_interrupted_sweep_leaves_readable_parts_and_resumes(tmp_path, monkeypatch):
    out = tmp_path / "s.parquet"
    full = sw.sweep_result(GRID, workers=1).rows
    calls = {"n": 0}
    real = sw._rows

    def interrupted(job):
        calls["n"] += 1
        if calls["n"] > 2:
            raise KeyboardInterrupt
        return real(job)

    monkeypatch.setattr(sw, "_rows", interrupted)
    monkeypatch.setattr(sw, "PART_ROWS", 1)  # a part per chunk
    monkeypatch.setattr(sw, "CHUNK_PROBLEMS", 32)  # several chunks
    with pytest.raises(KeyboardInterrupt):
        sw.stream(GRID, out, workers=1, progress=False)
    parts = sorted(sw.parts_dir(out).glob("part-*"))
    assert not out.exists() and len(parts) == 2
    done = sum(len(sw._read_part(p)) for p in parts)  # readable: each part written whole
    assert 0 < done < len(full)
    # without --resume the parts are not silently thrown away
    code = cli_code("sweep", *grid_args(), "-o", out)
    assert code == 2
    # another grid is refused; the same grid continues, computing only what is missing
    with pytest.raises(sw.InputError, match="another grid"):
        sw.stream({**GRID, "batch": "1"}, out, resume=True, workers=1)
    monkeypatch.setattr(sw, "_rows", real)
    res = sw.stream(GRID, out, resume=True, workers=1, progress=False)
    assert res.computed == res.points - 2 * sw.CHUNK_PROBLEMS * 12
    got = pd.read_parquet(out).sort_values(KEY).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, full.sort_values(KEY).reset_index(drop=True), check_dtype=False)
    assert not sw.parts_dir(out).exists()


def grid_args() -> list[str]:
    return [a for k, v in GRID.items() for a in (f"--{k.replace('_', '-')}", v)]


def cli_code(*args) -> int:
    try:
        main([str(a) for a in args])
    except SystemExit as e:
        return e.code
    return 0


def test_cli_sweep_reports_points_per_second(tmp_path, capsys):
    assert cli_code("sweep", *grid_args(), "--no-progress", "-o", tmp_path / "s.csv") == 0
    out = capsys.readouterr().out
    assert "points/s" in out and "1152 points computed" in out


@pytest.mark.parametrize("args, needle", [
    (["--engine", "spark"], "--engine: 'spark' is not allowed (allowed: local, dask)"),
    (["--scheduler", "tcp://x:8786"], "--scheduler: only with --engine dask"),
])
def test_bad_engine_options_are_one_line(tmp_path, capsys, args, needle):
    assert cli_code("sweep", "--seqlen", "512", *args, "-o", tmp_path / "s.csv") == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and needle in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "s.csv").exists() and not sw.parts_dir(tmp_path / "s.csv").exists()


def test_dask_local_cluster_gives_the_same_rows(tmp_path):
    pytest.importorskip("dask.distributed")
    want = sw.sweep_result(GRID, workers=1).rows.sort_values(KEY).reset_index(drop=True)
    res = sw.stream(GRID, tmp_path / "d.parquet", engine="dask", workers=2, progress=False)
    got = pd.read_parquet(res.path).sort_values(KEY).reset_index(drop=True)
    pd.testing.assert_frame_equal(got, want, check_dtype=False)


def test_chunks_end_where_a_shape_does(monkeypatch):
    """The grid walks batch and heads fastest; a chunk holds at least CHUNK_PROBLEMS problems
    and never splits a shape (the fields besides batch, heads, kv_heads) with the next, so each
    shape's template is planned once."""
    monkeypatch.setattr(sw, "CHUNK_PROBLEMS", 7)  # 4 (batch, heads) pairs a shape: 7 splits one
    seen, sizes = set(), []
    for chunk in sw._chunks(sw.points(GRID).problems(), sw.CHUNK_PROBLEMS):
        shapes = {p.shape_key() for p in chunk}
        assert not shapes & seen
        seen |= shapes
        sizes.append(len(chunk))
    assert all(n >= 7 for n in sizes[:-1]) and set(sizes[:-1]) == {8} and len(sizes) > 3


def test_a_sweep_s_default_pool_takes_the_cores_it_may_run_on(monkeypatch):
    """Under taskset or a cgroup cpuset a process may run on fewer cores than the machine has:
    the default pool takes those, not os.cpu_count() (16 workers on 2 allowed cores thrash)."""
    from iosim.analysis import sweep

    monkeypatch.setattr(sweep.os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(sweep.os, "cpu_count", lambda: 16)
    assert sweep._workers(None, sweep.PARALLEL_POINTS) == 2
    assert sweep._workers(None, sweep.PARALLEL_POINTS - 1) == 1
    assert sweep._workers(3, sweep.PARALLEL_POINTS) == 3


def test_cli_keeps_numpy_to_one_blas_thread_unless_told(monkeypatch):
    """OpenBLAS's thread spins after numpy's import (a quarter of iosim predict's CPU on 2 cores):
    main() sets one thread before a command imports numpy, and leaves a user's setting alone."""
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "")  # recorded: the test leaves it as it was
    monkeypatch.delenv("OPENBLAS_NUM_THREADS")
    with pytest.raises(SystemExit):
        main(["--version"])
    assert os.environ["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    with pytest.raises(SystemExit):
        main(["--version"])
    assert os.environ["OPENBLAS_NUM_THREADS"] == "4"
