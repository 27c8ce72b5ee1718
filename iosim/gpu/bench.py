"""The forward pass on the GPU: check, time and (optionally) profile one point of our kernels or of
torch's SDPA (`iosim.analysis.bench` runs the grid and writes the rows).

Per point: fresh random inputs; outputs NaN-poisoned; the kernels run once and are compared
with a float32 reference (computed in blocks of heads and query rows, so any problem whose inputs
fit can be checked; one that cannot is a row with status `unchecked: ...`, and the run goes on);
only a point that passes is timed (CUDA events, warm-up, L2 flushed
before every repetition, median). The error bound is a multiple of a same-dtype reference's
own error (torch SDPA in the input dtype against the float32 reference) plus a rounding term:
one unit u of the dtype, and for naive, which stores S in the input dtype before the softmax,
u·max|S| more (rounding S by u·|S| perturbs exp(S), so P and O, by about that much).
fp8_e4m3 (fa3): the inputs are bf16 (the kernels quantise them); the reference is float32
attention on them, the same-dtype yardstick the fp8 path emulated in torch (iosim.gpu.fp8: the
same scales, e4m3 rounding of Q, K, V and P), u one bf16 unit (O is bf16). Rows (the shared columns: the model's prediction and the measurement side
by side) are appended to the output file as they finish; `resume` skips points already there.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass

import numpy as np
import pandas as pd

from iosim.core.hardware import InputError
from iosim.core.problem import Problem

PEERS = {"torch_flash": "FLASH_ATTENTION", "torch_cudnn": "CUDNN_ATTENTION",
         "torch_efficient": "EFFICIENT_ATTENTION", "torch_math": "MATH"}
FLEX = "torch_flex"  # FlexAttention (torch.nn.attention.flex_attention) under torch.compile
FLEX_RECOMPILES = 256  # shapes one run may compile it for (dynamo's default falls back to eager at 8)
EXTRA_COLUMNS = ["seed", "err_bound", "ref_err_same_dtype", "hbm_floor_ms", "floor_ratio", "cublas_ms",
                 # decode (iosim.analysis.bench): the K/V bytes, the split count run and forced,
                 # the time with the launches queued ahead and its fraction of the HBM floor
                 "kv_bytes", "splits", "kv_splits", "page_ahead", "dq_bulk", "lazy_rescale", "persistent", "time_queued_ms", "floor_ratio_queued",
                 "copy_bw_bytes_per_s", "sm_clock_mhz", "mem_clock_mhz", "driver", "ncu_kernels",
                 # a Plan of several kernels (fp8: quantisation, then attention): the attention
                 # kernel alone (what the FA3 paper times), and the others'
                 "attn_ms", "attn_tflops", "other_kernels_ms",
                 # how the L2 was flushed before each repetition (Timer.flush), and the idle
                 # seconds before the point (bench --settle)
                 "flush", "settle_s"]
ROUNDING = {"bf16": 2.0**-8, "fp16": 2.0**-11, "fp8_e4m3": 2.0**-8}
ERR_MULTIPLE = 3.0
MATH_MAX_BYTES = 24 * 2**30  # torch's math backend materialises S and P: skip it beyond this


def require_gpu(command: str = "iosim bench"):
    """torch and cupy with a CUDA device, or one clear line."""
    try:
        import cupy  # noqa: F401
        import torch
    except ImportError as e:
        raise InputError(f"{command} needs CuPy and PyTorch with CUDA ({e.name} is missing; "
                         "install with pip install -e '.[gpu]')") from None
    if not torch.cuda.is_available():
        raise InputError(f"{command} needs an NVIDIA GPU: no CUDA device found")
    return torch


def gpu_info(torch) -> dict:
    info = {"gpu_name": torch.cuda.get_device_name(), "driver": "", "sm_clock_mhz": np.nan,
            "mem_clock_mhz": np.nan}
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.sm,clocks.mem",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=20).stdout.strip().splitlines()[0].split(",")
        info.update(driver=out[0].strip(), sm_clock_mhz=float(out[1]), mem_clock_mhz=float(out[2]))
    except Exception:  # nvidia-smi missing or unreadable: the clocks stay unknown
        pass
    return info


def profile_for(gpu_name: str) -> str:
    name = gpu_name.lower()
    for key, prof in (("h200", "h200-sxm-141gb"), ("h100", "h100-sxm5-80gb"),
                      ("a100", "a100-sxm4-80gb")):
        if key in name:
            return prof
    raise InputError(f"no hardware profile matches GPU '{gpu_name}' (pass --hw NAME_OR_PATH)")


@dataclass
class Timer:
    torch: object
    l2_bytes: int
    # GPU clock cycles the stream spins (torch.cuda._sleep) after the flush and before the
    # start event, so that the host has queued the launches by then: the time without their
    # host-side cost (0: not done; the flush alone hides some of it)
    lead_cycles: int = 0
    # a companion that times the same callables queued ahead (`queued_ms`), or None
    queued: Timer | None = None
    # how the L2 is flushed before each repetition (FLUSHES): "write" zero-fills a buffer of
    # twice the L2, which can leave the L2 full of dirty lines that the timed kernels' misses
    # then write back to DRAM (up to the L2's size of write traffic charged to every timed
    # call); "read" reads the buffer instead (a reduction), leaving no line dirty
    flush: str = "write"

    def __post_init__(self) -> None:
        self.flush_buf = self.torch.zeros(2 * self.l2_bytes // 4, dtype=self.torch.float32,
                                          device="cuda")

    def __call__(self, fn, budget_s: float = 0.4, max_reps: int = 50) -> float:
        """Median milliseconds of fn(), L2 flushed before each repetition."""
        torch = self.torch
        fn()
        torch.cuda.synchronize()
        est = self._once(fn)
        reps = int(min(max_reps, max(5, budget_s / max(est, 1e-6) * 1e3)))
        return float(np.median([self._once(fn) for _ in range(reps)]))

    def _once(self, fn) -> float:
        torch = self.torch
        if self.flush == "write":
            self.flush_buf.zero_()
        else:  # a read-only pass (a reduction to one number): no line left dirty
            self.flush_buf.amax()
        if self.lead_cycles:
            torch.cuda._sleep(self.lead_cycles)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        return a.elapsed_time(b)


FLUSHES = ("write", "read")  # Timer.flush: --flush of iosim bench
QUEUE_AHEAD_CYCLES = 1_000_000  # about 0.5 ms at H100/H200 clocks: more than any launch takes


def queued_ms(timer: Timer, fn) -> dict:
    """`time_queued_ms`: fn timed with its launches queued ahead (Timer.queued), if asked."""
    return {} if timer.queued is None else {"time_queued_ms": timer.queued(fn)}


def copy_bandwidth(torch, timer: Timer) -> float:
    """Bytes per second of a large device-to-device copy, counting read plus write."""
    n = 1 << 30
    x = torch.empty(n // 2, dtype=torch.float16, device="cuda").normal_()
    y = torch.empty_like(x)
    ms = timer(lambda: y.copy_(x))
    return 2 * n / (ms * 1e-3)


def inputs(torch, p: Problem, seed: int):
    """Fresh N(0, 1) Q, K, V in the caller's dtype (bf16 for fp8_e4m3: the kernels quantise)."""
    dt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp8_e4m3": torch.bfloat16}[p.dtype.value]
    g = torch.Generator(device="cuda").manual_seed(seed)

    def r(h, n):
        return torch.randn(p.batch, h, n, p.head_dim, device="cuda", dtype=dt, generator=g)

    return r(p.heads, p.seqlen_q), r(p.kv_heads, p.seqlen_k), r(p.kv_heads, p.seqlen_k)


def sdpa(torch, q, k, v, p: Problem, backend=None):
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    kw = dict(scale=p.scale, enable_gqa=p.group > 1)
    if p.window is not None:  # a boolean (Nq, Nk) mask: torch's SDPA has no sliding window
        kw["attn_mask"] = seen_mask(torch, p, 0, p.seqlen_q, q.device)
    elif p.causal and p.causal_offset:  # bottom-right, Nq != Nk: torch's lower-right bias
        from torch.nn.attention.bias import causal_lower_right

        kw["attn_mask"] = causal_lower_right(p.seqlen_q, p.seqlen_k)
    else:
        kw["is_causal"] = p.causal
    if backend is None:
        return F.scaled_dot_product_attention(q, k, v, **kw)
    with sdpa_kernel(getattr(SDPBackend, backend)):
        return F.scaled_dot_product_attention(q, k, v, **kw)


def seen_mask(torch, p: Problem, r0: int, r1: int, device):
    """bool (r1-r0, Nk): True where query rows r0..r1-1 see a key (causal, the sliding window)."""
    cols = torch.arange(p.seqlen_k, device=device)[None, :]
    pos = (torch.arange(r0, r1, device=device) + p.causal_offset)[:, None]
    seen = cols <= pos
    if p.window is not None:
        seen &= cols >= pos - p.window
    return seen


def dead_rows(p: Problem) -> int:
    """Leading query rows that see no key (bottom-right causal, Nq > Nk): O = 0, LSE = -inf."""
    return min(p.seqlen_q, max(0, -p.causal_offset)) if p.causal else 0


def rel_err(torch, out, ref, skip_rows: int = 0) -> float:
    """max |out - ref| / max |ref| over the rows from `skip_rows` on (dim 2); NaN is inf."""
    out, ref = out[:, :, skip_rows:], ref[:, :, skip_rows:]
    if ref.numel() == 0:
        return 0.0
    d = (out.float() - ref).abs().max().item()
    return float("inf") if math.isnan(d) else d / max(ref.abs().max().item(), 1e-30)


REF_CHUNK_BYTES = 1 << 30  # float32 scores a chunk of the reference holds at once


def blocks(torch, k, v, p: Problem, per_row: int, chunk_bytes: int = REF_CHUNK_BYTES):
    """(batch index, head slice, their K/V head indices, float32 K and V of those heads, row
    slice): the (heads, query rows) blocks of a reference, each holding at most `chunk_bytes`
    of `per_row`-byte rows, so that no N x N matrix is ever whole."""
    h, nq = p.heads, p.seqlen_q
    rows = max(1, min(nq, chunk_bytes // per_row))
    heads = max(1, min(h, chunk_bytes // (per_row * rows)))
    for bi in range(p.batch):
        for h0 in range(0, h, heads):
            hs = slice(h0, min(h, h0 + heads))
            kvh = torch.arange(hs.start, hs.stop, device=k.device) // p.group
            kf, vf = k[bi, kvh].float(), v[bi, kvh].float()
            for r0 in range(0, nq, rows):
                yield bi, hs, kvh, kf, vf, slice(r0, min(nq, r0 + rows))


def reference_chunks(torch, q, k, v, p: Problem, chunk_bytes: int = REF_CHUNK_BYTES):
    """float32 O and natural-log LSE, and max |S| over the visible scores, computed a block of
    (heads, query rows) at a time so that no N x N matrix is ever whole: any problem whose
    inputs fit can be checked. A row that sees no key has O = 0 and LSE = -inf."""
    b, h, nq, nk = p.batch, p.heads, p.seqlen_q, p.seqlen_k
    o = torch.empty(b, h, nq, p.head_dim, dtype=torch.float32, device=q.device)
    lse = torch.empty(b, h, nq, dtype=torch.float32, device=q.device)
    s_max = 0.0
    # per row: S, exp(S) and the mask, float32
    for bi, hs, _, kf, vf, rs in blocks(torch, k, v, p, nk * 4 * 3, chunk_bytes):
        s = torch.matmul(q[bi, hs, rs].float(), kf.transpose(-1, -2)) * p.scale
        if p.causal:
            seen = seen_mask(torch, p, rs.start, rs.stop, q.device)
            s = s.masked_fill(~seen, float("-inf"))
            s_max = max(s_max, s.masked_fill(~seen, 0).abs().max().item())
        else:
            s_max = max(s_max, s.abs().max().item())
        mx = s.amax(-1, keepdim=True)
        mx = torch.where(torch.isfinite(mx), mx, torch.zeros_like(mx))
        e = torch.exp(s - mx)
        del s
        tot = e.sum(-1, keepdim=True)
        o[bi, hs, rs] = torch.matmul(e, vf) / torch.where(tot > 0, tot, torch.ones_like(tot))
        lse[bi, hs, rs] = (mx + torch.log(tot))[..., 0]
        del e
    return o, lse, s_max


def reference(torch, q, k, v, p: Problem, tiles: tuple[int, int] | None = None):
    """float32 reference O and LSE (chunked: `reference_chunks`), the same-dtype SDPA's error
    against it (fp8_e4m3: the emulated fp8 path's, at the attention kernel's `tiles`, O's and
    LSE's the larger), and max |S|."""
    ref, lse, s_max = reference_chunks(torch, q, k, v, p)
    if p.dtype.value == "fp8_e4m3":
        from iosim.gpu.fp8 import emulate

        o_em, lse_em = emulate(torch, q, k, v, p, *tiles)
        same = max(rel_err(torch, o_em, ref, dead_rows(p)), lse_err(torch, lse_em, lse))
        del o_em, lse_em
        return ref, lse, same, s_max
    same = rel_err(torch, sdpa(torch, q, k, v, p), ref, dead_rows(p))
    return ref, lse, same, s_max


def lse_err(torch, lse, lse_ref) -> float:
    """max |LSE - ref| / max(|ref|, 1) over rows that see a key; inf where -inf rows differ."""
    gone = torch.isneginf(lse_ref)
    if not torch.equal(torch.isneginf(lse), gone):
        return float("inf")
    if not (~gone).any():
        return 0.0
    d = (lse[~gone] - lse_ref[~gone]).abs().max().item()
    return float("inf") if math.isnan(d) else d / max(lse_ref[~gone].abs().max().item(), 1)


def error_bound(schedule: str, p: Problem, same: float, s_max: float) -> float:
    u = ROUNDING[p.dtype.value]
    return ERR_MULTIPLE * same + u * (1 + (s_max if schedule == "naive" else 0))


def check(torch, launcher, ref, lse_ref, bound: float) -> tuple[float, bool]:
    """Run once on NaN-poisoned outputs; the relative error of O and (where the kernel keeps one)
    the LSE. Rows that see no key must hold O = 0 and LSE = -inf exactly."""
    launcher.poison()
    launcher()
    torch.cuda.synchronize()
    out = launcher.outputs()
    err = rel_err(torch, out["O"], ref)
    if "LSE" in out:
        err = max(err, lse_err(torch, out["LSE"], lse_ref))
    return err, err <= bound


def cublas_ms(torch, timer: Timer, q, k, v, p: Problem) -> float:
    """cuBLAS (batched, through torch.matmul: CuPy has no bf16 GEMM) for naive's two GEMMs,
    S = QKᵀ and O = PV, in the input dtype, as a sanity ratio for our GEMM kernels."""
    kx, vx = (x.repeat_interleave(p.group, dim=1) for x in (k, v))
    s = torch.empty(p.batch, p.heads, p.seqlen_q, p.seqlen_k, dtype=q.dtype, device="cuda")
    o = torch.empty_like(q)
    return timer(lambda: (torch.matmul(q, kx.transpose(-1, -2), out=s), torch.matmul(s, vx, out=o)))


def ncu_counts(launcher_args: dict, entries: list[str]) -> dict:
    """Run the point once under Nsight Compute; sum DRAM (and L2, shared) bytes over our kernels."""
    metrics = ["dram__bytes_read.sum", "dram__bytes_write.sum", "lts__t_bytes.sum",
               "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
               "sm__inst_executed_pipe_tensor.sum"]
    cmd = ["ncu", "--csv", "--print-units", "base", "--metrics", ",".join(metrics),
           "--kernel-name", f"regex:^({'|'.join(entries)})$", sys.executable, "-m",
           "iosim.gpu.once", json.dumps(launcher_args)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith('"')]
    if not lines:
        raise RuntimeError(f"ncu gave no rows: {out.stderr.strip()[-300:]}")
    import io

    df = pd.read_csv(io.StringIO("\n".join(lines)))
    df["Metric Value"] = pd.to_numeric(df["Metric Value"].astype(str).str.replace(",", ""))
    sums = df.groupby("Metric Name")["Metric Value"].sum()
    return {"dram_read_bytes_ncu": sums.get(metrics[0], np.nan),
            "dram_write_bytes_ncu": sums.get(metrics[1], np.nan),
            "l2_bytes_ncu": sums.get(metrics[2], np.nan),
            "smem_wavefronts_ncu": sums.get(metrics[3], np.nan),
            "tensor_inst_ncu": sums.get(metrics[4], np.nan),
            "ncu_kernels": int(df["ID"].nunique())}


def checked_inputs(torch, schedule: str, p: Problem, seed: int, tiles: tuple[int, int] | None = None):
    """Fresh inputs, the float32 reference and the error bound for `schedule` on `p` (`tiles`:
    the attention kernel's, which fp8's scales follow), with the row's first columns; or the
    row that says they do not fit in GPU memory."""
    try:
        q, k, v = inputs(torch, p, seed)
        ref, lse_ref, same, s_max = reference(torch, q, k, v, p, tiles)
    except torch.OutOfMemoryError:
        torch.cuda.empty_cache()
        return {"status": "unchecked: inputs or float32 reference do not fit in GPU memory"}
    bound = error_bound(schedule, p, same, s_max)
    return (q, k, v), (ref, lse_ref), bound, {"ref_err_same_dtype": same, "err_bound": bound}


def forward_point(torch, timer: Timer, pl, seed: int, bw: float, need_bytes: int,
                  use_ncu: bool, ncu_args: dict) -> dict:
    """One forward row of our kernel `pl` (a Plan): fresh inputs, check and, if it passes, time
    (and profile). A point whose inputs or reference do not fit is a row saying so; a crash is
    a row with status `error: ...`, never timed."""
    from iosim.gpu.launch import Launcher

    p = pl.problem
    got = checked_inputs(torch, pl.schedule, p, seed, (pl.main.block_m, pl.main.block_n))
    if isinstance(got, dict):
        return got
    (q, k, v), (ref, lse_ref), bound, r = got
    have = torch.cuda.get_device_properties(0).total_memory
    if need_bytes > have:  # e.g. naive's S and P at long N: said, not an OOM traceback
        r["status"] = (f"skipped: its tensors need {need_bytes / 2**30:.1f} GiB, over "
                       f"the GPU's {have / 2**30:.1f} GiB")
        return r
    try:
        launcher = Launcher(pl, q, k, v)
        err, ok = check(torch, launcher, ref, lse_ref, bound)
        r.update(max_rel_err=err, status="ok" if ok else "failed_check")
        if ok:
            r["time_ms"] = timer(launcher)
            r.update(queued_ms(timer, launcher))
            r["tflops"] = p.fa_flops() / (r["time_ms"] * 1e-3) / 1e12
            # several kernels (fp8: quantisation, attention; decode: splits, combine): the
            # attention kernel alone, and the others'
            if len(pl.kernels) > 1 and (p.dtype.value == "fp8_e4m3" or pl.schedule == "decode"):
                r["attn_ms"] = timer(launcher.only(pl.main.name))
                r["attn_tflops"] = p.fa_flops() / (r["attn_ms"] * 1e-3) / 1e12
                r["other_kernels_ms"] = sum(timer(launcher.only(k.name)) for k in pl.kernels
                                            if k is not pl.main)
            r["hbm_floor_ms"] = (pl.traffic.hbm_read + pl.traffic.hbm_write) / bw * 1e3
            r["floor_ratio"] = r["hbm_floor_ms"] / r["time_ms"]
            if pl.schedule == "naive":  # a sanity ratio: its failure keeps the timing
                try:
                    r["cublas_ms"] = cublas_ms(torch, timer, q, k, v, p)
                except torch.OutOfMemoryError:
                    torch.cuda.empty_cache()
            if use_ncu:  # a profiler failure keeps the timing: noted apart
                try:
                    r.update(ncu_counts(ncu_args, launcher.entries()), ncu_status="ok")
                except Exception as e:
                    r["ncu_status"] = f"error: {str(e).splitlines()[0][:200]}"
    except InputError:
        raise
    except Exception as e:  # a crash is a result too: recorded, never timed
        r.update(status=f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    return r


def kv_bytes(p: Problem) -> int:
    """The K/V cache a decode step reads: the HBM floor's bytes (K and V, every KV head)."""
    return 2 * p.batch * p.kv_heads * p.seqlen_k * p.head_dim * p.elem_bytes


def peer_point(torch, timer: Timer, name: str, p, seed: int) -> dict:
    """One forward row of torch SDPA backend `name` (or FlexAttention, `FLEX`), checked like
    our kernels. SDPA takes no paged cache: a paged problem's SDPA row says so, untimed."""
    if name == FLEX:
        return flex_point(torch, timer, p, seed)
    if p.page_size is not None:
        return {"status": "unsupported: torch SDPA takes no paged K/V cache"}
    got = checked_inputs(torch, name, p, seed)
    if isinstance(got, dict):
        return got
    (q, k, v), (ref, _), bound, r = got
    try:
        r.update(_peer(torch, timer, q, k, v, p, name, ref, bound))
    except Exception as e:  # a crash is a result too: recorded, never timed
        r.update(status=f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}")
    return r


def _peer(torch, timer: Timer, q, k, v, p: Problem, name: str, ref, bound: float) -> dict:
    backend = PEERS[name]
    if name == "torch_math" and p.bh * p.seqlen_q * p.seqlen_k * 4 * 3 > MATH_MAX_BYTES:
        return {"status": "skipped: S and P too large for the math backend"}
    try:
        out = sdpa(torch, q, k, v, p, backend)
    except torch.OutOfMemoryError:  # e.g. the math backend expanding GQA's K/V to every head
        torch.cuda.empty_cache()
        return {"status": "skipped: out of GPU memory"}
    except RuntimeError as e:
        return {"status": f"unsupported: {str(e).splitlines()[0][:160]}"}
    err = rel_err(torch, out, ref)
    if err > bound:
        return {"max_rel_err": err, "status": "failed_check"}
    ms = timer(lambda: sdpa(torch, q, k, v, p, backend))
    return {"max_rel_err": err, "status": "ok", "time_ms": ms,
            **queued_ms(timer, lambda: sdpa(torch, q, k, v, p, backend)),
            "tflops": p.fa_flops() / (ms * 1e-3) / 1e12}


_flex = None


def compiled_flex(torch):
    """flex_attention under torch.compile (once a process; a new shape compiles anew, up to
    FLEX_RECOMPILES of them: past dynamo's limit it would run eagerly, S materialised)."""
    global _flex
    if _flex is None:
        import torch._dynamo
        from torch.nn.attention.flex_attention import flex_attention

        for name in ("recompile_limit", "cache_size_limit"):
            if hasattr(torch._dynamo.config, name):
                setattr(torch._dynamo.config, name, FLEX_RECOMPILES)
        _flex = torch.compile(flex_attention, dynamic=False)
    return _flex


def flex_mask(p: Problem):
    """mask_mod of the rows' visible keys at logical key position `kv` (bottom-right causal,
    the sliding window), or None when every key is seen."""
    if not p.causal:
        return None
    off, w = p.causal_offset, p.window

    def mask(b, h, qi, kv):
        seen = kv <= qi + off
        return seen & (kv >= qi + off - w) if w is not None else seen

    return mask


def flex_call(torch, p: Problem, q, k, v):
    """A callable running compiled FlexAttention on `p`: a contiguous cache as given; a paged
    one through its block mask (torch's paged-attention layout: K and V (1, KVH, pages·P, d),
    page i at rows i·P..; the mask's KV blocks are the pages, in the block table's order, the
    last one masked where the cache ends), the pages in a random order as our kernel's."""
    from torch.nn.attention.flex_attention import BlockMask, create_block_mask

    flex = compiled_flex(torch)
    kw = dict(scale=p.scale, enable_gqa=p.group > 1)
    mask = flex_mask(p)
    if p.page_size is None:
        if mask is not None:
            kw["block_mask"] = create_block_mask(mask, None, None, p.seqlen_q, p.seqlen_k,
                                                 device=q.device)
        return lambda: flex(q, k, v, **kw)
    from iosim.gpu.launch import paged_cache

    ps, b, dev = p.page_size, p.batch, q.device
    pc = paged_cache(torch, p, k, v)
    bt = pc["BlockTable"]
    kc, vc = (pc[n].permute(2, 0, 1, 3).reshape(1, p.kv_heads, -1, p.head_dim) for n in ("Kc", "Vc"))
    del pc
    pages, npg = kc.shape[2] // ps, bt.shape[1]
    logical = torch.empty(pages, dtype=torch.int32, device=dev)
    logical[bt.flatten().long()] = torch.arange(npg, dtype=torch.int32, device=dev).repeat(b)
    full = 0 if mask is not None else p.seqlen_k // ps  # pages no key of which is masked

    def paged_mask(bi, h, qi, kv):  # a physical key position to the sequence's own
        pos = logical[kv // ps] * ps + kv % ps
        ok = pos < p.seqlen_k
        return ok & mask(bi, h, qi, pos) if mask is not None else ok

    def blocks(cols):  # (count, indices padded to every page) a sequence, one row block
        idx = torch.zeros(b, 1, 1, pages, dtype=torch.int32, device=dev)
        idx[:, 0, 0, :cols.shape[1]] = cols
        return torch.full((b, 1, 1), cols.shape[1], dtype=torch.int32, device=dev), idx

    n_part, i_part = blocks(bt[:, full:])
    n_full, i_full = blocks(bt[:, :full])
    kw["block_mask"] = BlockMask.from_kv_blocks(
        n_part, i_part, n_full if full else None, i_full if full else None,
        BLOCK_SIZE=(128, ps), mask_mod=paged_mask, seq_lengths=(p.seqlen_q, pages * ps))
    return lambda: flex(q, kc, vc, **kw)


def flex_point(torch, timer: Timer, p: Problem, seed: int) -> dict:
    """One row of compiled FlexAttention, checked like our kernels; a compile or launch that
    fails is a row with status `failed_compile: ...`, never a crash, never timed."""
    got = checked_inputs(torch, FLEX, p, seed)
    if isinstance(got, dict):
        return got
    (q, k, v), (ref, _), bound, r = got
    try:
        fn = flex_call(torch, p, q, k, v)
        out = fn()
        torch.cuda.synchronize()
    except Exception as e:
        torch.cuda.empty_cache()
        # the first line names the failure, the last (a subprocess's) often its cause
        msg = [m.strip() for m in str(e).strip().splitlines() if m.strip()] or [""]
        why = msg[0] if len(msg) == 1 else f"{msg[0]} ... {msg[-1]}"
        r["status"] = f"failed_compile: {type(e).__name__}: {why[:300]}"
        return r
    err = rel_err(torch, out, ref)
    r.update(max_rel_err=err, status="ok" if err <= bound else "failed_check")
    if err <= bound:
        r["time_ms"] = timer(fn)
        r.update(queued_ms(timer, fn))
        r["tflops"] = p.fa_flops() / (r["time_ms"] * 1e-3) / 1e12
    return r
