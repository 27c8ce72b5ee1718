"""fp8_e4m3 as a product path (issue 24): the Problem's quantisation fields, fa3's fp8 Plan (the
quantisation kernels it counts, the attention kernel's e4m3 reads and bf16 O), the Hadamard
matrix against the kernel's signs, and the rows' quantisation through validate's join."""

import io
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pydantic import ValidationError

from iosim.analysis.predict import row
from iosim.analysis.validate import validate
from iosim.core.hardware import InputError, load
from iosim.core.problem import Problem
from iosim.core.rows import quant_fields
from iosim.gpu.compile import kernel_path
from iosim.kernels import HADAMARD_SIGNS, hadamard_matrix, supported
from iosim.model import executor, reference
from iosim.model.backing import KERNEL, backing
from iosim.schedules import Tiles, plan

H100 = load("h100-sxm5-80gb")


def fp8(**kw) -> Problem:
    base = dict(batch=2, heads=4, kv_heads=2, seqlen_q=1000, seqlen_k=1000, head_dim=128,
                dtype="fp8_e4m3")
    return Problem(**(base | kw))


@pytest.mark.parametrize("kw", [dict(dtype="bf16", hadamard=True),
                                dict(dtype="bf16", fp8_scaling="tensor"),
                                dict(head_dim=96, hadamard=True),
                                dict(fp8_scaling="given", hadamard=True)])
def test_quantisation_fields_refused_where_meaningless(kw):
    with pytest.raises(ValidationError):
        fp8(**kw)


def test_plan_kernels_per_scaling():
    names = {s: [k.name for k in plan("fa3", fp8(fp8_scaling=s), H100).kernels]
             for s in ("block", "tensor", "given")}
    assert names == {"block": ["fp8_quant", "fa3_fwd_fp8"],
                     "tensor": ["fp8_amax", "fp8_quant", "fa3_fwd_fp8"],
                     "given": ["fa3_fwd_fp8"]}


def test_quantisation_kernel_counts_bf16_in_e4m3_out():
    p = fp8(seqlen_k=1001)  # ragged: Vt8 rows padded to 16 keys
    q = plan("fa3", p, H100).kernels[0]
    e_q, e_kv = p.batch * p.heads * 1000 * 128, p.batch * p.kv_heads * 1001 * 128
    assert dict(q.traffic.reads) == {"Q": 2 * e_q, "K": 2 * e_kv, "V": 2 * e_kv}
    assert q.traffic.writes["Q8"] == e_q and q.traffic.writes["K8"] == e_kv
    assert q.traffic.writes["Vt8"] == p.batch * p.kv_heads * 128 * 1008
    # one factor per tile of rows per head, at the attention kernel's tiles
    a = plan("fa3", p, H100).main
    assert q.traffic.writes["Qs"] == 4 * p.batch * p.heads * -(-1000 // a.block_m)
    assert q.traffic.writes["Ks"] == 4 * p.batch * p.kv_heads * -(-1001 // a.block_n)
    # the Hadamard transform adds d·(log2 d + 2) ALU operations per row of Q and K, no bytes
    h = plan("fa3", fp8(seqlen_k=1001, hadamard=True), H100).kernels[0]
    rows = p.batch * (p.heads * 1000 + p.kv_heads * 1001)
    assert h.work.alu_flops - q.work.alu_flops == rows * 128 * (7 + 2)
    assert h.traffic == q.traffic


def test_attention_kernel_reads_e4m3_writes_bf16():
    pb, p8 = fp8(dtype="bf16"), fp8(fp8_scaling="given")
    kb, k8 = plan("fa3", pb, H100).main, plan("fa3", p8, H100).main
    assert k8.name == "fa3_fwd_fp8" and k8.defines["FP8_E4M3"] == 1
    assert k8.traffic.writes["O"] == kb.traffic.writes["O"]  # bf16 in both
    assert k8.traffic.reads["Q8"] * 2 == kb.traffic.reads["Q"]
    assert set(k8.traffic.reads) == {"Q8", "K8", "Vt8", "Qs", "Ks", "Vs"}


@pytest.mark.parametrize("kw", [dict(), dict(fp8_scaling="tensor"), dict(hadamard=True),
                                dict(fp8_scaling="tensor", hadamard=True, causal=True),
                                dict(fp8_scaling="given")])
@pytest.mark.parametrize("tiles", [Tiles(), Tiles(block_m=16, block_n=32)])
def test_executor_counts_equal_the_closed_form_and_attention_stays_exact(kw, tiles):
    p = Problem(batch=2, heads=4, kv_heads=2, seqlen_q=37, seqlen_k=53, head_dim=16,
                dtype="fp8_e4m3", **kw)
    pl = plan("fa3", p, H100, tiles)
    x = reference.random_inputs(p, np.random.default_rng(1))
    got, meter = executor.run(pl, x["q"], x["k"], x["v"])
    want = reference.forward(p, x["q"], x["k"], x["v"])
    # the Hadamard rotation is applied for real: orthogonal, so attention is unchanged
    assert np.abs(got["O"] - want["O"]).max() < 1e-10
    for k in pl.kernels:
        assert meter.counts(k.name) == (k.traffic, k.work), k.name


def test_hadamard_matrix_is_orthogonal_with_the_kernels_signs():
    src = kernel_path("fp8_quant.cu").read_text()
    words = re.search(r"SIGNS\[8\] = \{([^}]*)\}", src).group(1)
    assert tuple(int(w.strip().rstrip("u"), 16) for w in words.split(",")) == HADAMARD_SIGNS
    for d in (16, 64, 128, 256):
        m = hadamard_matrix(d)
        assert np.allclose(m @ m.T, np.eye(d), atol=1e-12)
        assert np.allclose(np.abs(m), d**-0.5)
    # an outlier is spread over every entry of its row: the largest entry drops by sqrt(d)
    x = np.zeros(128)
    x[5] = 10.0
    assert np.abs(x @ hadamard_matrix(128)).max() == pytest.approx(10.0 / np.sqrt(128))


def test_backing_is_our_kernel_at_64_128_and_256():
    for d in (64, 128, 256):
        for s in ("block", "tensor", "given"):
            pl = plan("fa3", fp8(head_dim=d, fp8_scaling=s), H100)
            supported(pl)
            assert backing(pl, H100) == KERNEL
    with pytest.raises(InputError, match="head_dim"):  # no kernel between the panel widths
        supported(plan("fa3", fp8(head_dim=96), H100))


def test_quant_fields_of_rows():
    assert quant_fields({"dtype": "bf16", "fp8_scaling": ""}) == {}
    assert quant_fields({"dtype": "fp8_e4m3"}) == {"fp8_scaling": "given"}  # a published row
    assert quant_fields({"dtype": "fp8_e4m3", "fp8_scaling": "tensor", "hadamard": "True"}) == \
        {"fp8_scaling": "tensor", "hadamard": True}


def test_validate_joins_fp8_rows_on_their_quantisation(tmp_path):
    """Two fp8 rows of one shape, per-tile and per-tensor scaling (different Plans, different
    predictions), each measured at its own prediction: 0% error only if each meets its own."""
    hw = load("h100-sxm5-80gb.calibrated")
    rows = []
    for s in ("block", "tensor"):
        pl = plan("fa3", fp8(batch=4, heads=16, kv_heads=16, seqlen_q=4096, seqlen_k=4096,
                             fp8_scaling=s), hw)
        r = row(pl, hw)
        # as the bench records them: the kernel the row ran (iosim.core.rows.RAN_COLUMNS)
        ran = {"lazy_rescale": pl.main.defines["LAZY_RESCALE"], "persistent": pl.main.defines["PERSISTENT"]}
        rows.append(r | ran | {"time_ms": r["time_pred_ms"], "tflops": r["tflops_pred"], "status": "ok",
                               "gpu_name": "NVIDIA H100 80GB HBM3"})
    assert rows[0]["time_pred_ms"] != pytest.approx(rows[1]["time_pred_ms"], rel=1e-3)
    f = tmp_path / "m.csv"
    pd.DataFrame(rows).to_csv(f, index=False)
    times, _ = validate([f], hw)
    assert len(times) == 1 and times.n.iloc[0] == 2 and times.mape_pct.iloc[0] < 1e-6
    assert pd.read_csv(io.StringIO(f.read_text())).hadamard.tolist() == [False, False]


@pytest.mark.parametrize("args, needle", [
    (("bench", "--hadamard", "true", "--schedule", "fa3"), "apply to --dtype fp8_e4m3 only"),
    (("bench", "--dtype", "fp8_e4m3", "--fp8-scaling", "row"), "fp8-scaling"),
    (("predict", "--hadamard"), "fp8_e4m3 only"),
    (("predict", "--dtype", "fp8_e4m3", "--fp8-scaling", "given", "--hadamard"), "given"),
])
def test_cli_refuses_quantisation_options_in_one_line(args, needle, tmp_path):
    from test_cli_hardening import bad

    bad(*args, *(("-o", str(tmp_path / "x.csv")) if args[0] == "bench" else ()), needle=needle)


def test_predict_fp8_rows_carry_their_quantisation():
    from test_cli_hardening import cli

    code, out, _ = cli("predict", "--dtype", "fp8_e4m3", "--schedule", "fa3", "--fp8-scaling",
                       "tensor", "--hadamard", "--format", "csv")
    r = pd.read_csv(io.StringIO(out)).iloc[0]
    assert code == 0 and r.fp8_scaling == "tensor" and bool(r.hadamard) and r.kernels == 3
    assert r.backing == "kernel"


def test_tma_boxes_are_the_kernels_swizzled_rows():
    """fa3.cu's SW: Q8/K8 rows of 64 bytes (e4m3 at d = 64) take 64-byte boxes and swizzle, every
    other head_dim-long row 128; Vt8 (rows define HEAD_DIM: its rows are keys) panels of 128
    keys, or 64 / 32 where BLOCK_N is no multiple of 128 (fa3.cu's VT_KEYS)."""
    from iosim.kernels import tma_box_bytes

    assert tma_box_bytes("BLOCK_M", {"HEAD_DIM": 64}, 1) == 64
    assert tma_box_bytes("BLOCK_N", {"HEAD_DIM": 128}, 1) == 128
    assert tma_box_bytes("BLOCK_M", {"HEAD_DIM": 64}, 2) == 128  # bf16 at d = 64
    assert tma_box_bytes("HEAD_DIM", {"HEAD_DIM": 64, "BLOCK_N": 128}, 1) == 128
    assert tma_box_bytes("HEAD_DIM", {"HEAD_DIM": 128, "BLOCK_N": 256}, 1) == 128
    assert tma_box_bytes("HEAD_DIM", {"HEAD_DIM": 128, "BLOCK_N": 192}, 1) == 64
    assert tma_box_bytes("HEAD_DIM", {"HEAD_DIM": 128, "BLOCK_N": 224}, 1) == 32


def test_fp8_key_tiles_are_multiples_of_32():
    """fa3.cu's static_assert (BLOCK_N a multiple of 32 with FP8: Vt panels of 128, 64 or 32 keys)
    as the Plan's rules say it: 192 and 224 planned, 80 (bf16's d = 256 tile) refused."""
    from iosim.kernels import kernel_rules

    hw = load("h100")
    p = Problem(batch=1, heads=4, seqlen_q=1000, head_dim=128, dtype="fp8_e4m3")
    for bn, ok in ((128, True), (192, True), (224, True), (80, False)):
        pl = plan("fa3", p, hw, Tiles(block_n=bn))
        held = all(h for src, h, _ in kernel_rules(pl) if src == "fa3.cu")
        assert held == ok, (bn, kernel_rules(pl))


def test_fp8_d128_plans_the_measured_faster_key_tile():
    """At d = 128 the fp8 Plan takes 128x192 tiles: beside main's 128x128 in the same interleaved
    rounds (experiments/fp8/h100/speed11/default/variants.csv) the attention kernel's median
    was higher at every N and causal setting, and the model ranks the two tiles the same way."""
    hw = load("h100-sxm5-80gb")
    df = pd.read_csv(Path(__file__).resolve().parents[1] / "experiments/fp8/h100/speed11/default/variants.csv")
    med = df[df.status == "ok"].groupby("variant").attn_tflops.median()
    pairs = [(v, "new" + v[4:]) for v in med.index if v.startswith("main_")]
    assert len(pairs) == 5 and all(med[new] > med[old] for old, new in pairs), med
    p = Problem(batch=2, heads=16, seqlen_q=8192, head_dim=128, dtype="fp8_e4m3")
    pl = plan("fa3", p, hw)
    assert (pl.main.block_m, pl.main.block_n) == (128, 192)
    t = {bn: row(plan("fa3", p, hw, Tiles(block_n=bn)), hw)["time_pred_ms"] for bn in (128, 192)}
    assert t[192] < t[128], t


def test_fp8_d256_plans_the_measured_faster_lazy_rescale():
    """At d = 256 the fp8 Plan takes fa3.cu's lazy rescale: beside the kernel without it, in the
    same interleaved rounds, the attention kernel's median per-round ratio was above 1 at
    N = 4096, 8192 and 16384, in two calls (experiments/fp8/h100/speed12/round1, where the Plan
    had no lazy rescale, and round2, where it had); at d = 128 it was not, and the Plan leaves it
    off there. The model counts O's rescale on each row's first trip only (d multiplies a row a
    trip otherwise), two operations a row a trip for the test and the row sum, the V factors read
    twice; and it ranks the two kernels the same way."""
    runs = Path(__file__).resolve().parents[1] / "experiments/fp8/h100/speed12"

    def ratios(run: str, lazy: str, eager: str):  # median per-round ratio, by (d, N)
        df = pd.read_csv(runs / run / "variants.csv")
        ok = df[df.status == "ok"].set_index(["head_dim", "seqlen", "round"])
        return (ok[ok.kind == lazy].attn_tflops / ok[ok.kind == eager].attn_tflops).groupby(level=[0, 1]).median()

    first, second = ratios("round1", "lazy", "base"), ratios("round2", "base", "eager")
    assert len(first) == 6 and (first[256] > 1).all() and not (first[128] > 1).all(), first
    assert (second[256] > 1).all() and second.count() == 3, second
    for d, n in ((256, 4096), (256, 16384)):
        p = Problem(batch=16384 // n, heads=2048 // d, seqlen_q=n, head_dim=d, dtype="fp8_e4m3")
        pl, off = plan("fa3", p, H100), plan("fa3", p, H100, Tiles(lazy_rescale=False))
        assert (pl.main.defines["LAZY_RESCALE"], off.main.defines["LAZY_RESCALE"]) == (1, 0)
        sr = n * (n // pl.main.block_n) * p.bh  # query rows times key tiles
        saved = (sr - n * p.bh) * d - 2 * sr
        assert off.main.work.alu_flops - pl.main.work.alu_flops == saved > 0
        assert pl.main.traffic.reads["Vs"] == 2 * off.main.traffic.reads["Vs"]
        assert row(pl, H100)["time_pred_ms"] < row(off, H100)["time_pred_ms"]
    for d in (64, 128):
        assert plan("fa3", fp8(head_dim=d), H100).main.defines["LAZY_RESCALE"] == 0


def test_fp8_plans_the_measured_pv_wait_top():
    """fa3.cu's PV_WAIT_TOP (the wait for P_{j-1} V_{j-1} at the next trip's top, after the
    softmax of S_j, where ptxas cannot hoist it): the Plan takes it at the head_dims where,
    beside main's kernel in the same interleaved rounds (experiments/fp8/h100/speed14c/c1), the
    attention kernel was faster in every round at every N (d = 128), and not where it was not
    (d = 64, 256); a causal Plan and bf16's carry their head_dim's setting and no define."""
    from iosim.schedules.fa3 import FP8_PV_WAIT_TOP

    df = pd.read_csv(Path(__file__).resolve().parents[1] / "experiments/fp8/h100/speed14c/c1/variants.csv")
    ok = df[df.status == "ok"].set_index(["head_dim", "seqlen", "round"])
    ratio = ok[ok.kind == "top"].attn_tflops / ok[ok.kind == "base"].attn_tflops
    assert ratio.groupby(level=[0, 1]).size().eq(5).all() and len(ratio) == 45, ratio
    won = (ratio > 1).groupby(level=0).all()
    assert won.to_dict() == {d: bool(v) for d, v in FP8_PV_WAIT_TOP.items()} == {64: False, 128: True, 256: False}
    for d in (64, 128, 256):
        for causal in (False, True):
            pl = plan("fa3", fp8(head_dim=d, causal=causal), H100)
            assert pl.main.defines["PV_WAIT_TOP"] == FP8_PV_WAIT_TOP[d]
        assert "PV_WAIT_TOP" not in plan("fa3", fp8(head_dim=d, dtype="bf16"), H100).main.defines


def plans_set_none_of(names: set[str]) -> None:
    """No fa3 Plan (fp8 at every head_dim, causal or not, either grid; bf16) sets any of `names`,
    and kernels/fa3.cu reads none of them (switches measured slower live only in the commit an
    experiment ran, which its scripts take from git)."""
    for d in (64, 128, 256):
        for causal in (False, True):
            grids = (None,) if causal else (None, False, True)  # PERSISTENT: non-causal fp8 only
            builds = [(fp8(head_dim=d, causal=causal), Tiles(persistent=g)) for g in grids]
            builds.append((fp8(head_dim=d, causal=causal, dtype="bf16"), Tiles()))
            for p, tiles in builds:
                k = plan("fa3", p, H100, tiles).main
                assert not names & set(k.defines), (p, tiles, k.defines)
    src = kernel_path("fa3.cu").read_text()
    assert not [n for n in names if re.search(rf"\b{n}\b", src)], names


def test_fp8_plan_leaves_fa3s_orders_off():
    """FA3's O rescale after the P V wait (RESCALE_TOP), its first-warpgroup-only K/V waits
    (KV_WAIT_FIRST), both switches of fa3.cu at 4b5851f, and its 224-key tile at d = 128: beside
    the Plan's kernel in the same interleaved rounds (experiments/fp8/h100/speed15/c1, c2) each
    was slower in most rounds at every head_dim and N it ran, so the Plan takes none of them: no
    Plan sets either define, kernels/fa3.cu has neither, and d = 128 keeps 192-key tiles."""
    runs = Path(__file__).resolve().parents[1] / "experiments/fp8/h100/speed15"
    kinds = set()
    for f in ("c1/variants.csv", "c2/tiles.csv"):  # each call's own base
        ok = pd.read_csv(runs / f).query("status == 'ok'")
        kinds |= set(ok.kind)
        for _, shape in ok.groupby(["head_dim", "seqlen"]):
            base = shape[shape.kind == "base"].set_index("round").attn_tflops
            for kind, g in shape[shape.kind != "base"].groupby("kind"):
                ratio = g.set_index("round").attn_tflops / base
                assert len(ratio) == 5 and (ratio < 1).sum() >= 3, (f, kind, ratio)
    assert kinds == {"base", "rtop", "w0", "rtop_w0", "top_rtop_w0", "bn224"}
    plans_set_none_of({"RESCALE_TOP", "KV_WAIT_FIRST"})
    assert plan("fa3", fp8(head_dim=128), H100).main.block_n == 192


def test_fp8_plan_leaves_exp2_h2_off():
    """The exponential off the MUFU (EXP2_H2 of fa3.cu at 40e79ec, issue 24, session 15): the
    H100's MUFU gives a packed half exponential no more results a clock than the fp32 one (two
    MUFU.EX2.F16 a pair; experiments/fp8/h100/speed15h/c1/mufu.csv), and the f16x2 polynomial
    beside the MUFU runs more exponentials a clock than the MUFU alone; yet in the kernel every
    EXP2_H2 variant was slower than the Plan's kernel in most of the 5 interleaved rounds at d = 64 and
    128 at every N, and none won at every N at d = 256 (variants.csv), with its RMSE within 1%
    of the Plan's kernel's on the same inputs (accuracy.csv). So no Plan sets EXP2_H2 or its
    options, and kernels/fa3.cu has none of them."""
    runs = Path(__file__).resolve().parents[1] / "experiments/fp8/h100/speed15h/c1"
    rate = pd.read_csv(runs / "mufu.csv").set_index("name").results_per_clk_sm
    assert 15 < rate["ex2.approx.ftz.f32"] < 17  # 16 a clock an SM: 4 per sub-partition
    for form in ("ex2.approx.f16x2", "ex2.approx.ftz.bf16x2"):
        assert rate[form] < 1.05 * rate["ex2.approx.ftz.f32"], rate
    assert rate["half ex2.approx.ftz.f32, half f16x2 polynomial"] > 1.5 * rate["ex2.approx.ftz.f32"], rate
    ok = pd.read_csv(runs / "variants.csv").query("status == 'ok'")
    assert set(ok.kind) == {"base", "h1", "h2", "h2s", "h1o"}
    wins = {}
    for (d, n), shape in ok.groupby(["head_dim", "seqlen"]):
        base = shape[shape.kind == "base"].set_index("round").attn_tflops
        for kind, g in shape[shape.kind != "base"].groupby("kind"):
            ratio = g.set_index("round").attn_tflops / base
            assert len(ratio) == 5, (d, n, kind, ratio)
            wins[(d, kind, n)] = (ratio > 1).sum() >= 4
            if d in (64, 128):
                assert (ratio < 1).sum() >= 4, (d, n, kind, ratio)
    for d, kind in {(d, k) for d, k, _ in wins}:
        assert not all(w for (dd, k, _), w in wins.items() if (dd, k) == (d, kind)), (d, kind)
    acc = pd.read_csv(runs / "accuracy.csv")
    rmse = acc[acc.what == "rmse"].pivot_table(index=["head_dim", "causal", "seqlen"], columns="kind",
                                                values="rmse")
    for kind in ("h1", "h2", "h1o"):
        r = (rmse[kind] / rmse["base"]).dropna()
        assert len(r) == 6 if kind != "h1o" else len(r) == 3
        assert ((r > 0.99) & (r < 1.01)).all(), (kind, r)
    assert (acc[acc.what == "check"].status == "ok").all()
    plans_set_none_of({"EXP2_H2", "EXP2_H2_F32SUM", "EXP2_H2_MUFU"})


def test_rows_record_and_replay_the_lazy_rescale():
    """A bench row of fa3's fp8 forward records whether its kernel rescaled lazily; a row without
    the column was measured before the lazy rescale existed (False); other rows: None (the
    Plan's own)."""
    from iosim.core.rows import RAN_COLUMNS, measured_lazy_rescale

    r = dict(schedule="fa3", direction="fwd", dtype="fp8_e4m3")
    assert measured_lazy_rescale(r) is False and measured_lazy_rescale(r | {"lazy_rescale": 1.0}) is True
    assert measured_lazy_rescale(r | {"dtype": "bf16"}) is None
    assert measured_lazy_rescale(r | {"direction": "bwd"}) is None
    assert measured_lazy_rescale(r | {"schedule": "fa2"}) is None
    assert "lazy_rescale" in RAN_COLUMNS


def test_fp8_non_causal_plans_the_persistent_grid():
    """fa3.cu PERSISTENT: grid (G, 1, 1), G = the resident CTAs (at most the tiles), CTA c
    running tiles c, c + G, ...: its trips are the sum of its tiles', all tiles' trips kept;
    the Plan's at d = 256 (FP8_PERSISTENT: measured faster there, slower at d = 64, 128);
    causal problems and Tiles(persistent=False) keep the one-tile grid."""
    for d, n in ((64, 4096), (128, 8192), (256, 4096)):
        p = Problem(batch=16384 // n, heads=2048 // d, seqlen_q=n, head_dim=d, dtype="fp8_e4m3")
        pl, one = plan("fa3", p, H100, Tiles(persistent=True)), plan("fa3", p, H100, Tiles(persistent=False))
        assert plan("fa3", p, H100).main.defines["PERSISTENT"] == int(d == 256)
        k, k1 = pl.main, one.main
        assert (k.defines["PERSISTENT"], k1.defines["PERSISTENT"]) == (1, 0)
        assert k1.grid == (-(-n // k.block_m), p.heads, p.batch) and k1.tiles == 0
        assert k.grid == (min(k1.ctas, H100.sm_count), 1, 1) and k.tiles == k1.ctas > k.grid[0]

        def total(k, a):
            return float(np.sum(a) * k.ctas / len(a))

        assert total(k, k.tile_trips) == pytest.approx(total(k1, k1.tile_trips))
        assert total(k, k.trips) == pytest.approx(total(k1, k1.trips))
        assert k.traffic == k1.traffic and k.work == k1.work
        assert {"Q8", "O"} <= set(k.streamed) and not k1.streamed
        causal = plan("fa3", p.model_copy(update={"causal": True}), H100).main
        assert causal.defines["PERSISTENT"] == 0 and causal.grid[1:] == (p.heads, p.batch)
    with pytest.raises(InputError, match="persistent grid without --causal"):
        plan("fa3", p.model_copy(update={"causal": True}), H100, Tiles(persistent=True), check=True)


def test_rows_record_and_replay_the_persistent_grid():
    from iosim.core.rows import RAN_COLUMNS, measured_persistent

    r = {"schedule": "fa3", "direction": "fwd", "dtype": "fp8_e4m3"}
    assert measured_persistent(r) is False and measured_persistent(r | {"persistent": 1.0}) is True
    assert measured_persistent(r | {"dtype": "bf16"}) is None
    assert measured_persistent(r | {"schedule": "fa2"}) is None
    assert "persistent" in RAN_COLUMNS


def test_persistent_plans_are_their_own_shape():
    """The persistent grid's CTAs do not grow with batch x heads: predict's batch of problems
    (one template a shape) gives each problem the row it gets planned alone. (12 heads, d = 256, the persistent grid: 132
    CTAs are a whole number per (batch, K/V head) pair, so only fa3.layout keeps a template of
    the first problem from scaling them.)"""
    from iosim.analysis.predict import predict_many

    ps = [Problem(batch=b, heads=12, seqlen_q=4096, head_dim=256, dtype="fp8_e4m3") for b in (1, 2, 4)]
    got = predict_many(ps, H100, ["fa3"]).time_pred_ms.tolist()
    alone = [row(plan("fa3", p, H100), H100)["time_pred_ms"] for p in ps]
    assert got == pytest.approx(alone, rel=1e-9)
