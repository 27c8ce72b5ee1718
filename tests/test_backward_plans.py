"""Backward Plans against their kernels, without a GPU: every kernel a backward Plan launches has
a source, an argument list (its KernelSpec, iosim.kernels.SPECS) as long as its CUDA signature, tiles that fit
the GPU (or one clear refusal), and the launcher refuses what no backward kernel runs."""

import re

import pytest

from iosim.core.hardware import InputError, load
from iosim.core.problem import Problem
from iosim.gpu.compile import kernel_path
from iosim.kernels import SPECS, supported
from iosim.schedules import Tiles, plan
from iosim.schedules.base import BlockMap

H100 = load("h100-sxm5-80gb")


def bwd(d=128, causal=False, kv_heads=None, n=1000, **kw) -> Problem:
    return Problem(batch=2, heads=4, kv_heads=kv_heads, seqlen_q=n, head_dim=d, causal=causal,
                   direction="bwd", **kw)


def signature_params(source: str, entry: str) -> int:
    """Parameters of `entry`'s definition in kernels/<source>."""
    text = kernel_path(source).read_text()
    m = re.search(rf"\b{entry}\(([^)]*)\)\s*\{{", text)
    assert m, f"no definition of {entry} in {source}"
    return len([a for a in m.group(1).split(",") if a.strip()])


@pytest.mark.parametrize("schedule", ["naive", "fa1", "fa2"])
@pytest.mark.parametrize("kv_heads", [None, 2])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_backward_kernels_have_sources_and_matching_arguments(schedule, kv_heads, d):
    pl = plan(schedule, bwd(d, True, kv_heads), H100)
    supported(pl)
    names = [k.name for k in pl.kernels]
    assert ("gqa_reduce" in names) == (kv_heads is not None)  # a GQA sum only when grouped
    for k in pl.kernels:
        assert k.source is not None, k.name
        assert len(SPECS[k.name].args) == signature_params(k.source, k.name), k.name
        assert k.smem_bytes <= H100.smem_per_block_optin_bytes, k.name


def test_fa2_backward_grid_covers_every_key_block():
    p = bwd(128, n=1000)
    pl = plan("fa2", p, H100)
    main = next(k for k in pl.kernels if k.name == "fa2_bwd")
    assert main.grid == (-(-p.seqlen_k // main.block_n), p.heads, p.batch)
    # K, V and both stages of the Q/dO ring (input dtype), Pᵀ and dSᵀ, LSE/D rings (fp32)
    bm, bn, st, e = main.block_m, main.block_n, main.stages, p.elem_bytes
    assert main.smem_bytes == (2 * bn * 128 + 2 * st * bm * 128 + 2 * bm * bn) * e + 2 * st * bm * 4


@pytest.mark.parametrize("d", [64, 72, 128, 192, 200, 256])
def test_fa1_backward_is_one_cta_per_head_with_its_kernels_shared_memory(d):
    """kernels/fa1.cu's fa1_bwd: grid (1, H, B) when one CTA per head fills the GPU (here: the
    measured row's replay, Tiles(split_cols=Nk); the key-block split: tests/test_fa1_split.py);
    K_j, V_j, the Q_i/dO_i ring (rows padded to a multiple of 64), Pᵀ and dSᵀ in the input
    dtype, the ℓ_i/m_i ring and D_i in fp32; tiles from the register file (BWD_TILES), any
    head_dim (padded), either causal alignment, GQA."""
    p = bwd(d, True, 2, seqlen_k=1500, causal_align="bottom-right")
    pl = plan("fa1", p, H100, Tiles(split_cols=1500))
    supported(pl)
    assert [k.name for k in pl.kernels] == ["fa1_bwd_init", "fa1_bwd", "fa1_bwd_convert",
                                           "gqa_reduce"]
    main = pl.kernels[1]
    assert main.grid == (1, p.heads, p.batch) and main.defines["DQ_ATOMIC"] == 0
    bm, bn, st, e, dp = main.block_m, main.block_n, main.stages, p.elem_bytes, -(-d // 64) * 64
    assert main.defines["HEAD_DIM_PAD"] == dp and main.defines["CAUSAL_BOTTOM_RIGHT"] == 1
    assert main.smem_bytes == (2 * bn * dp + 2 * st * bm * dp + 2 * bm * bn) * e + (2 * st + 1) * bm * 4
    # the kernel's static_asserts: 64-row query blocks (swizzled Pᵀ rows), 2 threads per row
    assert bm % 64 == 0 and bn % 16 == 0 and st >= 2 and 32 * main.defines["NUM_WARPS"] >= 2 * bm
    # HBM per step: O_i, ℓ_i, m_i, dO_i, Q_i, dQacc_i read and dQacc_i written, per visited pair
    bmap = BlockMap.of(p, bm, bn)
    sr = bmap.sum_r() * p.batch * p.heads
    assert main.traffic.reads["O"] == sr * d * e and main.traffic.reads["dQacc"] == sr * d * 4
    assert main.traffic.writes["dQacc"] == sr * d * 4 and main.traffic.reads["L"] == sr * 4


def test_a100_refuses_fa2_backward_at_d256_in_one_line():
    with pytest.raises(InputError, match="shared memory") as e:
        plan("fa2", bwd(256), load("a100-sxm4-80gb"))
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("schedule,problem,message", [
    ("fa3", bwd(96), "head_dim=96 has no real backward kernel"),
    ("fa2", bwd(96), "head_dim=96 has no real backward kernel"),
    ("naive", bwd(96), "head_dim=96 has no real backward kernel"),
])
def test_backward_launcher_refuses_what_no_kernel_runs(schedule, problem, message):
    with pytest.raises(InputError, match=message):
        supported(plan(schedule, problem, H100))


@pytest.mark.parametrize("schedule", ["naive", "fa1", "fa2"])
def test_every_backward_kernel_takes_the_bottom_right_diagonal(schedule):
    p = bwd(causal=True, seqlen_k=1500, causal_align="bottom-right")
    pl = plan(schedule, p, H100)
    supported(pl)  # no refusal
    main = [k for k in pl.kernels if k.name.endswith("_bwd") or k.name.startswith("naive_bwd")]
    masked = [k for k in main if "IS_CAUSAL" in k.defines]
    assert masked and all(k.defines["CAUSAL_BOTTOM_RIGHT"] == 1 for k in masked)


@pytest.mark.parametrize("tiles,message", [
    (Tiles(block_n=96), "needs --block-n 64 or 128"),
    (Tiles(block_m=64, block_n=128), "needs 64x64 dQ units"),
    (Tiles(block_m=128, block_n=64), "needs --warps 4"),
])
def test_fa3_backward_refuses_tiles_its_kernel_cannot_run(tiles, message):
    """kernels/fa3_bwd.cu's static_asserts as one-line refusals (iosim.kernels rules): a consumer
    warpgroup per 64 keys; the dQ units (64 queries x 64 columns) shared out evenly."""
    with pytest.raises(InputError, match=message):
        plan("fa3", bwd(64), load("h100-sxm5-80gb"), tiles, check=True)
    plan("fa3", bwd(64), load("h100-sxm5-80gb"), Tiles(block_m=128, block_n=128), check=True)


def test_fa3_backward_at_d256_takes_its_split_tiles_only():
    """kernels/fa3_bwd.cu at head_dim 256 (SPLIT_D): 64 x 64 tiles, two consumer warpgroups of
    four warps splitting head_dim, no ping-pong, 227 KB of shared memory with two stages;
    other warps, or tiles that do not fit, are refused in one line."""
    h100 = load("h100-sxm5-80gb")
    main = plan("fa3", bwd(256), h100, Tiles(), check=True).main
    assert (main.block_m, main.block_n, main.threads, main.defines["NUM_WARPS"]) == (64, 64, 384, 8)
    assert main.defines["PINGPONG"] == 0 and main.smem_bytes <= h100.smem_per_block_optin_bytes
    for tiles, message in ((Tiles(warps=4), "needs --warps 8"), (Tiles(block_n=128), "shared memory")):
        with pytest.raises(InputError, match=message) as e:
            plan("fa3", bwd(256), h100, tiles, check=True)
        assert "\n" not in str(e.value)


@pytest.mark.parametrize("hw", ["h100-sxm5-80gb", "h200-sxm-141gb"])
def test_fa3_backward_takes_the_dq_warp_where_its_staging_fits(hw):
    """kernels/fa3_bwd.cu's dQ reduction as the Plan picks it: d = 128, the dQ warp with a staged
    unit a consumer (DQ_BULK 2, 32 KB more shared memory than the atomics); d = 256, the dQ
    warp with the units staged in the step's Q/dO ring slot (DQ_BULK 2, no shared memory of its
    own); atomics (0) where the kernel has no dQ warp (deterministic) or two staged units do
    not fit (d = 64 beside its three dSᵀ buffers, a three-stage ring at d = 128; DQ_BULK 3, one
    unit shared in turn, fits at d = 64 but is not the Plan's). Every choice fits with the
    kernel's static shared memory."""
    from iosim.kernels import FA3_BWD_STATIC_SMEM as STATIC_SMEM
    from iosim.kernels import FA3_DQ_BOXES

    h = load(hw)

    def main(d, tiles=Tiles(), **kw):
        return plan("fa3", bwd(d, **kw), h, tiles, check=True).main

    atomics = main(128, deterministic=True)
    k = main(128)
    assert k.defines["DQ_BULK"] == 2 and k.smem_bytes == atomics.smem_bytes + 2 * FA3_DQ_BOXES
    assert k.smem_bytes + STATIC_SMEM <= h.smem_per_block_optin_bytes
    d256, d256_det = main(256), main(256, deterministic=True)
    assert d256.defines["DQ_BULK"] == 2 and d256.smem_bytes == d256_det.smem_bytes
    assert d256.smem_bytes + STATIC_SMEM <= h.smem_per_block_optin_bytes
    for k in (atomics, main(64), main(64, deterministic=True), d256_det, main(128, Tiles(stages=3))):
        assert k.defines["DQ_BULK"] == 0 and k.smem_bytes + STATIC_SMEM <= h.smem_per_block_optin_bytes
    d64 = main(64).defines | {"DQ_BULK": 2}  # two staged units: over the GPU's shared memory
    assert SPECS["fa3_bwd"].smem(d64, 2) + STATIC_SMEM > h.smem_per_block_optin_bytes
    # the copy engine's map of dQacc: boxes of one dQ unit's 64 rows, 32 fp32 columns
    assert SPECS["fa3_bwd"].tensor_maps["TmdQ"] == ("dQacc", 64)


def test_deterministic_rows_are_their_own_points_and_read_back():
    """A deterministic backward row (Problem.deterministic) keys apart from the default one in
    a bench file (resume), and a table read back gives the Problem field again (validate)."""
    import pandas as pd

    from iosim.analysis.bench import key
    from iosim.core.rows import normalize, option_fields, problem_fields

    rows = [{"hw": "h100", "schedule": "fa3", **problem_fields(bwd(deterministic=det))}
            for det in (True, False)]
    assert key(rows[0]) != key(rows[1])
    back = normalize(pd.DataFrame(rows)).to_dict("records")
    assert [option_fields(r) for r in back] == [{"deterministic": True}, {}]
    assert Problem(**{k: v for k, v in rows[1].items() if k not in ("hw", "schedule")},
                   **option_fields(back[0])).deterministic


def test_fa1_deterministic_backward_is_planned_unsplit():
    """fa1's backward splits a head's key blocks across CTAs (dQ by atomics) when batch·heads do
    not fill the GPU; asked for a deterministic backward it runs one CTA a head instead, which
    read-modify-writes dQacc_i in key-block order."""
    p = Problem(batch=1, heads=2, seqlen_q=8192, head_dim=64, direction="bwd")
    split = plan("fa1", p, H100).main
    det = plan("fa1", p.model_copy(update={"deterministic": True}), H100).main
    assert split.defines["DQ_ATOMIC"] == 1 and split.grid[0] > 1
    assert det.defines["DQ_ATOMIC"] == 0 and det.grid[0] == 1


def test_fa3_backward_waits_and_the_papers_dq_writer_variant():
    """Each fa3_bwd consumer step waits for its own dQ reduction (the deterministic mode also
    for its turn's flag): the memory round trips the timing model charges a trip
    (timing.sync_loads); and for its two GEMM turns, which are no memory round trips
    (timing.turn_waits, `pipeline.wgmma_wait_cycles` each). The FA3 paper's dQ-writer warp
    (Tiles.dq_writer) takes the dQ wait away; no kernel here has it, so it is refused for a run
    and backed as published."""
    from iosim.model.backing import PUBLISHED, backing
    from iosim.model.timing import sync_loads, turn_waits

    p = Problem(batch=1, heads=16, seqlen_q=4096, head_dim=128, dtype="bf16", direction="bwd")
    main = {k.name: k for k in plan("fa3", p, H100, Tiles(dq_bulk=0)).kernels}  # atomics
    assert sync_loads(main["fa3_bwd"]) == 1 and turn_waits(main["fa3_bwd"]) == 2
    det = {k.name: k for k in plan("fa3", p.model_copy(update={"deterministic": True}), H100).kernels}
    assert sync_loads(det["fa3_bwd_det"]) == 2 and turn_waits(det["fa3_bwd_det"]) == 2
    paper = plan("fa3", p, H100, Tiles(dq_writer=True))
    k = next(k for k in paper.kernels if k.name == "fa3_bwd")
    assert sync_loads(k) == 0 and turn_waits(k) == 2 and k.defines["DQ_WRITER"] == 1
    assert all(turn_waits(k) == 0 for k in plan("fa2", p, H100).kernels)
    assert (k.traffic, k.work, k.grid) == (main["fa3_bwd"].traffic, main["fa3_bwd"].work, main["fa3_bwd"].grid)
    with pytest.raises(InputError, match="dQ-writer"):
        supported(paper)
    assert backing(paper, H100) == PUBLISHED


def test_fa3_backward_dq_warp_spares_the_consumers_their_dq_wait():
    """At d = 128 the Plan's dQ reduction is fa3_bwd.cu's dQ warp (DQ_BULK 2: the consumers stage
    dQ, a warp of the producer warpgroup adds it with tensor reduce-adds): the consumers wait for
    their GEMM turns only, as the paper's dQ-writer. A measured row replays the reduction it ran
    (`dq_bulk`; none recorded: vector atomics), the same counts either way."""
    from iosim.core.rows import measured_dq_bulk
    from iosim.model.timing import sync_loads, turn_waits

    p = Problem(batch=1, heads=16, seqlen_q=4096, head_dim=128, dtype="bf16", direction="bwd")
    main = next(k for k in plan("fa3", p, H100).kernels if k.name == "fa3_bwd")
    assert main.defines["DQ_BULK"] == 2 and sync_loads(main) == 0 and turn_waits(main) == 2
    atomics = next(k for k in plan("fa3", p, H100, Tiles(dq_bulk=0)).kernels if k.name == "fa3_bwd")
    assert atomics.defines["DQ_BULK"] == 0 and sync_loads(atomics) == 1
    assert (atomics.traffic, atomics.work) == (main.traffic, main.work)
    d64 = next(k for k in plan("fa3", p.model_copy(update={"head_dim": 64}), H100).kernels
               if k.name == "fa3_bwd")
    assert d64.defines["DQ_BULK"] == 0 and sync_loads(d64) == 1  # two staged units do not fit
    row = {"schedule": "fa3", "direction": "bwd", "head_dim": 128}
    assert measured_dq_bulk(row) == 0 and measured_dq_bulk(row | {"dq_bulk": 2.0}) == 2
    assert measured_dq_bulk(row | {"direction": "fwd"}) is None
    assert measured_dq_bulk(row | {"deterministic": True}) is None


def _verdict(check, pl) -> str | None:
    try:
        check(pl)
    except InputError as e:
        return str(e)
    return None


@pytest.mark.parametrize("top_left_only", [False, True])
def test_supported_one_pass_refuses_what_its_rules_refuse_and_says_the_same(top_left_only, monkeypatch):
    """supported's one pass over every rule (backing asks it of each predicted row) refuses a
    Plan exactly when one of its rules, taken one by one in their order, does, with that
    rule's line: head_dims off every kernel's, dtypes, backward head dims, fa3's modelled
    dQ-writer warp, and (every spec made to mask top-left only: none does today) bottom-right
    masks."""
    from dataclasses import replace

    from iosim.core.problem import CausalAlign
    from iosim.kernels import _refuse

    if top_left_only:
        for name, spec in list(SPECS.items()):
            monkeypatch.setitem(SPECS, name, replace(spec, aligns=frozenset({CausalAlign.top_left})))

    h100, a100 = H100, load("a100-sxm4-80gb")
    seen = {None: 0}
    for d in (64, 96, 128, 200, 256):
        for direction in ("fwd", "bwd"):
            for causal, align, nk in ((False, "top-left", None), (True, "top-left", None),
                                      (True, "bottom-right", 1500)):
                for dtype in ("bf16", "fp16", "fp32", "fp8_e4m3"):
                    p = Problem(batch=2, heads=4, seqlen_q=1000, seqlen_k=nk, head_dim=d, causal=causal,
                                causal_align=align, direction=direction, dtype=dtype)
                    for s in ("naive", "fa1", "fa2", "fa3"):
                        for hw, tiles in ((h100, Tiles()), (h100, Tiles(dq_writer=True)), (a100, Tiles())):
                            try:
                                pl = plan(s, p, hw, tiles)
                            except InputError:
                                continue
                            want = _verdict(_refuse, pl)
                            assert _verdict(supported, pl) == want, (s, p, hw.name, tiles)
                            seen[want and want.split(" (")[0]] = 1
    assert seen[None] and len(seen) >= 5  # plans taken, and several rules' refusals
    assert ("the real naive kernel masks top-left only" in seen) is top_left_only
