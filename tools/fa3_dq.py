"""FA3 backward's dQ reduction from committed files. One file: experiments/fa3_bwd/dq_reduce.py's
CSV, TFLOP/s per variant (vector atomics, bulk reduce-add, deterministic) with cuDNN's beside
them, the variants' ratios to the atomics, and whether each variant's dQ accumulator had the same
bits on every run. Two files: a grid of fa3's backward (measured_bwd.csv) and the same grid in
its deterministic mode (`iosim bench --deterministic true`, measured_det.csv): the deterministic
mode's TFLOP/s and its ratio to the default kernel's.
A directory: its ncu_dq_VARIANT_dD.txt files (run.sh's ncudq step), the L2's load from the dQ
reduction per variant. Nsight Compute reports (.txt, dq256.sh's ncu step): the same metrics per
report, the L2's busy time (L2 throughput % x kernel time) and each one's ratio to the last.
Usage: python tools/fa3_dq.py experiments/fa3_bwd/h100/dq/dq_reduce.csv
       python tools/fa3_dq.py experiments/fa3_bwd/h100/dq
       python tools/fa3_dq.py MEASURED_BWD.csv MEASURED_DET.csv
       python tools/fa3_dq.py experiments/fa3_bwd/h100/dq256/ncu_d256_dq0.txt \
           experiments/fa3_bwd/h100/dq256/run2/ncu_d256_dq2.txt"""

import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
KEYS = ["head_dim", "causal", "seqlen_q"]


def _path(p: str) -> Path:
    return Path(p) if Path(p).exists() else ROOT / p


def variants(path: str) -> str:
    df = pd.read_csv(_path(path))
    out = [f"{df.gpu.iloc[0]}; status counts: {df.groupby(['variant', 'status']).size().to_dict()}"]
    ok = df[df.status == "ok"]
    w = ok.pivot_table(index=KEYS, columns="variant", values="tflops")
    for v in ("bulk", "deterministic", "torch_cudnn"):
        if v in w:
            w[f"{v}/atomic"] = w[v] / w["atomic"]
    bits = ok[ok.variant != "torch_cudnn"].groupby("variant").same_bits.agg(
        lambda s: f"{int(s.astype(str).str.lower().eq('true').sum())} of {len(s)}")
    out.append("same dQ accumulator bits on every run: " + "; ".join(f"{k} {v}" for k, v in bits.items()))
    for c in [c for c in w.columns if c.endswith("/atomic")]:
        for d, g in w[c].dropna().groupby(level="head_dim"):
            out.append(f"d={d}: {c} {g.min():.2f}-{g.max():.2f}")
    out.append(w.round(2).to_string())
    return "\n".join(out)


def det_cost(bwd: str, det: str) -> str:
    from iosim.core.rows import read_rows

    a, b = read_rows(_path(bwd)), read_rows(_path(det))
    a = a[(a.schedule == "fa3") & (a.status == "ok") & (a.get("deterministic", "") != "True")]
    b = b[(b.schedule == "fa3") & (b.status == "ok") & (b.deterministic == "True")]
    w = pd.concat([a.groupby(KEYS).tflops.first().rename("fa3"),
                   b.groupby(KEYS).tflops.first().rename("fa3 deterministic")], axis=1)
    w["deterministic/default"] = w["fa3 deterministic"] / w["fa3"]
    out = [f"{len(b)} deterministic rows ok, of {len(read_rows(_path(det)))}"]
    for (d, c), g in w["deterministic/default"].dropna().groupby(level=["head_dim", "causal"]):
        big = g[g.index.get_level_values("seqlen_q") >= 4096]
        out.append(f"d={d} causal={c}: deterministic/default {g.min():.2f}-{g.max():.2f} "
                   f"(N>=4096: {big.min():.2f}-{big.max():.2f})")
    out.append(w.round(2).to_string())
    return "\n".join(out)


NCU = {"gpu__time_duration.sum": "kernel ms",
       "lts__t_requests_op_red.sum": "L2 red requests",
       "lts__t_sectors_op_red.sum": "L2 red sectors",
       "lts__d_atomic_input_cycles_active.avg.pct_of_peak_sustained_elapsed": "L2 atomic unit busy %",
       "lts__throughput.avg.pct_of_peak_sustained_elapsed": "L2 throughput %",
       "dram__throughput.avg.pct_of_peak_sustained_elapsed": "DRAM throughput %",
       "Warp Cycles Per Issued Instruction": "warp cycles per issue"}


def _metrics(text: str) -> dict:
    row = {}
    for m, name in NCU.items():
        hit = re.search(rf"^\s+{re.escape(m)}\s+\S+\s+([\d,.]+)\s*$", text, re.M)
        row[name] = hit.group(1) if hit else "-"
    return row


def reports(*paths: str) -> str:
    """One row per Nsight Compute report: NCU's metrics, the L2's busy time, its ratio to the
    last report's."""
    rows = {}
    for p in paths:
        row = _metrics(_path(p).read_text())
        row["L2 busy ms"] = (float(row["L2 throughput %"]) / 100
                             * float(row["kernel ms"].replace(",", "")))
        full = _path(p).resolve()
        rows[str(full.relative_to(ROOT / "experiments")) if full.is_relative_to(ROOT) else p] = row
    t = pd.DataFrame.from_dict(rows, orient="index").drop(columns=["DRAM throughput %", "warp cycles per issue"])
    t["L2 busy / last"] = t["L2 busy ms"] / t["L2 busy ms"].iloc[-1]
    return "ncu, one launch of fa3's backward main kernel:\n" + t.round(3).T.to_string()


def ncu(folder: str) -> str:
    """One row per ncu_dq_*.txt: the metrics of NCU, as ncu printed them."""
    rows = {}
    for f in sorted(_path(folder).glob("ncu_dq_*_d*.txt")):
        text = f.read_text()
        v, d = re.fullmatch(r"ncu_dq_(\w+)_d(\d+)\.txt", f.name).groups()
        launch = re.search(r"^\s+fa3_bwd\w* \(([\d, ]+)\)x", text, re.M)
        row = {"grid": launch.group(1).replace(" ", "") if launch else ""}
        for m, name in NCU.items():
            hit = re.search(rf"^\s+{re.escape(m)}\s+\S+\s+([\d,.]+)\s*$", text, re.M)
            row[name] = hit.group(1) if hit else "-"
        rows[(v, int(d))] = row
    t = pd.DataFrame.from_dict(rows, orient="index")
    t.index.names = ["variant", "head_dim"]
    return ("ncu, one launch of fa3's backward main kernel, N = 8192, not causal "
            "(dq_reduce.py --once):\n" + t.to_string())


def report(path: str, det: str | None = None, *more: str) -> str:
    """What the command prints (tools/update_readme.py puts it in docs/results.md)."""
    if path.endswith(".txt"):
        return reports(path, *([det] if det else []), *more)
    if det is not None:
        return det_cost(path, det)
    return ncu(path) if _path(path).is_dir() else variants(path)


if __name__ == "__main__":
    print(report(*sys.argv[1:]))
