"""fa1's query-row split (the FlashAttention-1 library's forward num_splits): a head's query
blocks run on several CTAs when batch·heads cannot fill the GPU, chosen in the Plan."""

import math

import numpy as np
import pytest

from iosim.analysis.predict import row
from iosim.core.hardware import load
from iosim.core.plan import ctas_per_sm
from iosim.core.problem import Problem
from iosim.schedules import plan
from iosim.schedules.base import (
    KV_LOAD_TRIPS,
    SPLIT_EFFICIENCY,
    BlockMap,
    _even_counts,
    _split_work,
    split_blocks,
)

H100 = load("h100-sxm5-80gb")


def test_eight_heads_at_16k_fill_the_h100():
    # d = 64: Br = 64, 4 warps at 255 registers: 65536 // (128·255) = 2 CTAs per SM, 264
    # slots. 8 heads x 32 splits of 512 rows = 256 CTAs (0.97 of a wave); 29 splits (232
    # CTAs, 0.88) is below 95% of that, and 33 cannot be made from 256 query blocks.
    p = Problem(batch=1, heads=8, seqlen_q=16384, head_dim=64)
    main = plan("fa1", p, H100).main
    assert ctas_per_sm(main, H100) == 2
    assert main.grid == (32, 8, 1) and main.defines["SPLIT_ROWS"] == 512
    assert main.ctas >= H100.sm_count
    assert len(main.trips) == 32 and main.trips.sum() == (16384 // 64) * (16384 // 128)


@pytest.mark.parametrize("bh,n,d,causal", [(8, 16384, 64, False), (3, 1000, 256, False),
                                           (512, 1024, 64, False), (40, 8192, 128, False)])
def test_split_count_is_the_fewest_that_fills_the_gpu(bh, n, d, causal):
    p = Problem(batch=1, heads=bh, seqlen_q=n, head_dim=d, causal=causal)
    main = plan("fa1", p, H100).main
    slots = ctas_per_sm(main, H100) * H100.sm_count
    tm = -(-n // main.block_m)

    def eff(s: int) -> float:
        return bh * s / slots / math.ceil(bh * s / slots)
    counts = {-(-tm // qb) for qb in range(1, tm + 1)}  # what even splits of tm blocks give
    best = max(eff(s) for s in counts)
    s = main.grid[0]
    assert s in counts and main.defines["SPLIT_ROWS"] == -(-tm // s) * main.block_m
    assert eff(s) >= SPLIT_EFFICIENCY * best
    assert all(eff(x) < SPLIT_EFFICIENCY * best for x in counts if x < s)
    assert split_blocks(bh, tm, slots) * main.block_m == main.defines["SPLIT_ROWS"]


@pytest.mark.parametrize("bh,n,d", [(16, 16384, 128), (32, 4096, 64), (32, 16384, 64), (16, 8192, 128)])
def test_causal_splits_balance_the_triangle(bh, n, d):
    """Causal: a head's last split visits the most key blocks. The count is chosen by the
    makespan it implies, so the longest split stays near the average and the count is at least
    the causal-blind (wave-efficiency) one."""
    p = Problem(batch=1, heads=bh, seqlen_q=n, head_dim=d, causal=True)
    main = plan("fa1", p, H100).main
    slots = ctas_per_sm(main, H100) * H100.sm_count
    tm = -(-n // main.block_m)
    hi = BlockMap.of(p, main.block_m, main.block_n).hi
    blind = -(-tm // split_blocks(bh, tm, slots))  # splits without the work per split
    assert main.grid[0] >= blind
    assert main.trips.max() <= 2.5 * main.trips.mean()  # (one split per head: tm/2 x the mean)
    qb = split_blocks(bh, tm, slots, hi)
    assert main.defines["SPLIT_ROWS"] == qb * main.block_m


def test_heads_that_fill_the_gpu_are_not_split():
    # 16 x 32 = 512 heads: 1.94 waves of 264 at one CTA per head (0.97)
    p = Problem(batch=16, heads=32, seqlen_q=1024, head_dim=64)
    main = plan("fa1", p, H100).main
    assert main.grid == (1, 32, 16) and main.defines["SPLIT_ROWS"] == 1024


def test_causal_splits_carry_their_own_trips_and_kv_reads():
    # causal, 4 heads at N = 4096 (Br = 64, Bc = 128): split s of qb blocks visits, for each of
    # its query blocks i, the key blocks j <= i·64/128; it loads K/V up to its last block's.
    p = Problem(batch=1, heads=4, seqlen_q=4096, head_dim=64, causal=True)
    main = plan("fa1", p, H100).main
    qb = main.defines["SPLIT_ROWS"] // 64
    hi = [(64 * i + 63) // 128 + 1 for i in range(64)]  # key blocks query block i visits
    trips = [sum(hi[s:s + qb]) for s in range(0, 64, qb)]
    assert main.grid[0] == len(trips) > 1 and main.trips.tolist() == trips
    kv_rows = sum(128 * hi[min(s + qb, 64) - 1] for s in range(0, 64, qb))
    assert main.traffic.reads["K"] == p.bh * kv_rows * 64 * p.elem_bytes
    assert BlockMap.of(p, 64, 128).kv_rows_loaded(qb) == kv_rows


def test_the_split_makes_fa1_faster_where_heads_are_few():
    # The timing model sees the split's grid: at 16k with 8 heads fa1 runs within a few times
    # fa2 (the split fills the SMs), where one CTA per head would leave 124 of 132 SMs idle.
    p = Problem(batch=1, heads=8, seqlen_q=16384, head_dim=64)
    fa1, fa2 = (row(plan(s, p, H100), H100)["time_pred_ms"] for s in ("fa1", "fa2"))
    assert fa1 / fa2 < 4


def test_measured_rows_are_repredicted_with_the_split_they_ran():
    # The committed fa1 forward measurements predate the split (no split_rows column): they
    # are re-predicted as the kernel that ran them, one CTA per head; a row that names its
    # split (the bench records split_rows) with that split.
    import pandas as pd

    from iosim.analysis.calibrate import measured_plan
    from iosim.analysis.validate import repredict
    from iosim.schedules import Tiles

    base = dict(hw="h100-sxm5-80gb", schedule="fa1", direction="fwd", batch=1, heads=32,
                kv_heads=32, seqlen_q=16384, seqlen_k=16384, head_dim=64, dtype="bf16",
                causal=False)
    p = Problem(batch=1, heads=32, seqlen_q=16384, head_dim=64)
    old = pd.DataFrame([base])
    unsplit = plan("fa1", p, H100, Tiles(split_rows=16384))
    assert unsplit.main.grid == (1, 32, 1)
    assert repredict(old, H100).time_pred_ms.iloc[0] == row(unsplit, H100)["time_pred_ms"]
    assert measured_plan(next(old.itertuples(index=False)), H100).main.grid == (1, 32, 1)
    new = pd.DataFrame([base | {"split_rows": 2048}])
    assert measured_plan(next(new.itertuples(index=False)), H100).main.grid == (8, 32, 1)
    split = row(plan("fa1", p, H100), H100)
    assert split["split_rows"] == 2048  # what the bench writes beside its measurement
    assert repredict(new, H100).time_pred_ms.iloc[0] == split["time_pred_ms"]
    assert split["time_pred_ms"] < row(unsplit, H100)["time_pred_ms"] / 2


# ------------------------------------------------------------------ backward: key-block splits

def bwd(batch, heads, n, d, causal=False, **kw) -> Problem:
    return Problem(batch=batch, heads=heads, seqlen_q=n, head_dim=d, causal=causal,
                   direction="bwd", **kw)


def test_backward_splits_key_blocks_to_fill_the_gpu():
    # 8 heads at 16k, d = 64 (Bc = 128: 128 key blocks, one 256-thread CTA per SM at 255
    # registers, 132 slots): one CTA per head would leave 124 SMs idle. The split count is the
    # forward's wave rule over the key blocks; dQ goes out by atomics.
    p = bwd(1, 8, 16384, 64)
    main = plan("fa1", p, H100).main
    slots = ctas_per_sm(main, H100) * H100.sm_count
    tn = 16384 // main.block_n
    s = main.grid[0]
    assert main.grid[1:] == (8, 1) and s > 1 and main.ctas >= 0.9 * slots
    assert main.defines["SPLIT_COLS"] == -(-tn // s) * main.block_n and main.defines["DQ_ATOMIC"] == 1

    def eff(x: int) -> float:
        return 8 * x / slots / math.ceil(8 * x / slots)
    counts = {-(-tn // kb) for kb in range(1, tn + 1)}
    best = max(eff(x) for x in counts)
    assert eff(s) >= SPLIT_EFFICIENCY * best and all(eff(x) < SPLIT_EFFICIENCY * best for x in counts if x < s)
    # every split visits all 256 query blocks for each of its key blocks
    assert main.trips.tolist() == [256 * (main.defines["SPLIT_COLS"] // main.block_n)] * s


def test_backward_unsplit_where_heads_fill_the_gpu():
    # 16 x 32 heads at N = 1024: 512 CTAs (3.9 waves of 132): one CTA per head, dQ
    # read-modify-written (the kernel of the committed measurements before the split)
    main = plan("fa1", bwd(16, 32, 1024, 64), H100).main
    assert main.grid == (1, 32, 16) and main.defines["SPLIT_COLS"] == 1024
    assert main.defines["DQ_ATOMIC"] == 0


def test_backward_split_moves_no_bytes_but_changes_the_grid_and_time():
    # Each key block is loaded by one split and dQ's atomics are counted as fa2_bwd's (a read
    # and a write of dQacc per visited pair): the HBM and work totals are the unsplit ones;
    # the grid, the trips per CTA, the K/V reuse distance and the waited-for loads are not.
    from iosim.kernels import SPECS
    from iosim.schedules import Tiles

    for causal in (False, True):
        p = bwd(1, 16, 16384, 128, causal, kv_heads=4)
        split, one = (plan("fa1", p, H100, t).main for t in (Tiles(), Tiles(split_cols=16384)))
        s = split.grid[0]
        assert s > 1 and one.grid == (1, 16, 1)
        assert split.traffic == one.traffic and split.work == one.work
        assert split.traffic.reads["dQacc"] == split.traffic.writes["dQacc"] > 0
        assert len(split.trips) == s and split.trips.sum() == one.trips.sum()
        assert split.reuse == {"K": s, "V": s} and one.reuse == {"K": 1, "V": 1}
        assert SPECS["fa1_bwd"].sync_loads(split.defines) == 1 < SPECS["fa1_bwd"].sync_loads(one.defines)
        t_split = row(plan("fa1", p, H100), H100)["time_pred_ms"]
        t_one = row(plan("fa1", p, H100, Tiles(split_cols=16384)), H100)["time_pred_ms"]
        assert t_split < t_one / 3, (causal, t_split, t_one)


@pytest.mark.parametrize("align", ["top-left", "bottom-right"])
def test_backward_causal_splits_carry_their_own_trips(align):
    # causal, 32 heads at N = 4096, d = 64 (Br = 64, Bc = 128): key block j is visited by the
    # query blocks whose last row sees its first key; split s of kb key blocks sums them.
    p = bwd(1, 32, 4096, 64, True, causal_align=align, seqlen_k=4096 + 300 * (align == "bottom-right"))
    main = plan("fa1", p, H100).main
    kb = main.defines["SPLIT_COLS"] // 128
    nk, off = p.seqlen_k, p.causal_offset
    tn = -(-nk // 128)
    visits = [sum(1 for i in range(64) if 64 * i + 63 + off >= 128 * j) for j in range(tn)]
    trips = [sum(visits[s:s + kb]) for s in range(0, tn, kb)]
    assert main.grid[0] == len(trips) > 1 and main.trips.tolist() == trips
    assert BlockMap.of(p, 64, 128).col_split_pairs(kb).tolist() == trips
    assert split_blocks(32, tn, ctas_per_sm(main, H100) * H100.sm_count,
                        np.array(visits), outer="count") == kb


def test_backward_split_cols_is_what_a_measured_row_ran():
    # bench rows record split_cols; a backward row without it (measured before the split)
    # is re-predicted as one CTA per head with dQ read-modify-written
    import pandas as pd

    from iosim.analysis.calibrate import measured_plan

    base = dict(hw="h100-sxm5-80gb", schedule="fa1", direction="bwd", batch=1, heads=16,
                kv_heads=16, seqlen_q=8192, seqlen_k=8192, head_dim=128, dtype="bf16",
                causal=False)
    old = next(pd.DataFrame([base]).itertuples(index=False))
    assert measured_plan(old, H100).main.grid == (1, 16, 1)
    assert measured_plan(old, H100).main.defines["DQ_ATOMIC"] == 0
    new = next(pd.DataFrame([base | {"split_cols": 2048}]).itertuples(index=False))
    assert measured_plan(new, H100).main.grid == (4, 16, 1)
    assert row(plan("fa1", bwd(1, 16, 8192, 128), H100), H100)["split_cols"] is not None


def test_gpu_split_cases_split_as_they_say():
    # tests/test_gpu_backward.py FA1_SPLIT_CASES on a 132-SM GPU: all split but the last
    from test_gpu_backward import FA1_SPLIT_CASES, problem

    grids = [plan("fa1", problem(c, "bf16"), H100).main.grid[0] for c in FA1_SPLIT_CASES]
    assert all(g > 1 for g in grids[:-1]) and grids[-1] == 1, grids
    kb = [plan("fa1", problem(c, "bf16"), H100).main.defines["SPLIT_COLS"] for c in FA1_SPLIT_CASES]
    assert kb[2] > 64 and kb[4] > 64  # several key blocks a split (Bc = 64 at d = 128)


def _split_work_one_by_one(tm: int, hi: np.ndarray, outer: str) -> tuple:
    """base._split_work's answer, one split count at a time (what it computes at once)."""
    counts = sorted({-(-tm // qb) for qb in range(1, tm + 1)})
    longest, mean, n = [], [], []
    for s in counts:
        starts = np.arange(0, tm, -(-tm // s))
        steps = (np.maximum.reduceat(hi, starts) if outer == "max"
                 else np.add.reduceat((hi > 0).astype(np.int64), starts))
        work = np.add.reduceat(hi, starts) + KV_LOAD_TRIPS * steps
        longest.append(float(work.max()))
        mean.append(float(work.mean()))
        n.append(len(starts))
    return np.array(counts), np.array(longest), np.array(mean), np.array(n, np.float64)


def test_split_counts_and_their_work_at_once_are_those_one_by_one():
    """_even_counts (every ceil(tm / qb), from O(sqrt(tm)) of them) and _split_work (every
    count's splits in one numpy pass) equal the counts and work taken one split count at a time,
    to the bit: rising key blocks (the forward's rows), falling (the backward's key blocks) and
    any order."""
    for tm in range(1, 3000):
        assert _even_counts.__wrapped__(tm) == tuple(sorted({-(-tm // qb) for qb in range(1, tm + 1)}))
    rng = np.random.default_rng(0)
    for trial in range(300):
        tm = int(rng.integers(1, 400))
        hi = np.sort(rng.integers(0, 3000, tm))
        hi = (hi, hi[::-1].copy(), rng.integers(0, 3000, tm))[trial % 3].astype(np.int64)
        for outer in ("max", "count"):
            got = _split_work.__wrapped__(tm, (hi.dtype.str, hi.tobytes()), outer)
            for a, b in zip(got, _split_work_one_by_one(tm, hi, outer)):
                assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
