"""Limits of the L2-aware DRAM estimate, and the block-map closed forms the counts use."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from iosim.core import hardware
from iosim.core.hardware import InputError
from iosim.core.problem import Direction, Dtype, Problem
from iosim.model import memory
from iosim.schedules import plan
from iosim.schedules.base import BlockMap, blocks

PROFILES = {n: hardware.load(n) for n in hardware.available()}

problems = st.builds(
    Problem,
    batch=st.sampled_from([1, 2, 8]),
    heads=st.sampled_from([1, 4, 16, 32]),
    kv_heads=st.sampled_from([None, 1]),
    seqlen_q=st.sampled_from([1, 77, 512, 1000, 4096, 32768]),
    head_dim=st.sampled_from([64, 128, 256]),
    dtype=st.sampled_from([Dtype.bf16, Dtype.fp8_e4m3, Dtype.fp32]),
    causal=st.booleans(),
    direction=st.sampled_from([Direction.fwd, Direction.bwd]),
)


@settings(max_examples=80, deadline=None)
@given(problems, st.sampled_from(sorted(PROFILES)), st.sampled_from(["naive", "fa1", "fa2", "fa3"]),
       st.sampled_from([None, 0.25, 4.0]))
def test_dram_between_compulsory_and_two_level(p, hw_name, s, l2_scale):
    hw = PROFILES[hw_name]
    if l2_scale:
        hw = hw.with_changes(l2_bytes=int(hw.l2_bytes * l2_scale))
    try:
        pl = plan(s, p, hw)
    except InputError:
        return
    dram = memory.estimate(pl, hw)
    read, write = sum(d.read for d in dram), sum(d.write for d in dram)
    t = pl.traffic
    # never above the papers' two-level count (within rounding of one byte per kernel), but for
    # lines prefetched into L2 and evicted before their load: read twice at most
    again = sum(k.traffic.reads.get(n, 0) for k in pl.kernels
                for n in memory.prefetch_ahead(k, p.elem_bytes))
    assert read <= t.hbm_read + again + len(dram)
    assert write <= t.hbm_write + len(dram)
    assert all(d.read >= 0 and d.write >= 0 for d in dram)
    # never below the compulsory reads: Q, K and V (fp8: their bf16 originals at 2 bytes, which
    # fa3 quantises, or their e4m3 copies) come from DRAM at least once, as many bytes as read
    compulsory = sum(min(memory.tensor_bytes(p, n), t.reads.get(n, 0))
                     for n in ("Q", "K", "V", "Q8", "K8", "Vt8"))
    assert read >= compulsory - len(dram)


def test_flash_forward_dram_is_compulsory_when_kv_fits_l2():
    """FA2 forward at N=4096: K/V per (batch, head) are re-read by every query block; the
    CTAs of one head run together, so L2 serves the re-reads: DRAM sees Q, K, V once."""
    hw = PROFILES["h100-sxm5-80gb"]
    p = Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
    pl = plan("fa2", p, hw)
    (d,) = memory.estimate(pl, hw)
    qkv = 3 * 4 * 32 * 4096 * 128 * 2  # 3 tensors x B·H·N·d x 2 bytes
    assert d.read == qkv
    assert pl.traffic.hbm_read > 10 * qkv  # the two-level count re-reads K/V per query block


def test_naive_intermediates_dirty_in_l2_when_small():
    """S written by the QK^T kernel: when it fits the L2 it is still dirty there when the kernel
    ends (Nsight Compute does not count it); a large S reaches DRAM. The softmax starts cold
    (ncu flushes the L2 between kernels) and reads all of S."""
    hw = PROFILES["h100-sxm5-80gb"]
    small = plan("naive", Problem(batch=1, heads=1, seqlen_q=1024, head_dim=64), hw)
    big = plan("naive", Problem(batch=4, heads=32, seqlen_q=8192, head_dim=64), hw)
    ds, db = memory.estimate(small, hw), memory.estimate(big, hw)
    s_small, s_big = 1024 * 1024 * 2, 4 * 32 * 8192 * 8192 * 2
    assert ds[0].write < 0.1 * s_small
    assert db[0].write >= 0.99 * s_big
    assert ds[1].read >= s_small and db[1].read >= s_big


def test_shared_tiles_hit_when_launched_close():
    """K/V re-reads by the neighbouring query-block CTAs hit L2 however many heads run at once,
    while FA1's own re-reads of O, l, m (the same CTA, one outer step later) miss once the
    resident CTAs' footprints exceed the L2."""
    hw = PROFILES["h100-sxm5-80gb"]
    p = Problem(batch=16, heads=32, seqlen_q=16384, head_dim=128)
    (fa2,) = memory.estimate(plan("fa2", p, hw), hw)
    assert fa2.read == 3 * 16 * 32 * 16384 * 128 * 2
    pl = plan("fa1", p, hw)
    fa1 = memory.estimate(pl, hw)[1]
    assert fa1.read > 0.9 * pl.kernels[1].traffic.hbm_read


@settings(max_examples=60, deadline=None)
@given(problems, st.sampled_from(sorted(PROFILES)), st.sampled_from(["naive", "fa1", "fa2", "fa3"]),
       st.sampled_from([1.5, 2, 4]))
def test_more_sms_never_more_dram_reads(p, hw_name, s, factor):
    """More CTAs at once only turn re-reads by other CTAs into hits (see iosim/model/memory.py):
    the same Plan on a GPU with more SMs. (A Plan made for the larger GPU may take another
    layout, e.g. fa1 splitting a head's keys over two CTAs, each of which reads all of Q and
    O: more reads for more parallelism, a different schedule.) Not for a kernel that prefetches
    into L2: more CTAs at once evict more of its prefetched lines before their load
    (test_more_resident_ctas_never_fewer_refetches)."""
    hw = PROFILES[hw_name]
    big = hw.with_changes(sm_count=int(hw.sm_count * factor))
    try:
        pl = plan(s, p, hw)
        a, b = memory.estimate(pl, hw), memory.estimate(pl, big)
    except InputError:
        return
    if memory.same_cta_rereads(pl) or any(memory.prefetch_ahead(k, 2) for k in pl.kernels):
        return
    assert sum(d.read for d in b) <= sum(d.read for d in a) + len(a)


@settings(max_examples=60, deadline=None)
@given(st.floats(1, 1e9), st.floats(1, 1e8), st.integers(1, 4096), st.integers(1, 4),
       st.floats(1e6, 1e9))
def test_more_resident_ctas_never_fewer_refetches(count, ahead, resident, more, l2):
    """Prefetched lines are evicted by what the other resident CTAs move through the L2 in the
    meantime: more CTAs at once never keep more of them, and none is read more than twice."""
    few, many = (memory.refetched(np.float64(count), np.float64(ahead), np.float64(r), l2)
                 for r in (resident, resident * (1 + more)))
    assert 0 <= few <= many <= count


def _matrices(nq, nk, causal, bm, bn, offset=0):
    r, c = blocks(nq, bm), blocks(nk, bn)
    row0 = np.arange(len(r))[:, None] * bm + offset  # row i sees columns j <= i + offset
    col0 = np.arange(len(c))[None, :] * bn
    row_last = row0 + r[:, None] - 1
    col_last = col0 + c[None, :] - 1
    if causal:
        visit = col0 <= row_last
        diag = visit & (col_last > row0)
    else:
        visit = np.ones((len(r), len(c)), bool)
        diag = np.zeros_like(visit)
    return r, c, visit, diag


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 900), st.integers(1, 900), st.booleans(),
       st.sampled_from([16, 48, 64, 128, 192]), st.sampled_from([16, 64, 80, 128, 176]),
       st.booleans())
def test_block_map_closed_forms_match_the_matrices(nq, nk, causal, bm, bn, bottom_right):
    """The O(Tm) sums BlockMap uses equal the (Tm, Tn) matrix sums they replace (top-left and
    bottom-right causal alignment: offset 0 or Nk - Nq)."""
    off = nk - nq if bottom_right else 0
    r, c, visit, diag = _matrices(nq, nk, causal, bm, bn, off)
    b = BlockMap(nq, nk, bm, bn, causal, off)
    assert (b.visit == visit).all() and (b.diag == diag).all()
    assert b.sum_rc() == int(r @ visit.astype(np.int64) @ c)
    assert b.sum_rc_diag() == b.sum_rc(b.diag) == int(r @ diag.astype(np.int64) @ c)
    assert (b.row_visits() == visit.sum(1)).all() and (b.col_visits() == visit.sum(0)).all()
    assert b.sum_r() == int(visit.sum(1) @ r) and b.sum_c() == int(visit.sum(0) @ c)
    assert b.pairs == int(visit.sum()) and b.kv_rows_loaded() == int(c[visit.any(0)].sum())
    assert b.rows_visited() == int(r[visit.any(1)].sum())
    assert b.diag_pairs() == int(diag.sum()) and (b.r == r).all() and (b.c == c).all()


def test_persistent_grid_moves_the_dram_bytes_of_its_tiles():
    """fa3's persistent fp8 forward (KernelPlan.tiles): its 132 CTAs run the one-tile grid's
    tiles in the same order, 132 at a time, so the L2 sees what it sees with one tile a CTA;
    counting a CTA's bytes (all its tiles') as one unit would push the re-read K/V out of L2."""
    from iosim.analysis.predict import row
    from iosim.schedules import Tiles

    hw = PROFILES["h100-sxm5-80gb"]
    for d in (128, 256):
        p = Problem(batch=4, heads=2048 // d, seqlen_q=4096, head_dim=d, dtype=Dtype.fp8_e4m3)
        pl, one = plan("fa3", p, hw, Tiles(persistent=True)), plan("fa3", p, hw, Tiles(persistent=False))
        assert pl.main.tiles == one.main.ctas > pl.main.ctas
        assert memory.estimate(pl, hw) == memory.estimate(one, hw)
        r, r1 = row(pl, hw), row(one, hw)  # the batched path (iosim.analysis.table)
        assert (r["dram_read_bytes"], r["dram_write_bytes"]) == (r1["dram_read_bytes"], r1["dram_write_bytes"])
        k8 = pl.main.traffic.reads["K8"]  # re-read by every query tile of a head
        assert memory.estimate(pl, hw)[-1].read < 0.25 * k8
