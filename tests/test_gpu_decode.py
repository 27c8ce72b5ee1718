"""kernels/decode.cu (split-KV decode and its combine) against a float32 reference on fresh
random data, outputs NaN-poisoned first; the bound is a multiple of a same-dtype reference's
own error plus one rounding unit (iosim.gpu.bench, as for the other kernels)."""

import os

import pytest

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.schedules import plan

pytestmark = pytest.mark.gpu

# (batch, heads, kv_heads, seqlen_q, seqlen_k, head_dim, causal, window, dtype): GQA 32/8 split
# many ways; MHA with a ragged cache; 4 rows x 8 heads packed in 32 rows, causal; d = 256 with
# a window; batch 64 (one split: O written by decode_fwd itself); a window cutting tiles, fp16
CASES = [
    (1, 32, 8, 1, 8192, 128, False, None, "bf16"), (2, 8, 8, 1, 3000, 64, False, None, "bf16"),
    (1, 16, 2, 4, 5000, 128, True, None, "bf16"), (1, 8, 1, 16, 2048, 256, True, 100, "bf16"),
    (64, 32, 8, 1, 1024, 128, False, None, "bf16"), (3, 4, 2, 7, 777, 64, True, 300, "fp16"),
    (1, 32, 8, 1, 100000, 128, False, None, "fp16"), (2, 12, 4, 3, 1, 128, True, None, "bf16"),
]
# paged caches (pages in a random order): page sizes below, at and above the 64-key tile, a
# ragged last page, causal with a window
PAGED = [  # (case, page_size)
    ((1, 32, 8, 1, 8192, 128, False, None, "bf16"), 16),
    ((2, 8, 2, 4, 3001, 128, True, None, "bf16"), 64),
    ((1, 32, 8, 1, 20000, 128, False, None, "fp16"), 256),
    ((3, 4, 2, 7, 777, 64, True, 300, "bf16"), 32),
    ((1, 8, 1, 16, 2048, 256, True, 100, "bf16"), 128),
]


@pytest.fixture(scope="module")
def env():
    from iosim.gpu import bench

    torch = bench.require_gpu()
    hw = load(bench.profile_for(torch.cuda.get_device_name()))
    return torch, hw, bench


@pytest.mark.parametrize("case,page", [(c, None) for c in CASES] + PAGED)
def test_decode_matches_reference(env, case, page):
    from iosim.gpu.launch import Launcher

    torch, hw, bench = env
    b, h, kvh, nq, nk, d, causal, w, dtype = case
    p = Problem(batch=b, heads=h, kv_heads=kvh, seqlen_q=nq, seqlen_k=nk, head_dim=d,
                dtype=dtype, causal=causal, causal_align="bottom-right", window=w,
                page_size=page)
    pl = plan("decode", p, hw)
    q, k, v = bench.inputs(torch, p, seed=int.from_bytes(os.urandom(4), "little"))
    ref, lse_ref, same, s_max = bench.reference(torch, q, k, v, p)
    bound = bench.error_bound("decode", p, same, s_max)
    err, ok = bench.check(torch, Launcher(pl, q, k, v), ref, lse_ref, bound)
    assert ok, f"decode {case} ({pl.notes}): error {err:.3g} over bound {bound:.3g}"


@pytest.mark.parametrize("splits", [1, 7, 65])
def test_forced_split_counts_match_reference(env, splits):
    """The split counts `iosim bench --kv-splits` forces: one (O written by decode_fwd), an odd
    count over a ragged paged cache (its last split shorter) and the most this cache allows (130
    tiles: 65 splits of 2)."""
    from iosim.gpu.launch import Launcher
    from iosim.schedules import Tiles

    torch, hw, bench = env
    p = Problem(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=8192 + 77, head_dim=128,
                page_size=64 if splits == 7 else None)
    pl = plan("decode", p, hw, Tiles(kv_splits=splits), check=True)
    assert pl.main.defines["NUM_SPLITS"] == splits
    q, k, v = bench.inputs(torch, p, seed=int.from_bytes(os.urandom(4), "little"))
    ref, lse_ref, same, s_max = bench.reference(torch, q, k, v, p)
    bound = bench.error_bound("decode", p, same, s_max)
    err, ok = bench.check(torch, Launcher(pl, q, k, v), ref, lse_ref, bound)
    assert ok, f"decode {splits} splits ({pl.notes}): error {err:.3g} over bound {bound:.3g}"


def test_fused_combine_leaves_its_counters_zero(env):
    """The combine runs in the CTA that finishes last, found by a count per (batch, K/V head
    chunk) that it sets back to zero: launched again and again on the same buffers, every
    launch is right (O, LSE NaN-poisoned before each) and the counts end at zero."""
    from iosim.gpu.launch import Launcher

    torch, hw, bench = env
    p = Problem(batch=3, heads=32, kv_heads=8, seqlen_q=2, seqlen_k=5000 + 13, head_dim=128)
    pl = plan("decode", p, hw)
    assert pl.main.defines["NUM_SPLITS"] > 1 and len(pl.kernels) == 1
    q, k, v = bench.inputs(torch, p, seed=int.from_bytes(os.urandom(4), "little"))
    ref, lse_ref, same, s_max = bench.reference(torch, q, k, v, p)
    bound = bench.error_bound("decode", p, same, s_max)
    run = Launcher(pl, q, k, v)
    for i in range(4):
        err, ok = bench.check(torch, run, ref, lse_ref, bound)
        assert ok, f"launch {i}: error {err:.3g} over bound {bound:.3g}"
    assert int(run.buf["Counter"].abs().sum()) == 0


@pytest.mark.parametrize("ahead", [True, False])
def test_paged_gathers_match_reference(env, ahead):
    """Both paged gathers of decode.cu: the block table read a tile ahead (PAGE_AHEAD=1, the
    Plan's) and per row as each load issues (PAGE_AHEAD=0, the earlier kernel, which measured
    rows without `page_ahead` ran): 16-token pages in a random order, a ragged last page and
    tile, a window and causal rows, several splits."""
    from iosim.gpu.launch import Launcher
    from iosim.schedules import Tiles

    torch, hw, bench = env
    p = Problem(batch=2, heads=16, kv_heads=4, seqlen_q=2, seqlen_k=9000 + 41, head_dim=128,
                causal=True, causal_align="bottom-right", window=5000, page_size=16)
    pl = plan("decode", p, hw, Tiles(page_ahead=ahead), check=True)
    assert pl.main.defines["PAGE_AHEAD"] == int(ahead) and pl.main.defines["NUM_SPLITS"] > 1
    q, k, v = bench.inputs(torch, p, seed=int.from_bytes(os.urandom(4), "little"))
    ref, lse_ref, same, s_max = bench.reference(torch, q, k, v, p)
    bound = bench.error_bound("decode", p, same, s_max)
    err, ok = bench.check(torch, Launcher(pl, q, k, v), ref, lse_ref, bound)
    assert ok, f"paged, ahead={ahead} ({pl.notes}): error {err:.3g} over bound {bound:.3g}"
