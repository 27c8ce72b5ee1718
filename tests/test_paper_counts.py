"""The schedules' counts against the papers' own IO and FLOP derivations."""

import numpy as np

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.kernels import F32_TENSORS
from iosim.schedules import Tiles, plan
from iosim.schedules.base import F32

H100 = load("h100-sxm5-80gb")


def elements(traffic, p: Problem) -> dict[str, int]:
    out = {}
    for kind, m in (("r", traffic.reads), ("w", traffic.writes)):
        for name, b in m.items():
            out[name + kind] = b // (F32 if name in F32_TENSORS else p.elem_bytes)
    return out


def test_naive_forward_ideal_gemms_moves_4N2_plus_4Nd_per_head():
    # Read Q, K (2Nd); write S (N²); read S (N²); write P (N²); read P (N²); read V (Nd);
    # write O (Nd): 4N² + 4Nd elements, when one GEMM tile covers the whole matrix.
    n, d = 256, 64
    p = Problem(batch=2, heads=3, seqlen_q=n, head_dim=d, dtype="bf16")
    pl = plan("naive", p, H100, Tiles(block_m=n, block_n=n, block_k=32))
    t = pl.traffic
    assert (t.hbm_read + t.hbm_write) // p.elem_bytes == p.bh * (4 * n * n + 4 * n * d)


def test_fa1_forward_matches_algorithm_1():
    # Algorithm 1 on each of the S query-row splits of a head: K, V read once per split
    # (2Nd·S); per outer step j (Tc of them) the inner loops read Q (Nd), read and write O
    # (2Nd), read and write ℓ and m (4N) over all the splits' rows. Two heads cannot fill the
    # H100, so every case here is split (S > 1).
    for n, d in ((1024, 64), (2048, 128), (1000, 256)):
        p = Problem(batch=1, heads=2, seqlen_q=n, head_dim=d)
        pl = plan("fa1", p, H100)
        main = pl.kernels[1]
        tc, splits = -(-n // main.block_n), main.grid[0]
        assert splits == -(-n // main.defines["SPLIT_ROWS"]) > 1
        el = elements(main.traffic, p)
        assert el["Kr"] == el["Vr"] == p.bh * splits * n * d
        assert el["Qr"] == p.bh * tc * n * d
        assert el["Oaccr"] + el["Oaccw"] + el["Ow"] == p.bh * tc * 2 * n * d
        assert el["Lr"] + el["Mr"] + el["Lw"] + el["Mw"] == p.bh * tc * 4 * n
        total = sum(el.values())
        assert total == p.bh * (2 * splits * n * d + tc * (n * d + 2 * n * d + 4 * n))


def test_fa1_block_sizes_follow_the_paper():
    # Bc = ⌈M/4d⌉ rounded down to 16 and capped by registers; Br = min(Bc, d).
    p = Problem(head_dim=64, dtype="bf16")
    small = H100.with_changes(smem_per_block_optin_bytes=16384)  # M = 8192 elements
    pl = plan("fa1", p, small)
    assert (pl.block_n, pl.block_m) == (32, 32)  # ⌈8192/256⌉ = 32, min(32, 64) = 32


def test_fa1_io_is_theta_N2_d2_over_M():
    # Tc = N/Bc = 4Nd/M, and the inner loop moves ~3Nd per step: IO ≈ 12 N²d²/M. Doubling M
    # halves the quadratic part.
    # Theorem 2 is about one CTA per head: 1056 heads (a whole number of waves at 1, 2 or 4
    # CTAs per SM on 132 SMs) fill the GPU without splitting a head's rows.
    n, d = 4096, 64
    p = Problem(batch=8, heads=132, seqlen_q=n, head_dim=d)
    io = {}
    for m_bytes in (16384, 32768, 65536):
        hw = H100.with_changes(smem_per_block_optin_bytes=m_bytes)
        pl = plan("fa1", p, hw)
        assert pl.main.grid[0] == 1  # not split
        t = pl.traffic
        io[m_bytes] = (t.hbm_read + t.hbm_write) // p.bh
        m_elems = m_bytes // p.elem_bytes
        scaled = io[m_bytes] / (n * n * d * d / m_elems)
        # per step Q (2 B) and O read + written (fp32, 8 B) per element: 10 B x 4N²d²/M
        assert 40 <= scaled < 44
    assert 1.9 < io[16384] / io[32768] < 2.1
    assert 1.9 < io[32768] / io[65536] < 2.1


def test_fa2_forward_reads_k_and_v_once_per_q_block():
    n, d = 3000, 128
    p = Problem(batch=2, heads=4, kv_heads=2, seqlen_q=n, head_dim=d)
    pl = plan("fa2", p, H100)
    tm = -(-n // pl.block_m)
    t = pl.traffic
    assert t.reads["K"] == t.reads["V"] == p.bh * tm * n * d * p.elem_bytes
    assert t.reads["Q"] == t.writes["O"] == p.bh * n * d * p.elem_bytes


def test_forward_flops_are_4N2d_and_half_when_causal_up_to_diagonal_tiles():
    n, d = 4096, 128
    for s in ("naive", "fa1", "fa2", "fa3"):
        p = Problem(batch=1, heads=1, seqlen_q=n, head_dim=d)
        assert plan(s, p, H100).work.tensor_flops == 4 * n * n * d
    for s in ("fa1", "fa2", "fa3"):
        pc = Problem(batch=1, heads=1, seqlen_q=n, head_dim=d, causal=True)
        pl = plan(s, pc, H100, Tiles(block_m=128, block_n=128))
        t = n // 128  # square tiles: T(T+1)/2 tiles on or below the diagonal
        assert pl.work.tensor_flops == 4 * d * 128 * 128 * t * (t + 1) // 2
        assert pl.work.tensor_flops == 2 * n * n * d * (1 + 1 / t)  # half, plus the diagonal


def test_backward_recomputes_and_naive_reads_stored_p():
    p = Problem(batch=1, heads=2, seqlen_q=1024, head_dim=64, direction="bwd")
    naive = plan("naive", p, H100).traffic
    assert "P" in naive.reads and "S" not in naive.reads
    for s in ("fa1", "fa2", "fa3"):
        t = plan(s, p, H100).traffic
        assert "P" not in t.reads and "Q" in t.reads and "K" in t.reads
        assert t.writes["dQacc"] > 0  # dQ accumulated in fp32 in HBM
        assert plan(s, p, H100).work.tensor_flops == 10 * 1024 * 1024 * 64 * 2  # 2.5x forward


def test_causal_skips_blocks_above_the_diagonal():
    p = Problem(batch=1, heads=1, seqlen_q=2048, head_dim=64)
    pc = p.model_copy(update={"causal": True})
    for s in ("fa1", "fa2", "fa3"):
        full, half = plan(s, p, H100).traffic, plan(s, pc, H100).traffic
        streamed = "Q" if s == "fa1" else "K"  # FA1 streams Q blocks, FA2/FA3 K/V blocks
        assert half.reads[streamed] < 0.6 * full.reads[streamed]
    assert np.isclose(plan("naive", pc, H100).traffic.reads["Q"],
                      plan("naive", p, H100).traffic.reads["Q"])  # naive skips nothing
