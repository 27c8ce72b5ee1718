"""The model held against the committed real measurements (experiments/*/<gpu>/), re-predicted
with today's model and profiles: a change that moves the predictions away from what the H100
and H200 measured fails here."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from iosim.analysis.validate import validate
from iosim.core import hardware
from iosim.core.problem import Problem

DATA = Path(__file__).resolve().parents[1] / "experiments"
GPUS = ["h100", "h200"]


@pytest.fixture(scope="module", params=GPUS)
def tables(request):
    g = request.param
    return validate([DATA / "fwd_grid" / g / "measured.csv", DATA / "fwd_ncu" / g / "measured_ncu.csv"])


def test_dram_estimate_within_12_percent_of_nsight_compute(tables):
    _, dram = tables
    assert set(dram.schedule) == {"naive", "fa1", "fa2"}
    assert (dram.n >= 8).all()
    for c in ["read_err_min_pct", "read_err_max_pct", "write_err_min_pct", "write_err_max_pct"]:
        assert dram[c].abs().max() <= 12, dram.to_string()


def test_cycle_model_beats_the_roofline(tables):
    """What the cycle model adds: on every schedule its error is well under the roofline's."""
    times, _ = tables
    assert (times.mape_pct < times.roof_mape_pct / 2).all(), times.to_string()


def test_validate_command_prints_both_tables():
    out = subprocess.run([sys.executable, "-c", "from iosim.cli import main; main()", "validate",
                          str(DATA / "fwd_grid" / "h100" / "measured.csv"),
                          str(DATA / "fwd_ncu" / "h100" / "measured_ncu.csv")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "mape_pct" in out.stdout and "read_err_max_pct" in out.stdout


def test_readme_generated_blocks_are_current():
    """Every generated block (README.md, docs/results.md) equals what its command makes from
    the committed files (the commands run in this process: tools/update_readme.py)."""
    spec = importlib.util.spec_from_file_location("update_readme", DATA.parent / "tools" / "update_readme.py")
    update = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(update)
    assert not update.stale(), "stale generated blocks: run python tools/update_readme.py"


def test_backward_and_fa3_held_to_their_measurements():
    """The backward model against the real backward kernels, and fa3's forward against the
    real fa3 kernel (experiments/bwd_grid/h100/measured_bwd.csv,
    experiments/fa3/h100/measured_fa3.csv; neither was fitted):
    both are predicted about as well as the fitted forwards. FA2's backward holds only with
    its shared-memory reads counted per warp (the kernel's warp grids) and its barrier-phased
    trips ("lockstep"), fa3 only with its softmax and wgmma overlapping imperfectly and its
    pipeline filling once per CTA (each was ~25% fast without). FA1's backward holds only with
    its synchronous loads (O_i and, per dQ pass, dQacc_i consumed in the step that loads them:
    iosim.kernels `sync_loads`) waiting their round trips: 18% fast without."""
    cal = hardware.load("h100")
    times, _ = validate([DATA / "bwd_grid" / "h100" / "measured_bwd.csv", DATA / "fa3" / "h100" / "measured_fa3.csv"],
                        cal)
    t = times.set_index(["schedule", "direction"]).mape_pct
    assert t[("naive", "bwd")] <= 8, times.to_string()
    assert t[("fa2", "bwd")] <= 8, times.to_string()
    assert t[("fa1", "bwd")] <= 10, times.to_string()
    assert t[("fa3", "fwd")] <= 8, times.to_string()
    assert t[("fa2", "fwd")] <= 10, times.to_string()


def test_backward_and_fa3_hold_on_a_gpu_never_fitted():
    """The H100 fit on the H200's datasheet (hwprofiles/h200-sxm-141gb.calibrated.toml, not
    refitted) against the H200's backward and fa3 measurements (experiments/bwd_grid/h200/, experiments/fa3/h200/)."""
    times, _ = validate([DATA / "bwd_grid" / "h200" / "measured_bwd.csv", DATA / "fa3" / "h200" / "measured_fa3.csv"],
                        hardware.load("h200"))
    t = times.set_index(["schedule", "direction"]).mape_pct
    # naive bwd at 9: 4.3% before issue 23's dispatch and calibration, 8.0% after (its GEMMs
    # at d = 128 and 256 now predicted 5-11% fast on the H200)
    assert t[("naive", "bwd")] <= 9 and t[("fa2", "bwd")] <= 8, times.to_string()
    assert t[("fa3", "fwd")] <= 9.5 and t[("fa2", "fwd")] <= 10, times.to_string()
    assert t[("fa1", "bwd")] <= 10, times.to_string()


def test_the_restructured_kernels_passed_on_the_gpu():
    """experiments/structure_check (the H100, after the layer/KernelSpec restructure): the GPU
    tests passed with none failed, and every kernel row of its bench passed its NaN-poisoned
    check against the float32 reference, forward and backward, and was timed."""
    run = DATA / "structure_check" / "h100"
    log = (run / "gpu_tests.log").read_text()
    assert " passed" in log and "failed" not in log and "error" not in log.lower()
    for name, schedules in (("fwd.csv", {"naive", "fa1", "fa2", "fa3"}), ("bwd.csv", {"naive", "fa1", "fa2"})):
        df = pd.read_csv(run / name)
        ours = df[df.schedule.isin(schedules)]
        assert set(ours.schedule) == schedules
        assert (ours.status == "ok").all() and (ours.time_ms > 0).all(), ours.status.unique()
        assert (ours.max_rel_err <= ours.err_bound).all()


def test_fair_fa1_is_within_the_fa2_papers_range_of_fa2():
    """experiments/fa1_fair (H100, fa1 with query-row splits beside fa2 in one run): every fa1
    and fa2 row passed its check, and fa2/fa1 forward is 1.3-3.5x at d = 64, 128, N >= 1024
    (the FA2 paper measured 1.7-3.0x on A100; one CTA per head gave up to 14x here)."""
    df = pd.read_csv(DATA / "fa1_fair" / "h100" / "measured_fa1.csv")
    ours = df[df.schedule.isin(["fa1", "fa2"])]
    assert (ours.status == "ok").all() and (ours.max_rel_err <= ours.err_bound).all()
    t = ours.pivot_table(index=["head_dim", "causal", "seqlen_q"], columns="schedule", values="tflops")
    ratio = t.fa2 / t.fa1
    assert len(ratio) == 20 and ratio.between(1.3, 3.5).all(), ratio.round(2).to_dict()


def test_fair_fa1_backward_is_within_reach_of_fa2_and_predicted():
    """experiments/fa1_fair/h200 (fa1's backward with key-block splits beside fa2 in one run,
    STEP=bwd): the GPU tests passed, every fa1 and fa2 row passed its check, fa2/fa1 backward is
    1.3-3.5x at d = 64, 128, N >= 1024 (one CTA per head gave up to 18x on the same GPU,
    experiments/bwd_grid/h200), the split rows ran several CTAs a head at long N, and the model,
    re-predicting each row with the split it ran, stays within 15% MAPE."""
    run = DATA / "fa1_fair" / "h200"
    log = (run / "gpu_tests_bwd.log").read_text()
    assert " passed" in log and "failed" not in log and "error" not in log.lower()
    df = pd.read_csv(run / "measured_fa1_bwd.csv")
    ours = df[df.schedule.isin(["fa1", "fa2"])]
    assert (ours.direction == "bwd").all() and (ours.status == "ok").all()
    assert (ours.max_rel_err <= ours.err_bound).all()
    t = ours.pivot_table(index=["head_dim", "causal", "seqlen_q"], columns="schedule", values="time_ms")
    ratio = t.fa1 / t.fa2
    assert len(ratio) == 20 and ratio.between(1.3, 3.5).all(), ratio.round(2).to_dict()
    fa1 = ours[ours.schedule == "fa1"]
    assert (fa1[fa1.seqlen_q == 16384].split_cols < 16384).all()
    times, _ = validate([run / "measured_fa1_bwd.csv"])
    mape = times.set_index(["schedule", "direction"]).mape_pct
    assert mape[("fa1", "bwd")] <= 15, times.to_string()


def test_fa3_backward_held_to_its_kernel_and_to_the_papers():
    """FA3's backward (issues 21, 22): each consumer step waits, with nothing else to issue,
    for its two GEMM turns (`pipeline.wgmma_wait_cycles` each, iosim.kernels
    `_fa3_bwd_turn_waits`) and its own dQ reduction (and, deterministic, its turn's flag), one
    L2 round trip each (`pipeline.l2_latency_cycles`, `_fa3_bwd_waits`). Without those waits the model was 35% fast on
    kernels/fa3_bwd.cu (H100 and H200 grids, d = 64, 128), 49% on its deterministic mode and
    16-25% on the FA3 paper's Fig. 6; the paper's kernel (its Algorithm 3: a dQ-writer warp,
    `ran_tiles` "bwd dq-writer") waits for its GEMM turns only. Held on shapes no grid measured
    too (issue 21's ragged N, GQA, Nq != Nk, other batch/head splits)."""
    for g in GPUS:
        runs = [DATA / "fa3_bwd" / g / ("recheck" if g == "h100" else "") / "measured_bwd.csv"]
        if g == "h200":
            runs.append(DATA / "fa3_bwd" / g / "measured_det.csv")
        for run in runs:
            times, _ = validate([run], hardware.load(g))
            t = times.set_index(["schedule", "direction"]).mape_pct
            assert t[("fa3", "bwd")] <= 10, times.to_string()
    papers, _ = validate([DATA / "papers" / "published.csv"], by=["figure"])
    fig6 = papers[(papers.schedule == "fa3") & (papers.direction == "bwd")]
    assert len(fig6) == 2 and (fig6.mape_pct <= 15).all(), fig6.to_string()
    # the kernel with its dQ warp (d = 128; rows record their dq_bulk): its consumers wait for
    # their GEMM turns only, the paper's count
    for g in GPUS:  # the H200 through the H100's fitted parameters
        times, _ = validate([DATA / f"fa3_bwd/{g}/dqwarp/measured_bwd.csv"], hardware.load(g), by=["head_dim"])
        t = times.set_index(["schedule", "head_dim"]).mape_pct
        assert t[("fa3", 128)] <= 5 and t[("fa3", 64)] <= 10, times.to_string()
    # shapes no grid measured, twice (experiments/fa3_bwd/new_shapes.sh: ragged N, GQA in fp16,
    # Nq != Nk bottom-right, one CTA row a head, ragged and fp16 d = 256)
    for run in ("new_shapes", "new_shapes/run2"):
        times, _ = validate([DATA / f"fa3_bwd/h100/{run}/measured_new.csv"], hardware.load("h100"))
        assert times.n.sum() == 16 and (times.mape_pct <= 10).all(), times.to_string()


def ncu_metric(path: Path, name: str) -> float:
    """A metric's value in a committed Nsight Compute text report (its last column)."""
    line = next(x for x in path.read_text().splitlines() if x.split()[:1] == [name])
    return float(line.split()[-1].replace(",", ""))


def test_fa3_backward_dq_reduction_weighs_in_the_l2_as_nsight_compute_measured():
    """fa3_bwd.cu at d = 256, where the L2 binds (iosim.kernels FA3_RED_L2, FA3_ATOMIC_L2, from
    the committed ncu reports of the same kernel with the consumers' vector atomics and with the
    dQ warp's tensor reduce-adds): a reduction moves 1.5 L2 sectors a sector of dQ with either,
    and the atomics keep the L2 busy 1.53 times as long. With those weights the model holds
    d = 256 on both reductions, H100 and H200 (the H100's fitted profile); without them it was
    22% fast on the atomics (the L2 share of a trip too small) and 11% slow on the dQ warp."""
    from dataclasses import replace

    from iosim.kernels import FA3_ATOMIC_L2, FA3_RED_L2, SPECS
    from iosim.schedules import Tiles, plan

    root = DATA / "fa3_bwd/h100/dq256"
    atomics, warp = root / "ncu_d256_dq0.txt", root / "run2/ncu_d256_dq2.txt"
    p = Problem(batch=2, heads=8, seqlen_q=8192, head_dim=256, direction="bwd")  # the reports'
    t = plan("fa3", p, hardware.load("h100"), Tiles(dq_bulk=2)).main.traffic
    dq = t.reads["dQacc"] + t.writes["dQacc"]
    loads = sum(t.reads.values()) + sum(t.writes.values()) - dq
    for f in (atomics, warp):
        assert ncu_metric(f, "lts__t_sectors_op_red.sum") * 32 / dq == pytest.approx(FA3_RED_L2, abs=0.01)
    busy = [ncu_metric(f, "lts__throughput.avg.pct_of_peak_sustained_elapsed")
            * ncu_metric(f, "gpu__time_duration.sum") for f in (atomics, warp)]
    for f in (atomics, warp):  # both bound by the L2
        assert ncu_metric(f, "lts__throughput.avg.pct_of_peak_sustained_elapsed") > 85
    weight = (busy[0] / busy[1] * (loads + FA3_RED_L2 * dq) - loads) / dq
    assert weight == pytest.approx(FA3_ATOMIC_L2, abs=0.01)

    # d = 256's rows by reduction: the atomics (d256/, before the dQ warp) and the dQ warp
    runs = {"h100": {0: DATA / "fa3_bwd/h100/d256/measured_bwd.csv", 2: root / "run2/measured_bwd.csv"},
            "h200": {0: DATA / "fa3_bwd/h200/d256/measured_bwd.csv"}}

    def mape(g: str) -> dict[int, float]:
        out = {}
        for dq_bulk, run in runs[g].items():
            times, _ = validate([run], hardware.load(g), by=["head_dim"])
            out[dq_bulk] = float(times.set_index("head_dim").mape_pct[256])
        return out

    for g in GPUS:
        m = mape(g)
        assert m[0] <= 3 and m.get(2, 0) <= 7, m
    plain = replace(SPECS["fa3_bwd"], l2_weights=None)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(SPECS, "fa3_bwd", plain)
        m = mape("h100")
    assert m[0] > 15 and m[2] > 9, m


def test_the_model_is_held_to_the_queued_time_where_a_row_has_one(tmp_path):
    """validate compares with `time_queued_ms` (launches queued ahead) wherever a row was timed
    so, else `time_ms`: the queued runs of the small problems (experiments/small_new flush10),
    with their queued column dropped, give the issued-time error, and with `time_ms` replaced by
    the queued time the same error as the file as it is. Queued, two runs agree within 5% at
    every point; issued, some differ 1.5x (the host's launch cost is not the kernels')."""
    from iosim.core.rows import gpu_ms

    root = Path(__file__).resolve().parents[1] / "experiments/small_new/h100/flush10"
    runs = [pd.read_csv(root / f"measured_small_rq{i}.csv") for i in (1, 2)]
    df = runs[0]
    assert gpu_ms(df).tolist() == df["time_queued_ms"].tolist()
    assert gpu_ms(df.drop(columns="time_queued_ms")).tolist() == df["time_ms"].tolist()
    blank = df.assign(time_queued_ms=float("nan"))
    assert gpu_ms(blank).tolist() == df["time_ms"].tolist()

    def mape(frame: pd.DataFrame) -> float:
        path = tmp_path / f"m{len(list(tmp_path.iterdir()))}.csv"
        frame.to_csv(path, index=False)
        t = validate([path])[0]
        return float((t.mape_pct * t.n).sum() / t.n.sum())

    queued = mape(df)
    assert queued == pytest.approx(mape(df.assign(time_ms=df["time_queued_ms"]).drop(columns="time_queued_ms")))
    assert mape(df.drop(columns="time_queued_ms")) > queued + 2
    key = ["schedule", "direction", "batch", "heads", "seqlen_q", "head_dim", "causal"]
    both = runs[0].merge(runs[1], on=key)
    q = both.time_queued_ms_x / both.time_queued_ms_y
    issued = both.time_ms_x / both.time_ms_y
    assert q.between(0.95, 1.05).all() and ((issued > 1.5) | (issued < 1 / 1.5)).any()
