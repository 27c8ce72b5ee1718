"""Issue 14: tile knobs, the tuned tiles file, explain, tune and the side-by-side views."""

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from iosim.analysis.explain import explain
from iosim.analysis.sweep import sweep_result
from iosim.analysis.tune import pick, rank, spearman
from iosim.cli import TILES_ENV
from iosim.core.hardware import InputError, load
from iosim.core.problem import Problem
from iosim.gpu.compile import nvcc_available
from iosim.model.occupancy import ctas_per_sm, limiter, limits
from iosim.schedules import Tiles, knobs, plan

ROOT = Path(__file__).resolve().parents[1]
H100 = load("h100")
P = Problem(batch=2, heads=16, seqlen_q=4096, head_dim=128)


def iosim(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", "from iosim.cli import main; main()", *args],
                          capture_output=True, text=True, env=env)


# ----- knobs ---------------------------------------------------------------------------------

def test_knobs_reach_the_kernel_defines_and_the_shared_memory():
    k = plan("fa2", P, H100, Tiles(block_n=64, stages=3)).main
    assert (k.defines["BLOCK_N"], k.defines["STAGES"], k.block_n, k.stages) == (64, 3, 64, 3)
    # kernels/fa2.cu: (BLOCK_M + 2 * STAGES * BLOCK_N) * HEAD_DIM_PAD * 2 bytes
    assert k.smem_bytes == (128 + 2 * 3 * 64) * 128 * 2


@pytest.mark.parametrize("args,says", [
    (["--block-m", "64", "--warps", "8"], "--block-m a multiple of 16 x --warps (128)"),
    (["--warps", "32"], "registers a CTA"),
    (["--block-n", "40"], "--block-n 40: must be a multiple of 16"),
    (["--block-m", "0"], "--block-m 0: must be at least 1"),
    (["--stages", "8", "--block-n", "128"], "shared memory"),
])
def test_a_configuration_that_cannot_run_is_one_line_and_exit_2(args, says):
    r = iosim("predict", "--schedule", "fa2", *args)
    assert r.returncode == 2, r.stdout
    assert says in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_fa1_has_no_pipeline_and_fa3_warps_follow_block_m():
    with pytest.raises(InputError, match="allowed: --stages 1"):
        plan("fa1", P, H100, Tiles(stages=2), check=True)
    with pytest.raises(InputError, match="allowed: --warps 8"):
        plan("fa3", P, H100, Tiles(warps=4), check=True)
    assert plan("fa3", P, H100, Tiles(block_m=192)).main.defines["NUM_WARPS"] == 12


def test_predict_takes_knobs_and_sweep_sweeps_them():
    r = iosim("predict", "--schedule", "fa2", "--block-n", "64", "--format", "json")
    assert json.loads(r.stdout)[0]["block_n"] == 64
    res = sweep_result({"schedule": ["fa2"], "block_n": "32,64,128", "warps": "4,8",
                              "block_m": [64]})
    df = res.rows
    # block_m 64 with 8 warps cannot run (16 x 8 = 128 rows): skipped, with the kernel's reason
    assert sorted(zip(df.block_n, df.warps)) == [(32, 4), (64, 4), (128, 4)]
    assert sum(res.skipped.values()) == 3
    assert any("multiple of 16 x --warps" in why for why in res.skipped)


# ----- tuned tiles file ----------------------------------------------------------------------

def test_the_tuned_file_feeds_every_plan_and_options_win(tmp_path, monkeypatch):
    path = tmp_path / "tiles.json"
    knobs.write_entries(path, [{"schedule": "fa2", "hw": "h100-sxm5-80gb", "direction": "fwd",
                                "head_dim": 128, "block_m": 64, "block_n": 64, "warps": 4,
                                "stages": 3}])
    tuned = knobs.read_tiles(path)
    for hw in (H100, load("h100-sxm5-80gb")):  # calibrated and datasheet profiles share it
        pl = plan("fa2", P, hw, tuned=tuned)
        assert (pl.block_m, pl.block_n, pl.main.stages) == (64, 64, 3)
        assert str(path) in pl.notes
    # d = 96 pads to 128-wide rows: same bucket; d = 64 does not
    assert plan("fa2", P.model_copy(update={"head_dim": 96}), H100, tuned=tuned).block_n == 64
    assert plan("fa2", P.model_copy(update={"head_dim": 64}), H100, tuned=tuned).block_n == 128
    assert plan("fa2", P, H100, Tiles(block_n=32), tuned=tuned).block_n == 32  # the option wins
    assert plan("fa2", P, load("h200"), tuned=tuned).block_n == 32  # another GPU: the schedule's own
    # a Plan never reads the environment: only the commands do (--tiles, else IOSIM_TILES)
    monkeypatch.setenv(TILES_ENV, str(path))
    assert plan("fa2", P, H100).block_n == 32
    env = {**__import__("os").environ, TILES_ENV: str(path)}
    clean = {k: v for k, v in env.items() if k != TILES_ENV}
    for args, e in ((("--tiles", str(path)), clean), ((), env)):  # the option, the variable
        r = iosim("predict", "--schedule", "fa2", "--format", "json", *args, env=e)
        assert json.loads(r.stdout)[0]["block_m"] == 64
        r = iosim("explain", "--schedule", "fa2", "--format", "json", *args, env=e)
        assert r.returncode == 0 and json.loads(r.stdout)["kernels"][0]["threads"] == 128
    monkeypatch.delenv(TILES_ENV)
    out = tmp_path / "sweep.csv"
    assert iosim("sweep", "--schedule", "fa2", "--tiles", str(path), "-o", str(out)).returncode == 0
    assert __import__("pandas").read_csv(out).block_m.tolist() == [64]
    # a new entry for the same key replaces the old one
    knobs.write_entries(path, [{"schedule": "fa2", "hw": "h100-sxm5-80gb", "direction": "fwd",
                                "head_dim": 128, "block_m": 128, "block_n": 64, "warps": 8,
                                "stages": 2}])
    assert len(json.loads(path.read_text())["tiles"]) == 1
    assert plan("fa2", P, H100, tuned=knobs.read_tiles(path)).main.threads == 256
    with pytest.raises(InputError, match="no such file"):
        knobs.read_tiles(tmp_path / "missing.json")
    r = iosim("predict", "--tiles", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and "--tiles" in r.stderr and "no such file" in r.stderr


# ----- occupancy and explain -----------------------------------------------------------------

def test_occupancy_names_the_resource_that_binds():
    d256 = plan("fa2", P.model_copy(update={"head_dim": 256}), H100).main  # 192 KiB of tiles
    assert (ctas_per_sm(d256, H100), limiter(d256, H100)) == (1, "smem")
    k = plan("fa2", P, H100).main  # 128 threads x 255 registers: two CTAs in 65536
    assert limits(k, H100)["registers"] == 2 and limiter(k, H100) == "registers"
    assert ctas_per_sm(k, H100) == min(limits(k, H100).values())


def test_explain_lists_every_kernel_and_its_limits():
    e = explain("naive", P, H100)
    assert [v["kernel"] for v in e["kernels"]] == [k.name for k in plan("naive", P, H100).kernels]
    assert e["time_ms"] == pytest.approx(sum(v["time_ms"] for v in e["kernels"]))
    for v in e["kernels"]:
        alone = v["alone_ms"]  # the busiest is the unit or level that needs the longest alone
        assert alone[v["busiest"]] == max(alone.values())
        assert v["waves"] == pytest.approx(v["ctas"] / (v["ctas_per_sm"] * H100.sm_count))
        assert 0 < v["tail_wave_share"] <= 1


def test_what_ifs_never_slow_it_and_relaxing_dram_moves_an_hbm_bound_schedule():
    e = explain("naive", Problem(batch=1, heads=16, seqlen_q=8192, head_dim=64), H100)
    assert e["bound"] == "hbm"
    ifs = {w["change"]: w["speedup"] for w in e["what_if"]}
    assert all(s >= 0.999 for s in ifs.values()), ifs
    # its softmax and long-loop GEMMs stream from DRAM; its one-chunk QK^T keeps part of its
    # time on the SM side beside its stores (docs/model.md, `async`): 2x DRAM about 1.27x
    assert ifs["2x DRAM rate"] > 1.2
    fa2 = explain("fa2", P, H100)
    assert any(w["change"].startswith("3 CTAs of fa2_fwd per SM") for w in fa2["what_if"])


def test_explain_puts_the_measured_row_beside_the_prediction():
    csv = ROOT / "experiments/fwd_grid/h100/measured.csv"
    df = pd.read_csv(csv)
    r = df[(df.schedule == "fa2") & (df.status == "ok") & (df.head_dim == 128)
           & (~df.causal.astype(bool))].iloc[0]
    p = Problem(batch=int(r.batch), heads=int(r.heads), seqlen_q=int(r.seqlen_q), head_dim=128)
    e = explain("fa2", p, H100, measured=[csv])
    assert e["measured"] and e["measured"][0]["time_ms"] == pytest.approx(r.time_ms)
    out = iosim("explain", "--batch", str(p.batch), "--heads", str(p.heads), "--seqlen",
                str(p.seqlen_q), "--measured", str(csv))
    assert out.returncode == 0 and "measured on NVIDIA H100" in out.stdout
    assert "limited by registers" in out.stdout and "what would move it" in out.stdout
    j = json.loads(iosim("explain", "--format", "json").stdout)
    assert j["kernels"][0]["occupancy_limit"] == "registers"
    bad = iosim("explain", "--measured", "nowhere.csv")
    assert bad.returncode == 2 and "no such file" in bad.stderr


# ----- tune ----------------------------------------------------------------------------------

def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1)


def test_tune_ranks_by_predicted_time_and_picks_the_best_scored():
    probs = [Problem(batch=4, heads=16, seqlen_q=n, head_dim=128) for n in (1024, 8192)]
    df = rank("fa2", probs, H100, Tiles(stages=2), compile=False)
    assert set(df.stages) == {2}  # a fixed knob holds
    for _, g in df.groupby("seqlen_q"):
        assert list(g.sort_values("time_pred_ms").model_rank) == list(range(1, len(g) + 1))
    best = pick(df)
    ratio = df.time_pred_ms / df.groupby("seqlen_q").time_pred_ms.transform("min")
    geo = ratio.groupby(df.config).apply(lambda r: float((r.map(float).prod()) ** (1 / len(r))))
    assert best.config.iloc[0] == geo.idxmin()
    with pytest.raises(InputError, match="no tile search"):
        rank("naive", probs, H100)


def test_tune_cli_writes_a_tiles_file_that_predict_reads(tmp_path):
    """Tune picks among three configurations (block_n; block_m held at 64, away from the untuned
    128, so that predict shows the pick only by reading the file). Three, not the whole space:
    tune compiles each candidate with nvcc where it is on PATH (72 fa2 builds took ~27 s)."""
    out = tmp_path / "t.json"
    r = iosim("tune", "--seqlen", "2048", "--head-dim", "64", "--block-m", "64", "--warps", "4",
              "--stages", "2", "--write", str(out))
    assert r.returncode == 0, r.stderr
    assert "3 configurations x 1 problems" in r.stdout, r.stdout
    assert ("registers from nvcc" in r.stdout) == nvcc_available(), r.stdout
    entry = json.loads(out.read_text())["tiles"][0]
    tiles = ("block_m", "block_n", "warps", "stages")
    picked = tuple(entry[k] for k in tiles)

    def predicted(env=None) -> tuple:
        row = json.loads(iosim("predict", "--schedule", "fa2", "--head-dim", "64", "--format", "json",
                               env=env).stdout)[0]
        return tuple(row[k] for k in tiles)

    assert predicted() != picked
    assert predicted({**__import__("os").environ, TILES_ENV: str(out)}) == picked


# ----- side by side --------------------------------------------------------------------------

def test_predict_puts_hardware_side_by_side_and_compares_two_profiles():
    r = iosim("predict", "--hw", "h100,h200,a100", "--seqlen", "8192")
    assert r.returncode == 0, r.stderr
    head, fa3 = r.stdout.splitlines()[1], [ln for ln in r.stdout.splitlines() if "fa3" in ln][0]
    assert "h100" in head and "h200" in head and "a100" in head
    assert fa3.rstrip().endswith("-")  # no wgmma on the A100
    c = iosim("predict", "--hw", "h100,h200", "--compare", "--seqlen", "8192")
    assert "hbm_bandwidth_bytes_per_s" in c.stdout and "x1.433" in c.stdout
    assert iosim("predict", "--hw", "h100", "--compare").returncode == 2


def test_compare_two_sweeps_says_what_changed(tmp_path):
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    for path, hw in ((a, "h100"), (b, "h200")):
        assert iosim("sweep", "--seqlen", "1024,8192", "--schedule", "naive,fa2", "--hw", hw,
                     "-o", str(path)).returncode == 0
    c = iosim("compare", str(a), str(b), "--format", "csv")
    df = pd.read_csv(__import__("io").StringIO(c.stdout))
    assert len(df) == 4
    naive = df[df.schedule == "naive"]
    assert (naive.time_pred_ms_ratio < 1).all()  # more HBM bandwidth: the HBM-bound one is faster
    assert "naive: predicted ms x" in iosim("compare", str(a), str(b)).stdout


def test_committed_tune_verification_timed_only_what_passed_and_wrote_the_measured_pick():
    from iosim.analysis.tune import entries

    df = pd.read_csv(ROOT / "experiments/tune_fa2/h100/tune_fa2.csv")
    assert df.time_ms.notna().eq(df.status == "ok").all()  # timed if and only if it passed
    assert (df[df.status == "ok"].max_rel_err <= df[df.status == "ok"].err_bound).all()
    assert df.groupby(["head_dim", "seqlen_q"]).default.sum().eq(1).all()  # the own tiles tried
    written = json.loads((ROOT / "experiments/tune_fa2/h100/tiles_h100.json").read_text())["tiles"]
    picks = entries(pick(df[df.status == "ok"], "time_ms"), "fa2", H100, "fwd", "")
    assert [{k: e[k] for k in ("head_dim", *knobs.KNOBS)} for e in written] == \
        [{k: e[k] for k in ("head_dim", *knobs.KNOBS)} for e in picks]
