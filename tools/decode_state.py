"""What experiments/decode/state.sh measured (experiments/decode/state_probe.py and `iosim
bench` sequences), from a folder of its files:
  pages_state.csv: paged over contiguous time in one process (median of each case's timings),
    per shape, GPU state (cold, hot: after 1.5 s of copies, steady) and launch mode (nq: issued,
    the bench's time_ms; q: queued ahead), with the SM clock NVML read while they ran;
  seq_alone.csv, seq_after32.csv: `iosim bench` at batch 1, 128k keys, each page size over the
    contiguous cache of the same file, alone in a process and after batch-32 points;
  b32_ab.csv, confirm_ab.csv: each kernel variant's time over cuDNN's in the same process
    (medians of three interleaved rounds), issued and queued.
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
    return "\n".join(out)


if __name__ == "__main__":
    print(report(*sys.argv[1:]))
