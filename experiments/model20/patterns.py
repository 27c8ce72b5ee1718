"""Each mutation's `old` string occurs exactly once in its file (mutation_check's rule)."""
import sys
from pathlib import Path

sys.path.insert(0, "experiments/mutation_check")
from mutation_check import MUTATIONS  # noqa: E402

bad = 0
for name, path, old, _ in MUTATIONS:
    text = Path(path).read_text()
    for o in (old if isinstance(old, tuple) else (old,)):
        c = text.count(o)
        if c != 1:
            bad += 1
            print(f"{c}x {name!r}: {o!r} in {path}")
print(f"{len(MUTATIONS)} mutations, {bad} patterns not found exactly once")
