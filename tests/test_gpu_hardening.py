"""Real kernels at every head_dim (a multiple of 8 up to 256, padded inside the kernels), with the
causal diagonal top-left or bottom-right, and the chunked float32 reference at a size whose whole
N x N matrix would not fit. Fresh random inputs, outputs NaN-poisoned, bound as in `iosim bench`."""

import os

import pytest

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.schedules import plan

pytestmark = pytest.mark.gpu

HEAD_DIMS = list(range(8, 257, 8))
# naive's GEMM tiles change only with the power of two above d and whether d divides the tile
NAIVE_HEAD_DIMS = [8, 16, 24, 40, 56, 72, 96, 120, 136, 168, 200, 248]
ALIGN_CASES = [  # (seqlen_q, seqlen_k, head_dim): Nq > Nk leaves rows that see no key
    (300, 700, 64), (700, 300, 64), (1000, 129, 128), (129, 1000, 96), (257, 256, 200),
]


@pytest.fixture(scope="module")
def env():
    from iosim.gpu import bench

    torch = bench.require_gpu()
    hw = load(bench.profile_for(torch.cuda.get_device_name()))
    return torch, hw, bench


def check(env, schedule: str, p: Problem) -> None:
    from iosim.gpu.launch import Launcher

    torch, hw, bench = env
    q, k, v = bench.inputs(torch, p, seed=int.from_bytes(os.urandom(4), "little"))
    ref, lse, same, s_max = bench.reference(torch, q, k, v, p)
    bound = bench.error_bound(schedule, p, same, s_max)
    err, ok = bench.check(torch, Launcher(plan(schedule, p, hw), q, k, v), ref, lse, bound)
    assert ok, f"{schedule} {p}: error {err:.3g} over bound {bound:.3g}"


@pytest.mark.parametrize("d", HEAD_DIMS)
@pytest.mark.parametrize("schedule", ["fa1", "fa2"])
def test_flash_kernels_every_head_dim(env, schedule, d):
    check(env, schedule, Problem(batch=1, heads=3, kv_heads=1, seqlen_q=333, seqlen_k=333,
                                 head_dim=d, causal=d % 16 == 0))


@pytest.mark.parametrize("d", NAIVE_HEAD_DIMS)
def test_naive_kernels_every_head_dim_class(env, d):
    check(env, "naive", Problem(batch=1, heads=2, seqlen_q=333, seqlen_k=333, head_dim=d,
                                dtype="fp16", causal=d % 16 == 8))


@pytest.mark.parametrize("align", ["top-left", "bottom-right"])
@pytest.mark.parametrize("case", ALIGN_CASES)
@pytest.mark.parametrize("schedule", ["naive", "fa1", "fa2"])
def test_causal_alignment(env, schedule, case, align):
    nq, nk, d = case
    check(env, schedule, Problem(batch=2, heads=2, seqlen_q=nq, seqlen_k=nk, head_dim=d,
                                 causal=True, causal_align=align))


def test_large_problem_is_checked_against_a_chunked_reference(env):
    """batch 1, 32 heads, 8 K/V heads, N = 32768, causal: the whole float32 S would be 128 GiB;
    the chunked reference checks fa2 there, and agrees with the unchunked one at a small size."""
    torch, hw, bench = env
    check(env, "fa2", Problem(batch=1, heads=32, kv_heads=8, seqlen_q=32768, head_dim=128,
                              causal=True))
    p = Problem(batch=2, heads=4, kv_heads=2, seqlen_q=700, seqlen_k=500, head_dim=64,
                causal=True, causal_align="bottom-right")
    q, k, v = bench.inputs(torch, p, seed=1)
    whole, lse_whole, _ = bench.reference_chunks(torch, q, k, v, p, chunk_bytes=1 << 40)
    small, lse_small, _ = bench.reference_chunks(torch, q, k, v, p, chunk_bytes=1 << 16)
    assert torch.allclose(whole, small, atol=1e-6)
    assert torch.equal(torch.isneginf(lse_whole), torch.isneginf(lse_small))
    assert (whole[:, :, :200] == 0).all()  # rows 0..199 see no key (bottom-right, Nq - Nk = 200)


@pytest.mark.parametrize("nk,align", [(3000, "top-left"), (3001, "bottom-right"),
                                      (2000, "bottom-right")])
def test_naive_two_pass_softmax(env, nk, align):
    """The softmax that reads each row of S twice (ROW_IN_SMEM=0: rows longer than a CTA's shared
    memory) at a small size, through a what-if profile with 2 KiB of shared memory a CTA: what
    dev/naive_fa1_check.py's `rowx2` case checked, here with both causal alignments and an Nk
    that is not a multiple of 8 (the element-wise path)."""
    from iosim.gpu.launch import Launcher

    torch, hw, bench = env
    p = Problem(batch=1, heads=2, seqlen_q=3000, seqlen_k=nk, head_dim=64, causal=True,
                causal_align=align)
    pl = plan("naive", p, hw.with_changes(smem_per_block_optin_bytes=2048))
    assert pl.kernels[1].defines["ROW_IN_SMEM"] == 0
    q, k, v = bench.inputs(torch, p, seed=int.from_bytes(os.urandom(4), "little"))
    ref, lse, same, s_max = bench.reference(torch, q, k, v, p)
    bound = bench.error_bound("naive", p, same, s_max)
    err, ok = bench.check(torch, Launcher(pl, q, k, v), ref, lse, bound)
    assert ok, f"naive two-pass {p}: error {err:.3g} over bound {bound:.3g}"


def test_bench_says_what_does_not_fit(env, tmp_path):
    """naive at N = 65536, 8 heads: S and P need 128 GiB, more than the GPU has: its bench row
    says so (no OOM traceback), and fa2's row beside it is checked and timed."""
    from iosim.analysis.bench import run

    torch, hw, bench = env
    p = Problem(batch=1, heads=8, seqlen_q=65536, head_dim=128)
    df = run([p], ["naive", "fa2"], [], tmp_path / "b.csv", hw, False, False, progress=False)
    status = df.set_index("schedule").status
    assert status.naive.startswith("skipped: its tensors need") and status.fa2 == "ok"


def test_tune_verify_times_what_passes_in_interleaved_rounds(env):
    """`iosim tune --verify`: each configuration is checked, and those that pass are timed in
    ROUNDS interleaved rounds (median), so no pick is judged by its place in the queue."""
    from iosim.analysis import tune

    torch, hw, _ = env
    p = Problem(batch=1, heads=4, seqlen_q=512, seqlen_k=512, head_dim=64)
    ranked = tune.rank("fa2", [p], hw, tune.Tiles(), note=lambda _: None, compile=False)
    m = tune.verify(ranked, hw, top=3)
    ok = m[m.status == "ok"]
    assert len(ok) >= 3 and (ok.time_rounds == tune.ROUNDS).all() and (ok.time_ms > 0).all()
    assert m.loc[m.status != "ok", "time_ms"].isna().all()  # a failed check is never timed
