"""`iosim bench`: check, time and (optionally) profile the real kernels over a grid of problems,
beside torch's SDPA, and write one row per point as it finishes.

Per point: fresh random inputs; outputs NaN-poisoned; the kernels run once and are compared with
a float32 reference (iosim.gpu.bench, iosim.gpu.backward); only a point that passes is timed,
the L2 flushed before each repetition as `--flush` says (`write`, the default: a zero-fill, which
leaves dirty lines the timed kernels write back, a fixed cost a call; `read`: none
left dirty; experiments/decode/h100/fused/flush_probe.csv), recorded in each row's `flush`.
Each row holds the model's prediction and the measurement side by side (the shared columns).
Rows are appended (and fsynced) as they finish; `resume` skips points already in the file and
measures again those that ended in an error. A file is never overwritten.

Decode (`--schedule decode`: Nq <= 16 against a long K/V cache, contiguous or paged): each row
of a decode problem, ours and the peers', carries `kv_bytes` and the HBM floor, `hbm_floor_ms`
(the K/V bytes at the device-to-device copy bandwidth measured in the same run) and
`floor_ratio` (the floor over the row's time: the fraction of the copy bandwidth its K/V reads
reach); ours also the split count it ran (`splits`; `kv_splits`: a count forced with
--kv-splits, blank for the Plan's own), a paged one whether its kernel read the block table a
tile ahead (`page_ahead`, 1) and, with more than one split, the split kernel alone
(`attn_ms`, beside the model's `attn_time_pred_ms`) and the combine's (`other_kernels_ms`).
A step takes microseconds, so every decode row is also timed with its launches queued ahead
of the start event (`time_queued_ms`, `floor_ratio_queued`: the host's launch cost left out,
as a CUDA graph would; iosim.gpu.bench.Timer.lead_cycles); `time_ms` is timed as every other
row, the launches issued after the L2 flush. Peers: torch's SDPA backends (`torch`; they take no
paged cache: a paged problem's SDPA rows say so) and compiled FlexAttention (`flex`; paged
through its block mask).

fp8_e4m3 (fa3 forward): the row's time is the Plan's, quantisation included; `attn_ms` the
attention kernel alone, beside the model's `attn_time_pred_ms`. torch's SDPA takes no fp8: its
backends are the peers of the bf16 problems in the same run (`--dtype fp8_e4m3,bf16`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

import pandas as pd

from iosim.analysis.predict import row
from iosim.core.hardware import HardwareProfile, InputError, load
from iosim.core.problem import Direction, Dtype, Problem
from iosim.core.rows import DET_COLUMNS, MEASURED_COLUMNS, PROBLEM_COLUMNS, QUANT_COLUMNS, problem_fields
from iosim.model.backing import footprint_bytes
from iosim.schedules import Tiles, decode, plan
from iosim.schedules.knobs import TunedTiles

NCU_COLUMNS = ["l2_bytes_ncu", "smem_wavefronts_ncu", "tensor_inst_ncu", "ncu_status"]
FP8_COLUMNS = [*QUANT_COLUMNS, "attn_time_pred_ms"]


# what tells apart two points of the same problem columns: fp8's quantisation, the sliding
# window, the paged cache, decode's forced split count, a deterministic backward (blank where
# unset)
KEY_EXTRA = [*QUANT_COLUMNS, "window", "page_size", "kv_splits", *DET_COLUMNS]
PEER_GROUPS = ("torch", "flex")  # --peers: torch's SDPA backends, compiled FlexAttention


def key(r: dict) -> tuple:
    """A point's identity: its problem columns and what else tells it apart (KEY_EXTRA)."""
    def text(v) -> str:
        return "" if pd.isna(v) else str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)

    return tuple(str(r[c]) for c in PROBLEM_COLUMNS) + tuple(text(r.get(c, "")) for c in KEY_EXTRA)


def parse_peers(text: str) -> list[str]:
    """--peers: `none`, or a comma list of `torch` (its SDPA backends) and `flex` (compiled
    FlexAttention), in any case and order; one line if anything else."""
    items = [x.strip().lower() for x in text.split(",")]
    if items == ["none"]:
        return []
    bad = [x for x in items if x not in PEER_GROUPS]
    if bad or not items or len(set(items)) != len(items):
        raise InputError(f"--peers: '{text}' (allowed: none, or a comma list of torch, flex)")
    return items


def peer_rows(groups: list[str], p: Problem) -> list[str]:
    """The peer rows a problem gets: torch's SDPA backends and FlexAttention, as asked; none
    for fp8 (torch takes no fp8: the bf16 problems' peers stand beside them) nor for a
    deterministic backward (the peers are not asked for one: the default problems' peers stand
    beside it)."""
    from iosim.gpu import bench

    if p.dtype is Dtype.fp8_e4m3 or p.deterministic:
        return []
    return [*(list(bench.PEERS) if "torch" in groups else []),
            *([bench.FLEX] if "flex" in groups else [])]


def attn_time_pred_ms(pl, hw: HardwareProfile) -> float:
    """The model's time of the Plan's attention kernel alone (its `main`)."""
    from iosim.model import memory, timing

    pred = timing.predict(pl, hw, memory.estimate(pl, hw))
    return pred[pl.kernels.index(pl.main)].seconds * 1e3


def file_columns(model: list[str], extra: list[str]) -> list[str]:
    """A bench file's columns, each once: the model's row, the measurement's, the GPU side's
    `extra` (iosim.gpu.bench.EXTRA_COLUMNS), Nsight Compute's, fp8's and the point's keys."""
    return list(dict.fromkeys(model + MEASURED_COLUMNS + extra + NCU_COLUMNS + FP8_COLUMNS + KEY_EXTRA))


def done_keys(path: Path, columns: list[str]) -> tuple[set[tuple], list[str]]:
    """Points already measured. Rows that ended in an error (a crash, not a measurement) are
    dropped so that the resumed run measures them again; the file is rewritten with this
    version's columns so appended rows line up."""
    if not path.exists() or path.stat().st_size == 0:
        return set(), columns
    df = pd.read_csv(path)
    errors = df.status.astype(str).str.startswith("error")
    tmp = path.with_suffix(".tmp")
    columns = columns + [c for c in df.columns if c not in columns]
    if errors.any() or list(df.columns) != columns:
        df[~errors].reindex(columns=columns).to_csv(tmp, index=False)
        tmp.replace(path)
    return {key(r) for r in df[~errors].to_dict("records")}, columns


def append(path: Path, r: dict, columns: list[str]) -> None:
    new = not path.exists() or path.stat().st_size == 0
    pd.DataFrame([r]).reindex(columns=columns).to_csv(path, mode="a", header=new, index=False)
    with open(path, "a") as f:
        f.flush()
        os.fsync(f.fileno())


def run(problems: Iterable[Problem], schedules: list[str], peers: list[str], out: Path,
        hw: HardwareProfile | None, resume: bool, use_ncu: bool, seed: int | None = None,
        progress: bool | None = None, tiles: Tiles = Tiles(),
        tuned: TunedTiles | None = None, kv_splits: list[int | None] = (None,),
        flush: str = "write", queued: bool = False, settle_s: float = 0.0) -> pd.DataFrame:
    """Bench every point; `peers`: the peer groups (parse_peers); `seed` None draws fresh
    inputs each run (each row records its seed); `tiles`: the knobs (iosim.schedules.knobs)
    for every schedule's kernels; `tuned`: a tiles file's entries; `kv_splits`: decode's split
    counts, each a point of its own (None: the Plan's); `flush`: how the L2 is flushed before
    each repetition (iosim.gpu.bench.Timer.flush), recorded in each row; `queued`: every row
    also timed with its launches queued ahead (`time_queued_ms`; decode rows always are);
    `settle_s`: the GPU idles this long before each problem's rows (recorded in each row)."""
    from iosim.gpu import bench
    from iosim.kernels import supported

    torch = bench.require_gpu()
    if seed is None:
        seed = int.from_bytes(os.urandom(4), "little") >> 1
    info = bench.gpu_info(torch)
    hw = hw or load(bench.profile_for(info["gpu_name"]))
    problems = list(problems)
    if tiles != Tiles() and any(p.direction is Direction.bwd for p in problems):
        raise InputError("--block-m/--block-n/--warps/--stages set the forward kernels' tiles "
                         "(allowed with them: --direction fwd)")

    def tiles_of(s: str, k: int | None) -> Tiles:
        return replace(tiles, kv_splits=k) if s == "decode" else tiles

    splits_of = {s: list(kv_splits) if s == "decode" else [None] for s in schedules}
    for p in problems:  # refuse unsupported shapes before measuring anything
        for s in schedules:
            for k in splits_of[s]:
                supported(plan(s, p, hw, tiles_of(s, k), check=True, tuned=tuned))
    if out.exists() and out.stat().st_size and not resume:
        raise InputError(f"{out} exists (allowed: --resume to continue it, or another -o)")
    timer = bench.Timer(torch, hw.l2_bytes, flush=flush)
    bw = bench.copy_bandwidth(torch, timer)
    if queued or any(decode.takes(p) for p in problems):  # also with the launches queued
        timer.queued = bench.Timer(torch, hw.l2_bytes, lead_cycles=bench.QUEUE_AHEAD_CYCLES,
                                   flush=flush)
    columns = file_columns(list(row(plan(schedules[0], problems[0], hw), hw).keys()), bench.EXTRA_COLUMNS)
    done, columns = done_keys(out, columns) if resume else (set(), columns)
    todo = [(s, p, k) for p in problems for s in schedules for k in splits_of[s]]
    todo += [(s, p, None) for p in problems for s in peer_rows(peers, p)]
    todo.sort(key=lambda t: problems.index(t[1]))  # a problem's rows together, ours first
    try:
        from tqdm import tqdm
        # None: a bar only on a terminal; True: also when piped
        bar = tqdm(todo, disable=None if progress is None else not progress, desc="bench", unit="pt")
    except ImportError:
        bar = todo
    last = None
    for n, (s, p, k) in enumerate(bar):
        r: dict = {"hw": hw.name, "schedule": s, **problem_fields(p), "kv_splits": k}
        if key(r) in done:
            continue
        r.update(info, copy_bw_bytes_per_s=bw, seed=seed + n, flush=flush, settle_s=settle_s)
        if settle_s and p is not last:  # a problem's first row: what the problem before left
            torch.cuda.synchronize()  # (a heavy one's slow phase) decays first
            time.sleep(settle_s)
        last = p
        peer = s in bench.PEERS or s == bench.FLEX
        pl = None if peer else plan(s, p, hw, tiles_of(s, k), check=True, tuned=tuned)
        if pl is not None:
            r.update(row(pl, hw))  # the model's prediction beside the measurement
            if len(pl.kernels) > 1 and (p.dtype is Dtype.fp8_e4m3 or s == "decode"):
                r["attn_time_pred_ms"] = attn_time_pred_ms(pl, hw)
        if p.direction is Direction.bwd:  # gradients: their own inputs, reference and check
            from iosim.gpu.backward import point

            r.update(point(torch, timer, hw, s, p, seed + n, bw))
        elif pl is None:
            r.update(bench.peer_point(torch, timer, s, p, seed + n))
        else:
            ncu_args = dict(schedule=s, hw=hw.name, seed=seed + n, **problem_fields(p),
                            **({"kv_splits": k} if k is not None else {}))
            r.update(bench.forward_point(torch, timer, pl, seed + n, bw, footprint_bytes(pl),
                                         use_ncu, ncu_args))
        if decode.takes(p):
            r.update(decode_columns(p, pl, r, bw))
        if pl is not None and "DQ_BULK" in pl.main.defines:  # fa3 backward: its dQ reduction
            r["dq_bulk"] = pl.main.defines["DQ_BULK"]  # (measured_dq_bulk)
        if pl is not None and "LAZY_RESCALE" in pl.main.defines:  # fa3 fp8 forward's rescale
            r["lazy_rescale"] = pl.main.defines["LAZY_RESCALE"]  # (measured_lazy_rescale)
            r["persistent"] = pl.main.defines["PERSISTENT"]  # (measured_persistent)
        append(out, r, columns)
        torch.cuda.empty_cache()
    return pd.read_csv(out)


def decode_columns(p: Problem, pl, r: dict, bw: float) -> dict:
    """A decode problem's row: the K/V bytes, the HBM floor (those bytes at the copy bandwidth
    of the run) and the row's fraction of it; ours, the split count it ran."""
    from iosim.gpu.bench import kv_bytes

    kv = kv_bytes(p)
    out = {"kv_bytes": kv, "hbm_floor_ms": kv / bw * 1e3}
    for t, ratio in (("time_ms", "floor_ratio"), ("time_queued_ms", "floor_ratio_queued")):
        if pd.notna(r.get(t, float("nan"))):
            out[ratio] = out["hbm_floor_ms"] / r[t]
    if pl is not None and pl.schedule == "decode":
        out["splits"] = pl.main.defines["NUM_SPLITS"]
        if "PAGE_AHEAD" in pl.main.defines:  # the paged gather that ran (measured_page_ahead)
            out["page_ahead"] = pl.main.defines["PAGE_AHEAD"]
    return out
