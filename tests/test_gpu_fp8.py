"""fa3's fp8_e4m3 path on a Hopper GPU, through the product's own launcher: fresh bf16 inputs,
outputs NaN-poisoned (e4m3 copies with e4m3's NaN), every scaling (per tile, per tensor, given)
with and without the Hadamard rotation, against float32 attention on the bf16 inputs; the bound
is a multiple of the emulated fp8 path's own error (iosim.gpu.fp8) plus one bf16 unit. And on
the FA3 paper's outlier inputs, whether block quantisation with the Hadamard rotation is more accurate
than per-tensor scaling is measured (experiments/fp8/accuracy.py) after each fp8 kernel is held
to its emulation there."""

import os

import pytest

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.schedules import Tiles, plan

pytestmark = pytest.mark.gpu

CASES = [  # (batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, causal, align): ragged N,
    # GQA and MQA, Nq != Nk with both causal diagonals
    (2, 2, 2, 1024, 1024, 128, False, "top-left"), (1, 8, 2, 3000, 3000, 128, True, "top-left"),
    (1, 2, 1, 777, 777, 256, True, "top-left"), (1, 2, 2, 700, 300, 128, True, "top-left"),
    (1, 4, 2, 300, 1000, 256, True, "bottom-right"),
    # d = 64: e4m3 rows of 64 bytes (the 64-byte swizzle), ragged, GQA, both diagonals
    (2, 4, 2, 1000, 1000, 64, False, "top-left"), (1, 4, 1, 500, 900, 64, True, "bottom-right"),
]
MODES = [dict(), dict(fp8_scaling="tensor"), dict(hadamard=True),
         dict(fp8_scaling="tensor", hadamard=True), dict(fp8_scaling="given")]


@pytest.fixture(scope="module")
def env():
    from iosim.gpu import bench

    torch = bench.require_gpu()
    hw = load(bench.profile_for(torch.cuda.get_device_name()))
    if not hw.has_wgmma:
        pytest.skip(f"fa3's fp8 path needs a Hopper GPU (sm_90a); this is {hw.name}")
    return torch, hw, bench


@pytest.mark.parametrize("mode", MODES, ids=lambda m: "-".join(f"{k}={v}" for k, v in m.items()) or "block")
@pytest.mark.parametrize("case", CASES)
def test_fp8_matches_reference(env, case, mode):
    from iosim.gpu.launch import Launcher

    torch, hw, bench = env
    b, h, kvh, nq, nk, d, causal, align = case
    p = Problem(batch=b, heads=h, kv_heads=kvh, seqlen_q=nq, seqlen_k=nk, head_dim=d,
                dtype="fp8_e4m3", causal=causal, causal_align=align, **mode)
    pl = plan("fa3", p, hw)
    q, k, v = bench.inputs(torch, p, seed=int.from_bytes(os.urandom(4), "little") >> 1)
    ref, lse, same, s_max = bench.reference(torch, q, k, v, p, (pl.main.block_m, pl.main.block_n))
    bound = bench.error_bound("fa3", p, same, s_max)
    err, ok = bench.check(torch, Launcher(pl, q, k, v), ref, lse, bound)
    assert ok, f"fp8 {mode} {case}: error {err:.3g} over bound {bound:.3g} (emulated {same:.3g})"
    # the yardstick is an fp8 attention's error (emulated: 0.03-0.13 of max|O| on these draws),
    # and the bound stays below what a wrong layout, mask or factor costs: O(1) of max|O|
    assert bound < 0.5, f"bound {bound:.3g} (emulated {same:.3g}) too loose to catch a layout error"


def test_outlier_inputs_fp8_kernels_agree_with_their_emulation(env):
    import importlib.util
    from pathlib import Path

    torch, hw, _ = env
    path = Path(__file__).resolve().parents[1] / "experiments" / "fp8" / "accuracy.py"
    spec = importlib.util.spec_from_file_location("fp8_accuracy", path)
    acc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(acc)
    p = Problem(batch=1, heads=4, seqlen_q=1024, head_dim=128)
    r = acc.errors(torch, hw, p, seed=int.from_bytes(os.urandom(4), "little") >> 1, emulated=True)
    for name in acc.METHODS:
        if name != "bf16 fa3":  # each fp8 kernel within 2x of its emulation's RMSE, above bf16
            assert r[name] <= 2 * r[f"{name} (emulated)"], r
            assert r["bf16 fa3"] < r[name], r


# the persistent grid (non-causal, fa3.cu PERSISTENT) with more tiles than CTAs, so that a CTA
# runs several: ragged N (the last tile of each head masked), GQA, at each head_dim (d = 256:
# the lazy rescale, whose largest V factor changes from tile to tile)
PERSISTENT_CASES = [(4, 8, 2, 2000, 1900, 256), (3, 6, 3, 3000, 2900, 128), (2, 8, 4, 2500, 2500, 64)]


@pytest.mark.parametrize("case", PERSISTENT_CASES)
def test_fp8_persistent_grid_runs_several_tiles_a_cta(env, case):
    from iosim.gpu.launch import Launcher

    torch, hw, bench = env
    b, h, kvh, nq, nk, d = case
    p = Problem(batch=b, heads=h, kv_heads=kvh, seqlen_q=nq, seqlen_k=nk, head_dim=d, dtype="fp8_e4m3")
    pl = plan("fa3", p, hw, Tiles(persistent=True))  # (the Plan's at d = 256)
    k = pl.main
    assert k.defines["PERSISTENT"] == 1 and k.grid[1:] == (1, 1) and k.tiles > k.grid[0], (k.grid, k.tiles)
    q, kk, v = bench.inputs(torch, p, seed=int.from_bytes(os.urandom(4), "little") >> 1)
    ref, lse, same, s_max = bench.reference(torch, q, kk, v, p, (k.block_m, k.block_n))
    bound = bench.error_bound("fa3", p, same, s_max)
    err, ok = bench.check(torch, Launcher(pl, q, kk, v), ref, lse, bound)
    assert ok, f"persistent fp8 {case}: error {err:.3g} over bound {bound:.3g} (emulated {same:.3g})"
