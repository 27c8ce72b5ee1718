"""Medians of a folder's alternate stages.py runs, a branch against the main it left: the
folder holds `stages_BASE_run*.json` (main at BASE) and `stages_run*.json` (the branch), made
alternately by its `stages_ab.sh` (output: its stages.log; `python experiments/sweep_speed/stages.py
--rounds 15 --grid-rounds 9 --out ...`, PYTHONPATH each tree's own). Prints ms per stage and
branch / main.

    python experiments/sweep_speed/medians.py experiments/sweep_speed/lim19 65b11c7
    python experiments/sweep_speed/medians.py experiments/sweep_speed/wave19 4f0fd86
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def medians(folder: Path, pattern: str) -> tuple[dict, int]:
    runs = [json.loads(p.read_text()) for p in sorted(folder.glob(pattern))]
    return {part: {k: statistics.median(r[part]["ms"][k] for r in runs) for k in runs[0][part]["ms"]}
            for part in ("grid", "batch", "one")}, len(runs)


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: medians.py FOLDER BASE (FOLDER/stages_BASE_run*.json against FOLDER/stages_run*.json)")
    folder, base_rev = Path(sys.argv[1]), sys.argv[2]
    (base, nb), (new, nn) = medians(folder, f"stages_{base_rev}_run*.json"), medians(folder, "stages_run*.json")
    print(f"medians of {nb} runs (main {base_rev}) and {nn} ({folder.name}), ms")
    for part in base:
        print(part)
        for k, v in base[part].items():
            print(f"  {k:18s} {v:8.2f} {new[part][k]:8.2f}  {new[part][k] / v if v > 0 else float('nan'):6.3f}")


if __name__ == "__main__":
    main()
