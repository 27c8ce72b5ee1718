"""fa1's backward loop trip in SASS: compile kernels/fa1.cu's fa1_bwd with the Plan's defines
(`nvcc -cubin`, sm_90a), disassemble it (nvdisasm) and count the warp instructions one trip of
its inner loop (one (query block, key block) step) issues, by class, against the model's count
(iosim.model.timing.instructions of the Plan's work per trip, plus the spec's loop_issue) and,
where Nsight Compute measured the kernel, ncu's inst_executed per warp and trip.

    python tools/fa1_sass.py [OUT.csv]     (needs nvcc and nvdisasm: PATH, or NVDISASM=path)
    python tools/fa1_sass.py --fit experiments/fa1_sass/sass_trip.csv    (iosim.kernels' FA1_*)
    python tools/fa1_sass.py --dram experiments/ncu_mechanism/h100/sass13/ncu_sass13.csv
    python tools/fa1_sass.py --share NCU.csv [NCU.csv ...]    (iosim.model.memory's PREFETCH_L2_SHARE)

The trip's path: the smallest loop that holds every HMMA is the inner loop; loops nested in it
run their trip counts (phase 1's k loop DK/16/P1_UNROLL times, the dQ passes NT3/NT3P times,
the L2 prefetch's lines / threads times, the kernel's own constants); a forward branch's two
sides: the rcp slow path (a CALL) never runs; of the softmax's two versions (the mask's
if/else: the one with more instructions is the masked one) the plain trip runs the other; the
cp.async of ℓ or m (tid < BLOCK_M, or < 2 BLOCK_M) a quarter of the warps each. Everything
else runs once a trip. Counts are per warp; a CTA's trip is NUM_WARPS of them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd

from iosim.analysis.validate import preferred
from iosim.core.problem import Problem
from iosim.gpu.compile import define_options, kernels_dir, nvcc_arch_options
from iosim.kernels import fa1_bwd_trip_terms
from iosim.model import timing
from iosim.schedules import Tiles, plan

ROOT = Path(__file__).resolve().parents[1]
NCU = ROOT / "experiments/ncu_mechanism/h100/wave12/ncu_fa1_bwd_wave.csv"
# (batch, heads, N, d, causal): the ncu points (wave12) and one d = 64 point of the grid
# and, per head_dim, one point that the Plan runs unsplit (dQacc read and written) and one it
# splits (dQacc by reductions)
POINTS = [(8, 16, 2048, 128, False), (16, 8, 1024, 256, False), (8, 16, 2048, 128, True),
          *((b, 32, 2048, d, False) for d in (32, 64, 96, 160, 192) for b in (8, 1)),
          (1, 32, 2048, 128, False), (1, 32, 2048, 256, False)]
CLASSES = {"mma": ("HMMA",), "ldsm": ("LDSM",), "lds_sts": ("LDS", "STS"), "cp_async": ("LDGSTS",),
           "global": ("LDG", "STG", "RED", "REDG", "ATOMG"), "prefetch": ("CCTL",),
           "fp32": ("FFMA", "FMUL", "FADD", "FMNMX", "FSETP", "FSEL", "F2FP", "FCHK", "FSET"),
           "mufu": ("MUFU",), "shfl": ("SHFL",),
           "sync": ("BAR", "DEPBAR", "LDGDEPBAR", "WARPSYNC", "BSSY", "BSYNC"),
           "branch": ("BRA", "EXIT", "CALL", "RET")}
OF = {op: c for c, ops in CLASSES.items() for op in ops}  # the rest: integer, address, moves
LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)([^;]*);")
TARGET = re.compile(r"`\((\.L_x_\d+)\)")


def op_class(op: str) -> str:
    return OF.get(op.split(".")[0], "int")


def blocks(sass: str) -> list[dict]:
    """Basic blocks (label, instructions as (address, opcode, operands)) in address order."""
    out: list[dict] = []
    for ln in sass.splitlines():
        s = ln.strip()
        if re.match(r"^\.L_x_\d+:$", s):
            out.append({"label": s[:-1], "ins": []})
            continue
        m = LINE.search(ln)
        if not m:
            continue
        if not out or (out[-1]["ins"] and out[-1]["ins"][-1][1].split(".")[0] in ("BRA", "EXIT")):
            out.append({"label": "", "ins": []})
        out[-1]["ins"].append((int(m.group(1), 16), m.group(3), (m.group(2) or "") + m.group(4)))
    return [b for b in out if b["ins"]]


def _loops(bl: list[dict]) -> list[tuple[int, int]]:
    """(first block, last block) of every loop: a branch back to an earlier label."""
    at = {b["label"]: i for i, b in enumerate(bl) if b["label"]}
    out = []
    for i, b in enumerate(bl):
        op, args = b["ins"][-1][1], b["ins"][-1][2]
        t = TARGET.search(args)
        if op == "BRA" and t and at.get(t.group(1), i + 1) <= i:
            out.append((at[t.group(1)], i))
    return out


def _has(bl, lo, hi, cls) -> int:
    return sum(op_class(op) == cls for b in bl[lo:hi + 1] for _, op, _ in b["ins"])


def trip_weights(bl: list[dict], k: dict, masked: bool = False) -> dict[int, float]:
    """Block -> times one warp runs it in one trip of the inner loop (module docstring)."""
    mma = _has(bl, 0, len(bl) - 1, "mma")
    lo, hi = min((r for r in _loops(bl) if _has(bl, *r, "mma") == mma), key=lambda r: r[1] - r[0])
    w = {i: 1.0 for i in range(lo, hi + 1)}
    for a, b in _loops(bl):
        if not (lo < a and b < hi):
            continue
        if _has(bl, a, b, "prefetch"):
            n = k["prefetch_lines"] / k["threads"]
        elif _has(bl, a, b, "global"):
            n = k["dq_passes"]
        else:
            n = k["p1_trips"]
        for i in range(a, b + 1):
            w[i] *= n
    for i in range(lo, hi + 1):
        ops = [op.split(".")[0] for _, op, _ in bl[i]["ins"]]
        last = bl[i]["ins"][-1]
        if "CALL" in ops:
            w[i] = 0.0
        elif last[1] == "BRA" and not last[2].strip().startswith("@") and i + 1 <= hi:
            # an if/else: this side, then the label after it (the other side)
            a, b = _has(bl, i, i, "mufu"), _has(bl, i + 1, i + 1, "mufu")
            if a >= 4 and a == b:  # the softmax's two versions: the longer one masks
                big = i if len(bl[i]["ins"]) > len(bl[i + 1]["ins"]) else i + 1
                w[big] *= float(masked)
                w[i + i + 1 - big] *= float(not masked)
            elif _has(bl, i, i, "cp_async") == 1 == _has(bl, i + 1, i + 1, "cp_async"):
                w[i] *= 0.25  # ℓ by tid < BLOCK_M, m by the next BLOCK_M threads
                w[i + 1] *= 0.25
    return w


def count(bl: list[dict], w: dict[int, float]) -> tuple[Counter, Counter]:
    """(instructions by class, and by class those in blocks that hold MMAs) a warp runs in w."""
    c: Counter = Counter()
    in_mma: Counter = Counter()
    for i, x in w.items():
        mma = _has(bl, i, i, "mma") > 0
        for _, op, _ in bl[i]["ins"]:
            c[op_class(op)] += x
            in_mma[op_class(op)] += x * mma
    return c, in_mma


def _nvdisasm() -> str:
    tool = os.environ.get("NVDISASM") or shutil.which("nvdisasm")
    if not tool:
        sys.exit("error: nvdisasm not found: put it on PATH or set NVDISASM=path")
    return tool


def sass_of(defines: dict[str, int], dtype: str = "bf16") -> str:
    """nvdisasm's text of fa1_bwd compiled with these defines."""
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "k.cubin"
        subprocess.run(["nvcc", "-std=c++17", *nvcc_arch_options("sm_90a"), f"-I{kernels_dir()}",
                        *define_options(defines, dtype), "-cubin", "-o", str(cubin),
                        str(kernels_dir() / "fa1.cu")], check=True, capture_output=True)
        return subprocess.run([_nvdisasm(), "-c", str(cubin)], check=True, capture_output=True,
                              text=True).stdout


def constants(d: dict[str, int]) -> dict[str, float]:
    """fa1.cu's loop trip counts for these defines (its fa1b namespace's constexprs)."""
    nw, bm, dp, dg = d["NUM_WARPS"], d["BLOCK_M"], d["HEAD_DIM_PAD"], d["HEAD_DIM"]
    w3q = min(nw, bm // 32)
    nt3 = dp // (nw // w3q) // 8
    lines = -(-dg * 2 // 128) + (0 if d["DQ_ATOMIC"] else -(-dg * 4 // 128))
    return {"threads": 32 * nw, "p1_trips": (-(-dg // 16)) // 2,
            "dq_passes": nt3 // (4 if nt3 % 4 == 0 else 2), "prefetch_lines": bm * lines}


def ncu_per_warp_trip() -> dict[tuple, float]:
    """Nsight Compute's inst_executed of fa1_bwd per warp and trip at the wave12 points."""
    if not NCU.exists():
        return {}
    d = pd.read_csv(NCU)
    d = d[(d["Kernel Name"] == "fa1_bwd") & (d.metric == "inst_executed")]
    hw = preferred("h100-sxm5-80gb")
    out = {}
    for r in d.itertuples(index=False):
        k = _main(Problem(batch=r.batch, heads=r.heads, seqlen_q=r.seqlen, head_dim=r.head_dim,
                          causal=bool(r.causal), direction="bwd"), hw)
        out[(r.batch, r.heads, r.seqlen, r.head_dim, bool(r.causal))] = r.value / (
            k.trips.sum() * k.ctas / len(k.trips)) / (k.threads // 32)
    return out


def _main(p: Problem, hw):
    return next(k for k in plan("fa1", p, hw).kernels if k.name == "fa1_bwd")


def model_per_warp_trip(k, hw) -> tuple[float, float, float]:
    """(the counts' instructions, the Plan's loop_issue, its loop_shadow) per warp and trip."""
    trips = k.trips.sum() * k.ctas / len(k.trips)
    w = k.work
    mma, other = timing.instructions(w.tensor_flops, w.alu_flops + w.exp_ops, k.traffic.sram, hw,
                                     False, k.inst_per_op)
    nw = k.threads // 32
    return (mma + other) / trips / nw, k.loop_issue / nw, getattr(k, "loop_shadow", 0.0) / nw


def table() -> pd.DataFrame:
    """One row per point: the trip's SASS by class (per warp), the instructions beyond the
    counts on the chain (`beyond`: integer, global, prefetch, barrier and branch instructions
    outside the MMA blocks, the global ones in them) and in the MMAs' shadow (`shadow`: integer
    and branch instructions in blocks that hold MMAs), the regressors of iosim.kernels'
    fa1_bwd_trip_terms, the model's counts and loop terms, ncu's count."""
    hw, ncu, rows = preferred("h100-sxm5-80gb"), ncu_per_warp_trip(), []
    for b, h, n, d, causal in POINTS:
        k = _main(Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=causal, direction="bwd"), hw)
        bl = blocks(sass_of(k.defines))
        c, in_mma = count(bl, trip_weights(bl, constants(k.defines)))
        shadow = in_mma["int"] + in_mma["branch"]
        beyond = sum(c[x] for x in ("int", "global", "prefetch", "sync", "branch")) - shadow
        counted, issue, shade = model_per_warp_trip(k, hw)
        rows.append({"batch": b, "heads": h, "seqlen": n, "head_dim": d, "causal": causal,
                     "dq_atomic": k.defines["DQ_ATOMIC"], **{x: c.get(x, 0.0) for x in [*CLASSES, "int"]},
                     "sass_trip": sum(c.values()), "beyond": beyond, "shadow": shadow,
                     **fa1_bwd_trip_terms(k.defines), "model_counts": counted,
                     "model_loop_issue": issue, "model_loop_shadow": shade,
                     "model_trip": counted + issue + shade,
                     "ncu_trip": ncu.get((b, h, n, d, causal), float("nan"))})
    return pd.DataFrame(rows)


def fit(t: pd.DataFrame) -> dict[str, float]:
    """Least squares of the SASS's instructions beyond the counts on the regressors
    (iosim.kernels): beyond - dq - unpack = FA1_TRIP_INT + FA1_COPY_INT x copies; shadow =
    FA1_KSTEP_INT x ksteps + FA1_MMA_INT x mma_unrolled; and each point's relative error."""
    a = np.column_stack([np.ones(len(t)), t.copies])
    trip, copy = np.linalg.lstsq(a, t.beyond - t.dq - t.unpack, rcond=None)[0]
    b = t[["ksteps", "mma_unrolled"]].to_numpy(float)
    kstep, mma = np.linalg.lstsq(b, t.shadow, rcond=None)[0]
    return {"FA1_TRIP_INT": trip, "FA1_COPY_INT": copy, "FA1_KSTEP_INT": kstep, "FA1_MMA_INT": mma,
            "beyond_err": (a @ [trip, copy] + t.dq + t.unpack) / t.beyond - 1,
            "shadow_err": b @ [kstep, mma] / t.shadow - 1}


def dram(path: str) -> pd.DataFrame:
    """Nsight Compute's DRAM and L2 bytes of fa1_bwd (experiments/ncu_mechanism/h100/sass13,
    prefetch14: one CTA a head, as every point ran) beside the Plan's two-level counts and the
    model's DRAM estimate, GB; the MB that the resident CTAs move between a prefetch and its
    load (memory.refetched's), and the DRAM reads above the two-level ones, percent."""
    from iosim.model import memory
    from iosim.model.occupancy import ctas_per_sm

    m, hw, rows = pd.read_csv(path), preferred("h100-sxm5-80gb"), []
    for (b, h, n, d, causal), g in m.groupby(["batch", "heads", "seqlen", "head_dim", "causal"]):
        v = g.set_index("metric").value
        pl = plan("fa1", Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=bool(causal),
                                 direction="bwd"), hw, Tiles(split_cols=n))
        i = [k.name for k in pl.kernels].index("fa1_bwd")
        k, est = pl.kernels[i], memory.estimate(pl, hw)[i]
        sector = 32
        ahead = max(memory.prefetch_ahead(k, 2).values())
        moved = ahead * min(k.ctas, ctas_per_sm(k, hw) * hw.sm_count) / 1e6
        rows.append({"batch": b, "heads": h, "seqlen": n, "head_dim": d, "causal": causal,
                     "two_level_read": k.traffic.hbm_read / 1e9,
                     "l2_read_ncu": v["lts__t_sectors_srcunit_tex_op_read.sum"] * sector / 1e9,
                     "l2_read_hit_ncu": v["lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum"] * sector / 1e9,
                     "dram_read_model": est.read / 1e9, "dram_read_ncu": v["dram__bytes_read.sum"] / 1e9,
                     "two_level_write": k.traffic.hbm_write / 1e9,
                     "dram_write_model": est.write / 1e9, "dram_write_ncu": v["dram__bytes_write.sum"] / 1e9,
                     "dram_pct_ncu": v["dram__throughput.avg.pct_of_peak_sustained_elapsed"],
                     "l2_pct_ncu": v["lts__throughput.avg.pct_of_peak_sustained_elapsed"],
                     "moved_MB": moved,
                     "over_2level_model_pct": 100 * (est.read / k.traffic.hbm_read - 1),
                     "over_2level_ncu_pct": 100 * (v["dram__bytes_read.sum"] / k.traffic.hbm_read - 1)})
    return pd.DataFrame(rows)


SHARES = np.round(np.arange(0.2, 0.8, 0.005), 3)  # the grid the share is chosen on


def evicted(paths: list[str]) -> pd.DataFrame:
    """Per point of the ncu files: the MB that the resident CTAs move between a prefetch and
    its load (memory.refetched's), and the share of the prefetched bytes that DRAM read again
    (ncu's DRAM reads above the two-level reads, over the prefetched tensors' reads)."""
    from iosim.model import memory
    from iosim.model.occupancy import ctas_per_sm

    hw, rows = preferred("h100-sxm5-80gb"), []
    for path in paths:
        m = pd.read_csv(path)
        for (b, h, n, d, causal), g in m.groupby(["batch", "heads", "seqlen", "head_dim", "causal"]):
            v = g.set_index("metric").value
            k = plan("fa1", Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=bool(causal),
                                    direction="bwd"), hw, Tiles(split_cols=n)).main
            pre = memory.prefetch_ahead(k, 2)
            moved = max(pre.values()) * min(k.ctas, ctas_per_sm(k, hw) * hw.sm_count)
            again = v["dram__bytes_read.sum"] - k.traffic.hbm_read
            rows.append({"batch": b, "heads": h, "seqlen": n, "head_dim": d, "moved_MB": moved / 1e6,
                         "evicted_ncu": again / sum(k.traffic.reads[t] for t in pre)})
    return pd.DataFrame(rows)


def share(paths: list[str]) -> tuple[float, pd.DataFrame]:
    """The PREFETCH_L2_SHARE (on SHARES) whose memory.refetched fits ncu's evicted shares best
    (least squares), and the points with the model's at it."""
    hw = preferred("h100-sxm5-80gb")
    t = evicted(paths)
    l2 = hw.l2_bytes * hw.efficiency.l2_capacity
    model = lambda s: np.clip(1 - s * l2 / (t.moved_MB.to_numpy() * 1e6), 0, 1)  # noqa: E731
    best = float(min(SHARES, key=lambda s: float(((model(s) - t.evicted_ncu) ** 2).sum())))
    return best, t.assign(evicted_model=model(best))


def main(args: list[str]) -> str:
    if args[:1] == ["--share"] and len(args) > 1:
        s, t = share(args[1:])
        return (f"PREFETCH_L2_SHARE by least squares over {len(t)} points: {s:.3f}; per point the "
                "MB the resident CTAs move between a prefetch and its load, the share of the "
                "prefetched bytes DRAM read again (ncu) and the model's at that share:\n"
                + t.round(3).to_string(index=False))
    if args[:1] == ["--dram"] and len(args) == 2:
        pd.set_option("display.width", 250)
        return ("fa1_bwd's bytes, GB: the Plan's two-level reads, Nsight Compute's L2 reads from the "
                "SMs and their hits, the model's DRAM reads and ncu's; the same for writes; ncu's "
                "DRAM and L2 throughput (percent of peak):\n" + dram(args[1]).round(2).to_string(index=False))
    if args[:1] == ["--fit"] and len(args) == 2:
        t = pd.read_csv(args[1])
        f = fit(t)
        return (f"least squares over the {len(t)} builds of {args[1]}: "
                + ", ".join(f"{k} = {f[k]:.3f}" for k in list(f)[:4])
                + "; the fit's error per build (percent), on the chain: "
                + ", ".join(f"{100 * e:+.0f}" for e in f["beyond_err"])
                + "; in the MMAs' shadow: " + ", ".join(f"{100 * e:+.0f}" for e in f["shadow_err"]))
    if len(args) > 1:
        sys.exit("usage: python tools/fa1_sass.py [OUT.csv] | --fit SASS_TRIP.csv | --dram NCU_SASS13.csv"
                 " | --share NCU.csv [NCU.csv ...]")
    t = table()
    if args:
        t.round(3).to_csv(args[0], index=False)
    pd.set_option("display.width", 250)
    cols = ["batch", "heads", "seqlen", "head_dim", "causal", "dq_atomic", *CLASSES, "int",
            "sass_trip", "beyond", "shadow", "model_counts", "model_loop_issue",
            "model_loop_shadow", "model_trip", "ncu_trip"]
    return ("warp instructions per warp and trip of fa1_bwd's inner loop: the SASS by class; "
            "beyond the counts on the chain and in the MMAs' shadow; the model's counts, "
            "loop_issue, loop_shadow and their sum; Nsight Compute's inst_executed / warps / "
            "trips:\n" + t[cols].round(1).to_string(index=False))


if __name__ == "__main__":
    print(main(sys.argv[1:]))
