"""What experiments/decode/state.sh measured (experiments/decode/state_probe.py and `iosim
bench` sequences), from a folder of its files:
  pages_state.csv: paged over contiguous time in one process (median of each case's timings),
    per shape, GPU state (cold, hot: after 1.5 s of copies, steady) and launch mode (nq: issued,
    the bench's time_ms; q: queued ahead), with the SM clock NVML read while they ran;
  seq_alone.csv, seq_after32.csv: `iosim bench` at batch 1, 128k keys, each page size over the
    contiguous cache of the same file, alone in a process and after batch-32 points;
  b32_ab.csv, confirm_ab.csv: each kernel variant's time over cuDNN's in the same process
    (medians of three interleaved rounds), issued and queued;
  alloc.csv: batch 1, 128k, each cache placement's time (ms) per round, issued and queued;
  alloc_ab.csv: per placement, each variant's queued time (median of the rounds) over the
    Plan's kernel on the contiguous cache;
  after32_ab.csv: each variant's queued time (ms) fresh, then in each round after a batch-32
    paged point;
  bench_settle*.csv: the decode grid (`iosim bench`) with each --settle, the paged rows' queued
    time over the contiguous one of the same file.
Usage: python tools/decode_state.py experiments/decode/h100/state11 [OTHER_FOLDER ...]"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd


def fmt(df: pd.DataFrame) -> str:
    return df.to_string(float_format=lambda x: f"{x:.4g}")


def pages(d: Path) -> list[str]:
    p = pd.read_csv(d / "pages_state.csv")
    med = p.groupby(["batch", "seqlen_k", "state", "mode", "case"]).ms.median().unstack("case")
    ratio = med.drop(columns="contiguous").div(med.contiguous, axis=0)
    ratio["sm_mhz_min"] = p.groupby(["batch", "seqlen_k", "state", "mode"]).sm_mhz_min.min()
    return [f"{d.name}/pages_state.csv: paged over contiguous, one process (p16a, p16b: two "
            "caches of 16-token pages)", fmt(ratio)]


def seq(d: Path) -> list[str]:
    out = []
    for name in ("seq_alone.csv", "seq_after32.csv"):
        s = pd.read_csv(d / name)
        s = s[(s.schedule == "decode") & (s.status == "ok") & (s.batch == 1)]
        flat = s[s.page_size.isna()].iloc[0]
        s = s[s.page_size.notna()]
        out.append(fmt(pd.DataFrame({
            "page_size": s.page_size.astype(int).values,
            "paged_q_ms": s.time_queued_ms.values,
            "contiguous_q_ms": flat.time_queued_ms,
            "paged/contiguous": (s.time_queued_ms / flat.time_queued_ms).values,
            "issued": (s.time_ms / flat.time_ms).values}).set_index("page_size"))
            .replace("\n", "\n  ").join([f"{d.name}/{name} (batch 1, 128k, queued):\n  ", ""]))
    return out


def ab(d: Path, name: str) -> list[str]:
    a = pd.read_csv(d / name)
    med = a.groupby(["batch", "seqlen_k", "mode", "case"]).ms.median().unstack("case")
    return [f"{d.name}/{name}: time over cuDNN's (median of 3 rounds)",
            fmt(med.div(med.torch_cudnn, axis=0).drop(columns="torch_cudnn").T)]


def alloc(d: Path) -> list[str]:
    a = pd.read_csv(d / "alloc.csv")
    a = a[a.status == "ok"]
    return [f"{d.name}/alloc.csv: batch 1, 128k, ms by placement, round and launch mode",
            fmt(a.pivot_table(index="case", columns=["round", "mode"], values="ms", sort=False))]


def alloc_ab(d: Path) -> list[str]:
    a = pd.read_csv(d / "alloc_ab.csv")
    a = a[(a.status == "ok") & (a["mode"] == "q")]
    med = a.groupby(["where", "case"], sort=False).ms.median().unstack("case")
    flat = med.loc["contig", "default"]
    return [f"{d.name}/alloc_ab.csv: batch 1, 128k, queued, over the Plan's kernel on the "
            f"contiguous cache ({flat:.4f} ms)", fmt(med[list(dict.fromkeys(a.case))] / flat)]


def after32(d: Path) -> list[str]:
    a = pd.read_csv(d / "after32_ab.csv")
    a = a[a["mode"] == "q"]
    return [f"{d.name}/after32_ab.csv: batch 1, 128k, queued ms, fresh then after a batch-32 "
            "paged point", fmt(a.pivot_table(index=["where", "case"], columns=["state", "round"],
                                             values="ms", sort=False))]


def settles(d: Path) -> list[str]:
    cols = {}
    for f in sorted(d.glob("bench_settle*.csv")):
        g = pd.read_csv(f)
        g = g[(g.schedule == "decode") & (g.status == "ok")]
        keys = ["batch", "seqlen_k"]
        flat = g[g.page_size.isna()].set_index(keys).time_queued_ms
        paged = g[g.page_size.notna()].set_index(keys + ["page_size"]).time_queued_ms
        cols[f"settle {g.settle_s.iloc[0]:g} s"] = paged / flat.reindex(paged.index.droplevel(2)).values
    t = pd.DataFrame(cols)
    t.index = t.index.set_levels(t.index.levels[2].astype(int), level=2)
    worst = ", ".join(f"{c}: {t[c].max():.3f}" for c in t)
    return [f"{d.name}/bench_settle*.csv: the grid, paged over contiguous (queued) with each idle "
            f"before a problem; worst {worst}", fmt(t.unstack("page_size"))]


def report(*folders: str) -> str:
    out = []
    for f in map(Path, folders):
        if (f / "pages_state.csv").is_file():
            out += pages(f)
        if (f / "seq_alone.csv").is_file():
            out += seq(f)
        for name in ("b32_ab.csv", "confirm_ab.csv"):
            if (f / name).is_file():
                out += ab(f, name)
        for name, show in (("alloc.csv", alloc), ("alloc_ab.csv", alloc_ab),
                           ("after32_ab.csv", after32), ("bench_settle0.csv", settles)):
            if (f / name).is_file():
                out += show(f)
    return "\n".join(out)


if __name__ == "__main__":
    print(report(*sys.argv[1:]))
