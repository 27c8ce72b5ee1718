"""Medians of this folder's stages.py runs, main (4f0fd86, where wave19 branched) against
wave19, made alternately by stages_ab.sh (its output: stages.log; 3 runs each; `python
experiments/sweep_speed/stages.py --rounds 15 --grid-rounds 9 --out ...`, PYTHONPATH the
tree's own). Prints ms per stage and wave19 / main.

    python experiments/sweep_speed/wave19/medians.py
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

HERE = Path(__file__).resolve().parent


def medians(pattern: str) -> dict:
    runs = [json.loads(p.read_text()) for p in sorted(HERE.glob(pattern))]
    return {part: {k: statistics.median(r[part]["ms"][k] for r in runs) for k in runs[0][part]["ms"]}
            for part in ("grid", "batch", "one")}, len(runs)


def main() -> None:
    (base, nb), (new, nn) = medians("stages_4f0fd86_run*.json"), medians("stages_run*.json")
    print(f"medians of {nb} runs (main 4f0fd86) and {nn} (wave19), ms")
    for part in base:
        print(part)
        for k, v in base[part].items():
            print(f"  {k:18s} {v:8.2f} {new[part][k]:8.2f}  {new[part][k] / v if v > 0 else float('nan'):6.3f}")


if __name__ == "__main__":
    main()
