"""The executor runs each Plan's loops on real data: (a) the result is exact attention,
(b) what it counts tile by tile equals the Plan's closed-form counts, kernel by kernel."""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from iosim.core.hardware import load
from iosim.core.problem import Direction, Problem
from iosim.model import executor, reference
from iosim.schedules import SCHEDULES, Tiles, plan

H100 = load("h100-sxm5-80gb")


@st.composite
def cases(draw):
    heads = draw(st.sampled_from([1, 2, 4]))
    p = Problem(
        batch=draw(st.integers(1, 2)), heads=heads,
        kv_heads=draw(st.sampled_from([d for d in (1, 2, 4) if heads % d == 0])),
        seqlen_q=draw(st.integers(1, 70)), seqlen_k=draw(st.integers(1, 70)),
        head_dim=draw(st.sampled_from([8, 16, 24])),
        dtype=draw(st.sampled_from(["fp16", "bf16", "fp32", "fp8_e4m3"])),
        causal=draw(st.booleans()), direction=draw(st.sampled_from(["fwd", "bwd"])),
        causal_align=draw(st.sampled_from(["top-left", "bottom-right"])),
    )
    t = Tiles(block_m=draw(st.sampled_from([8, 16, 32, 48])),
              block_n=draw(st.sampled_from([8, 16, 24, 64])), block_k=draw(st.sampled_from([8, 16])))
    return draw(st.sampled_from(GENERIC)), p, t


# decode takes Nq <= 16 query rows, forward only: its own property test below
GENERIC = sorted(set(SCHEDULES) - {"decode"})
FWD_ONLY = ("fa1_paper",)  # Algorithm 1: a forward model


def check(name: str, p: Problem, t: Tiles, seed: int = 0, hw=H100):
    if name in FWD_ONLY and p.direction is Direction.bwd:
        return
    if name == "standard" and p.causal and p.causal_offset and p.causal_align.value == "bottom-right":
        return  # the benchmark's mask is top-left only (refused)
    pl = plan(name, p, hw, t)
    x = reference.random_inputs(p, np.random.default_rng(seed))
    if p.direction is Direction.fwd:
        got, meter = executor.run(pl, x["q"], x["k"], x["v"])
        want = reference.forward(p, x["q"], x["k"], x["v"])
        keys = ["O"] + (["LSE"] if name not in ("naive", "standard") else [])
    else:
        fwd = reference.forward(p, x["q"], x["k"], x["v"])
        got, meter = executor.run(pl, x["q"], x["k"], x["v"], x["do"], fwd["O"], fwd["LSE"])
        want = reference.backward(p, x["q"], x["k"], x["v"], x["do"])
        keys = ["dQ", "dK", "dV"]
    for key in keys:
        # a row that sees no key (bottom-right causal, Nq > Nk) has LSE = -inf in both
        gone = np.isneginf(want[key])
        assert np.array_equal(np.isneginf(got[key]), gone), (name, key)
        g, w = got[key][~gone], want[key][~gone]
        # relative to the result's scale (inputs are O(1); a gradient can be exactly 0)
        err = np.abs(g - w).max(initial=0.0) / max(np.abs(w).max(initial=0.0), 1.0)
        assert err < 1e-10, (name, key, err)
    for kp in pl.kernels:
        traffic, work = meter.counts(kp.name)
        assert traffic == kp.traffic, (kp.name, traffic, kp.traffic)
        assert work == kp.work, (kp.name, work, kp.work)
    return pl


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_executor_matches_reference_and_closed_form(case):
    check(*case)


def test_every_schedule_and_direction_default_tiles_small():
    # The hardware-chosen tiles too (larger than the problem: one ragged block each way).
    for name in GENERIC:
        for direction in ("fwd", "bwd"):
            for causal in (False, True):
                p = Problem(batch=1, heads=2, kv_heads=1, seqlen_q=37, seqlen_k=53, head_dim=16,
                            causal=causal, direction=direction)
                check(name, p, Tiles())


def test_bottom_right_causal_rows_that_see_no_key_are_zero():
    # Nq = 70 > Nk = 20, bottom-right: row i sees keys j <= i - 50, so rows 0..49 see none
    # (O = 0, LSE = -inf, as FlashAttention returns); whole query blocks are never visited.
    for name in ("naive", "fa1", "fa2"):
        p = Problem(batch=1, heads=1, seqlen_q=70, seqlen_k=20, head_dim=16, causal=True,
                    causal_align="bottom-right")
        check(name, p, Tiles(block_m=16, block_n=16, block_k=16))
        x = reference.random_inputs(p, np.random.default_rng(1))
        out = reference.forward(p, x["q"], x["k"], x["v"])
        assert (out["O"][0, 0, :50] == 0).all() and np.isneginf(out["LSE"][0, 0, :50]).all()
        assert np.isfinite(out["LSE"][0, 0, 50:]).all()


def test_fa1_query_row_splits_match_the_closed_form():
    # A GPU of one SM holding 3 CTAs: one head of 5 query blocks split 3 ways (2, 2, 1 blocks:
    # 32 rows a split); each split re-reads the K/V blocks its rows see. Ragged lengths, both
    # causal diagonals, GQA; the executor runs the Plan's splits.
    hw = H100.with_changes(sm_count=1, max_ctas_per_sm=3)
    t = Tiles(block_m=16, block_n=16, split_rows=32)
    for causal, align in ((False, "top-left"), (True, "top-left"), (True, "bottom-right")):
        for nk in (50, 77, 110):
            p = Problem(batch=1, heads=1, seqlen_q=77, seqlen_k=nk, head_dim=16, causal=causal,
                        causal_align=align)
            pl = check("fa1", p, t, hw=hw)
            main = pl.main
            assert main.grid == (3, 1, 1) and main.defines["SPLIT_ROWS"] == 32
            # K, V: split s reads the key blocks that its last row (< 32(s+1)) sees: causal,
            # keys < 32(s+1) + offset, in whole 16-row blocks (the last one ragged)
            ends = (32, 64, 77)
            seen = [min(nk, e + p.causal_offset) if causal else nk for e in ends]
            kv = sum(min(nk, -(-n // 16) * 16) for n in seen)
            assert main.traffic.reads["K"] == kv * 16 * p.elem_bytes, (causal, align, nk)
    gqa = Problem(batch=1, heads=2, kv_heads=1, seqlen_q=77, seqlen_k=60, head_dim=16,
                  causal=True, causal_align="bottom-right")
    assert check("fa1", gqa, t, hw=hw.with_changes(max_ctas_per_sm=6)).main.grid == (3, 2, 1)


def test_fa1_backward_key_block_splits_match_the_closed_form():
    # A GPU of one SM: 2 heads of 7 key blocks (Bc = 16) split in runs of 2 (4 CTAs a head,
    # the last with one block). The executor runs each split's CTA over its own key blocks and
    # adds its dQ contributions into dQacc (the kernel's atomics); its dQ, dK, dV equal float64
    # attention's, its counts the closed form's, and the trips of its CTAs the Plan's. Ragged
    # lengths, Nq != Nk, both causal diagonals, GQA.
    from iosim.kernels import SPECS

    hw = H100.with_changes(sm_count=1)
    for causal, align in ((False, "top-left"), (True, "top-left"), (True, "bottom-right")):
        for nq, nk in ((77, 110), (110, 100), (40, 110)):
            p = Problem(batch=1, heads=2, kv_heads=1, seqlen_q=nq, seqlen_k=nk, head_dim=16,
                        causal=causal, causal_align=align, direction="bwd")
            t = Tiles(block_m=16, block_n=16, split_cols=32)
            pl = check("fa1", p, t, hw=hw)
            main = pl.main
            assert main.grid == (4, 2, 1) and main.defines["SPLIT_COLS"] == 32
            assert main.defines["DQ_ATOMIC"] == 1 and SPECS["fa1_bwd"].sync_loads(main.defines) == 1
            x = reference.random_inputs(p, np.random.default_rng(3))
            fwd = reference.forward(p, x["q"], x["k"], x["v"])
            _, meter = executor.run(pl, x["q"], x["k"], x["v"], x["do"], fwd["O"], fwd["LSE"])
            ran = meter.trips["fa1_bwd"]
            assert len(ran) == 2 * 4 and ran[:4] == main.trips.tolist(), (causal, align, nq, nk)
            assert ran[:4] == ran[4:]  # each head alike
    # the Plan's own split on a one-SM GPU: one key block a CTA for two heads of 7 blocks
    p = Problem(batch=1, heads=2, seqlen_q=100, seqlen_k=100, head_dim=16, causal=True,
                direction="bwd")
    pl = check("fa1", p, Tiles(block_m=16, block_n=16), hw=H100.with_changes(sm_count=7))
    assert pl.main.grid[0] > 1


def test_fa3_backward_tiles_count_what_the_kernel_reads():
    """fa3_bwd.cu's tiles (d = 64: 128 x 128, d = 128: 64 x 128): the executor's counts equal
    the closed form, and its shared memory holds no P (dV takes Pᵀ from registers): the same
    problem's traffic is P's stores, rc elements, below a Plan that stores P. d = 256 (64 x 64,
    two consumers splitting head_dim): P is stored, and K_j, V_j (Sᵀ, dPᵀ) and Pᵀ, dSᵀ (dV, dK)
    are read by both consumers, Q_i and dO_i once in all; causal both diagonals, Nq != Nk."""
    from iosim.core.problem import Problem as P_
    from iosim.kernels import Readers
    from iosim.schedules.base import BlockMap
    from iosim.schedules.flash import flash_bwd

    for d, bm in ((64, 128), (128, 64)):
        p = P_(batch=1, heads=2, kv_heads=1, seqlen_q=300, seqlen_k=200, head_dim=d,
               causal=True, direction="bwd")
        pl = check("fa3", p, Tiles(block_m=bm, block_n=128))
        main = next(k for k in pl.kernels if k.name == "fa3_bwd")
        blocks = BlockMap.of(p, bm, 128)
        rd = Readers(qdo_s=2, kv_s=1, qdo_kv=2, pds_kv=0, k_dq=bm // 64, ds_dq=d // 64, p_back=0,
                     p_smem=0)
        stored = flash_bwd(p, blocks, fa1=False, rd=rd._replace(p_smem=1)).traffic.sram
        assert stored - main.traffic.sram / p.bh == blocks.sum_rc() * p.elem_bytes
    rd = Readers(qdo_s=1, kv_s=2, qdo_kv=1, pds_kv=2, k_dq=1, ds_dq=4, p_back=0, p_smem=1)
    for nq, nk, align in ((300, 200, "top-left"), (200, 333, "bottom-right")):
        p = P_(batch=1, heads=2, kv_heads=1, seqlen_q=nq, seqlen_k=nk, head_dim=256,
               causal=True, causal_align=align, direction="bwd")
        pl = check("fa3", p, Tiles())  # the Plan's tiles
        main = next(k for k in pl.kernels if k.name == "fa3_bwd")
        assert (main.block_m, main.block_n, main.threads, main.defines["PINGPONG"]) == (64, 64, 384, 0)
        blocks = BlockMap.of(p, 64, 64)
        assert main.traffic.sram == p.bh * flash_bwd(p, blocks, fa1=False, rd=rd).traffic.sram


def test_fa3_deterministic_counts_its_flags():
    """fa3's deterministic backward (fa3_bwd_det): the executor's counts equal the closed form,
    which is the plain kernel's plus one int32 read and one write of a turn flag per consumer
    warpgroup and visited (query block, key block) pair; fa2 (atomics, no such mode) refuses."""
    from iosim.core.hardware import InputError
    from iosim.schedules.base import BlockMap

    for d, bm, bn, causal, align in ((64, 128, 128, True, "bottom-right"),
                                     (128, 64, 128, False, "top-left"),
                                     (128, 64, 128, True, "top-left"),
                                     (256, 64, 64, True, "bottom-right")):
        p = Problem(batch=2, heads=2, kv_heads=1, seqlen_q=300, seqlen_k=333, head_dim=d,
                    causal=causal, causal_align=align, direction="bwd", deterministic=True)
        det = check("fa3", p, Tiles())
        plain = plan("fa3", p.model_copy(update={"deterministic": False}), H100)
        k, k0 = det.main, plain.main
        assert (k.name, k0.name, k.defines["DETERMINISTIC"], k0.defines["DETERMINISTIC"]) == \
            ("fa3_bwd_det", "fa3_bwd", 1, 0)
        flags = BlockMap.of(p, bm, bn).pairs * p.bh * 2 * 4  # two consumers at every d
        assert k.traffic.reads["dQsem"] == k.traffic.writes["dQsem"] == flags
        assert k.traffic.hbm_read - k0.traffic.hbm_read == flags
        assert k.work == k0.work
    with pytest.raises(InputError, match="fa2's backward .* no deterministic mode"):
        plan("fa2", p, H100)


@st.composite
def window_cases(draw):
    p = Problem(batch=1, heads=2, kv_heads=draw(st.sampled_from([1, 2])),
                seqlen_q=draw(st.integers(1, 90)), seqlen_k=draw(st.integers(1, 90)),
                head_dim=16, causal=True, window=draw(st.integers(0, 100)),
                causal_align=draw(st.sampled_from(["top-left", "bottom-right"])))
    t = Tiles(block_m=draw(st.sampled_from([8, 16, 32])), block_n=draw(st.sampled_from([8, 16, 24])))
    return draw(st.sampled_from(["fa2", "fa3"])), p, t


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(window_cases())
def test_sliding_window_matches_reference_and_closed_form(case):
    # the executor skips key blocks before the window and masks its lower edge; exact attention
    # under the window, and its counts equal the closed form's
    check(*case)


def test_sliding_window_skips_blocks_and_the_model_times_fewer_trips():
    # Nq = Nk = 4096, 128 x 128 tiles, W = 1024: query block i visits key blocks
    # [max(0, i - 8), i] (the first row's window starts 1024 keys back, 8 blocks): at most 9,
    # and far fewer pairs than the causal mask's 32·33/2
    from iosim.model import memory, timing
    from iosim.schedules.base import BlockMap

    causal = Problem(batch=1, heads=8, seqlen_q=4096, head_dim=128, causal=True)
    win = causal.model_copy(update={"window": 1024})
    bm = BlockMap.of(win, 128, 128)
    assert list(bm.row_visits()) == [min(i, 8) + 1 for i in range(32)]
    assert bm.pairs == sum(min(i, 8) + 1 for i in range(32)) < BlockMap.of(causal, 128, 128).pairs
    # the diagonal tile, and from block 8 on the tile the last row's window edge cuts
    assert list(bm.row_diag()) == [1] * 8 + [2] * 24
    pw, pc = plan("fa2", win, H100), plan("fa2", causal, H100)
    # K read once per visited pair: 252 of 528 tiles of 128 rows, 8 heads, bf16
    assert pw.traffic.reads["K"] == 252 * 128 * 128 * 2 * 8
    assert pc.traffic.reads["K"] == 528 * 128 * 128 * 2 * 8
    tw, tc = (timing.predict(x, H100, memory.estimate(x, H100))[0].seconds for x in (pw, pc))
    assert tw < 0.6 * tc, (tw, tc)
    assert pw.main.defines["WINDOW"] == 1024 and pc.main.defines["WINDOW"] == -1


@st.composite
def decode_cases(draw):
    g = draw(st.sampled_from([1, 2, 4, 8]))
    causal = draw(st.booleans())
    batch = draw(st.integers(1, 3))
    ragged = draw(st.one_of(st.none(), st.tuples(*[st.integers(1, 300)] * batch)))
    p = Problem(batch=batch, heads=2 * g, kv_heads=2, seqlens_k=ragged,
                seqlen_q=draw(st.integers(1, 16)),
                seqlen_k=draw(st.integers(1, 300)) if ragged is None else None,
                head_dim=draw(st.sampled_from([16, 24])), causal=causal,
                causal_align="bottom-right",
                window=draw(st.one_of(st.none(), st.integers(0, 120))) if causal else None,
                page_size=draw(st.sampled_from([None, 1, 16, 24, 64, 256])))
    t = Tiles(block_n=draw(st.sampled_from([32, 64])), warps=draw(st.sampled_from([1, 2])))
    # a small GPU, so that the heuristic splits the keys (1 to 4 SMs)
    return p, t, H100.with_changes(sm_count=draw(st.integers(1, 4)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(decode_cases())
def test_decode_matches_reference_and_closed_form(case):
    # split-KV decode: GQA heads packed, keys split across CTAs and warps, partials combined,
    # contiguous or paged K/V (pages in a random order, rows gathered through the block table),
    # one length or a ragged batch; exact attention, and counts equal to the closed form (the
    # combine fused into the last CTA)
    p, t, hw = case
    check("decode", p, t, hw=hw)


def test_decode_packs_gqa_heads_and_splits_the_keys():
    from iosim.schedules import decode

    # batch 1, 32 heads over 8 KV heads, one query row, 128k keys: 8 CTAs cannot fill 132 SMs,
    # so the keys are split; each KV head's tiles are read once for its 4 query heads
    p = Problem(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=131072, head_dim=128)
    pl = plan("decode", p, H100)
    main, = pl.kernels  # the combine fused: the last CTA of each K/V head merges the partials
    s = main.grid[0]
    assert main.grid == (s, 8, 1) and main.defines["HEADS_PER_CTA"] == 4 and main.block_m == 16
    assert 8 * s >= 0.8 * 132
    # the partials written, and read back once by the combining CTAs; one count per CTA, one
    # reset per K/V head
    assert main.traffic.reads["Opart"] == main.traffic.writes["Opart"]
    assert main.traffic.reads["Counter"] == 4 * 8 * s and main.traffic.writes["Counter"] == 4 * 8 * (s + 1)
    assert main.traffic.writes["O"] == 32 * 128 * 2
    kv = 8 * 131072 * 128 * 2
    assert main.traffic.reads["K"] == main.traffic.reads["V"] == kv  # once per group
    assert main.traffic.writes["Opart"] == 32 * s * 128 * 4
    # batch 64: the CTAs fill the GPU, one split, O written directly
    big = plan("decode", p.model_copy(update={"batch": 64}), H100)
    assert len(big.kernels) == 1 and big.kernels[0].grid[0] == 1
    assert set(big.traffic.writes) == {"O", "LSE"}
    # FlashAttention's heuristic over the SMs: 1 split at >= 80% of them; else the fewest
    # splits within 95% of the best wave efficiency
    assert decode.num_splits(106, 132, 1000) == 1
    # 8 CTAs (batch 1) on 132 SMs: 33 splits fill two waves exactly, 16 (128 CTAs, 97%) are the
    # fewest within 95% of it (15: 91%); 64 CTAs (batch 8): 2 splits
    assert decode.num_splits(8, 132, 2048) == 16
    assert decode.num_splits(64, 132, 512) == 2


def test_paged_decode_counts_the_block_table():
    # 131072 keys in 64-key tiles: with 16-token pages each tile reads 4 table entries, with
    # 64 or 256 one; K and V bytes are the contiguous cache's
    p = Problem(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=131072, head_dim=128)
    flat = plan("decode", p, H100)
    for ps, per_tile in ((16, 4), (64, 1), (256, 1)):
        pl = plan("decode", p.model_copy(update={"page_size": ps}), H100)
        main = pl.kernels[0]
        assert main.name == "decode_paged_fwd" and main.defines["PAGE_SIZE"] == ps
        assert main.traffic.reads["BlockTable"] == 8 * 2048 * per_tile * 4
        assert main.traffic.reads["K"] == flat.kernels[0].traffic.reads["K"]


def test_ragged_decode_counts_each_sequence_and_equal_lengths_match_the_uniform_batch():
    from iosim.model import memory, timing

    p = Problem(batch=4, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=65536, head_dim=128)
    same = plan("decode", p.model_copy(update={"seqlens_k": (65536,) * 4, "seqlen_k": 65536}), H100)
    flat = plan("decode", p, H100)
    assert same.traffic == flat.traffic and same.work == flat.work
    # each sequence reads its own keys: K bytes follow the sum of the lengths, not 4 x the longest
    lens = (1000, 65536, 8000, 300)
    rag = plan("decode", p.model_copy(update={"seqlens_k": lens}), H100)
    s = rag.kernels[0].defines["NUM_SPLITS"]
    assert rag.kernels[0].grid == (4 * s, 8, 1) and rag.kernels[0].source is None  # modelled
    assert rag.kernels[0].traffic.reads["K"] == 8 * sum(lens) * 128 * 2
    t_rag, t_flat = (sum(k.seconds for k in timing.predict(x, H100, memory.estimate(x, H100)))
                     for x in (rag, flat))
    assert t_rag < t_flat  # fewer bytes, and the longest sequence's CTAs set the pace
