"""Registers and local memory (spills) of every kernel the Plans launch, as the run-time NVRTC
build makes them (what `iosim bench` runs), on the GPU machine:
`. experiments/gpu_env.sh nvrtc_resources; python3 experiments/nvrtc_resources/nvrtc_resources.py OUT.csv [REGEX]`.
The cases are tests/test_kernel_compile.py's (sm_90a only; REGEX filters on the entry name);
each is compiled by iosim.gpu.compile.compile_kernel, and CuPy reports the function's
attributes (12 processes at a time). Also prints CuPy's and NVRTC's versions.
"""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]


def resources(case: tuple) -> dict:
    from iosim.gpu.compile import compile_kernel

    source, entry, defines, dtype, arch = case
    a = compile_kernel(source, entry, dict(defines), dtype, arch).attributes
    return dict(source=source, entry=entry, dtype=dtype,
                defines=" ".join(f"{n}={v}" for n, v in defines),
                num_regs=a["num_regs"], local_size_bytes=a["local_size_bytes"])


def main() -> None:
    import multiprocessing as mp

    import cupy

    out, pattern = Path(sys.argv[1]), re.compile(sys.argv[2] if len(sys.argv) > 2 else ".")
    spec = importlib.util.spec_from_file_location("tkc", ROOT / "tests/test_kernel_compile.py")
    tkc = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tkc)
    print("cupy", cupy.__version__, "nvrtc", cupy.cuda.nvrtc.getVersion(), flush=True)
    cases = [c for c in dict.fromkeys(tkc.cases() + tkc.head_dim_cases())
             if c[4] == "sm_90a" and pattern.search(c[1])]
    rows = []
    with mp.get_context("spawn").Pool(12) as pool:
        for r in pool.imap_unordered(resources, cases):
            rows.append(r)
            pd.DataFrame(rows).to_csv(out, index=False)  # every row so far
            print(r, flush=True)


if __name__ == "__main__":
    main()
