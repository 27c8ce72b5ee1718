"""Tile knobs: a user's tile configuration, checked against what the kernel and the GPU allow,
and tuned tiles that `iosim tune` writes and every Plan reads.

A configuration (`Tiles`: block_m, block_n, warps, stages; a `None` field is the schedule's own
choice) is refused in one line when it cannot run: a CTA over the GPU's threads, registers or
shared memory, or tiles the real kernel's static_asserts reject (kernels/<source>.cu).

Tuned tiles live in the JSON file named by the environment variable IOSIM_TILES (`iosim tune
--write FILE` writes it; `export IOSIM_TILES=FILE` makes predict, sweep, explain and bench use
it). An entry applies to its schedule, GPU (the profile's name less `.calibrated`, so the
datasheet and calibrated profiles share it), direction and head_dim bucket (the head_dims whose
shared-memory rows pad to the same power of two >= 64, as the kernels lay them out). Options
given on the command line win over the file, the file over the schedule's table.
"""

from __future__ import annotations

import json
import os
from dataclasses import fields, replace
from functools import lru_cache
from pathlib import Path

from iosim.core.hardware import MAX_THREADS_PER_CTA, HardwareProfile, InputError
from iosim.core.plan import Plan
from iosim.core.problem import Problem
from iosim.schedules.base import Tiles, pow2_at_least

TILES_ENV = "IOSIM_TILES"
KNOBS = ("block_m", "block_n", "warps", "stages")  # the options every problem command takes


def given(t: Tiles) -> dict[str, int]:
    """The fields a user set."""
    return {f.name: getattr(t, f.name) for f in fields(t) if getattr(t, f.name) is not None}


def option(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_values(t: Tiles) -> None:
    """Each given knob is a positive whole number; block sizes multiples of 16 (the MMA tile)."""
    for name, v in given(t).items():
        if v < 1:
            raise InputError(f"{option(name)} {v}: must be at least 1")
        if name in ("block_m", "block_n", "block_k") and v % 16:
            raise InputError(f"{option(name)} {v}: must be a multiple of 16 (the MMA tile)")


def kernel_rules(pl: Plan) -> list[tuple[bool, str]]:
    """(holds, what it requires) for the static_asserts of the Plan's real kernel."""
    k = pl.main
    d = k.defines
    bm, bn, w, st = d.get("BLOCK_M"), d.get("BLOCK_N"), d.get("NUM_WARPS"), d.get("STAGES", 1)
    if k.source == "fa2.cu" and "FA2_FWD" in d:
        chunks = d["HEAD_DIM_PAD"] // 8  # kernels/fa2.cu: one pass of the threads covers RSTEP rows
        rstep = 32 * w // chunks if (32 * w) % chunks == 0 else 0
        return [(bm % (16 * w) == 0, f"--block-m a multiple of 16 x --warps ({16 * w})"),
                (rstep > 0 and rstep % 8 == 0,
                 f"--warps x 32 threads covering >= 8 rows of {chunks} 16-byte chunks a pass "
                 f"(--warps >= {max(1, 8 * chunks // 32)})"),
                (rstep > 0 and bm % max(rstep, 1) == 0 and bn % max(rstep, 1) == 0,
                 f"--block-m and --block-n multiples of the {rstep} rows one pass copies"),
                (st >= 1, "--stages >= 1")]
    if k.source == "fa1.cu" and "FA1_BWD" in d:  # kernels/fa1.cu's fa1_bwd static_asserts
        dp = d["HEAD_DIM_PAD"]
        w1k = min(w, max(1, bn // 32))
        w1q, w3q = w // w1k, min(w, max(1, bm // 32))
        return [(bm % 64 == 0 and 32 * w >= 2 * bm, "--block-m a multiple of 64, at most "
                 "--warps x 16"),
                (w % w1k == 0 and bn % (16 * w1k) == 0 and bm % (8 * w1q) == 0
                 and bm % (4 * w) == 0,
                 "--warps splitting --block-n by 32 rows, then --block-m by 8"),
                (dp % (16 * (w // w1k)) == 0 and w % w3q == 0 and dp % (16 * (w // w3q)) == 0,
                 "--warps splitting the padded head_dim in 16 columns"),
                (st >= 2, "--stages >= 2 (the Q/dO cp.async ring)")]
    if k.source == "fa1.cu":
        return [(bm % w == 0 and (bm // w) % 16 == 0, "--block-m / --warps a multiple of 16")]
    if k.source == "fa3.cu" and "FA3_FWD" in d:
        return [(bm % 64 == 0 and bm <= 192, "--block-m 64, 128 or 192 (one warpgroup per 64 rows)"),
                (w == bm // 16, f"--warps {bm // 16} (block_m / 16: four per warpgroup)"),
                (bn <= 256, "--block-n at most 256")]
    return []


def check(pl: Plan, t: Tiles, hw: HardwareProfile) -> None:
    """InputError, one line, when the Plan's kernels cannot run with the tiles asked for."""
    tiles = ", ".join(f"{option(n)} {v}" for n, v in given(t).items())
    what = f"{pl.schedule} with {tiles} cannot run on {hw.name}"
    if pl.main.stages != t.stages and t.stages is not None and "FA1_FWD" in pl.main.defines:
        raise InputError(f"{what}: fa1's loads are synchronous (allowed: --stages 1)")
    for k in pl.kernels:
        if k.threads > MAX_THREADS_PER_CTA:
            raise InputError(f"{what}: {k.name} needs {k.threads} threads a CTA "
                             f"(allowed: at most {MAX_THREADS_PER_CTA}, --warps <= {MAX_THREADS_PER_CTA // 32})")
        regs = min(k.regs_per_thread, hw.max_registers_per_thread) * k.threads
        if regs > hw.registers_per_sm:
            raise InputError(f"{what}: {k.name} needs {regs} registers a CTA ({k.threads} "
                             f"threads x {min(k.regs_per_thread, hw.max_registers_per_thread)}), "
                             f"over the SM's {hw.registers_per_sm} (allowed: fewer --warps)")
    for ok, rule in kernel_rules(pl):
        if not ok:
            raise InputError(f"{what}: kernels/{pl.main.source} needs {rule}")
    # a knob the schedule overrode (fa3's warps follow block_m): say so rather than ignore it
    main = pl.main.defines if pl.schedule != "naive" else {}  # naive: per-GEMM tiles
    for name, define in (("block_m", "BLOCK_M"), ("block_n", "BLOCK_N"), ("warps", "NUM_WARPS")):
        v = getattr(t, name)
        if v is not None and define in main and main[define] != v:
            raise InputError(f"{what}: its kernel takes {option(name)} {main[define]} here "
                             f"(allowed: {option(name)} {main[define]})")


# ----- tuned tiles ---------------------------------------------------------------------------

def gpu_key(hw: HardwareProfile) -> str:
    return hw.name.removesuffix(".calibrated")


def bucket(head_dim: int) -> int:
    return pow2_at_least(head_dim, 64)


def tiles_path() -> Path | None:
    v = os.environ.get(TILES_ENV)
    return Path(v) if v else None


def read_entries(path: Path) -> list[dict]:
    try:
        stat = path.stat()
    except OSError:
        raise InputError(f"{TILES_ENV}={path}: no such file (allowed: a file `iosim tune --write` "
                         "wrote, or unset it)") from None
    return list(_read(str(path), stat.st_mtime_ns))


@lru_cache(maxsize=8)
def _read(path: str, mtime_ns: int) -> tuple[dict, ...]:
    try:
        data = json.loads(Path(path).read_text())
        entries = data["tiles"]
        for e in entries:
            for key in ("schedule", "hw", "direction", "head_dim", *KNOBS):
                e[key]  # noqa: B018  (every entry names all of them)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{TILES_ENV}={path}: not a tiles file ({type(e).__name__}: {e}; "
                         "allowed: the JSON `iosim tune --write` writes)") from None
    return tuple(entries)


def tuned(schedule: str, p: Problem, hw: HardwareProfile) -> tuple[Tiles, Path] | None:
    """The tuned tiles for this schedule, GPU, direction and head_dim bucket, with the file."""
    path = tiles_path()
    if path is None:
        return None
    for e in read_entries(path):
        if (e["schedule"], e["hw"], e["direction"]) == (schedule, gpu_key(hw), p.direction.value) \
                and bucket(int(e["head_dim"])) == bucket(p.head_dim):
            return Tiles(**{k: int(e[k]) for k in KNOBS}), path
    return None


def resolve(schedule: str, p: Problem, hw: HardwareProfile, t: Tiles) -> tuple[Tiles, Path | None]:
    """The user's knobs, filled from the tuned file where it has an entry (options win)."""
    found = tuned(schedule, p, hw)
    if found is None:
        return t, None
    file_tiles, path = found
    return replace(file_tiles, **given(t)), path


def write_entries(path: Path, entries: list[dict], force: bool = False) -> list[dict]:
    """Merge entries into the tiles file (an entry replaces the one with the same key), written
    atomically. A measured pick is never replaced by a model pick, and by another measured pick
    only with `force`. Returns the entries kept instead of the new ones."""
    from iosim.core.output import write_text

    old: list[dict] = []
    if path.exists():
        old = list(_read(str(path), path.stat().st_mtime_ns))

    def key(e: dict) -> tuple:
        return e["schedule"], e["hw"], e["direction"], bucket(int(e["head_dim"]))

    def measured(e: dict) -> bool:
        return str(e.get("how", "")).startswith("measured")

    olds = {key(e): e for e in old}
    kept = [olds[key(e)] for e in entries if key(e) in olds and measured(olds[key(e)])
            and (not measured(e) or not force)]
    kept_keys = {key(e) for e in kept}
    entries = [e for e in entries if key(e) not in kept_keys]
    new_keys = {key(e) for e in entries}
    merged = [e for e in old if key(e) not in new_keys] + entries
    write_text(path, json.dumps({"tiles": merged}, indent=1) + "\n")
    return kept
