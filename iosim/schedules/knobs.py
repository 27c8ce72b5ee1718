"""Tile knobs: a user's tile configuration, checked against what the kernel and the GPU allow,
and tuned tiles that `iosim tune` writes and every Plan reads.

A configuration (`Tiles`: block_m, block_n, warps, stages; a `None` field is the schedule's own
choice) is refused in one line when it cannot run: a CTA over the GPU's threads, registers or
shared memory, or tiles a real kernel's static_asserts reject (the rules of its KernelSpec,
iosim.kernels).

Tuned tiles live in a JSON file (`iosim tune --write FILE` writes it; the commands predict,
sweep, explain and bench read it with `--tiles FILE`, or from the environment variable
IOSIM_TILES, and pass its entries to every Plan: a Plan never reads the environment). An entry applies to its schedule, GPU (the profile's name less `.calibrated`, so the
datasheet and calibrated profiles share it), direction and head_dim bucket (the head_dims whose
shared-memory rows pad to the same power of two >= 64, as the kernels lay them out). Options
given on the command line win over the file, the file over the schedule's table.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from functools import lru_cache
from pathlib import Path

from iosim.core.hardware import MAX_THREADS_PER_CTA, HardwareProfile, InputError
from iosim.core.plan import Plan
from iosim.core.problem import Problem
from iosim.kernels import SPECS, kernel_rules
from iosim.schedules.base import Tiles, pow2_at_least

KNOBS = ("block_m", "block_n", "warps", "stages")  # the options every problem command takes


def given(t: Tiles) -> dict[str, int]:
    """The fields a user set."""
    return {f.name: getattr(t, f.name) for f in fields(t) if getattr(t, f.name) is not None}


def option(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_values(t: Tiles) -> None:
    """Each given knob is a positive whole number; block sizes multiples of 16 (the MMA tile).
    (`page_ahead`, `dq_bulk`, `lazy_rescale` and `persistent` replay a measured row's kernel:
    not knobs.)"""
    for name, v in given(t).items():
        if name in ("page_ahead", "dq_bulk", "lazy_rescale", "persistent"):
            continue
        if v < 1:
            raise InputError(f"{option(name)} {v}: must be at least 1")
        if name in ("block_m", "block_n", "block_k") and v % 16:
            raise InputError(f"{option(name)} {v}: must be a multiple of 16 (the MMA tile)")


def check(pl: Plan, t: Tiles, hw: HardwareProfile) -> None:
    """InputError, one line, when the Plan's kernels cannot run with the tiles asked for."""
    tiles = ", ".join(f"{option(n)} {v}" for n, v in given(t).items())
    what = f"{pl.schedule} with {tiles} cannot run on {hw.name}"
    if t.stages is not None and t.stages != pl.main.stages and pl.main.name in SPECS \
            and "STAGES" not in SPECS[pl.main.name].defines:
        raise InputError(f"{what}: {pl.main.name}'s loads are synchronous (allowed: --stages 1)")
    for k in pl.kernels:
        if k.threads > MAX_THREADS_PER_CTA:
            raise InputError(f"{what}: {k.name} needs {k.threads} threads a CTA "
                             f"(allowed: at most {MAX_THREADS_PER_CTA}, --warps <= {MAX_THREADS_PER_CTA // 32})")
        if k.smem_bytes > hw.smem_per_block_optin_bytes:
            raise InputError(f"{what}: {k.name} needs {k.smem_bytes:,} B of shared memory a CTA, "
                             f"over the GPU's {hw.smem_per_block_optin_bytes:,} B (allowed: smaller tiles "
                             "or fewer --stages)")
        regs = min(k.regs_per_thread, hw.max_registers_per_thread) * k.threads
        if regs > hw.registers_per_sm:
            raise InputError(f"{what}: {k.name} needs {regs} registers a CTA ({k.threads} "
                             f"threads x {min(k.regs_per_thread, hw.max_registers_per_thread)}), "
                             f"over the SM's {hw.registers_per_sm} (allowed: fewer --warps)")
    for source, ok, rule in kernel_rules(pl):
        if not ok:
            raise InputError(f"{what}: kernels/{source} needs {rule}")
    # a knob that no kernel took (fa3's warps follow block_m): say so rather than ignore it
    # (one kernel is enough: naive's GEMMs narrow their tiles to their own shapes)
    for name, define in (("block_m", "BLOCK_M"), ("block_n", "BLOCK_N"), ("warps", "NUM_WARPS")):
        v = getattr(t, name)
        took = {k.defines[define] for k in pl.kernels if define in k.defines}
        if v is not None and took and v not in took:
            used = pl.main.defines.get(define, min(took))
            raise InputError(f"{what}: its kernel takes {option(name)} {used} here "
                             f"(allowed: {option(name)} {used})")


# ----- tuned tiles ---------------------------------------------------------------------------

@dataclass(frozen=True)
class TunedTiles:
    """A tiles file's entries, read once by the command that was given it."""

    path: Path
    entries: tuple[dict, ...]


def gpu_key(hw: HardwareProfile) -> str:
    return hw.name.removesuffix(".calibrated")


def bucket(head_dim: int) -> int:
    """The tuning key's head_dim bucket: the power of two >= d and >= 64."""
    return pow2_at_least(head_dim, 64)


def read_tiles(path: Path, label: str = "--tiles ") -> TunedTiles:
    """The tiles file at `path`; `label` names where the path came from in an error."""
    try:
        stat = path.stat()
    except OSError:
        raise InputError(f"{label}{path}: no such file (allowed: a file `iosim tune --write` "
                         "wrote)") from None
    return TunedTiles(path, _read(str(path), stat.st_mtime_ns, label))


@lru_cache(maxsize=8)
def _read(path: str, mtime_ns: int, label: str = "--tiles ") -> tuple[dict, ...]:
    try:
        data = json.loads(Path(path).read_text())
        entries = data["tiles"]
        for e in entries:
            for key in ("schedule", "hw", "direction", "head_dim", *KNOBS):
                e[key]  # noqa: B018  (every entry names all of them)
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InputError(f"{label}{path}: not a tiles file ({type(e).__name__}: {e}; "
                         "allowed: the JSON `iosim tune --write` writes)") from None
    return tuple(entries)


def tuned(table: TunedTiles, schedule: str, p: Problem, hw: HardwareProfile) -> Tiles | None:
    """The tuned tiles for this schedule, GPU, direction and head_dim bucket."""
    for e in table.entries:
        if (e["schedule"], e["hw"], e["direction"]) == (schedule, gpu_key(hw), p.direction.value) \
                and bucket(int(e["head_dim"])) == bucket(p.head_dim):
            return Tiles(**{k: int(e[k]) for k in KNOBS})
    return None


def resolve(table: TunedTiles | None, schedule: str, p: Problem, hw: HardwareProfile,
            t: Tiles) -> tuple[Tiles, Path | None]:
    """The user's knobs, filled from the tuned table where it has an entry (options win),
    with the file they came from."""
    found = tuned(table, schedule, p, hw) if table is not None else None
    if found is None:
        return t, None
    return replace(found, **given(t)), table.path


def write_entries(path: Path, entries: list[dict], force: bool = False) -> list[dict]:
    """Merge entries into the tiles file (an entry replaces the one with the same key), written
    atomically. A measured pick is never replaced by a model pick, and by another measured pick
    only with `force`. Returns the entries kept instead of the new ones."""
    from iosim.core.output import write_text

    old: list[dict] = []
    if path.exists():
        old = list(read_tiles(path).entries)

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
