"""`iosim bench --schedule decode`: the grid, its peers and columns, resume, and the bad
combinations, with the GPU side replaced by a stand-in that measures nothing (the GPU tests and
experiments/decode run the real thing): what reaches the rows is what the bench logic decides."""

from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import pytest
from test_cli_hardening import bad, cli

import iosim.gpu.bench as gbench
from iosim.analysis.bench import key, parse_peers
from iosim.core.hardware import InputError, load
from iosim.core.problem import Problem
from iosim.schedules import Tiles, plan

BW = 3.0e12  # the stand-in's copy bandwidth, bytes a second
OURS_MS, PEER_MS = 0.1, 0.2


class FakeTorch:
    class cuda:
        @staticmethod
        def empty_cache() -> None:
            pass


@pytest.fixture
def gpu(monkeypatch):
    """A stand-in GPU: our kernels take OURS_MS, a checked peer PEER_MS; the forward points
    measured are recorded."""
    measured = []
    monkeypatch.setattr(gbench, "require_gpu", lambda command="iosim bench": FakeTorch)
    monkeypatch.setattr(gbench, "gpu_info", lambda torch: {"gpu_name": "NVIDIA H100 80GB HBM3"})
    monkeypatch.setattr(gbench, "Timer", lambda torch, l2, lead_cycles=0, flush="write":
                        SimpleNamespace(queued=None, flush=flush))
    monkeypatch.setattr(gbench, "copy_bandwidth", lambda torch, timer: BW)

    def forward(torch, timer, pl, seed, bw, need, ncu, args):
        measured.append(pl)
        return {"status": "ok", "time_ms": OURS_MS, "time_queued_ms": OURS_MS / 2, "hbm_floor_ms": 123.0}

    monkeypatch.setattr(gbench, "forward_point", forward)
    # a peer's inputs and reference: here its measured row (checked_inputs returns a row when
    # the inputs do not fit, and the peer returns it as it is)
    monkeypatch.setattr(gbench, "checked_inputs",
                        lambda torch, name, p, seed, tiles=None: {"status": "ok", "time_ms": PEER_MS})
    return measured


GRID = ["bench", "--schedule", "decode", "--seqlen", "1", "--seqlen-k", "4096", "--batch", "2",
        "--heads", "32", "--kv-heads", "8", "--head-dim", "128", "--causal", "false",
        "--page-size", "none,64", "--hw", "h100", "--no-progress"]


def test_decode_grid_rows_peers_and_the_hbm_floor(gpu, tmp_path):
    out = tmp_path / "b.csv"
    code, _, err = cli(*GRID, "--peers", "torch,flex", "--flush", "read", "-o", out)
    assert code == 0, err
    df = pd.read_csv(out)
    assert (df.flush == "read").all()  # every row says how the L2 was flushed
    bad(*GRID, "--flush", "wipe", "-o", tmp_path / "c.csv", needle="allowed: write, read")
    sdpa = list(gbench.PEERS)
    assert sorted(df.schedule) == sorted(["decode", *sdpa, gbench.FLEX] * 2)
    kv = 2 * 2 * 8 * 4096 * 128 * 2  # K and V, batch 2, 8 KV heads, bf16
    assert (df.kv_bytes == kv).all()
    assert df.hbm_floor_ms.tolist() == pytest.approx([kv / BW * 1e3] * len(df))  # ours' too
    timed = df[df.time_ms.notna()]
    assert timed.floor_ratio.tolist() == pytest.approx((timed.hbm_floor_ms / timed.time_ms).tolist())
    ours = df[df.schedule == "decode"]  # also timed with the launches queued ahead
    assert ours.floor_ratio_queued.tolist() == pytest.approx((2 * ours.floor_ratio).tolist())
    # torch's SDPA takes no paged cache: said, not run; FlexAttention runs both
    paged = df[df.page_size == 64]
    assert (paged[paged.schedule.isin(sdpa)].status == "unsupported: torch SDPA takes no paged K/V cache").all()
    assert paged[paged.schedule.isin(sdpa)].time_ms.isna().all()
    assert (df[df.schedule == gbench.FLEX].status == "ok").all()
    # ours: the Plan's split count and the model's prediction beside the measurement
    hw = load("h100")
    for _, r in df[df.schedule == "decode"].iterrows():
        p = Problem(batch=2, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=4096,
                    page_size=None if pd.isna(r.page_size) else int(r.page_size))
        pl = plan("decode", p, hw)
        assert r.splits == pl.main.defines["NUM_SPLITS"] and pd.isna(r.kv_splits)
        assert r.time_pred_ms > 0 and r.notes == pl.notes
        # a paged row says which gather ran (today's: the table read a tile ahead)
        assert (r.page_ahead == 1) if p.page_size else pd.isna(r.page_ahead)
    assert len(gpu) == 2


def test_resume_measures_only_new_points_and_forced_splits_are_points(gpu, tmp_path):
    out = tmp_path / "b.csv"
    assert cli(*GRID, "--peers", "torch", "-o", out)[0] == 0
    bad(*GRID, "--peers", "torch", "-o", out, needle="--resume")  # never overwritten
    gpu.clear()
    code, _, err = cli(*GRID, "--peers", "torch,flex", "--resume", "-o", out)
    assert code == 0 and not gpu, err  # only the FlexAttention rows were new
    grid = [a for a in GRID if a not in ("--page-size", "none,64")]
    code, _, err = cli(*grid, "--kv-splits", "4,8", "--resume", "-o", out)
    assert code == 0, err
    assert [pl.main.defines["NUM_SPLITS"] for pl in gpu] == [4, 8]
    df = pd.read_csv(out)
    forced = df[df.kv_splits.notna()]
    assert forced.kv_splits.tolist() == [4, 8] and (forced.splits == forced.kv_splits).all()
    assert len({key(r) for r in df.to_dict("records")}) == len(df)  # every row its own point


def test_forced_splits_plan_and_refusal():
    hw = load("h100")
    p = Problem(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=4096)  # 64 tiles of 64
    one = plan("decode", p, hw, Tiles(kv_splits=1), check=True)
    assert [k.name for k in one.kernels] == ["decode_fwd"]  # O written by the decode kernel
    eight = plan("decode", p, hw, Tiles(kv_splits=8), check=True)
    assert [k.name for k in eight.kernels] == ["decode_fwd"]  # the combine fused (last CTA)
    assert {"Opart", "LSEpart", "Counter", "O", "LSE"} <= set(eight.main.traffic.writes)
    assert eight.main.grid[0] == 8 and eight.main.trips.tolist() == [8] * 8  # 8 tiles a split
    with pytest.raises(InputError, match=r"--kv-splits 28 .* leaves a split empty"):
        plan("decode", p, hw, Tiles(kv_splits=28), check=True)  # 3 tiles a split: 22 splits


def test_peers_grammar():
    assert parse_peers("none") == [] and parse_peers("Torch, FLEX") == ["torch", "flex"]
    for text in ("", "torch,torch", "flox", "none,torch"):
        with pytest.raises(InputError, match="allowed: none, or a comma list of torch, flex"):
            parse_peers(text)


@pytest.mark.parametrize("args,needle", [
    (["--schedule", "fa2", "--page-size", "64"], "--page-size: a paged K/V cache is decode's"),
    (["--schedule", "decode", "--page-size", "none,x"], "--page-size"),
    (["--schedule", "fa2", "--kv-splits", "4"], "--kv-splits forces decode's split count"),
    (["--schedule", "decode", "--peers", "torch,flox"], "--peers"),
    (["--schedule", "decode", "--peers", "flex", "--direction", "bwd"], "forward only"),
    (["--schedule", "decode", "--seqlen", "1", "--causal", "false", "--window", "64"],
     "needs the causal mask"),
])
def test_bad_combinations_are_one_line(tmp_path, args, needle):
    bad("bench", "-o", tmp_path / "b.csv", *args, needle=needle)


@pytest.mark.parametrize("args,needle", [
    (["--seqlen", "64"], "decode: seqlen 64 query rows"),
    (["--seqlen", "1", "--seqlen-k", "4096", "--kv-splits", "28"], "--kv-splits 28"),
])
def test_bad_decode_points_are_refused_before_measuring(gpu, tmp_path, args, needle):
    bad("bench", "-o", tmp_path / "b.csv", "--schedule", "decode", "--head-dim", "128", *args,
        needle=needle)
    assert not gpu and not (tmp_path / "b.csv").exists()


def _paged(b: int, nk: int, ps: int = 16) -> Problem:
    return Problem(batch=b, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=nk, head_dim=128,
                   page_size=ps)


@pytest.mark.parametrize("ps", [16, 64, 256])
def test_the_earlier_gather_waits_two_round_trips_a_trip(ps):
    """decode_paged_fwd with PAGE_AHEAD=0 (each row's table entry read as its load issues)
    waits for two table reads a trip (its spec's sync_loads): on an H200 (the H100's fitted
    parameters) at one CTA an SM (batch 1 and 8: 128 CTAs on 132 SMs) every trip takes at
    least two load round trips, more than its bandwidth share, so the step is slower than the
    contiguous cache's, whatever the page size; at batch 32 (two CTAs an SM) the share exceeds
    them and it is not. Today's gather (the table read a tile ahead) waits for nothing: the
    contiguous cache's time plus its table bytes."""
    from iosim.analysis.predict import row
    from iosim.kernels import SPECS

    hw = load("h200-sxm-141gb.calibrated")
    lat = hw.pipeline.load_latency_cycles / hw.clock_hz
    for b, nk, slower in ((1, 131072, True), (8, 32768, True), (32, 32768, False)):
        flat = row(plan("decode", _paged(b, nk).model_copy(update={"page_size": None}), hw), hw)
        old_pl = plan("decode", _paged(b, nk, ps), hw, Tiles(page_ahead=False))
        new_pl = plan("decode", _paged(b, nk, ps), hw)
        assert SPECS[old_pl.main.name].sync_loads(old_pl.main.defines) == 2
        assert SPECS[new_pl.main.name].sync_loads(new_pl.main.defines) == 0
        old, new = row(old_pl, hw)["time_pred_ms"], row(new_pl, hw)["time_pred_ms"]
        trips = old_pl.main.trips.max()  # a CTA's trips (every split alike here)
        assert new == pytest.approx(flat["time_pred_ms"], rel=0.01)
        if slower:
            assert old >= 1e3 * trips * 2 * lat and old > 1.15 * new
        else:
            assert old == pytest.approx(new, rel=0.01)


def test_validate_replays_the_gather_a_row_ran(tmp_path):
    """A paged decode row without `page_ahead` was measured before the kernel read the table
    a tile ahead: validate predicts the earlier gather for it (measured_page_ahead); a row that
    says page_ahead 1 is predicted as today's kernel; a contiguous row is neither."""
    from iosim.analysis.validate import repredict
    from iosim.core.rows import measured_page_ahead

    hw = load("h200-sxm-141gb.calibrated")
    p = _paged(8, 32768)
    base = {"hw": hw.name, "schedule": "decode", "direction": "fwd", "batch": 8, "heads": 32,
            "kv_heads": 8, "seqlen_q": 1, "seqlen_k": 32768, "head_dim": 128, "dtype": "bf16",
            "causal": False, "time_ms": 0.4, "tflops": 1.0, "status": "ok"}
    rows_ = pd.DataFrame([base | {"page_size": 16}, base | {"page_size": 16, "page_ahead": 1.0},
                          base | {"page_size": None, "page_ahead": None}])
    assert [measured_page_ahead(r) for r in rows_.itertuples(index=False)] == [False, True, None]
    got = repredict(rows_, hw)
    old, new = (row_time(plan("decode", p, hw, Tiles(page_ahead=a)), hw) for a in (False, True))
    assert sorted(got.time_pred_ms.round(9))[1:] == sorted([round(old, 9), round(new, 9)])
    assert old > 1.15 * new


def row_time(pl, hw) -> float:
    from iosim.analysis.predict import row

    return row(pl, hw)["time_pred_ms"]


def test_a_bench_file_names_each_column_once():
    """The fp8 quantisation columns are both fp8's and the point's keys: a bench file lists them
    once (files written before say `fp8_scaling.1` when read back)."""
    from iosim.analysis.bench import KEY_EXTRA, file_columns

    cols = file_columns(["hw", "schedule", "fp8_scaling", "time_pred_ms"], ["seed", "time_queued_ms"])
    assert len(cols) == len(set(cols)) and set(KEY_EXTRA) <= set(cols)
    assert cols[:4] == ["hw", "schedule", "fp8_scaling", "time_pred_ms"]


def test_settle_idles_the_gpu_before_each_point_and_says_so(gpu, tmp_path, monkeypatch):
    """--settle: the GPU idles that long before every problem's rows (synchronised first, so
    the idle starts when the problem before has finished; not between a problem's own rows),
    and each row records it."""
    import iosim.analysis.bench as abench

    events = []
    monkeypatch.setattr(FakeTorch.cuda, "synchronize", lambda: events.append("sync"), raising=False)
    monkeypatch.setattr(abench.time, "sleep", lambda s: events.append(s))
    out = tmp_path / "s.csv"
    code, _, err = cli(*GRID, "--settle", "1.5", "--peers", "torch", "-o", out)
    assert code == 0, err
    df = pd.read_csv(out)
    assert (df.settle_s == 1.5).all() and len(gpu) == 2 and len(df) == 2 * (1 + len(gbench.PEERS))
    assert events == ["sync", 1.5] * 2  # two problems (contiguous and paged), one idle each
    events.clear()
    code, _, err = cli(*GRID, "-o", tmp_path / "t.csv")
    assert code == 0 and events == [] and (pd.read_csv(tmp_path / "t.csv").settle_s == 0).all()
    bad(*GRID, "--settle", "-1", "-o", tmp_path / "u.csv", needle="allowed: 0 to 600 seconds")
