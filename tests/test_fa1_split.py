"""fa1's query-row split (the FlashAttention-1 library's forward num_splits): a head's query
blocks run on several CTAs when batch·heads cannot fill the GPU, chosen in the Plan."""

import math

import pytest

from iosim.analysis.predict import row
from iosim.core.hardware import load
from iosim.core.plan import ctas_per_sm
from iosim.core.problem import Problem
from iosim.schedules import plan
from iosim.schedules.base import SPLIT_EFFICIENCY, BlockMap, split_blocks

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
