"""Whether this tree's kernels/fa3.cu compiles to another commit's fa3.cu (default fcefc0c: main
before the review that took RESCALE_TOP, KV_WAIT_FIRST and EXP2_H2 out of it), instruction for
instruction, at every build of fa3.cu the Plans launch: iosim.schedules.plan over fp8_e4m3
(block and per-tensor scaling with the Hadamard rotation), bf16 and fp16, d = 64, 128, 256,
causal (top-left and bottom-right, with and without a sliding window) or not, MHA and GQA, ragged
and long N, and fp8 on the other grid than the Plan's (the `persistent` tile knob, as the
experiments' `onetile` / `pers` variants); each distinct (entry, defines, dtype) built from both sources with nvcc -cubin
(sm_90a), SASS compared (cuobjdump -sass, instruction words stripped). No GPU:

    CUOBJDUMP=/path/to/cuobjdump python3 experiments/fp8/speed15/sass_clean15.py [COMMIT] | tee experiments/fp8/speed15/sass_clean15.log

Exits 1 when any build differs.
"""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))

from iosim.core.hardware import InputError, load  # noqa: E402
from iosim.core.problem import Problem  # noqa: E402
from iosim.gpu.compile import define_options, nvcc_arch_options  # noqa: E402
from iosim.schedules import Tiles, plan  # noqa: E402

SOURCE = "fa3.cu"


def problems():
    """(Problem, Tiles) of every build to compare."""
    for d in (64, 128, 256):
        for causal in (False, True):
            for kvh in (4, 1):
                for n in (2000, 4096, 8192, 16384):
                    aligns = ("top-left", "bottom-right") if causal else ("top-left",)
                    for quant in ({}, {"fp8_scaling": "tensor", "hadamard": True}):
                        for align in aligns:
                            p = Problem(batch=1, heads=4, kv_heads=kvh, seqlen_q=n, head_dim=d,
                                        dtype="fp8_e4m3", causal=causal, causal_align=align, **quant)
                            yield p, Tiles()
                            if not causal:  # PERSISTENT is non-causal only
                                yield from ((p, Tiles(persistent=x)) for x in (False, True))
                    for dtype in ("bf16", "fp16"):
                        for align in aligns:
                            for window in (None, 1024) if causal else (None,):
                                yield Problem(batch=1, heads=4, kv_heads=kvh, seqlen_q=n,
                                              head_dim=d, dtype=dtype, causal=causal,
                                              causal_align=align, window=window), Tiles()


def builds() -> list[tuple[str, dict[str, int], str]]:
    """(entry, defines, dtype) of every fa3.cu kernel the Plans launch, deduplicated."""
    hw, seen = load("h100-sxm5-80gb"), {}
    for p, tiles in problems():
        try:
            kernels = plan("fa3", p, hw, tiles).kernels
        except InputError:
            continue
        for k in kernels:
            if k.source == SOURCE:
                key = (k.name, tuple(sorted(k.defines.items())), p.dtype.value)
                seen[key] = (k.name, dict(k.defines), p.dtype.value)
    return list(seen.values())


def cubin(src: Path, defines: dict[str, int], dtype: str, out: Path) -> Path:
    subprocess.run(["nvcc", "-std=c++17", *nvcc_arch_options("sm_90a"), "-cubin",
                    f"-I{ROOT / 'kernels'}", *define_options(defines, dtype), str(src), "-o", str(out)],
                   check=True, capture_output=True, text=True)
    return out


def sass(path: Path) -> list[str]:
    text = subprocess.run([os.environ.get("CUOBJDUMP", "cuobjdump"), "-sass", str(path)],
                          check=True, capture_output=True, text=True).stdout
    return [re.sub(r"/\* 0x[0-9a-f]+ \*/", "", t).strip() for t in text.splitlines()
            if re.match(r"\s+/\*[0-9a-f]{4}\*/", t)]


def main(ref: str) -> int:
    bad = 0
    with tempfile.TemporaryDirectory() as t:
        old = Path(t) / f"fa3_{ref}.cu"
        old.write_text(subprocess.run(["git", "show", f"{ref}:kernels/{SOURCE}"], cwd=ROOT, check=True,
                                      capture_output=True, text=True).stdout)
        todo = builds()
        print(f"kernels/{SOURCE} beside {ref}'s: {len(todo)} builds")
        for entry, defines, dtype in todo:
            a = sass(cubin(ROOT / "kernels" / SOURCE, defines, dtype, Path(t) / "a.cubin"))
            b = sass(cubin(old, defines, dtype, Path(t) / "b.cubin"))
            differ = sum(1 for x in difflib.unified_diff(a, b, n=0, lineterm="")
                         if x[:1] in "+-" and x[:3] not in ("+++", "---"))  # diff's < and > lines
            bad += differ > 0
            print(f"{entry} {dtype} {' '.join(f'{k}={v}' for k, v in sorted(defines.items()))}: "
                  f"{differ} differing of {len(a)} instructions", flush=True)
    print(f"{len(todo) - bad} of {len(todo)} builds identical")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "fcefc0c"))
