"""Mechanisms the accuracy ceilings alone let through (issue 23), each held by a test that
fails when it is removed (experiments/mutation_check/mutation_check.py lists which):

- fa2's forward reads every K_j and V_j tile from shared memory once per warp (each warp
  splits the query rows and multiplies by the whole tile), not once per CTA;
- CTAs run in waves on the SMs' slots (a tail wave costs a whole CTA's time), measured on
  shapes whose CTA count sits just above and below a multiple of the slots
  (experiments/waves/h100/measured_waves.csv);
- standard attention's row kernels (softmax and its backward), kernel by kernel against
  Nsight Compute (experiments/naive_kernels);
- standard attention's GEMMs: the instructions of their k loop beyond the MMAs (address
  arithmetic of every copy into the ring), and, with k in one chunk, the C tile's stores in the
  CTA's one trip (experiments/naive_kernels);
- fa1's forward: every warp reads all of K_j and V_j from shared memory (Nsight Compute's
  shared-memory wavefronts, experiments/fwd_ncu), and its warps, with no CTA barrier inside a
  step, drift apart: the bandwidth share and the SM's throughput overlap before they combine with
  the warps' chain (the `drift` policy; experiments/fwd_grid, new_shapes, fwd_ncu);
- fa2's forward: its cp.async copies take the shared-memory data pipe one wavefront a warp's
  512 bytes (Nsight Compute's wavefronts, experiments/fwd_ncu and acc13_probe), and a CTA alone
  on its SM (d = 256) waits for its ring's first K/V stage before its first trip;
- fa3's persistent fp8 forward: a tile's Q copy and O stores overlap the CTA's other tiles
  (KernelPlan.streamed), so only each CTA's first tile waits for them, and the pipeline fills
  once per CTA (experiments/fp8/h100/speed13).
- fa1's backward: the instructions its SASS issues beyond the counts, on the warps' chain and in
  the MMAs' shadow (experiments/fa1_sass, against Nsight Compute in ncu_mechanism/h100/wave12
  and sass13), and its prefetch: DRAM overlaps the chain better than a synchronous phase (the
  `prefetch` policy; experiments/bwd_grid, one wave); the prefetched lines the L2 evicts
  before their load, read twice from DRAM (Nsight Compute, ncu_mechanism/h100/sass13 and
  prefetch14), and its FP32 work as its SASS issues it (D_i one FMA an element, no dQ add);
- fa3's FP8 forward with the wait for P·V after the softmax (PV_WAIT_TOP): a warpgroup's
  softmax runs under its own previous P·V as well as the other warpgroup's GEMMs, and overlaps
  the tensor cores' work better (experiments/fp8/h100/speed14c);
- a transfer of the H100's fit keeps the target GPU's own HBM efficiency (its measured copy
  bandwidth: the H200's HBM3e, experiments/*/h200).
- fa3's backward: its consumers wait at their GEMM turns (`pipeline.wgmma_wait_cycles`), not for
  memory; its wgmma run at the forward's rate (Nsight Compute, experiments/fa3_bwd).
- round trips priced by where their lines are: to DRAM (`pipeline.load_latency_cycles`,
  measured on decode's earlier gather) or to L2 (`pipeline.l2_latency_cycles`, fitted:
  KernelSpec.sync_in_l2); fa1's forward waits its one-stage K/V load once an outer step; a
  CTA alone on its SM waits its cp.async ring's first stage whatever its trips' policy.
- CTAs as the block scheduler places them (Nsight Compute, ncu_mechanism/h100/small15b): alike
  CTAs past the last full wave spread over the SMs, each at its own residency; one wave of
  unequal CTAs with two on some SMs shares each such SM between its pair while both run, and
  past the first wave at two an SM, once the last CTA has started, each SM's two share it while
  both run, the one left alone at its own speed; the longest CTA that starts with the launch
  shares the bandwidth with the CTAs beside it for as long as they run (processor sharing),
  not alone.
- a kernel's edges (Nsight Compute of tiny kernels, experiments/small_fwd16/h100/ncu16): its
  first wave's CTAs wait their first trip's loads at once, through their share of L2 and DRAM,
  and a CTA's end waits for its stores to drain.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from iosim.analysis.calibrate import measured_plan
from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.kernels import SPECS
from iosim.model import memory, timing
from iosim.model.occupancy import ctas_per_sm
from iosim.schedules import Tiles, plan

WAVES = Path(__file__).resolve().parents[1] / "experiments/waves/h100/measured_waves.csv"
H100 = load("h100")


def test_fa2_forward_reads_each_kv_tile_once_per_warp():
    """Shared-memory bytes grow by 2 tiles (K_j, V_j) per trip per extra warp: kernels/fa2.cu's
    warps each ldmatrix the whole K_j and V_j."""
    p = Problem(batch=2, heads=4, seqlen_q=1024, head_dim=128)
    sram = {w: plan("fa2", p, H100, Tiles(block_m=128, block_n=64, warps=w)).traffic.sram
            for w in (4, 8)}
    trips = (1024 // 128) * (1024 // 64) * 2 * 4  # CTAs x key tiles
    assert sram[8] - sram[4] == 2 * (8 - 4) * trips * 64 * 128 * 2


def wave_pairs() -> pd.DataFrame:
    """Measured fa2/fa3 forward rows with one head, paired: the largest batch whose CTAs fill
    whole waves exactly (a multiple of SMs x CTAs per SM) and the next measured batch (a few
    CTAs more: one more, nearly empty, wave)."""
    df = pd.read_csv(WAVES)
    df = df[(df.status == "ok") & (df.heads == 1) & (df.direction == "fwd") & ~df.causal]
    out = []
    for (s, n, d), g in df.groupby(["schedule", "seqlen_q", "head_dim"]):
        rows = {int(r.batch): r for r in g.itertuples()}
        for b, r in rows.items():
            pl = measured_plan(r, H100)
            slots = ctas_per_sm(pl.main, H100) * H100.sm_count
            nxt = min((c for c in rows if c > b), default=None)
            if pl.main.ctas % slots == 0 and nxt is not None:
                out.append({"schedule": s, "N": n, "d": d, "full": r, "tail": rows[nxt]})
    return pd.DataFrame(out)


def predicted(r) -> float:
    pl = measured_plan(r, H100)
    return sum(t.seconds for t in timing.predict(pl, H100, memory.estimate(pl, H100), False))


def test_wave_quantisation_is_measured_and_predicted():
    """A few CTAs past full waves cost a whole extra wave: measured, the time jumps by
    1.14-1.51x for 1.5-3% more CTAs (fa2 and fa3 forward, N = 512 and 1024); the model's jump
    is within 25% of the measured one in all but one pair, where a fluid schedule (no waves)
    predicts about 1.02x in every pair. (The miss: fa3, d = 64, N = 1024, 396 -> 402 CTAs,
    measured 1.28x, predicted 1.01x: the model's three full waves are bandwidth-bound.)"""
    pairs = wave_pairs()
    assert len(pairs) >= 10, pairs
    misses = []
    for p in pairs.itertuples():
        meas = p.tail.time_ms / p.full.time_ms
        pred = predicted(p.tail) / predicted(p.full)
        assert meas > 1.1, (p.schedule, p.N, p.d, meas)
        if abs(pred / meas - 1) > 0.25:
            misses.append((p.schedule, p.N, p.d, round(meas, 2), round(pred, 2)))
    assert len(misses) <= 1, misses


def test_tune_picks_within_5pct_of_the_measured_best():
    """`iosim tune --verify`'s committed run (experiments/tune_fa2/h100/tune_fa2.csv: per problem,
    the then-model's top 5 configurations and the schedule's own, checked and timed): today's
    model, re-ranking what was tried with the registers nvcc gave each, picks one within 5% of
    the measured best in 14 of the 15 problems, d = 64 included (the issue's run: 9 of 15), and
    within 7% in the last (d = 128, N = 8192: 256x32 w8 and 128x32 w4 0.2% apart in the model,
    5.5% measured)."""
    from iosim.analysis.tune import with_registers

    df = pd.read_csv(WAVES.parents[2] / "tune_fa2/h100/tune_fa2.csv")
    ratios = []
    for (d, n), g in df[df.status == "ok"].groupby(["head_dim", "seqlen_q"]):
        r0 = g.iloc[0]
        p = Problem(batch=int(r0.batch), heads=int(r0.heads), seqlen_q=int(n), head_dim=int(d))
        pred = []
        for r in g.itertuples():
            t = Tiles(block_m=r.block_m, block_n=r.block_n, warps=r.warps, stages=r.stages)
            pl = with_registers(plan("fa2", p, H100, t, check=True), int(r.registers))
            pred.append(sum(k.seconds for k in timing.predict(pl, H100, memory.estimate(pl, H100), False)))
        pick = g.time_ms.to_numpy()[min(range(len(pred)), key=pred.__getitem__)]
        ratios.append(pick / g.time_ms.min())
    assert len(ratios) == 15
    assert sum(r <= 1.05 for r in ratios) >= 14 and max(ratios) <= 1.07, [round(float(r), 3) for r in ratios]


def test_small_problems_no_fit_saw():
    """experiments/small_new (N = 384, 768, 1536; 2, 8 and 11 heads; batch 1 and 3; d up to
    256; measured after the calibration, which saw none of them): every kernel schedule within
    12% MAPE, forward and backward, where a 10 us launch and a lone CTA as slow as two
    co-resident ones (before issue 23) were 15-52% off."""
    from iosim.analysis.validate import validate

    times, _ = validate([WAVES.parents[2] / "small_new/h100/measured_small.csv"], H100)
    t = times.set_index(["schedule", "direction"]).mape_pct
    assert len(t) == 7 and (t <= 12).all(), times.to_string()
    assert t[("fa2", "fwd")] <= 10 and t[("fa3", "fwd")] <= 10, times.to_string()



NAIVE_NCU = Path(__file__).resolve().parents[1] / "experiments/naive_kernels/h100/naive_kernels.csv"


def naive_tool():
    """tools/naive_kernels.py as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "naive_kernels", Path(__file__).resolve().parents[1] / "tools" / "naive_kernels.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def naive_gemm_times():
    """tools/naive_kernels.py's rows of naive's GEMMs, with each Plan kernel's loop trips."""
    t = naive_tool().kernel_times(str(NAIVE_NCU))
    t = t[~t.kernel.str.contains("softmax")].copy()
    trips = {}
    for r in t.itertuples():
        p = Problem(batch=r.batch, heads=r.heads, seqlen_q=r.seqlen, head_dim=r.head_dim,
                    causal=r.causal, direction=r.direction)
        trips.update({(r.Index, k.name): int(k.trips.max()) for k in plan("naive", p, H100).kernels})
    t["trips"] = [trips[(i, k)] for i, k in zip(t.index, t.kernel)]
    assert len(t) == 32
    return t


def test_row_kernels_held_to_their_measured_durations():
    """naive_softmax and naive_bwd_softmax, kernel by kernel, within 10% of Nsight Compute's
    durations at the GPU's own clocks at 12 points (N = 512..16384, d = 64..256, forward and
    backward; tools/naive_kernels.py). The three mechanisms this needs: a row's loads are its
    one trip's, not a prologue added to it (else long rows are predicted 15-30% slow); the
    block reduction's merges are counted (else the short rows, issue-bound in ncu, are
    predicted 20-35% fast); the many one-row CTAs on an SM overlap their phases as a fluid
    (`spread`; else long forward rows, DRAM-bound at 88% in ncu, are predicted 15-25% slow)."""
    t = naive_tool().kernel_times(str(NAIVE_NCU))
    rows = t[t.kernel.str.contains("softmax")]
    assert len(rows) == 12 and len(t) == 8 * 3 + 4 * 5
    assert rows.ratio.between(0.9, 1.1).all(), rows.to_string()


def test_gemm_loop_instructions_counted():
    """naive's GEMMs issue about 29 warp instructions beyond the model's count per 512 bytes a
    trip stages (iosim.kernels GEMM_INST_STAGED, refitted here from ncu's inst_executed), and
    with them every GEMM with a long k loop (8 trips or more: naive_pv, naive_bwd_dv, _dq, _dk)
    is within 15% of Nsight Compute's duration (20 kernels); without them the d = 256 ones are
    predicted 21-26% fast (only half the tensor pipe busy in ncu: the dispatch is shared with
    those instructions)."""
    from iosim.kernels import GEMM_INST_STAGED

    coef, fit = naive_tool().gemm_inst(str(NAIVE_NCU))
    assert abs(coef[0] - GEMM_INST_STAGED) < 0.05 and (fit.fit_err.abs() < 0.2).all(), coef
    t = naive_gemm_times()
    long = t[t.trips >= 8]
    assert len(long) == 20 and long.ratio.between(0.85, 1.15).all(), long.to_string()


def test_one_chunk_gemm_stores_its_tile_in_its_trip():
    """With k in one chunk (d = 64: naive_qk, naive_bwd_dp, one trip, one stage) the CTA loads,
    multiplies and stores in its one trip: the C tile's stores are the trip's bytes, and its
    co-resident CTAs overlap them with their loads (DRAM writes and L2 reads, different
    levels), as ncu's 76-79% DRAM throughput at N >= 8192 shows. Added after the trip, as an
    epilogue with its own bandwidth share, they were predicted 35-41% slow there; in the trip,
    all five within 25% (N = 512..16384; 20% with the profile before session 15's refit, whose
    higher sync_overlap, 1.86 against 1.77, overlapped naive_qk's long streams more: 12-23%
    slow at N >= 8192 now; 30% with session 14's reverted refit, 1.71)."""
    t = naive_gemm_times()
    one = t[t.trips == 1]
    assert len(one) == 5 and one.ratio.between(0.8, 1.25).all(), one.to_string()
    assert (one[one.seqlen >= 8192].dram_pct >= 75).all()


FA3_NCU = Path(__file__).resolve().parents[1] / "experiments/fa3_ncu/h100/fa3_ncu.csv"


def test_fa3_forward_held_to_nsight_compute():
    """fa3_fwd (and fa3_fwd_fp8) against Nsight Compute's durations at the GPU's own clocks
    (experiments/fa3_ncu, tools/fa3_ncu.py), every profiled launch checked. Where the kernel
    spec says the consumer warps run their softmax at the same time (three warpgroups, no
    ping-pong: d = 64) ncu shows warps stalled on the full MUFU queue; where they take turns
    (d = 128, 256) almost none. The mechanisms this needs: those warps' exp2 and FP32 work
    overlap (else d = 64 at long N is predicted 28% slow, bf16 and fp8), they start in step
    (the first trip unhidden: else 512-key CTAs at d = 64 are predicted 13% fast), and a
    ragged tile is computed in full (else d = 256 at N = 512, 80-key tiles, is 8% fast). Held
    within 9% (6% with the profile before session 15's refit; with it the d = 64 points are
    4-8% slow: its lower sync_overlap, 1.77 against 1.86, adds the three warpgroups' softmax
    phases more; 10% with session 14's reverted refit)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "fa3_ncu", Path(__file__).resolve().parents[1] / "tools" / "fa3_ncu.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    t = tool.points(str(FA3_NCU))
    assert len(t) == 8 and (t.check_ok == 1).all()
    prof = load("h100")
    for r in t.itertuples(index=False):
        p = Problem(batch=r.batch, heads=r.heads, seqlen_q=r.seqlen, head_dim=r.head_dim,
                    causal=r.causal, dtype=r.dtype, direction="fwd")
        apart = timing.softmax_apart(plan("fa3", p, prof).main)
        assert apart == (r.head_dim == 64)
        assert (r.mio > 0.5) if apart else (r.mio < 0.1), r
    held = t[(t.head_dim == 64) | (t.seqlen == 512)]
    assert len(held) == 6
    assert (held.err_pct.abs() < 9).all(), held.to_string()


FWD_NCU = Path(__file__).resolve().parents[1] / "experiments/fwd_ncu/h100/measured_ncu.csv"
SMEM_WAVEFRONT_BYTES = 128  # one wavefront of the shared-memory pipe: 32 banks x 4 bytes


def test_fa1_forward_reads_each_kv_tile_once_per_warp():
    """kernels/fa1.cu's warps each own 16 query rows and ldmatrix the whole K_j and V_j at every
    inner step: the model's shared-memory bytes are Nsight Compute's wavefronts (128 bytes each)
    within 10% at every profiled fa1 forward point (read once per CTA they were a quarter)."""
    df = pd.read_csv(FWD_NCU)
    df = df[(df.schedule == "fa1") & (df.direction == "fwd") & (df.status == "ok")]
    assert len(df) == 8 and df.smem_wavefronts_ncu.notna().all()
    for r in df.itertuples(index=False):
        sram = measured_plan(r, H100).main.traffic.sram
        ncu = r.smem_wavefronts_ncu * SMEM_WAVEFRONT_BYTES
        assert abs(sram / ncu - 1) < 0.10, (r.batch, r.heads, r.seqlen_q, r.head_dim, sram, ncu)


def test_fa1_forward_drifting_warps_below_dram_saturation():
    """fa1's forward at one CTA per SM, 48 to 132 CTAs (one wave; DRAM 50-90% busy): a step's
    time stays near the warps' own (Nsight Compute at 64 CTAs, d = 128: warps wait on
    shared-memory and math dependencies, hardly on global loads) until the DRAM saturates. With
    the bandwidth share combined as a synchronous phase (`none`) these points were up to 20%
    slow (d = 128, 64-96 CTAs); held here within 13% each and 5.5% on average (the `none`
    mutation fails the 13%; fwd16's refit, with the CTAs past a wave at two an SM alone once
    their partner ends: 12.6% at worst, 5.02% on average, main 4f0ace8's 12.5% and 4.95%;
    session 16's refit,
    after fa2's backward moved to its port and ring: 12.5% at worst, 5 x 16 heads N = 3000 and
    2 x 32/8 heads N = 8192, d = 128, with the SM's load path fitted 6% slower, 44.9 bytes a
    clock against 47.6; 4.3% and 11.5% with session 15's profile; 10% each with the profile
    fitted before session 15's refit: its lower sync_overlap, 1.77 against 1.86, combines the
    phases more nearly additively, and two points run 10.7 and 11.5% slow; 15% and 7% with
    session 14's reverted refit)."""
    from iosim.analysis.accuracy import join
    from iosim.analysis.validate import repredict
    from iosim.core.rows import MEASURED_NEEDS, read_rows

    root = Path(__file__).resolve().parents[1] / "experiments"
    files = [root / "fwd_grid/h100/measured.csv", root / "new_shapes/h100/measured_new.csv", FWD_NCU]
    m = pd.concat([read_rows(f, MEASURED_NEEDS) for f in files], ignore_index=True)
    m = m[(m.schedule == "fa1") & (m.direction == "fwd") & (m.status == "ok")]
    ctas = [measured_plan(r, H100).main.ctas for r in m.itertuples(index=False)]
    m = m[[48 <= c <= H100.sm_count for c in ctas]]
    assert len(m) >= 20
    assert timing.POLICIES[measured_plan(next(m.itertuples(index=False)), H100).main.overlap] \
        == timing.POLICIES["drift"]
    j = join(repredict(m), m)
    err = (j.time_pred_ms / j.time_ms - 1).abs()
    assert len(err) >= 20  # shapes measured in two files join once
    assert err.max() < 0.13 and err.mean() < 0.055, j.assign(err=err)[
        ["batch", "heads", "kv_heads", "seqlen_q", "head_dim", "causal", "err"]].to_string()


def _fa2_fwd_h100(head_dim: int) -> pd.DataFrame:
    """fa2's forward rows measured on the H100 at one head_dim, with today's predictions."""
    from iosim.analysis.accuracy import join
    from iosim.analysis.validate import repredict
    from iosim.core.rows import MEASURED_NEEDS, read_rows

    root = Path(__file__).resolve().parents[1] / "experiments"
    files = [root / "fwd_grid/h100/measured.csv", root / "new_shapes/h100/measured_new.csv"]
    m = pd.concat([read_rows(f, MEASURED_NEEDS) for f in files], ignore_index=True)
    m = m[(m.schedule == "fa2") & (m.direction == "fwd") & (m.status == "ok")
          & (m.head_dim == head_dim)]
    j = join(repredict(m), m)
    return j.assign(err=j.time_pred_ms / j.time_ms - 1)


PROBE13 = Path(__file__).resolve().parents[1] / "experiments/acc13_probe/h100/probe13/ncu.csv"


def test_fa2_forward_shared_memory_pipe_leaves_out_async_fills():
    """kernels/fa2.cu copies Q, K_j and V_j into shared memory by cp.async: a warp's copy (512
    bytes) takes one wavefront of the data pipe, its bytes written through the L1's fill path,
    while every warp's ldmatrix reads take a wavefront (128 bytes) each. The model's pipe bytes
    are Nsight Compute's shared-memory wavefronts within 6% at the 8 profiled fa2 points and
    at three d = 128 tilings (the fills counted as bytes: 7-16% over), and at d = 256, where
    that pipe binds the trip, the long forwards (N >= 4096) are held within 5% each, 3.5% on
    average (the fills in the pipe: up to 11% slow, 7% on average)."""
    from iosim.core.problem import Problem as P

    df = pd.read_csv(FWD_NCU)
    df = df[(df.schedule == "fa2") & (df.direction == "fwd") & (df.status == "ok")]
    assert len(df) == 8
    pts = [(measured_plan(r, H100).main, r.smem_wavefronts_ncu) for r in df.itertuples(index=False)]
    probe = pd.read_csv(PROBE13)
    probe = probe[(probe["Metric Name"] == "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum")
                  & probe.point.str.contains('"fa2"')]
    assert len(probe) == 3
    for r in probe.itertuples(index=False):
        a = json.loads(r.point)
        pts.append((plan("fa2", P(batch=a["b"], heads=a["h"], seqlen_q=a["n"], head_dim=a["d"]),
                         H100, Tiles(**a["tiles"])).main, r.value))
    for k, wavefronts in pts:
        pipe = k.traffic.sram - timing.smem_fill(k)
        assert abs(pipe / (wavefronts * SMEM_WAVEFRONT_BYTES) - 1) < 0.06, (k.grid, k.defines)
    j = _fa2_fwd_h100(256)
    long = j[j.seqlen_q >= 4096]
    assert len(long) >= 8
    assert long.err.abs().max() < 0.05 and long.err.abs().mean() < 0.035, \
        long[["batch", "heads", "seqlen_q", "causal", "err"]].to_string()


def test_fa2_forward_alone_on_its_sm_waits_for_its_first_stage():
    """At d = 256 fa2's forward holds its SM alone (197 KB of shared memory a CTA): before its
    first trip a CTA waits for the round trip and the bytes of its ring's first K/V stage, and
    no other CTA's trips fill that wait. Short loops (N <= 2048: 8-32 trips a CTA) show it:
    held within 9% each and 5% on average (without it up to 11% fast, 7% on average)."""
    j = _fa2_fwd_h100(256)
    short = j[j.seqlen_q <= 2048]
    assert len(short) >= 6
    assert short.err.abs().max() < 0.09 and short.err.abs().mean() < 0.05, \
        short[["batch", "heads", "seqlen_q", "causal", "err"]].to_string()


def test_fa3_fp8_persistent_grid_overlaps_each_tile_s_q_and_o():
    """The persistent grid is predicted faster than one tile a CTA where a CTA's start and
    finish show (N = 4096: 16-32 key tiles a tile), and by less at N = 16384. Of the 3.3-3.5%
    at N = 4096, about half is the pipeline filling once per CTA, half each tile's Q copy and
    O stores overlapping the CTA's other tiles (KernelPlan.streamed): a model that kept Q and O
    in a once-per-CTA phase predicts 1.6-2.4% (H100 profile)."""
    def attn(p, persistent):
        pl = plan("fa3", p, H100, Tiles(persistent=persistent))
        return timing.predict(pl, H100, memory.estimate(pl, H100))[-1].seconds

    for d in (128, 256):
        gain = {}
        for n in (4096, 16384):
            p = Problem(batch=16384 // n, heads=2048 // d, seqlen_q=n, head_dim=d, dtype="fp8_e4m3")
            gain[n] = attn(p, False) / attn(p, True)
        assert gain[4096] > 1.028 and 1.0 < gain[16384] < gain[4096], (d, gain)
PV_ROUNDS = Path(__file__).resolve().parents[1] / "experiments/fp8/h100/speed14c/c1/variants.csv"


def test_fa3_fp8_softmax_under_its_own_pv_overlaps_the_tensor_cores_better(monkeypatch):
    """fa3.cu's FP8 kernel with PV_WAIT_TOP (a warpgroup's softmax under its own previous P·V,
    not only under the other warpgroup's GEMMs) is predicted faster than without it by what
    the same call's interleaved rounds measured at d = 128 (1.04-1.06), within 0.02 at every N;
    a model that ignored the wait's place predicts 1.00 (`under_pv`, timing.PV_OVERLAP)."""
    import iosim.schedules.fa3 as fa3

    rounds = pd.read_csv(PV_ROUNDS).query("status == 'ok' and head_dim == 128")
    for n in (4096, 8192, 16384):
        p = Problem(batch=16384 // n, heads=16, seqlen_q=n, head_dim=128, dtype="fp8_e4m3")
        ms = {}
        for top in (0, 1):
            monkeypatch.setitem(fa3.FP8_PV_WAIT_TOP, 128, top)
            pl = plan("fa3", p, H100)
            kt = timing.predict(pl, H100, memory.estimate(pl, H100))
            ms[top] = kt[[k.name for k in pl.kernels].index("fa3_fwd_fp8")].seconds
        g = rounds[rounds.seqlen == n].groupby("kind").attn_ms.median()
        assert abs(ms[0] / ms[1] - g["base"] / g["top"]) < 0.02, (n, ms, g.to_dict())


FA1_SASS = Path(__file__).resolve().parents[1] / "experiments/fa1_sass/sass_trip.csv"
SASS13 = Path(__file__).resolve().parents[1] / "experiments/ncu_mechanism/h100/sass13/ncu_sass13.csv"


def fa1_sass_tool():
    """tools/fa1_sass.py as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "fa1_sass", Path(__file__).resolve().parents[1] / "tools" / "fa1_sass.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    return tool


def test_fa1_backward_instructions_counted():
    """fa1's backward issues about twice what its counts imply (Nsight Compute's inst_executed
    1.9-2.4x the counts' at one wave): its inner loop's SASS (experiments/fa1_sass, 15 builds)
    adds integer and address arithmetic (the rolled phase-1 k loop's ldmatrix addresses, every
    copy's address, bounds and predicate, bf16 widening for D_i), the global loads, stores and
    prefetches, barriers and branches. The SASS trip is what ncu counts (93-100% of
    inst_executed; the rest: the outer step's work), class by class where ncu counted them
    (experiments/ncu_mechanism/h100/sass13: integer, ldmatrix, global, branch, MMA); the spec's
    constants are the least-squares fit of that table (iosim.kernels FA1_*), and with them the
    model's instructions a trip are within 15% of ncu's at every profiled point, where the
    counts alone are about half (loop_issue and loop_shadow: without either, d = 256 is 25% or
    more short)."""
    from iosim import kernels
    from iosim.analysis.validate import preferred

    tool, t = fa1_sass_tool(), pd.read_csv(FA1_SASS)
    f = tool.fit(t)
    for k in ("FA1_TRIP_INT", "FA1_COPY_INT", "FA1_KSTEP_INT", "FA1_MMA_INT"):
        assert abs(f[k] / getattr(kernels, k) - 1) < 0.01, (k, f[k])
    assert (f["beyond_err"].abs() < 0.2).all() and (f["shadow_err"].abs() < 0.25).all(), f
    at = t.dropna(subset=["ncu_trip"])
    assert len(at) == 3 and (at.sass_trip / at.ncu_trip).between(0.93, 1.0).all(), at
    # ncu's classes per warp and trip (sass13: two of the table's points)
    m = pd.read_csv(SASS13)
    hw = preferred("h100-sxm5-80gb")
    sub = t[t.causal.eq(False) & t.batch.isin([8, 16]) & t.head_dim.isin([128, 256])]
    assert len(sub) == 2
    for _, r in sub.iterrows():
        g = m[(m.batch == r.batch) & (m.head_dim == r.head_dim)].set_index("metric").value
        k = tool._main(Problem(batch=r.batch, heads=r.heads, seqlen_q=r.seqlen, head_dim=r.head_dim,
                               direction="bwd"), hw)
        per = k.trips.sum() * k.ctas / len(k.trips) * (k.threads // 32)  # warp-trips
        ncu = {"int": g["smsp__sass_thread_inst_executed_op_integer_pred_on.sum"] / 32,
               "ldsm": g["smsp__sass_inst_executed_op_ldsm.sum"],
               "mma": g["smsp__inst_executed_pipe_tensor_op_hmma.sum"],
               "branch": g["smsp__sass_inst_executed_op_branch.sum"],
               "global": g["smsp__sass_inst_executed_op_global_ld.sum"]
               + g["smsp__sass_inst_executed_op_global_st.sum"]}
        for c, v in ncu.items():
            assert abs(r[c] / (v / per) - 1) < 0.1, (r.head_dim, c, r[c], v / per)
    # the model's count against ncu's at every profiled point, today's Plans
    for (b, h, n, d, causal), v in tool.ncu_per_warp_trip().items():
        k = tool._main(Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=causal,
                               direction="bwd"), hw)
        counts, issue, shade = tool.model_per_warp_trip(k, hw)
        assert counts / v < 0.55 and abs((counts + issue + shade) / v - 1) < 0.15, (d, counts, issue, shade, v)


def test_fa1_backward_prefetch_overlaps_dram_with_the_chain():
    """fa1's backward waits for O_i and dQacc_i within its step (synchronous loads), but the step
    before prefetched their lines into L2 (and Q_i, dO_i come through the cp.async ring): DRAM
    works for the next step while the warps run their chain, so the CTA's bandwidth share and
    the SM's throughput overlap as drifting warps' do before combining with the chain (the
    `prefetch` policy). At one CTA a head and 64-132 heads (one wave, the share about the
    chain) the measured rows are within 13% each and 7.5% on average on the H100 and the H200;
    combined as synchronous phases (`none`) they were up to 21% slow."""
    from iosim.analysis.accuracy import join
    from iosim.analysis.validate import repredict
    from iosim.core.rows import MEASURED_NEEDS, read_rows

    root = Path(__file__).resolve().parents[1] / "experiments/bwd_grid"
    for gpu in ("h100", "h200"):
        m = read_rows(root / gpu / "measured_bwd.csv", MEASURED_NEEDS)
        m = m[(m.schedule == "fa1") & (m.direction == "bwd") & (m.status == "ok")]
        m = m[[64 <= b * h <= 132 for b, h in zip(m.batch, m.heads)]]
        assert len(m) == 12
        assert measured_plan(next(m.itertuples(index=False)), H100).main.overlap == "prefetch"
        j = join(repredict(m), m)
        err = (j.time_pred_ms / j.time_ms - 1).abs()
        assert err.max() < 0.13 and err.mean() < 0.075, (gpu, err.round(3).tolist())


PREFETCH14 = Path(__file__).resolve().parents[1] / "experiments/ncu_mechanism/h100/prefetch14/ncu_prefetch14.csv"


def test_fa1_backward_prefetched_lines_evicted_before_their_load_are_read_twice():
    """fa1's backward prefetches the next trip's O_i and dQacc_i lines into L2 a trip ahead of
    their loads; meanwhile every resident CTA moves its trip's bytes through the L2, and once
    those pass a share of it (memory.PREFETCH_L2_SHARE) prefetched lines are evicted and DRAM
    reads them again. Nsight Compute at eight points (sass13, prefetch14: one CTA a head) finds
    DRAM reads 0-6% above the two-level reads at 11-15 MB moved, 24-25% at 22 MB (d = 256 at 96
    heads and d = 192 at 128 alike) and 47-54% at 29-30 MB; the share is their least-squares fit,
    and with it the model's DRAM reads are 87-96% of ncu's at every point (without: 71-72% at
    29-30 MB). The H100's d = 256 rows with 128 or more heads are then within 6% (were 6-9%
    fast) with the profile before session 15's refit, within 7% with it (3.7-6.8%; 8% with
    session 14's reverted refit)."""
    from iosim.analysis.accuracy import join
    from iosim.analysis.validate import preferred, repredict
    from iosim.core.rows import MEASURED_NEEDS, read_rows

    tool = fa1_sass_tool()
    share, t = tool.share([str(SASS13), str(PREFETCH14)])
    assert len(t) == 8 and abs(share - memory.PREFETCH_L2_SHARE) < 0.003, share
    assert (abs(t.evicted_model - t.evicted_ncu) < 0.1).all(), t
    d = tool.dram(str(SASS13)).assign(src="sass13")
    d = pd.concat([d, tool.dram(str(PREFETCH14))])
    ratio = d.dram_read_model / d.dram_read_ncu
    assert ratio.min() > 0.85 and ratio.max() < 1.0, ratio.round(3).tolist()
    hw = preferred("h100-sxm5-80gb")
    m = read_rows(Path(__file__).resolve().parents[1] / "experiments/bwd_grid/h100/measured_bwd.csv",
                  MEASURED_NEEDS)
    m = m[(m.schedule == "fa1") & (m.direction == "bwd") & (m.status == "ok") & (m.head_dim == 256)]
    m = m[m.batch * m.heads >= 128]
    assert len(m) == 4
    j = join(repredict(m, hw), m)
    err = j.time_pred_ms / j.time_ms - 1
    assert err.abs().max() < 0.07, err.round(3).tolist()


def test_fa1_backward_fp32_work_as_its_sass_issues_it():
    """fa1's backward forms D_i = rowsum(dO_i∘O_i) with one FMA an element (an FMA is one op)
    and adds dQ on no FP32 unit (the dQ product accumulates into the loaded dQacc_i fragments,
    or fp32 atomics add it in L2). Counted as three ops an element (two for D_i, one for the
    add) the model's FP32 work at d = 256 was 1.7x what the SASS issues and at d = 32 0.8x; as
    the kernel does it, the SASS's FP32, MUFU and shuffle instructions a warp and trip are the
    same multiple of the counted ops / 32 at every one of the 15 builds of experiments/fa1_sass
    (head_dim 32-256, split or not)."""
    from iosim.analysis.validate import preferred

    tool, t, hw = fa1_sass_tool(), pd.read_csv(FA1_SASS), preferred("h100-sxm5-80gb")
    ratios = []
    for _, r in t.iterrows():
        k = tool._main(Problem(batch=r.batch, heads=r.heads, seqlen_q=r.seqlen, head_dim=r.head_dim,
                               causal=r.causal, direction="bwd"), hw)
        warp_trips = k.trips.sum() * k.ctas / len(k.trips) * (k.threads // 32)
        ops = (k.work.alu_flops + k.work.exp_ops) / 32 / warp_trips
        ratios.append((r.fp32 + r.mufu + r.shfl) / ops)
    assert len(ratios) == 15 and max(ratios) / min(ratios) < 1.2, [round(x, 3) for x in ratios]


def test_h200_keeps_its_own_hbm_efficiency_through_the_h100_profile():
    """The DRAM's sustained share of its datasheet rate is the GPU's own, not the architecture's:
    the H200's HBM3e copies at 0.87 of 4.8 TB/s where the H100's HBM3 reaches 0.90 of 3.35
    (copy_bw_bytes_per_s beside every row). A transfer of the H100's fit keeps the target's
    (calibrate.OWN); with the H100's share standard attention's backward on the H200, DRAM-bound
    kernel after kernel, was 8.3% fast on average, with its own 7.2%."""
    from iosim.analysis.calibrate import copy_efficiency, transfer
    from iosim.analysis.validate import validate
    from iosim.core.rows import MEASURED_NEEDS, read_rows

    root = Path(__file__).resolve().parents[1]
    rows = pd.concat([read_rows(root / f, MEASURED_NEEDS) for f in
                      ("experiments/fwd_grid/h200/measured.csv", "experiments/bwd_grid/h200/measured_bwd.csv")])
    own = copy_efficiency(rows, load("hwprofiles/h200-sxm-141gb.toml"))["efficiency.hbm"]
    assert abs(load("hwprofiles/h200-sxm-141gb.toml").efficiency.hbm - own) < 1e-4, own
    h200 = transfer(load("hwprofiles/h100-sxm5-80gb.calibrated.toml"),
                    load("hwprofiles/h200-sxm-141gb.toml"), "h100")
    shipped = load("h200")
    assert h200.efficiency.hbm == shipped.efficiency.hbm == load("hwprofiles/h200-sxm-141gb.toml").efficiency.hbm
    assert abs(shipped.efficiency.hbm - load("h100").efficiency.hbm) > 0.015
    times, _ = validate([root / "experiments/bwd_grid/h200/measured_bwd.csv"])
    naive = times[(times.schedule == "naive") & (times.direction == "bwd")].iloc[0]
    assert naive.mape_pct < 8.0, naive.to_dict()


FA3_BWD = Path(__file__).resolve().parents[1] / "experiments/fa3_bwd"


def test_fa3_backward_waits_at_its_gemm_turns():
    """FA3's backward keeps its tensor pipe busy only 43-48% of the time, and when busy at the
    full wgmma rate: Nsight Compute's SM throughput (its busiest pipe, the tensor pipe) is the
    Plan's FLOPs at the peak rate over the elapsed cycles to within 1% at d = 64 and 128, on the
    H100 and the H200 (experiments/fa3_bwd/h100/ncu_d*.txt, h200/ncu_stalls_d*.txt). So its
    GEMMs are not slower than the forward's (register A, transposed B, 64-wide tiles); the rest
    of the time its consumers wait at their GEMM turns (wgmma.wait_group, the turn's barrier
    and the dSᵀ stores' proxy fence: ncu's WARPGROUP.DEPBAR, BAR and FENCE sites). With the
    waits' own cycles (`pipeline.wgmma_wait_cycles`, timing.turn_waits) one wgmma efficiency
    holds the forward and the backward; priced at nothing, the backward is predicted 23% fast.
    Whether a wait costs what a memory round trip does, the data no longer tell: session 18's
    refit put it at 1,266 cycles, between the fitted L2 round trip (1,207) and DRAM's
    measured one (1,304), and priced at either the backward stays within 5% MAPE (3.4 and 2.2%,
    4.5 and 3.0% at d = 64, 128). Earlier fits kept them apart (session 16: 1,122 and 1,299
    cycles, the backward 3% and 5% fast when tied to the L2 round trip; 5% and more while the
    round trip was one fitted latency, 1,063 cycles, the turn waits 1,361): the mutation that
    priced the waits as round trips is no longer in experiments/mutation_check."""
    import re

    from iosim.analysis.validate import validate

    for f, g in [("h100/ncu_d64.txt", "h100"), ("h100/ncu_d128.txt", "h100"),
                 ("h200/ncu_stalls_d64.txt", "h200"), ("h200/ncu_stalls_d128.txt", "h200")]:
        text = (FA3_BWD / f).read_text()
        cycles = float(re.search(r"Elapsed Cycles\s+cycle\s+([\d,]+)", text).group(1).replace(",", ""))
        busy = float(re.search(r"Compute \(SM\) Throughput\s+%\s+([\d.]+)", text).group(1)) / 100
        d = int(re.search(r"_d(\d+)\.txt", f).group(1))
        hw = load(g)
        p = Problem(batch=2, heads=16, seqlen_q=8192, head_dim=d, direction="bwd")
        k = next(k for k in plan("fa3", p, hw).kernels if k.name == "fa3_bwd")
        at_peak = k.work.tensor_flops / (hw.sm_count * cycles * hw.tensor_flops_per_clk_per_sm["bf16"])
        assert 1.0 <= busy / at_peak < 1.01 and busy < 0.5, (f, busy, at_peak)
    # one wgmma efficiency for both directions: the forward's committed grids and the
    # backward's current kernels (the atomics at d = 64, the dQ warp at d = 128)
    fwd, _ = validate([Path(__file__).resolve().parents[1] / "experiments/fa3/h100/measured_fa3.csv"], H100)
    assert fwd.set_index(["schedule", "direction"]).mape_pct[("fa3", "fwd")] <= 5, fwd.to_string()
    runs = [FA3_BWD / "h100/recheck/measured_bwd.csv", FA3_BWD / "h100/dqwarp/measured_bwd.csv"]
    bwd, _ = validate(runs, H100, by=["head_dim"])
    bwd = bwd[bwd.schedule == "fa3"]
    assert len(bwd) == 2 and (bwd.mape_pct <= 5).all(), bwd.to_string()
    # the waits priced at nothing: the backward predicted 15% and more too fast
    assert "pipeline.wgmma_wait_cycles" in H100.provenance["fitted"]
    free, _ = validate(runs, H100.with_changes(**{"pipeline.wgmma_wait_cycles": 0.0}), by=["head_dim"])
    free = free[free.schedule == "fa3"]
    assert (free.mean_err_pct < -15).all(), free.to_string()


SMALL = [Path(__file__).resolve().parents[1] / f for f in (
    "experiments/small_new/h100/flush10/measured_small_rq1.csv",
    "experiments/waves/h100/flush10/measured_waves_rq.csv")]
BWD_GRID = Path(__file__).resolve().parents[1] / "experiments/bwd_grid/h100/measured_bwd.csv"


def _groups(files, hw=H100):
    from iosim.analysis.validate import validate

    t, _ = validate(files, hw)
    return t.set_index(["schedule", "direction"])


def test_round_trips_to_l2_and_to_dram_are_priced_apart():
    """A synchronous wait is a round trip to where its lines are. To DRAM: the profile's
    `load_latency_cycles`, measured, not fitted (tools/round_trip.py: the earlier paged decode
    gather, two dependent round trips a trip where they bind; 1304 cycles); to L2 (lines the
    step before prefetched, the kernel's own atomics and flags: KernelSpec.sync_in_l2):
    `l2_latency_cycles`, fitted, shorter. fa1's backward (O_i and dQacc_i prefetched into L2)
    is then within 5% MAPE on the H100 grid and on average within 2% (+1.1%, integrate17's
    refit); with its waits priced as DRAM round trips 5.3% MAPE, +3.0% on average, 1.9 points
    slower (an earlier refit's, before the kernel's edges: +0.9% against +3.4%): one latency
    for both made the decode gather's two round trips a trip 2.6 of it (session 14's refit,
    1063 cycles)."""
    pipe = H100.pipeline
    assert "pipeline.load_latency_cycles" not in H100.provenance["fitted"]
    assert "pipeline.l2_latency_cycles" in H100.provenance["fitted"]
    assert 0.5 * pipe.load_latency_cycles < pipe.l2_latency_cycles < pipe.load_latency_cycles
    for name, l2 in (("fa1_bwd", True), ("fa3_bwd", True), ("decode_paged_fwd", False)):
        assert bool(SPECS[name].sync_in_l2) == l2, name
    own = _groups([BWD_GRID]).loc[("fa1", "bwd")]
    assert own.mape_pct <= 5 and abs(own.mean_err_pct) <= 2, own.to_dict()
    tied = _groups([BWD_GRID], H100.with_changes(**{"pipeline.l2_latency_cycles": pipe.load_latency_cycles}))
    tied = tied.loc[("fa1", "bwd")]
    assert tied.mean_err_pct > own.mean_err_pct + 1.5, tied.to_dict()


def test_fa1_forward_waits_its_one_stage_kv_load_once_an_outer_step():
    """fa1.cu's forward loads K_j and V_j through one cp.async stage and waits for them before
    its inner loop over the split's query blocks (QB = SPLIT_ROWS / BLOCK_M): a round trip an
    outer step, 1 / QB of one a trip, which nothing on the SM fills (one CTA an SM). The small
    problems split the rows to fill the GPU (QB = 1): their fa1 forwards (queued, shapes no fit
    saw but the waves') within 8.5% MAPE and on average within 3% (-0.7%); without the wait
    10.1% MAPE, 9% fast on average. Large problems run unsplit: the wait amortised over
    Nq / BLOCK_M trips, the forward grid unchanged within 0.5%."""
    from iosim.kernels import kernel_defines

    d = kernel_defines("fa1_fwd", HEAD_DIM=128, BLOCK_M=128, BLOCK_N=128, NUM_WARPS=8, SPLIT_ROWS=128)
    assert SPECS["fa1_fwd"].sync_loads(d) == 1.0
    g = _groups(SMALL).loc[("fa1", "fwd")]
    assert g.mape_pct <= 8.5 and abs(g.mean_err_pct) <= 3, g.to_dict()


def test_a_lone_cta_waits_its_rings_first_stage_whatever_its_policy():
    """A CTA alone on its SM (its shared memory admits one) waits, before its first trip, for
    its cp.async ring's first stage: a DRAM round trip and the stage's bytes, with no other
    CTA's trips to fill the wait, whatever the policy of its trips: fa2's backward (lockstep,
    two stages, one CTA an SM at every d) as fa2's forward at d = 256 (async). With it the small
    fa2 backwards (queued) are 6.3% MAPE, 6.3% fast on average, and the H100 grid's 2.9%;
    charged only to `async` trips (before session 15) 9.3% and 9% fast, the grid 3.9%."""
    small = _groups(SMALL).loc[("fa2", "bwd")]
    assert small.mape_pct <= 7.5 and small.mean_err_pct > -7.5, small.to_dict()
    grid = _groups([BWD_GRID]).loc[("fa2", "bwd")]
    assert grid.mape_pct <= 3.5, grid.to_dict()


def test_decode_combine_waits_five_round_trips_to_l2():
    """Split-KV decode's fused combine (decode.cu combine_last) runs after the last split's
    loop, nothing overlapping it: five dependent round trips to L2 (the fence after the CTA's
    partial stores, the count's atomicAdd, the fence after the count's reset, the partial LSEs,
    the partial Os), `pipeline.l2_latency_cycles` each. On the fused kernel's contiguous H100
    rows (experiments/decode/h100/fused, launches queued ahead; no decode row fitted) the
    shortest step, batch 1 at 4k keys (16 splits), is then 2.0% slow and every step within 5%;
    with three (the count and the two partials' reads) it is 7.4% fast."""
    from iosim.analysis.measured import decode_run_ms

    fused = Path(__file__).resolve().parents[1] / "experiments/decode/h100/fused"
    rows = pd.concat([pd.read_csv(fused / "bench_read.csv"), pd.read_csv(fused / "mha.csv")])
    ours = rows[(rows.schedule == "decode") & rows.kv_splits.isna() & rows.page_size.isna()]
    one = ours[(ours.batch == 1) & (ours.seqlen_k == 4096)].iloc[0]
    k = plan("decode", Problem(batch=1, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=4096,
                               head_dim=128), H100).main
    assert k.tail_round_trips == 5
    err = [decode_run_ms(r, H100) / r.time_queued_ms - 1 for _, r in ours.iterrows()]
    assert max(abs(e) for e in err) <= 0.05, err
    assert abs(decode_run_ms(one, H100) / one.time_queued_ms - 1) <= 0.04


def _small_rows() -> pd.DataFrame:
    """The small and wave grids' rows (queued, shapes no fit saw) beside today's prediction:
    signed error (percent), the main kernel's CTAs and CTAs an SM."""
    from iosim.analysis.accuracy import gpu_ms, join, measured_ok
    from iosim.analysis.validate import MEASURED_NEEDS, read_rows, repredict

    m = pd.concat([read_rows(f, MEASURED_NEEDS) for f in SMALL], ignore_index=True)
    j = join(repredict(m, H100), m)
    j = j[measured_ok(j) & j.time_pred_ms.notna()].copy()
    j["err"] = (j.time_pred_ms / gpu_ms(j) - 1) * 100
    mains = [measured_plan(r, H100).main for r in j.itertuples()]
    return j.assign(ctas=[k.ctas for k in mains], occ=[ctas_per_sm(k, H100) for k in mains])


def test_a_partial_last_wave_runs_at_its_own_residency():
    """The CTAs past the last full wave spread over the SMs as slots free (Nsight Compute,
    experiments/ncu_mechanism/h100/small15b: fa2's 272 CTAs at two an SM, 264 slots, ran two or
    three CTAs an SM, so the last 8 alone), each as fast as one alone on its SM, not as one of
    two. The wave grid's fa2 forwards with such a tail (268-536 CTAs, N = 512 and 1024, d = 64
    and 128) are then within 3% MAPE, worst 5.6%; charged a whole wave at two an SM (before
    session 15b) 14.2% MAPE, all slow, worst 19.2%."""
    j = _small_rows()
    slots = j.occ * H100.sm_count
    g = j[(j.schedule == "fa2") & (j.direction == "fwd") & ~j.causal & (j.occ == 2)
          & (j.ctas > slots) & (j.ctas % slots > 0) & (j.ctas % slots < H100.sm_count)]
    assert len(g) >= 6, len(g)
    assert g.err.abs().mean() <= 4 and g.err.abs().max() <= 7, g[["batch", "seqlen_q", "err"]]


def test_one_wave_of_unequal_ctas_shares_sms_in_pairs():
    """One wave of unequal (causal) CTAs at two an SM with fewer than two for every SM: the
    hardware places them all at once (Nsight Compute, small15b: 136 causal fa2 CTAs, 4 SMs held
    two), the two on an SM share its units while both run and the one left runs alone; which
    two share is the block scheduler's, so the expected latest pair (timing.shared_pairs).
    The wave grid's fa2 causal forwards with 136 CTAs at N = 1024 are then within 8% (measured
    47.7 us at d = 128: 0.5% slow; d = 64 7.6% slow, 7% before the kernel's edges of session 17
    added its first wave's first K/V tiles), the one-wave causal fa2 rows within 7.5% MAPE;
    scheduled at one CTA an SM, as the best of the occupancies (before session 15b), 19.6% and
    13.8% fast, the group 10.9% MAPE."""
    arr = timing.np.array
    assert timing.shared_pairs(arr([4.0]), arr([2.0]), 2, 1) == 4.0  # shared all through
    assert timing.shared_pairs(arr([4.0]), arr([2.0]), 1, 1) == 2.0  # alone
    # CTAs of 2 and 4 s shared (1 and 2 s alone), any two alike on the one SM: (2, 2) end at 2,
    # (4, 4) at 4, (2, 4) at 2 + (1 - 2/4) x 2 = 3 (the longer alone after its partner): 3 expected
    assert abs(timing.shared_pairs(arr([2.0, 4.0]), arr([1.0, 2.0]), 2, 1) - 3.0) < 1e-12
    j = _small_rows()
    g = j[(j.schedule == "fa2") & (j.direction == "fwd") & j.causal & (j.occ == 2)
          & (j.ctas > H100.sm_count) & (j.ctas <= 2 * H100.sm_count)]
    assert len(g) >= 10, len(g)
    few = g[(g.ctas < 140) & (g.seqlen_q == 1024)]
    assert len(few) == 2 and few.err.abs().max() <= 8, few[["head_dim", "err"]]
    assert g.err.abs().mean() <= 7.5, g[["batch", "seqlen_q", "head_dim", "err"]]


def test_a_cta_runs_alone_once_its_sm_partner_ends():
    """Unequal CTAs at two an SM past the first wave: while CTAs wait for a place the SMs run
    full, and once the last has started each SM's two share it while both run, the one left
    alone at its own speed (timing.shared_end, the rule one wave follows from the start). The
    wave grid's causal fa2 forwards past a wave (268-536 CTAs at 264 places): measured, B = 34
    at N = 1024 no slower than B = 33 (the 8 CTAs past the wave take the places of the
    shortest CTAs and finish, alone, before the longest pairs); predicted within 6.5%, the
    group within 4.5% MAPE. At the shared speed all through (before session 16) B = 34 was
    14-16% slow, the group 7.2% MAPE."""
    arr = timing.np.array
    # one SM, one wave: shared_pairs; three CTAs of 2 s shared (1 s alone) on one SM's two
    # places: the third starts as the first two end and runs alone
    assert timing.shared_end(arr([4.0]), arr([2.0]), 2, 2, 1) == 4.0
    assert timing.shared_end(arr([2.0]), arr([1.0]), 3, 2, 1) <= 2.0 + 1.0 + 1e-12
    j = _small_rows()
    slots = j.occ * H100.sm_count
    g = j[(j.schedule == "fa2") & (j.direction == "fwd") & j.causal & (j.occ == 2)
          & (j.ctas > slots)]
    assert len(g) >= 8, len(g)
    past = g[g.ctas - slots.loc[g.index] < H100.sm_count]
    assert len(past) >= 4 and past.err.abs().max() <= 6.5, past[["batch", "seqlen_q", "err"]]
    assert g.err.abs().mean() <= 4.5, g[["batch", "seqlen_q", "head_dim", "err"]]


def test_the_longest_cta_of_a_wave_shares_the_bandwidth_while_the_others_run():
    """The longest CTA that starts with the launch shares L2 and DRAM with the CTAs beside it
    for as long as they run: Σ min(d, D) / D of them on average (processor sharing,
    timing._longest), not none. Nsight Compute (experiments/ncu_mechanism/h100/small15b, 16
    heads x 1, N = 1024, one CTA an SM) has fa2's causal backward kernel at 0.979 of the
    non-causal one's duration (d = 64 and 128), its busiest SM 3.5% and 2.7% short: the predicted
    ratio is 0.934 and 0.926 (0.895 and 0.883 with the longest CTA alone on the bandwidth, before
    session 15c). The small grid's causal fa2 backwards at one CTA an SM and 128-136 CTAs
    are then within 9.2% (11.9% fast before). Since session 16 fa2's backward trip waits its
    port, not its bandwidth share (its ring copies a trip ahead: test_fa2_backward_trips_wait_
    their_port_behind_a_ring), so the share no longer shortens its causal kernel: the ratio is
    0.994 and 0.992 (1.015 and 1.014 of ncu's), and those rows are within 6%."""
    ncu = pd.read_csv(Path(__file__).resolve().parents[1]
                      / "experiments/ncu_mechanism/h100/small15b/ncu_small15b.csv")
    ncu = ncu[(ncu.schedule == "fa2") & (ncu.direction == "bwd") & (ncu.kernel == "fa2_bwd")
              & (ncu.metric == "gpu__time_duration.sum")]
    for d in (64, 128):
        measured, pred = {}, {}
        for causal in (False, True):
            rows = ncu[(ncu.head_dim == d) & (ncu.causal == causal) & (ncu.batch == 16)
                       & (ncu.heads == 1) & (ncu.seqlen == 1024)]
            measured[causal] = rows.value.iloc[0]
            pl = plan("fa2", Problem(batch=16, heads=1, seqlen_q=1024, head_dim=d, causal=causal,
                                     direction="bwd"), H100)
            ks = timing.predict(pl, H100, memory.estimate(pl, H100))
            pred[causal] = ks[[k.name for k in pl.kernels].index("fa2_bwd")].seconds \
                - H100.launch_overhead_s
        ratio = pred[True] / pred[False] / (measured[True] / measured[False])
        assert 0.94 <= ratio <= 1.02, (d, pred, measured)
    j = _small_rows()
    g = j[(j.schedule == "fa2") & (j.direction == "bwd") & j.causal & (j.occ == 1)
          & (j.ctas >= 128) & (j.ctas <= 136)]
    assert len(g) == 4 and g.err.abs().max() <= 10, g[["batch", "head_dim", "err"]]


def _bwd_rows(files: list[str], schedule: str, direction: str = "bwd") -> pd.DataFrame:
    """Measured backward (or `direction`) rows of `schedule` beside today's prediction (H100
    profile): signed error, percent, against the time validate holds the model to (queued where
    timed so)."""
    from iosim.analysis.accuracy import gpu_ms, join, measured_ok
    from iosim.analysis.validate import MEASURED_NEEDS, read_rows, repredict

    root = Path(__file__).resolve().parents[1] / "experiments"
    m = pd.concat([read_rows(root / f, MEASURED_NEEDS) for f in files], ignore_index=True)
    m = m[(m.schedule == schedule) & (m.direction == direction)]
    j = join(repredict(m, H100), m)
    j = j[measured_ok(j) & j.time_pred_ms.notna()].copy()
    return j.assign(err=(j.time_pred_ms / gpu_ms(j) - 1) * 100)


def test_fa2_backward_trips_wait_their_port_behind_a_ring():
    """fa2's backward (`lockstep`: barrier-phased trips, one CTA an SM) copies the next trip's
    Q_i, dO_i, LSE_i, D_i a trip ahead (a cp.async ring, STAGES >= 2) and adds dQ with atomics
    it never waits for: its trip is the warps' chain, with the trip's bytes through the SM's own
    load/store path on it, combined with the SM's throughput as synchronous phases, and its share
    of L2/DRAM bounds the trip but does not add to it. The small grid (1-34 heads x batch, N =
    256-1024, one wave or a few) measures a trip about as long alone on the GPU as beside 131
    others (5.3 us at d = 64, 8 CTAs: the times at N = 256, 512, 1024; the bandwidth-heavy grid
    5.1-5.2): with the share as a phase (before session 16) its rows were 6.3% MAPE, all fast,
    worst 11.9%; with the port off the chain 7.5%, worst 13.9% (and the grid's 10-18% fast);
    now 2.4%, worst 7.6% (session 18's refit beside naive's GEMM address chain, launch overhead
    3.65 -> 3.52 us: 3.2%, 3.1% fast on average, worst 9.0%)."""
    j = _small_rows()
    g = j[(j.schedule == "fa2") & (j.direction == "bwd")]
    assert len(g) == 66
    assert g.err.abs().mean() <= 4 and abs(g.err.mean()) <= 3.5 and g.err.abs().max() <= 10, \
        g[["batch", "heads", "seqlen_q", "head_dim", "causal", "err"]].to_string()


def test_reductions_cross_the_sm_port_once():
    """fa2's backward adds dQ into dQacc with red.global (fa3's with red.global or the dQ warp's
    bulk reduce-adds): the L2 reads and writes dQacc, as the Plan counts, but the bytes leave
    the SM once (KernelSpec.l2_reductions): its port carries the trip's Q_i, dO_i and the
    atomics' data, not their reads. Counted twice, the backward grid's d = 128 rows run 6.3%
    slow (MAPE, every one slow; 1.9% counted once)."""
    j = _bwd_rows(["bwd_grid/h100/measured_bwd.csv"], "fa2")
    g = j[j.head_dim == 128]
    assert len(g) == 12
    assert g.err.abs().mean() <= 4 and abs(g.err.mean()) <= 3, g[["batch", "seqlen_q", "causal", "err"]]
    p = Problem(batch=2, heads=8, seqlen_q=2048, head_dim=128, direction="bwd")
    k = next(k for k in plan("fa2", p, H100).kernels if k.name == "fa2_bwd")
    assert timing.reduced_loop_reads(k, p) == k.traffic.reads["dQacc"] > 0


def test_fa3_backward_split_d_consumers_run_in_step():
    """fa3's backward at head_dim 256 (SPLIT_D) has its two consumer warpgroups split head_dim
    and meet at a named barrier every step (no ping-pong): their GEMMs issue together and share
    the tensor cores, and their softmax runs while no GEMM does (KernelSpec.consumers_in_step),
    so a step takes the whole CTA's tensor time, its softmax and its two GEMM-turn waits (about
    3.4 us at the committed shapes; ncu's L2 88% busy at N = 8192 is then not the limiter).
    Taken as turns (each warpgroup half the tensor time) the trip was the L2 share and the dQ
    warp's rows (DQ_BULK 2, N = 1000-16384) 8.6% fast on average, -24% at N = 1000 causal; now
    within 1% on average and 12% at worst (the two N = 1000 rows, 6 waves of 16-trip CTAs)."""
    j = _bwd_rows(["fa3_bwd/h100/dq256/run2/measured_bwd.csv", "fa3_bwd/h100/new_shapes/measured_new.csv",
                   "fa3_bwd/h100/new_shapes/run2/measured_new.csv"], "fa3")
    g = j[(j.head_dim == 256) & j.dq_bulk.astype(str).str.startswith("2")]
    assert len(g) == 9
    assert abs(g.err.mean()) <= 3 and g.err.abs().mean() <= 6 and g.err.abs().max() <= 12.5, \
        g[["batch", "seqlen_q", "causal", "err"]]


def test_fa3_backward_computes_ragged_tiles_in_full():
    """fa3_bwd.cu's TMA zero-fills the rows past a ragged Nq or Nk and its consumers compute
    whole tiles on them (KernelPlan.tile_trips, as fa3.cu's forward): at N = 1000, d = 256 (64 x
    64 tiles) every CTA runs 16 whole query tiles, as at N = 1024. Counted as fractions, the
    ragged grid's last CTA of each head (N = 5000: 79 key blocks, the last 8 keys) was another
    CTA length and the list schedule of nearly equal CTAs put the fp16 row at +8.2%; now 2.7%."""
    for n in (1000, 1024):
        p = Problem(batch=8, heads=6, seqlen_q=n, head_dim=256, direction="bwd")
        k = next(k for k in plan("fa3", p, H100).kernels if k.name == "fa3_bwd")
        assert k.tile_trips is not None and float(k.tile_trips.max()) == 16
    j = _bwd_rows(["fa3_bwd/h100/new_shapes/measured_new.csv"], "fa3")
    g = j[(j.head_dim == 256) & (j.seqlen_q == 5000)]
    assert len(g) == 1 and g.err.abs().max() <= 5, g[["batch", "seqlen_q", "err"]]


def test_fa2_forward_computes_ragged_tiles_in_full():
    """fa2.cu's cp.async zero-fills the keys and rows past a ragged N and its warps compute whole
    tiles on them (KernelPlan.tile_trips, as fa3's): at N = 1000 (128 x 32 tiles at d = 128) a
    causal CTA's longest run is 32 whole key tiles, as at N = 1024, not 31.25. Counted as
    fractions, the committed new-shapes row B = 16, H = 16, N = 1000, causal was predicted
    beyond 15% fast (measured slower than the same heads at N = 1024)."""
    for n in (1000, 1024):
        p = Problem(batch=16, heads=16, seqlen_q=n, head_dim=128, causal=True)
        k = next(k for k in plan("fa2", p, H100).kernels if k.name == "fa2_fwd")
        assert k.tile_trips is not None and float(k.tile_trips.max()) == 32
    j = _bwd_rows(["new_shapes/h100/measured_new.csv"], "fa2", "fwd")
    g = j[(j.seqlen_q == 1000) & (j.head_dim == 128) & j.causal & (j.heads == 16)]
    assert len(g) == 1 and g.err.abs().max() <= 13, g[["batch", "seqlen_q", "err"]]


def test_the_longest_cta_shares_bandwidth_with_those_beside_it_while_they_run():
    """timing._longest's processor sharing, held directly (since session 16 no committed group
    turns on it: fa2's backward, whose small causal rows it was fitted to, waits its port, not
    its bandwidth share; fa1's small forwards move 0.1 point without it): a period of CTAs of
    4, 2, 1 and 1 time units, all started together, leaves the longest CTA sharing L2 and DRAM
    with Σ min(d, 4) / 4 = 2 CTAs on average (itself included), at most the 4 that run at once."""
    import numpy as np

    dc = np.array([[4.0, 2.0, 1.0, 1.0]])
    at, share = timing._longest(dc, np.array([1.0]), np.array([4.0]), np.array([4.0]))
    assert at.tolist() == [0] and share == pytest.approx([2.0])
    _, few = timing._longest(dc, np.array([1.0]), np.array([1.5]), np.array([4.0]))
    assert few == pytest.approx([1.5])  # at most the CTAs that run at once


def test_fa1_forward_warps_released_at_a_barrier_queue_at_their_tensor_core():
    """fa1.cu's forward meets at a CTA barrier once an outer step (K_j, V_j landed), so 1 / QB of
    its trips begin with every warp released at once (KernelSpec.barrier_trips); at d = 128 its
    8 warps put two on each SM sub-partition, which reach their MMAs together: each waits on
    average for the other's, half the sub-partition's tensor time, on its chain. Nsight Compute
    (experiments/mid_fwd17, one 8-warp CTA an SM, QB = 2): each warp's ~1,900 instructions a
    trip at 6.8 cycles each set the trip (hardly `not_selected`: the two warps of a
    sub-partition do not wait to issue, they wait on dependencies), 15% beyond the model's
    trip without the queue. The small block's d = 128 forwards (one CTA an SM, QB = 1 or 2):
    MAPE 3.6%, 2.3% fast on average, worst 12.6% (model17b's refit); without the queue 8.9%,
    8.9% fast on average. 4-warp CTAs (one warp a sub-partition) and unsplit large problems
    (QB = Nq / BLOCK_M) are left as they were."""
    import dataclasses

    from iosim.analysis.accuracy import join
    from iosim.analysis.validate import repredict
    from iosim.core.rows import MEASURED_NEEDS, read_rows
    from iosim.kernels import kernel_defines

    spec = SPECS["fa1_fwd"]
    d = dict(HEAD_DIM=128, BLOCK_M=128, BLOCK_N=128, NUM_WARPS=8)
    assert spec.barrier_trips(kernel_defines("fa1_fwd", **d, SPLIT_ROWS=128)) == 1.0
    assert spec.barrier_trips(kernel_defines("fa1_fwd", **d, SPLIT_ROWS=512)) == 0.25
    p = Problem(batch=1, heads=1, seqlen_q=1024, head_dim=128)
    r = timing.Rates.of(plan("fa1", p, H100).main, H100, p)
    # w = the CTA's warps a sub-partition (the profile's issue_per_clk_per_sm: 4 schedulers)
    cyc = 1.0 / H100.clock_hz
    eight = timing.Trip.of(1e6, 0.0, 0.0, 0.0, 8, r, cyc, barrier=1.0)
    four = timing.Trip.of(1e6, 0.0, 0.0, 0.0, 4, r, cyc, barrier=1.0)
    assert eight.queue == pytest.approx(eight.tensor / 2) and four.queue == 0.0

    m = pd.concat([read_rows(f, MEASURED_NEEDS) for f in SMALL], ignore_index=True)
    m = m[(m.schedule == "fa1") & (m.direction == "fwd") & (m.status == "ok") & (m.head_dim == 128)]
    assert len(m) >= 30

    def err(mm):
        j = join(repredict(mm), mm)
        return j.time_pred_ms / j.time_queued_ms.where(j.time_queued_ms.notna(), j.time_ms) - 1

    e = err(m)
    assert e.abs().mean() < 0.05 and e.mean() > -0.04 and e.abs().max() < 0.15, e.describe()
    try:  # the same rows without the queue: fast
        SPECS["fa1_fwd"] = dataclasses.replace(spec, barrier_trips=None)
        off = err(m)
    finally:
        SPECS["fa1_fwd"] = spec
    assert off.mean() < e.mean() - 0.04, (off.mean(), e.mean())


def test_a_warps_loads_wait_for_the_other_ctas_bytes_at_the_sm_port():
    """The SM's port (its own load path to L2) is shared by the CTAs resident on it: a warp's
    synchronous loads (`drift`: fa1's forward, O_i, ℓ_i, m_i and its K/V copies) find it busy
    with each other CTA's bytes for the share of time that CTA keeps it busy, port / chain as
    alone (mean value analysis's arrival theorem), and wait for them: (n - 1) x that share x
    the trip's port time on the warp's chain. Nsight Compute (experiments/mid_fwd17, model.txt):
    at d = 256 with 144 CTAs, 12 SMs hold two, and those SMs run 109,039 cycles against the
    lone CTAs' 71,924 in the same launch (1.52x; d = 64 at QB = 2: 1.41x), with `lg_throttle`
    (the LSU's global queue full) 1.16 an issue; the model's processor sharing of two CTAs put
    it near 1.26x. The small block's fa1 forwards with two CTAs on some SMs (more CTAs than
    SMs): MAPE 4.8%, 2.5% fast on average, worst 12.2% (model17b's refit; session 18's, beside
    naive's GEMM address chain: 5.4%, 4.3% fast); without the wait 7.9%, 6.9% fast, worst
    18.6%."""
    from iosim.analysis.accuracy import join
    from iosim.analysis.validate import repredict
    from iosim.core.rows import MEASURED_NEEDS, read_rows

    m = pd.concat([read_rows(f, MEASURED_NEEDS) for f in SMALL], ignore_index=True)
    m = m[(m.schedule == "fa1") & (m.direction == "fwd") & (m.status == "ok")]
    m = m[[measured_plan(r, H100).main.ctas > H100.sm_count for r in m.itertuples(index=False)]]
    assert len(m) >= 10
    j = join(repredict(m), m)
    e = j.time_pred_ms / j.time_queued_ms.where(j.time_queued_ms.notna(), j.time_ms) - 1
    assert e.abs().mean() < 0.06 and e.mean() > -0.05 and e.abs().max() < 0.14, \
        j.assign(err=e)[["batch", "heads", "seqlen_q", "head_dim", "causal", "err"]].to_string()


def test_a_kernels_first_wave_waits_its_first_loads_at_once():
    """The kernel's head: its first wave's CTAs all wait for their first trip's operands at
    once (no trip before it to overlap them), through their share of L2 and DRAM, so the same
    CTAs take longer the more of them the wave holds (timing._schedule's `burst`, once a
    kernel). The wave grid's fa2 and fa3 forwards at one CTA an SM and one wave, 16 heads
    against one (N = 256 and 1024, d = 64 and 128: 2-8 CTAs against 32-128, each CTA the same
    work): measured 2-16% slower (7.4% on average), predicted 0.7-7% (3.1%: the first trip's
    loads overlap nothing only up to its work, its warps' chain); without the burst each CTA
    is timed alone and 16 heads come out no slower (0-2%)."""
    j = _small_rows()
    g = j[j.schedule.isin(["fa2", "fa3"]) & (j.direction == "fwd") & ~j.causal & (j.batch == 1)
          & j.heads.isin([1, 16]) & j.seqlen_q.isin([256, 1024]) & j.head_dim.isin([64, 128])]
    from iosim.analysis.accuracy import gpu_ms

    g = g.assign(meas=gpu_ms(g))
    t = g.pivot_table(index=["schedule", "seqlen_q", "head_dim"], columns="heads",
                      values=["meas", "time_pred_ms"])
    assert len(t) == 8, t
    meas, pred = t.meas[16] / t.meas[1], t.time_pred_ms[16] / t.time_pred_ms[1]
    assert (pred >= 1.005).all() and (pred <= meas).all(), pd.DataFrame({"meas": meas, "pred": pred})
    assert pred.mean() - 1 >= 0.35 * (meas.mean() - 1), pd.DataFrame({"meas": meas, "pred": pred})


def test_a_cta_waits_for_its_stores_to_drain():
    """The kernel's tail: a CTA's warps exit only once their stores have left for the L2
    (Nsight Compute's `drain` stall), a round trip (timing.store_drain; priced at the measured
    `load_latency_cycles`, none fitted); a CTA alone on its SM waits it before the next takes
    its place. fa1_init stores only (Oacc, l, m): Nsight Compute has its busiest SM active 1159
    cycles (0.58 us) at one CTA (experiments/small_fwd16/h100/ncu16); the model's busy time is
    its stores' bandwidth and that drain. The wave grid's tiniest problems (one batch, 1 or 4
    heads, N = 256: 28 rows, every schedule and direction, 1-5 kernels of a few us each): the
    launch overhead refitted beside the edges (3.68 us, 4.59 without), predicted 4.5% slow on
    average; without the drain they come out 4.1% fast, and with the old fixed cost (one
    launch overhead, nothing per kernel) 6.7% slow."""
    from iosim.analysis.accuracy import gpu_ms

    p = Problem(batch=1, heads=1, seqlen_q=128, head_dim=64)
    pl = plan("fa1", p, H100)
    init = next(i for i, k in enumerate(pl.kernels) if k.name == "fa1_init")
    kt = timing.predict(pl, H100, memory.estimate(pl, H100))[init]
    busy = kt.seconds - H100.launch_overhead_s
    rt = H100.pipeline.load_latency_cycles / H100.clock_hz
    assert rt <= busy <= 2 * 0.58e-6, (busy, rt)
    j = _small_rows()
    g = j[(j.batch == 1) & (j.heads <= 4) & (j.seqlen_q == 256) & ~j.causal
          & (j.time_queued_ms.notna())]
    assert len(g) >= 24 and g.schedule.nunique() == 4, len(g)
    err = (g.time_pred_ms / gpu_ms(g) - 1) * 100
    assert -3 <= err.mean() <= 6, g.assign(err=err)[["schedule", "direction", "heads", "head_dim", "err"]]


def test_naive_gemm_loop_instructions_wait_on_their_dependent_address_chain():
    """naive.cu's GEMMs compute every 16-byte copy's swizzled address, bound and predicate and
    every ldmatrix's address, each from the one before (KernelSpec.loop_chain): a warp waits
    issue to dependent issue on each (pipeline.chain_inst_cycles, fitted from the ncu value's
    5.5 cycles: `wait` and `short_scoreboard` stalls, experiments/mid_fwd17), where the other
    instructions of a warp cost inst_cycles. One 8-warp GEMM CTA an SM runs on that chain:
    naive_pv timed in its sequence (experiments/naive_fwd18/h100/prefix.csv) 13-16% beyond the
    model without it. The small block's naive rows (H100 calibrated profile): forward MAPE
    4.8%, 3.1% fast on average, backward 3.6%, worst 7.5%; with the chain's steps at
    inst_cycles 6.2% (5.5% fast) and 3.9%, worst 11.9%."""
    from iosim.analysis.accuracy import join
    from iosim.analysis.validate import repredict
    from iosim.core.rows import MEASURED_NEEDS, read_rows

    p = Problem(batch=1, heads=1, seqlen_q=1024, head_dim=128)
    pv = next(k for k in plan("naive", p, H100).kernels if k.name == "naive_pv")
    assert timing.loop_chain(pv) == pv.loop_issue > 0
    assert timing.loop_chain(plan("fa2", p, H100).main) == 0.0
    assert H100.pipeline.chain_cycles > 2 * H100.pipeline.inst_cycles

    m = pd.concat([read_rows(f, MEASURED_NEEDS) for f in SMALL], ignore_index=True)
    m = m[(m.schedule == "naive") & (m.status == "ok")]
    for direction in ("fwd", "bwd"):
        mm = m[m.direction == direction]
        assert len(mm) >= 50
        j = join(repredict(mm, H100), mm)
        e = j.time_pred_ms / j.time_queued_ms.where(j.time_queued_ms.notna(), j.time_ms) - 1
        assert e.abs().mean() < 0.05 and e.mean() > -0.04 and e.abs().max() < 0.15, (direction, e.describe())
