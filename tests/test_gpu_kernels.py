"""Real kernels against a float32 reference on fresh random data, outputs NaN-poisoned first;
the bound is a multiple of a same-dtype reference's own error plus one rounding unit."""

import pytest

from iosim.core.hardware import InputError, load
from iosim.core.problem import Problem
from iosim.schedules import plan

pytestmark = pytest.mark.gpu

CASES = [  # (batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, causal)
    (2, 4, 4, 512, 512, 64, False), (1, 4, 4, 1000, 1000, 64, True),
    (2, 2, 2, 1024, 1024, 128, False), (1, 8, 2, 3000, 3000, 128, True),
    (1, 2, 2, 777, 777, 256, False), (1, 2, 1, 2048, 2048, 256, True),
    (1, 2, 2, 300, 700, 128, False), (1, 2, 2, 700, 300, 128, True),
]


@pytest.fixture(scope="module")
def env():
    from iosim.gpu import bench

    torch = bench.require_gpu()
    hw = load(bench.profile_for(torch.cuda.get_device_name()))
    return torch, hw, bench


@pytest.mark.parametrize("schedule", ["naive", "fa1", "fa2", "fa3"])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("case", CASES)
def test_kernel_matches_reference(env, schedule, dtype, case):
    from iosim.gpu.launch import Launcher

    torch, hw, bench = env
    if schedule == "fa3" and not hw.has_wgmma:
        pytest.skip(f"fa3 needs a Hopper GPU (sm_90a); this is {hw.name}")
    b, h, kvh, nq, nk, d, causal = case
    p = Problem(batch=b, heads=h, kv_heads=kvh, seqlen_q=nq, seqlen_k=nk, head_dim=d,
                dtype=dtype, causal=causal)
    for _ in range(2):  # fresh inputs every time
        q, k, v = bench.inputs(torch, p, seed=int.from_bytes(__import__("os").urandom(4), "little"))
        ref, lse_h0, same, s_max = bench.reference(torch, q, k, v, p)
        bound = bench.error_bound(schedule, p, same, s_max)
        err, ok = bench.check(torch, Launcher(plan(schedule, p, hw), q, k, v), ref, lse_h0, bound)
        assert ok, f"{schedule} {dtype} {case}: error {err:.3g} over bound {bound:.3g}"


# fa1's query-row splits (kernels/fa1.cu SPLIT_ROWS; on H100/H200 the Plan splits each of these
# 2-3 ways or more, with 2 to 6 query blocks a split): few heads at long N, ragged N, both causal
# diagonals (bottom-right with Nq > Nk: whole blocks, inside a split, see no key; Nq < Nk), GQA
# and MQA, padded head_dims.
FA1_SPLIT_CASES = [  # (batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, causal, align)
    (1, 2, 2, 16384, 16384, 64, False, "top-left"), (1, 4, 2, 5000, 5000, 128, True, "top-left"),
    (2, 8, 4, 4500, 3000, 64, True, "bottom-right"), (1, 8, 1, 3000, 4500, 128, True, "bottom-right"),
    (1, 3, 1, 7777, 7777, 72, False, "top-left"), (2, 8, 2, 6000, 6000, 256, True, "top-left"),
    (1, 8, 8, 3000, 4500, 64, True, "top-left"),
]


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("case", FA1_SPLIT_CASES)
def test_fa1_query_row_splits_match_reference(env, dtype, case):
    from iosim.gpu.launch import Launcher

    torch, hw, bench = env
    b, h, kvh, nq, nk, d, causal, align = case
    p = Problem(batch=b, heads=h, kv_heads=kvh, seqlen_q=nq, seqlen_k=nk, head_dim=d,
                dtype=dtype, causal=causal, causal_align=align)
    pl = plan("fa1", p, hw)
    main = pl.main
    assert main.grid[0] > 1 and main.defines["SPLIT_ROWS"] < nq, main.grid  # really split
    q, k, v = bench.inputs(torch, p, seed=int.from_bytes(__import__("os").urandom(4), "little"))
    ref, lse_h0, same, s_max = bench.reference(torch, q, k, v, p)
    bound = bench.error_bound("fa1", p, same, s_max)
    err, ok = bench.check(torch, Launcher(pl, q, k, v), ref, lse_h0, bound)
    assert ok, f"fa1 {dtype} {case} grid {main.grid}: error {err:.3g} over bound {bound:.3g}"


# fa3's forward with the bottom-right diagonal (Nq > Nk: rows that see no key; Nq < Nk): the LSE
# that fa3's backward reads
FA3_BR_CASES = [(1, 4, 2, 700, 300, 128, True), (1, 2, 2, 300, 700, 64, True),
                (1, 2, 1, 1000, 1200, 256, True)]


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("case", FA3_BR_CASES)
def test_fa3_bottom_right_matches_reference(env, dtype, case):
    from iosim.gpu.launch import Launcher

    torch, hw, bench = env
    if not hw.has_wgmma:
        pytest.skip(f"fa3 needs a Hopper GPU (sm_90a); this is {hw.name}")
    b, h, kvh, nq, nk, d, causal = case
    p = Problem(batch=b, heads=h, kv_heads=kvh, seqlen_q=nq, seqlen_k=nk, head_dim=d,
                dtype=dtype, causal=causal, causal_align="bottom-right")
    q, k, v = bench.inputs(torch, p, seed=int.from_bytes(__import__("os").urandom(4), "little"))
    ref, lse_h0, same, s_max = bench.reference(torch, q, k, v, p)
    bound = bench.error_bound("fa3", p, same, s_max)
    err, ok = bench.check(torch, Launcher(plan("fa3", p, hw), q, k, v), ref, lse_h0, bound)
    assert ok, f"fa3 {dtype} {case}: error {err:.3g} over bound {bound:.3g}"


def test_fa3_refused_off_hopper(env):
    """On a GPU without sm_90a, fa3 is refused in one line (its Plan, or its compile)."""
    from iosim.gpu.compile import compile_kernel

    torch, hw, bench = env
    if hw.has_wgmma:
        pytest.skip("this GPU is a Hopper: fa3 runs here")
    p = Problem(batch=1, heads=2, seqlen_q=256, head_dim=128)
    with pytest.raises(InputError, match="Hopper"):
        plan("fa3", p, hw)
    with pytest.raises(InputError, match="Hopper"):
        compile_kernel("fa3.cu", "fa3_fwd", plan("fa3", p, load("h100-sxm5-80gb")).kernels[0].defines,
                       "bf16")


def test_unsupported_shapes_are_refused(env):
    from iosim.gpu.launch import Launcher

    torch, hw, bench = env
    p = Problem(batch=1, heads=1, seqlen_q=128, head_dim=100)  # not a multiple of 8
    q, k, v = bench.inputs(torch, p, 0)
    with pytest.raises(InputError, match="head_dim=100"):
        Launcher(plan("fa2", p, hw), q, k, v)


# Sliding windows (Problem.window): ragged lengths, windows shorter than a tile (0: the
# diagonal alone), cutting tiles and spanning several, GQA, both diagonals (fa3: top-left only)
WINDOW_CASES = [  # (batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, window, align)
    (1, 4, 2, 1000, 1000, 128, 100, "top-left"), (1, 2, 2, 2048, 2048, 64, 256, "top-left"),
    (1, 2, 1, 777, 777, 256, 0, "top-left"), (2, 4, 4, 3000, 3000, 128, 1000, "top-left"),
    (1, 2, 2, 300, 700, 128, 50, "top-left"), (1, 4, 1, 300, 700, 128, 64, "bottom-right"),
]


@pytest.mark.parametrize("schedule", ["fa2", "fa3"])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("case", WINDOW_CASES)
def test_sliding_window_matches_reference(env, schedule, dtype, case):
    from iosim.gpu.launch import Launcher

    torch, hw, bench = env
    b, h, kvh, nq, nk, d, w, align = case
    if schedule == "fa3" and (not hw.has_wgmma or align == "bottom-right"):
        pytest.skip("fa3: Hopper, top-left diagonal")
    p = Problem(batch=b, heads=h, kv_heads=kvh, seqlen_q=nq, seqlen_k=nk, head_dim=d,
                dtype=dtype, causal=True, causal_align=align, window=w)
    pl = plan(schedule, p, hw)
    assert pl.main.defines["WINDOW"] == w
    q, k, v = bench.inputs(torch, p, seed=int.from_bytes(__import__("os").urandom(4), "little"))
    ref, lse_h0, same, s_max = bench.reference(torch, q, k, v, p)
    bound = bench.error_bound(schedule, p, same, s_max)
    err, ok = bench.check(torch, Launcher(pl, q, k, v), ref, lse_h0, bound)
    assert ok, f"{schedule} {dtype} {case}: error {err:.3g} over bound {bound:.3g}"
