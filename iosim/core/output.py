"""Writing files: one convention for every command.

- An existing file is replaced only with `--force`; a file that holds measurements (a table with
  `time_ms` or `status` columns, as `iosim bench` and `tune --verify` write, or a tiles file with a
  measured pick) is never replaced, `--force` or not: measured data cannot be re-made by a command.
- Writes go to a temporary file in the same directory, renamed over the target when complete, so
  a reader (or an interrupted run) never sees half a file.
- The extension says the format; a path whose extension is not allowed is refused in one line.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from iosim.core.hardware import InputError

MEASURED_MARKERS = frozenset({"time_ms", "status"})  # columns only a measurement has


def holds_measurements(path: Path) -> bool:
    """True when `path` holds measured rows or picks (see the module docstring)."""
    suffix = path.suffix.lower()
    try:
        if suffix in (".parquet", ".pq"):
            import pyarrow.parquet as pq

            return bool(MEASURED_MARKERS & set(pq.read_schema(path).names))
        if suffix == ".json":
            data = json.loads(path.read_text())
            if isinstance(data, dict):  # a tiles file: {"tiles": [{"how": "measured on ..."}]}
                return any(str(e.get("how", "")).startswith("measured")
                           for e in data.get("tiles", []) if isinstance(e, dict))
            return any(isinstance(r, dict) and MEASURED_MARKERS & set(r) for r in data)
        with open(path, encoding="utf-8", errors="replace") as f:
            header = f.readline()
        return bool(MEASURED_MARKERS & {c.strip().strip('"') for c in header.split(",")})
    except Exception:  # noqa: BLE001 - unreadable: not known to be measured; --force still needed
        return False


def check_writable(path: str | Path, suffixes: Iterable[str], force: bool = False,
                   option: str = "-o") -> Path:
    """The output path, or InputError when it cannot or must not be written: a directory, an
    extension not in `suffixes`, a missing or read-only directory, an existing file without
    `force`, or a file that holds measurements."""
    p = Path(path)
    suffixes = tuple(suffixes)
    allowed = ", ".join(suffixes)
    if p.is_dir():
        raise InputError(f"{option} {p}: is a directory (allowed: a file ending in {allowed})")
    if p.suffix.lower() not in suffixes:
        raise InputError(f"{option} {p}: unknown output type '{p.suffix or '(none)'}' (allowed: {allowed})")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{option} {p}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise InputError(f"{option} {p}: permission denied")
    if p.exists():
        if holds_measurements(p):
            raise InputError(f"{option} {p}: the file holds measurements, which iosim never "
                             "replaces (allowed: another path)")
        if not force:
            raise InputError(f"{option} {p}: exists (allowed: --force to replace it, or another path)")
    return p


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_atomic(path: Path, write: Callable[[str], None]) -> Path:
    """Call `write(tmp)` on a temporary file beside `path`, then rename it to `path`."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or ".")
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None
    os.close(fd)
    try:
        write(tmp)
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600: the user's umask, like open()
        os.replace(tmp, path)
    except OSError as e:
        raise InputError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def write_text(path: Path, text: str) -> Path:
    return write_atomic(path, lambda tmp: Path(tmp).write_text(text))


def write_table(df, path: Path) -> Path:
    """CSV, JSON records, or Parquet (.parquet/.pq) by the extension, written atomically."""
    suffix = path.suffix.lower()

    def write(tmp: str) -> None:
        if suffix in (".parquet", ".pq"):
            try:
                df.to_parquet(tmp, index=False)
            except ImportError:
                raise InputError("writing Parquet needs pyarrow (pip install pyarrow), or use .csv") from None
        elif suffix == ".json":
            Path(tmp).write_text(df.to_json(orient="records", indent=1))
        else:
            df.to_csv(tmp, index=False)

    return write_atomic(path, write)
