"""Compile the CUDA kernels of kernels/ at run time (CuPy RawModule, NVRTC) or offline (nvcc).

`compile_kernel` / `launch` need CuPy and a GPU and import CuPy lazily; `nvcc_resources` needs
only `nvcc` on PATH (no GPU, no CuPy) and is what CI uses to check registers and spills;
`nvrtc_resources` does the same with NVRTC (the nvidia-cuda-nvrtc wheel, no GPU), the compiler
that builds what runs: the two can allocate registers differently
(experiments/nvrtc_resources/h100/nvrtc_resources.csv: fa2_fwd at d = 64 spills in the NVRTC build
only).

Options are the same in both paths (docs/kernel-contract.md): `-std=c++17`, the target
architecture, `-I kernels/`, one `-DNAME=value` per define and the dtype macro
`ELEM_BF16=1` / `ELEM_FP16=1`.

The resource checks compile each distinct build once: ptxas logs are kept on disk
(`cache_dir()`), keyed by everything the compile reads (compiler version, options, the source
and header texts; for nvcc also the preprocessed device code, which merges builds whose extra
defines the kernel never reads).
"""

from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from iosim.core.hardware import InputError
from iosim.kernels import SPECS

# The macro names elem_t, the type of O (and of the inputs, except fp8 inputs, which the Plan
# flags with FP8_E4M3=1: fa3.cu reads e4m3 Q, K, V and writes bf16 O).
DTYPE_MACROS = {"bf16": "ELEM_BF16", "fp16": "ELEM_FP16", "fp8_e4m3": "ELEM_BF16"}
ARCHS = ("sm_80", "sm_90a")

_MODULE_CACHE: dict[tuple, Any] = {}


def kernels_dir() -> Path:
    """The repository's kernels/ directory (or the copy an installed wheel keeps in iosim/kernels)."""
    here = Path(__file__).resolve()
    repo = here.parents[2] / "kernels"
    if repo.is_dir():
        return repo
    return here.parents[1] / "kernels"


def kernel_path(source: str) -> Path:
    """Path of kernels/<source>; raises FileNotFoundError naming the directory if missing."""
    p = kernels_dir() / source
    if not p.is_file():
        raise FileNotFoundError(f"kernel source {source!r} not found in {kernels_dir()}")
    return p


def _dtype_macro(dtype: str) -> str:
    try:
        return DTYPE_MACROS[dtype]
    except KeyError:
        raise ValueError(f"dtype {dtype!r} not supported; allowed: {', '.join(DTYPE_MACROS)}") from None


def _check_arch(arch: str) -> str:
    if arch not in ARCHS:
        raise ValueError(f"arch {arch!r} not supported; allowed: {', '.join(ARCHS)}")
    return arch


def define_options(defines: dict[str, int], dtype: str) -> list[str]:
    """The -D options for a Plan's defines plus the dtype macro (sorted: stable cache keys)."""
    opts = [f"-D{k}={int(v)}" for k, v in sorted(defines.items())]
    opts.append(f"-D{_dtype_macro(dtype)}=1")
    return opts


def device_arch() -> str:
    """Target for the current CuPy device: sm_90a on compute capability 9.x, else sm_80."""
    import cupy

    cc = cupy.cuda.Device().compute_capability  # e.g. "90"
    major = int(cc) // 10
    if major == 9:
        return "sm_90a"
    if major >= 8:
        return "sm_80"
    raise RuntimeError(f"compute capability {cc} not supported; need 8.x or 9.x")


def _source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _headers_text() -> str:
    # Changes to included headers must invalidate the cache too.
    return "".join(p.read_text() for p in sorted(kernels_dir().glob("*.cuh")))


def nvrtc_options(defines: dict[str, int], dtype: str, arch: str) -> tuple[str, ...]:
    """NVRTC options of the run-time build (CuPy adds -default-device to them)."""
    return ("-std=c++17", f"--gpu-architecture={arch}", f"-I{kernels_dir()}",
            *define_options(defines, dtype))


def _function(entry: str) -> str:
    """The compiled function's name of an entry (fa3's backward reuses fa2's aux kernels)."""
    return SPECS[entry].function if entry in SPECS else entry


def compile_kernel(source: str, entry: str, defines: dict[str, int], dtype: str, arch: str | None = None):
    """Compile kernels/<source> with NVRTC and return the `cupy.RawKernel` for `entry`.

    Cached by (source and header text hash, entry, defines, dtype, arch)."""
    import cupy

    text = kernel_path(source).read_text()
    arch = _check_arch(arch or device_arch())
    # an entry with sm_90a-only instructions (wgmma, setmaxnreg, iosim.kernels): compiled for
    # sm_90a or refused, never retried without the architecture (its #error guard would fire)
    archs = SPECS[entry].archs if entry in SPECS else frozenset(ARCHS)
    sm90a_only = archs == {"sm_90a"}
    if arch not in archs:
        import cupy

        raise InputError(f"{source} needs a Hopper GPU (sm_90a: wgmma, TMA, setmaxnreg); "
                         f"{cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)['name'].decode()} "
                         f"compiles for {arch} (allowed there: naive, fa1, fa2)")
    key = (_source_hash(text + _headers_text()), entry, tuple(sorted(defines.items())), dtype, arch)
    kern = _MODULE_CACHE.get(key)
    if kern is None:
        options = nvrtc_options(defines, dtype, arch)
        try:
            module = cupy.RawModule(code=text, options=options)
            kern = module.get_function(_function(entry))
        except cupy.cuda.compiler.CompileException as e:
            # Some CuPy versions add their own -arch option; NVRTC then rejects ours. Not for
            # sm_90a-only sources: without the architecture they cannot compile correctly.
            if sm90a_only or ("arch" not in str(e).lower()
                                        and "option" not in str(e).lower()):
                raise
            module = cupy.RawModule(
                code=text, options=tuple(o for o in options if not o.startswith("--gpu-arch"))
            )
            kern = module.get_function(_function(entry))
        _MODULE_CACHE[key] = kern
    return kern


def launch(kernel, grid: tuple[int, int, int], threads: int, smem_bytes: int, args: tuple) -> None:
    """Launch with `smem_bytes` of dynamic shared memory, raising the kernel's dynamic limit
    when over 48 KB (cudaFuncAttributeMaxDynamicSharedMemorySize)."""
    if smem_bytes > 48 * 1024 and kernel.max_dynamic_shared_size_bytes < smem_bytes:
        kernel.max_dynamic_shared_size_bytes = smem_bytes
    kernel(tuple(grid), (int(threads), 1, 1), tuple(args), shared_mem=int(smem_bytes))


def nvcc_arch_options(arch: str) -> list[str]:
    _check_arch(arch)
    if arch == "sm_90a":
        return ["-gencode=arch=compute_90a,code=sm_90a"]
    return [f"-arch={arch}"]


_PTXAS_FUNC = re.compile(r"Compiling entry function '([^']+)'")
# ptxas notes that cost sm_90a kernels their speed: wgmma serialised (C7515 and kin: accumulator
# registers touched inside a pipeline stage, too few registers, calls), setmaxnreg ignored (C7508).
_WGMMA_SERIALIZED = re.compile(r"wgmma\.mma_async instructions are serialized", re.IGNORECASE)
_SETMAXNREG_IGNORED = re.compile(r"C7508|setmaxnreg[^\n]*ignored", re.IGNORECASE)


def parse_ptxas(log: str, entry: str) -> dict[str, int]:
    """Registers, spills, static shared memory and stack frame of `entry` from `ptxas -v` output."""
    lines = log.splitlines()
    start = None
    for i, line in enumerate(lines):
        m = _PTXAS_FUNC.search(line)
        if m and m.group(1) == entry:
            start = i
            break
    if start is None:
        raise ValueError(f"entry {entry!r} not found in ptxas output:\n{log}")
    block = []
    for line in lines[start + 1 :]:
        if _PTXAS_FUNC.search(line):
            break
        block.append(line)
    text = "\n".join(block)

    def grab(pattern: str) -> int:
        m = re.search(pattern, text)
        return int(m.group(1)) if m else 0

    regs = re.search(r"Used (\d+) registers", text)
    if regs is None:
        raise ValueError(f"no register count for {entry!r} in ptxas output:\n{text}")
    return {
        "registers": int(regs.group(1)),
        "spill_stores": grab(r"(\d+) bytes spill stores"),
        "spill_loads": grab(r"(\d+) bytes spill loads"),
        "smem_static": grab(r"(\d+) bytes smem"),
        "stack_frame": grab(r"(\d+) bytes stack frame"),
        # the whole log (these notes may precede the entry's block); one entry per source here
        "wgmma_serialized": int(bool(_WGMMA_SERIALIZED.search(log))),
        "setmaxnreg_ignored": int(bool(_SETMAXNREG_IGNORED.search(log))),
    }


def nvcc_available() -> bool:
    return shutil.which("nvcc") is not None


def cache_dir() -> Path:
    """Where ptxas logs are kept between runs: $XDG_CACHE_HOME/iosim/ptxas (~/.cache/iosim/ptxas)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "iosim" / "ptxas"


def _cached_log(key: list, make) -> str:
    """The ptxas log stored under `key` (everything the compile's output depends on), else
    `make()`'s, stored (written whole then renamed: parallel test workers share the cache; an
    unwritable cache only costs the compile)."""
    path = cache_dir() / f"{hashlib.sha256(json.dumps(key).encode()).hexdigest()}.log"
    try:
        return path.read_text()
    except OSError:
        pass
    log = make()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(log)
        os.replace(tmp, path)
    except OSError:
        pass
    return log


@lru_cache(maxsize=1)
def nvcc_version() -> str:
    return subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True).stdout


def _nvcc(args: list[str]) -> str:
    proc = subprocess.run(["nvcc", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"nvcc failed (nvcc {' '.join(args)}):\n{proc.stderr}")
    return proc.stdout + proc.stderr


def _nvcc_log(source: str, defines: dict[str, int], dtype: str, arch: str) -> str:
    """ptxas's log of `nvcc -cubin` for one build, compiled once per distinct build: looked up by
    the source and header texts and the options, then by the preprocessed device code (`nvcc -E`,
    exactly what cicc compiles: Plans that differ only in defines a kernel never reads share it),
    which is what gets compiled (a .cup file: nvcc skips preprocessing it again)."""
    src = kernel_path(source)
    opts = ["-std=c++17", *nvcc_arch_options(arch), f"-I{kernels_dir()}"]
    defined = [*opts, *define_options(defines, dtype)]

    def by_device_code() -> str:
        device_code = _nvcc(["-E", *defined, str(src)])

        def compile_once() -> str:
            with tempfile.TemporaryDirectory() as tmp:
                cup = Path(tmp) / f"{src.stem}.cup"
                cup.write_text(device_code)
                return _nvcc(["-cubin", "-Xptxas", "-v", *opts, "-o", str(Path(tmp) / "k.cubin"), str(cup)])

        return _cached_log(["nvcc -E", nvcc_version(), opts, device_code], compile_once)

    return _cached_log(["nvcc", nvcc_version(), defined, source, src.read_text() + _headers_text()],
                       by_device_code)


def nvcc_resources(source: str, entry: str, defines: dict[str, int], dtype: str, arch: str) -> dict[str, int]:
    """Compile offline with `nvcc -cubin -Xptxas -v` and report `entry`'s resources:
    registers, spill_stores, spill_loads, smem_static, stack_frame (bytes except registers), and
    wgmma_serialized / setmaxnreg_ignored (1 when ptxas says so). Each distinct build is
    compiled once (`_nvcc_log`; the log is kept in `cache_dir()`)."""
    if not nvcc_available():
        raise RuntimeError("nvcc not found on PATH")
    return parse_ptxas(_nvcc_log(source, defines, dtype, _check_arch(arch)), _function(entry))


@lru_cache(maxsize=1)
def nvrtc_library() -> ctypes.CDLL | None:
    """libnvrtc of the nvidia-cuda-nvrtc wheel (CUDA 13 layout nvidia/cu13/lib), its builtins
    loaded first so that NVRTC finds them without LD_LIBRARY_PATH; None where it is absent."""
    spec = importlib.util.find_spec("nvidia")
    roots = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    for lib in (d / "cu13" / "lib" for d in roots):
        main, builtins = lib / "libnvrtc.so.13", sorted(lib.glob("libnvrtc-builtins.so.13*"))
        if main.is_file() and builtins:
            ctypes.CDLL(str(builtins[0]), mode=ctypes.RTLD_GLOBAL)
            return ctypes.CDLL(str(main))
    return None


def _nvrtc_compile(source: str, opts: list[str]) -> str:
    lib = nvrtc_library()
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), kernel_path(source).read_bytes(),
                              source.encode(), 0, None, None):
        raise RuntimeError("nvrtcCreateProgram failed")
    try:
        status = lib.nvrtcCompileProgram(prog, len(opts),
                                         (ctypes.c_char_p * len(opts))(*(o.encode() for o in opts)))
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, log)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
    text = log.value.decode(errors="replace")
    if status != 0:
        raise RuntimeError(f"NVRTC failed ({' '.join(opts)}):\n{text}")
    return text


def nvrtc_version() -> str:
    major, minor = ctypes.c_int(), ctypes.c_int()
    nvrtc_library().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


def nvrtc_resources(source: str, entry: str, defines: dict[str, int], dtype: str, arch: str) -> dict[str, int]:
    """`nvcc_resources` for the NVRTC build (the options `compile_kernel` gives CuPy, plus
    CuPy's -default-device); needs `nvrtc_library()`. Compiled once per build (`cache_dir()`)."""
    if nvrtc_library() is None:
        raise RuntimeError("libnvrtc not found (pip install nvidia-cuda-nvrtc)")
    opts = [*nvrtc_options(defines, dtype, _check_arch(arch)), "-default-device", "--ptxas-options=-v"]
    text = kernel_path(source).read_text() + _headers_text()
    return parse_ptxas(_cached_log(["nvrtc", nvrtc_version(), opts, source, text],
                                   lambda: _nvrtc_compile(source, opts)), _function(entry))
