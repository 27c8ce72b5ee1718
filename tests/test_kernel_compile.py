"""Every real kernel compiles offline with nvcc, at the tiles the Plans choose, with no register
spills and no stack frame, and (sm_90a) without ptxas serialising wgmma or ignoring setmaxnreg;
and with NVRTC, the compiler of the run-time build (what runs), the same (no GPU needed; each
skipped with a reason where nvcc, or the nvidia-cuda-nvrtc wheel, is absent)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from iosim.core.hardware import InputError, load
from iosim.core.problem import Direction, Problem
from iosim.gpu.compile import (
    kernel_path,
    nvcc_arch_options,
    nvcc_available,
    nvcc_resources,
    nvrtc_library,
    nvrtc_resources,
)
from iosim.kernels import supported
from iosim.schedules import plan

needs_nvcc = pytest.mark.skipif(not nvcc_available(), reason="nvcc not on PATH (CUDA toolkit)")

PROFILES = {"sm_90a": "h100-sxm5-80gb", "sm_80": "a100-sxm4-80gb"}


def cases() -> list[tuple]:
    """(source, entry, defines, dtype, arch) of every kernel the Plans launch, deduplicated.
    N = 4096 and 16384 exercise two softmax widths; N = 200000 the two-pass softmax."""
    seen = {}
    for arch, hw_name in PROFILES.items():
        hw = load(hw_name)
        for dtype in ("bf16", "fp16") if arch == "sm_90a" else ("bf16",):
            for d in (64, 128, 256):
                for causal in (False, True):
                    for n in (4096, 16384, 200000):
                        p = Problem(batch=1, heads=2, seqlen_q=n, head_dim=d, dtype=dtype,
                                    causal=causal)
                        ss = ("naive", "fa1", "fa2") + (("fa3",) if arch == "sm_90a" else ())
                        for s in ss if n < 200000 else ("naive",):
                            for k in plan(s, p, hw).kernels:
                                key = (k.source, k.name, tuple(sorted(k.defines.items())), dtype, arch)
                                seen[key] = key
                    if causal:  # the forwards' sliding window (WINDOW >= 0: its mask and skip)
                        p = Problem(batch=1, heads=2, seqlen_q=4096, head_dim=d, dtype=dtype,
                                    causal=True, window=1024)
                        for s in ("fa2", "fa3") if arch == "sm_90a" else ("fa2",):
                            k = plan(s, p, hw).main
                            key = (k.source, k.name, tuple(sorted(k.defines.items())), dtype, arch)
                            seen[key] = key
                    # the backward kernels (GQA adds gqa_reduce), where the Plan's tiles fit
                    # the GPU (A100: not fa1, fa2 at d = 256) and a kernel runs it (fa3: d = 64,
                    # 128): for fa3 both causal diagonals and its deterministic mode
                    # (head_dim_cases covers the others)
                    for s, align, det in [(x, a, t) for x in ss[:4]
                                          for a in ("top-left", "bottom-right")[:1 + (x == "fa3")]
                                          for t in (False, True)[:1 + (x == "fa3")]]:
                        p = Problem(batch=1, heads=4, kv_heads=2, seqlen_q=4096, head_dim=d,
                                    dtype=dtype, causal=causal, direction="bwd",
                                    causal_align=align if causal else "top-left",
                                    deterministic=det)
                        try:
                            pl = plan(s, p, hw)
                            supported(pl)
                            kernels = pl.kernels
                        except InputError:
                            continue
                        for k in kernels:
                            key = (k.source, k.name, tuple(sorted(k.defines.items())), dtype, arch)
                            seen[key] = key
                # split-KV decode: one query row (MHA and GQA 32/8, split), 16 rows of 4 heads
                # (32 packed rows), one split at batch 64, causal with a window (mma.sync and
                # cp.async: sm_80 too)
                for b, h, nq, causal, win in ((1, 32, 1, False, None), (1, 8, 1, False, None),
                                              (1, 32, 16, True, 512), (64, 32, 1, False, None)):
                    for page in (None, 16) if b == 1 and nq == 1 else (None,):
                        p = Problem(batch=b, heads=h, kv_heads=8, seqlen_q=nq, seqlen_k=65536,
                                    head_dim=d, dtype=dtype, causal=causal,
                                    causal_align="bottom-right", window=win, page_size=page)
                        for k in plan("decode", p, hw).kernels:
                            key = (k.source, k.name, tuple(sorted(k.defines.items())), dtype, arch)
                            seen[key] = key
    for d in (64, 128, 256):  # fa3's e4m3 path (64-byte swizzled panels at d = 64) and its
        for causal in (False, True):  # quantisation kernels (per tile, per tensor, Hadamard)
            for quant in ({}, {"fp8_scaling": "tensor", "hadamard": True}):
                p = Problem(batch=1, heads=2, seqlen_q=4096, head_dim=d, dtype="fp8_e4m3",
                            causal=causal, **quant)
                for k in plan("fa3", p, load(PROFILES["sm_90a"])).kernels:
                    key = (k.source, k.name, tuple(sorted(k.defines.items())), "fp8_e4m3", "sm_90a")
                    seen[key] = key
    return list(seen)


def head_dim_cases() -> list[tuple]:
    """The same for the other head_dims the real naive, fa1 and fa2 kernels take (a multiple of
    8 up to 256, padded inside): for each distinct tile configuration (the defines but HEAD_DIM)
    the largest head_dim that uses it and the largest that is 8 mod 16 (the zero-filled chunk),
    bf16 (fp16 compiles the same code), causal with the diagonal bottom-right (the most code)
    and not causal (a different register allocation)."""
    picked: dict[tuple, dict] = {}
    for arch, hw_name in PROFILES.items():
        hw = load(hw_name)
        for d in range(8, 257, 8):
            for causal in (False, True):
                p = Problem(batch=1, heads=2, seqlen_q=4096, head_dim=d, causal=causal,
                            causal_align="bottom-right")
                bwd = p.model_copy(update={"direction": Direction.bwd})
                for s, q in (("naive", p), ("fa1", p), ("fa2", p), ("fa1", bwd)):
                    try:  # (the fa1 backward's tiles at d > 192 do not fit A100)
                        kernels = plan(s, q, hw).kernels
                    except InputError:
                        continue
                    for k in kernels:
                        tiles = tuple(sorted((n, v) for n, v in k.defines.items() if n != "HEAD_DIM"))
                        key = (k.source, k.name, tiles, "bf16", arch)
                        case = (k.source, k.name, tuple(sorted(k.defines.items())), "bf16", arch)
                        picked.setdefault(key, {})[d % 16] = case  # d ascending: the largest
    return list(dict.fromkeys(c for by_class in picked.values() for c in by_class.values()))


def check_resources(res: dict) -> None:
    assert res["spill_stores"] == 0 and res["spill_loads"] == 0, res
    assert res["stack_frame"] == 0, res
    assert 0 < res["registers"] <= 255, res
    assert res["wgmma_serialized"] == 0, res  # ptxas: "wgmma.mma_async instructions are serialized"
    assert res["setmaxnreg_ignored"] == 0, res


@needs_nvcc
@pytest.mark.parametrize("source,entry,defines,dtype,arch",
                         list(dict.fromkeys(cases() + head_dim_cases())),
                         ids=lambda x: x if isinstance(x, str) else None)
def test_kernel_compiles_without_spills(source, entry, defines, dtype, arch):
    check_resources(nvcc_resources(source, entry, dict(defines), dtype, arch))


def nvrtc_cases() -> list:
    """The sm_90a cases in bf16 (fp16 compiles the same code). fa2_fwd at d = 64 (128x128 tiles,
    4 warps; not causal, and causal bottom-right) spills 40-48 B in the NVRTC build only (on
    the H100 too: experiments/nvrtc_resources/h100/nvrtc_resources.csv); the committed forward data were
    measured with that build. A known defect, held as a strict xfail: a fix turns it red. (NVRTC
    13.0, the GPU machine's, pinned by the dev extra; 13.5 does not spill there.)"""
    out = []
    for c in dict.fromkeys(cases() + head_dim_cases()):
        if c[4] != "sm_90a" or c[3] != "bf16":
            continue
        d = dict(c[2])
        known = c[1] == "fa2_fwd" and d["HEAD_DIM"] == 64 and (not d["IS_CAUSAL"] or d["CAUSAL_BOTTOM_RIGHT"])
        out.append(pytest.param(*c, marks=pytest.mark.xfail(strict=True, reason="NVRTC-only spill, "
                                                             "see nvrtc_cases")) if known else c)
    return out


@pytest.mark.skipif(nvrtc_library() is None, reason="libnvrtc absent (pip install nvidia-cuda-nvrtc)")
@pytest.mark.parametrize("source,entry,defines,dtype,arch", nvrtc_cases(),
                         ids=lambda x: x if isinstance(x, str) else None)
def test_nvrtc_build_without_spills(source, entry, defines, dtype, arch):
    check_resources(nvrtc_resources(source, entry, dict(defines), dtype, arch))


@needs_nvcc
def test_fa3_refuses_other_architectures():
    """fa3.cu stops the build (its #error guard) when not compiled for sm_90a: plain sm_90 lacks
    wgmma's and setmaxnreg's arch-specific features, sm_80 everything."""
    p = Problem(batch=1, heads=2, seqlen_q=1024, head_dim=128)
    k = plan("fa3", p, load("h100-sxm5-80gb")).kernels[0]
    defines = [f"-D{n}={v}" for n, v in k.defines.items()] + ["-DELEM_BF16=1"]
    for arch in (["-arch=sm_90"], nvcc_arch_options("sm_80")):
        proc = subprocess.run(["nvcc", "-std=c++17", "-cubin", *arch, f"-I{kernel_path('fa3.cu').parent}",
                               *defines, "-o", "/dev/null", str(kernel_path("fa3.cu"))],
                              capture_output=True, text=True)
        assert proc.returncode != 0 and "needs -arch=sm_90a" in proc.stderr, (arch, proc.stderr[-500:])


@pytest.mark.unit  # no compiler: a text comparison
def test_wgmma_header_is_generated():
    """kernels/wgmma.cuh is exactly what tools/gen_wgmma.py writes (never edited by hand)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_wgmma", kernel_path("fa3.cu").parents[1] / "tools" / "gen_wgmma.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert kernel_path("wgmma.cuh").read_text() == gen.render()


@needs_nvcc
def test_each_distinct_build_compiles_once(tmp_path, monkeypatch):
    """naive_qk never reads IS_CAUSAL: the causal and the non-causal Plan's builds preprocess to
    the same device code and compile once; asked again, it reads the log back from the on-disk
    cache and compiles nothing; an edited kernel source is compiled anew."""
    from iosim.gpu import compile as cc

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    calls = []
    nvcc = cc._nvcc
    monkeypatch.setattr(cc, "_nvcc", lambda args: calls.append(args[0]) or nvcc(args))
    hw = load("h100")
    qk = [k for c in (False, True)
          for k in plan("naive", Problem(batch=1, heads=2, seqlen_q=4096, head_dim=64, causal=c), hw).kernels
          if k.name == "naive_qk"]
    assert len(qk) == 2 and qk[0].defines != qk[1].defines

    def compiles() -> int:
        calls.clear()
        got = [nvcc_resources(k.source, k.name, k.defines, "bf16", "sm_90a") for k in qk]
        assert got[0] == got[1]
        return calls.count("-cubin")

    assert compiles() == 1
    assert compiles() == 0 and calls == []
    kernels = tmp_path / "kernels"
    shutil.copytree(cc.kernels_dir(), kernels)
    monkeypatch.setattr(cc, "kernels_dir", lambda: kernels)
    (kernels / "naive.cu").write_text((kernels / "naive.cu").read_text() + "\n__device__ int iosim_edit;\n")
    assert compiles() == 1
