"""Backward kernels (naive, fa1, fa2, fa3) against float32 gradients on fresh random data: dQ, dK, dV
NaN-poisoned first, the bound a multiple of the same-dtype SDPA backward's own error plus one
rounding unit (naive: plus the rounding of its stored S), as the forward's check."""

import os

import pytest

from iosim.core.hardware import InputError, load
from iosim.core.problem import Problem
from iosim.schedules import plan

pytestmark = pytest.mark.gpu

CASES = [  # (batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, causal): ragged N, GQA, MQA
    (2, 4, 4, 512, 512, 64, False), (1, 4, 4, 1000, 1000, 64, True),
    (2, 2, 2, 1024, 1024, 128, False), (1, 8, 2, 3000, 3000, 128, True),
    (1, 2, 2, 777, 777, 256, False), (1, 2, 1, 2048, 2048, 256, True),
    (1, 2, 2, 300, 700, 128, False), (1, 2, 2, 700, 300, 128, True),
]


@pytest.fixture(scope="module")
def env():
    from iosim.gpu import backward, bench

    torch = bench.require_gpu()
    hw = load(bench.profile_for(torch.cuda.get_device_name()))
    return torch, hw, bench, backward


# fa1 (kernels/fa1.cu, any head_dim padded inside, either causal alignment) also: the diagonal
# bottom-right with Nq > Nk (query rows that see no key: dQ = 0) and Nq < Nk, padded head_dims
# (72: Bc = 64 and a zero-filled chunk; 200: Bc = 32, the odd phase-1 warp tile), GQA and MQA.
FA1_CASES = [
    (1, 4, 2, 700, 300, 72, True, "bottom-right"), (1, 2, 2, 300, 700, 256, True, "bottom-right"),
    (2, 2, 1, 555, 555, 200, False), (1, 4, 1, 1000, 1200, 64, True, "bottom-right"),
]


# fa1's key-block split (kernels/fa1.cu SPLIT_COLS, dQ by fp32 atomics; the Plan's split on
# a 132-SM GPU, tests/test_fa1_split.py): few heads at long N (one key block a CTA), ragged N
# top-left, GQA with several key blocks a split (bottom-right), MQA with Nq > Nk, Nq < Nk
# top-left (a split whose later key blocks no query sees: dK = dV = 0 there), and enough heads
# to fill the GPU unsplit (one CTA per head, dQ read-modify-written).
FA1_SPLIT_CASES = [
    (1, 2, 2, 8192, 8192, 64, False), (1, 1, 1, 5000, 5000, 128, True),
    (2, 16, 4, 3000, 3000, 128, True, "bottom-right"), (1, 3, 1, 4100, 3000, 128, True, "bottom-right"),
    (1, 64, 16, 1000, 3000, 128, True), (8, 16, 16, 512, 512, 64, False),
]


def problem(case, dtype):
    b, h, kvh, nq, nk, d, causal, *align = case
    return Problem(batch=b, heads=h, kv_heads=kvh, seqlen_q=nq, seqlen_k=nk, head_dim=d,
                   dtype=dtype, causal=causal, direction="bwd",
                   causal_align=align[0] if align else "top-left")


# fa2 (kernels/fa2_bwd.cu, head_dim 64, 128, 256): the bottom-right diagonal, Nq > Nk and Nq < Nk
FA2_CASES = [
    (1, 4, 2, 700, 300, 128, True, "bottom-right"), (1, 2, 2, 300, 700, 64, True, "bottom-right"),
    (1, 2, 1, 1000, 1200, 256, True, "bottom-right"),
]


# fa3 (kernels/fa3_bwd.cu, head_dim 64, 128, 256): the CASES, both diagonals, GQA, MQA; at 256
# (two consumers splitting head_dim) also ragged Nq != Nk both ways, bottom-right (rows that see
# no key), GQA, and not causal with a ragged key block
FA3_CASES = CASES + FA2_CASES + [
    (1, 4, 1, 1000, 1200, 64, True, "bottom-right"), (2, 4, 1, 1500, 1500, 128, False),
    (1, 4, 2, 700, 333, 256, True, "bottom-right"), (1, 2, 2, 300, 700, 256, True),
    (2, 4, 1, 1100, 900, 256, False)]


@pytest.mark.parametrize("schedule,case", [(s, c) for s in ("naive", "fa1", "fa2") for c in CASES]
                         + [("fa1", c) for c in FA1_CASES + FA1_SPLIT_CASES]
                         + [("fa2", c) for c in FA2_CASES]
                         + [("fa3", c) for c in FA3_CASES])
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_backward_matches_reference(env, schedule, dtype, case):
    torch, hw, bench, backward = env
    if schedule == "fa3" and not hw.has_wgmma:
        pytest.skip(f"fa3 needs a Hopper GPU (sm_90a); this is {hw.name}")
    p = problem(case, dtype)
    for _ in range(2):  # fresh inputs every time
        seed = int.from_bytes(os.urandom(4), "little") >> 1
        q, k, v = bench.inputs(torch, p, seed)
        do = backward.grad_output(torch, p, seed)
        ref, s_max = backward.reference_grads(torch, q, k, v, do, p)
        same = backward.grad_err(torch, backward.sdpa_grads(torch, q, k, v, do, p), ref, p)
        bound = bench.error_bound(schedule, p, same, s_max)
        launcher = backward.BackwardLauncher(plan(schedule, p, hw), hw, q, k, v, do)
        launcher.poison()
        launcher()
        torch.cuda.synchronize()
        err = backward.grad_err(torch, launcher.outputs(), ref, p)
        assert err <= bound, f"{schedule} {dtype} {case}: error {err:.3g} over bound {bound:.3g}"
        if schedule in ("fa1", "fa2", "fa3"):  # rows that see no key (skipped by grad_err): dQ = 0
            assert launcher.outputs()["dQ"][:, :, :bench.dead_rows(p)].eq(0).all()


def test_unwritten_gradient_fails_the_check(env):
    """Poisoning is what catches a kernel that writes nothing: without the dQ conversion, dQ
    keeps its NaNs and the error is infinite."""
    torch, hw, bench, backward = env
    p = problem((1, 2, 2, 256, 256, 64, False), "bf16")
    q, k, v = bench.inputs(torch, p, 1)
    do = backward.grad_output(torch, p, 1)
    ref, _ = backward.reference_grads(torch, q, k, v, do, p)
    launcher = backward.BackwardLauncher(plan("fa2", p, hw), hw, q, k, v, do)
    launcher.poison()
    launcher()
    torch.cuda.synchronize()
    assert backward.grad_err(torch, launcher.outputs(), ref, p) < 0.05
    launcher.kernels = [x for x in launcher.kernels if x[0].name != "fa2_bwd_convert"]
    launcher.poison()
    launcher()
    torch.cuda.synchronize()
    assert backward.grad_err(torch, launcher.outputs(), ref, p) == float("inf")


def test_backward_without_kernel_is_refused(env):
    torch, hw, bench, backward = env
    p = problem((1, 2, 2, 128, 128, 96, False), "bf16")
    q, k, v = bench.inputs(torch, p, 0)
    with pytest.raises(InputError, match="head_dim=96 has no real backward kernel"):
        backward.BackwardLauncher(plan("fa3", p, hw), hw, q, k, v, q)


# fa3's dQ reductions that are not the Plan's at their head_dim (kernels/fa3_bwd.cu DQ_BULK):
# the consumers' atomics at d = 128 and 256 (0) and the dQ warp through one shared buffer at
# d = 64 (3), on ragged N, both diagonals and GQA (rows past Nq outside the dQ tensor map)
DQ_VARIANT_CASES = [((1, 8, 2, 3000, 3000, 128, True), 0), ((1, 2, 2, 700, 300, 128, True, "bottom-right"), 0),
                    ((2, 4, 1, 1000, 1200, 64, True, "bottom-right"), 3), ((2, 4, 4, 777, 777, 64, False), 3),
                    ((1, 4, 2, 700, 333, 256, True, "bottom-right"), 0)]


@pytest.mark.parametrize("case,dq_bulk", DQ_VARIANT_CASES)
def test_fa3_dq_variants_match_reference(env, case, dq_bulk):
    """Each of fa3_bwd.cu's other dQ reductions computes the same gradients, checked as the
    Plan's kernel is (fresh inputs, NaN-poisoned outputs, the same bound)."""
    from dataclasses import replace

    from iosim.kernels import SPECS, kernel_defines

    torch, hw, bench, backward = env
    if not hw.has_wgmma:
        pytest.skip(f"fa3 needs a Hopper GPU (sm_90a); this is {hw.name}")
    p = problem(case, "bf16")
    pl = plan("fa3", p, hw)
    ks = []
    for k in pl.kernels:
        if k.name == "fa3_bwd":
            values = {n: v for n, v in k.defines.items() if not n.startswith("MODEL_")} | {"DQ_BULK": dq_bulk}
            k = replace(k, defines=kernel_defines(k.name, **values),
                        smem_bytes=SPECS[k.name].smem(values, p.elem_bytes))
        ks.append(k)
    pl = replace(pl, kernels=tuple(ks))
    seed = int.from_bytes(os.urandom(4), "little") >> 1
    q, k, v = bench.inputs(torch, p, seed)
    do = backward.grad_output(torch, p, seed)
    ref, s_max = backward.reference_grads(torch, q, k, v, do, p)
    same = backward.grad_err(torch, backward.sdpa_grads(torch, q, k, v, do, p), ref, p)
    launcher = backward.BackwardLauncher(pl, hw, q, k, v, do)
    launcher.poison()
    launcher()
    torch.cuda.synchronize()
    err = backward.grad_err(torch, launcher.outputs(), ref, p)
    bound = bench.error_bound("fa3", p, same, s_max)
    assert err <= bound, f"DQ_BULK={dq_bulk} {case}: error {err:.3g} over bound {bound:.3g}"
    assert launcher.outputs()["dQ"][:, :, :bench.dead_rows(p)].eq(0).all()


# fa3's deterministic mode (kernels/fa3_bwd.cu, DETERMINISTIC=1): not causal with many key
# blocks a head (the most CTAs meeting in one dQ_i), both causal diagonals with ragged N and GQA
# (d = 256: two consumers of one key block, each with its own dQ columns and turns)
DET_CASES = [(2, 8, 8, 4096, 4096, 128, False), (1, 8, 2, 3000, 3333, 64, True, "bottom-right"),
             (1, 4, 4, 1000, 1000, 128, True), (1, 6, 3, 1500, 700, 64, True, "bottom-right"),
             (1, 4, 2, 2000, 2100, 256, True, "bottom-right")]


@pytest.mark.parametrize("case", DET_CASES)
def test_fa3_deterministic_gives_the_same_bits_every_run(env, case):
    """The deterministic backward passes the ordinary check, and its fp32 dQ accumulator and
    dQ, dK, dV are the same bits on every run: alone, and while another stream's matrix
    products hold SMs (so its CTAs start at other times and on other SMs); its turn flags are
    left zero for the next launch."""
    torch, hw, bench, backward = env
    if not hw.has_wgmma:
        pytest.skip(f"fa3 needs a Hopper GPU (sm_90a); this is {hw.name}")
    p = problem(case, "bf16").model_copy(update={"deterministic": True})
    seed = int.from_bytes(os.urandom(4), "little") >> 1
    q, k, v = bench.inputs(torch, p, seed)
    do = backward.grad_output(torch, p, seed)
    ref, s_max = backward.reference_grads(torch, q, k, v, do, p)
    same = backward.grad_err(torch, backward.sdpa_grads(torch, q, k, v, do, p), ref, p)
    launcher = backward.BackwardLauncher(plan("fa3", p, hw), hw, q, k, v, do)
    assert "fa3_bwd_det" in launcher.entries()
    busy = torch.cuda.Stream()
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    first = None
    for run in range(4):
        launcher.poison()
        if run % 2:  # matrix products on another stream, queued just before the backward
            with torch.cuda.stream(busy):
                for _ in range(4):
                    x @ x
        launcher()
        torch.cuda.synchronize()
        got = {n: launcher.buf[n].clone() for n in ("dQacc", "dQ", "dK", "dV")}
        assert launcher.buf["dQsem"].eq(0).all()
        if first is None:
            err = backward.grad_err(torch, launcher.outputs(), ref, p)
            bound = bench.error_bound("fa3", p, same, s_max)
            assert err <= bound, f"deterministic {case}: error {err:.3g} over bound {bound:.3g}"
            first = got
            continue
        for n, t in got.items():  # bit patterns (a NaN would differ from itself)
            a, b = t.view(torch.int32 if t.dtype == torch.float32 else torch.int16), first[n]
            assert torch.equal(a, b.view(a.dtype)), f"{n} differs on run {run} ({case})"
