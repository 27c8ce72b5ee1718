"""What the L2 flush before each timed repetition costs a decode step, and the paged caches'
page sizes beside the contiguous cache (experiments/decode/fused.sh's files in one folder):
  flush_probe.csv: a copy and read-only reductions (amax) after a zero-fill of twice the L2
    (`write`: the L2 left full of dirty lines) and after a read of it (`read`): the write flush's
    extra time (write - read) and the bytes it moves at the copy bandwidth;
  repeat_read.csv, repeat_write.csv: our decode step at the same points after either flush,
    launches queued ahead: the same extra time;
  stages.csv: paged caches (16, 64, 256 tokens, pages in a random order) over the contiguous one,
    launches queued ahead, at the default ring (3 stages) and deeper ones (5, 6).
Usage: python tools/decode_flush.py experiments/decode/h100/fused"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

KEYS = ["batch", "seqlen_k"]


def fmt(df: pd.DataFrame) -> str:
    return df.to_string(index=False, float_format=lambda x: f"{x:.4g}")


def probe(d: Path) -> list[str]:
    p = pd.read_csv(d / "flush_probe.csv")
    t = p.pivot_table(index=["op", "bytes"], columns="flush", values="ms").reset_index()
    copy_bw = p[(p.op == "copy") & (p.flush == "read")].bytes_per_s.iloc[0]
    t = t.assign(MiB=t.bytes / 2**20, extra_us=1e3 * (t.write - t.read))
    t["extra_MB_at_copy_bw"] = t.extra_us * 1e-6 * copy_bw / 1e6
    return [f"{p.gpu_name.iloc[0]}, L2 {p.l2_bytes.iloc[0] / 1e6:.1f} MB: a copy (MiB: read + "
            "write) and read-only reductions, ms after each flush, the write flush's extra:",
            fmt(t[["op", "MiB", "read", "write", "extra_us", "extra_MB_at_copy_bw"]])]


def repeat(d: Path) -> list[str]:
    r, w = (pd.read_csv(d / f"repeat_{f}.csv").set_index(KEYS) for f in ("read", "write"))
    t = pd.DataFrame({"splits": r.splits.astype(int), "read_q_ms": r.time_queued_ms,
                      "write_q_ms": w.time_queued_ms,
                      "extra_us": 1e3 * (w.time_queued_ms - r.time_queued_ms),
                      "bw_read": r.floor_ratio_queued, "bw_write": w.floor_ratio_queued})
    return ["decode (GQA 32/8, d = 128, bf16), launches queued ahead, after each flush:",
            fmt(t.reset_index())]


def stages(d: Path) -> list[str]:
    s = pd.read_csv(d / "stages.csv")
    s = s[(s.status == "ok") & (s.schedule == "decode")]
    flat = s[s.page_size.isna()].set_index([*KEYS, "stages_run"]).time_queued_ms
    paged = s[s.page_size.notna()].assign(page=lambda x: x.page_size.astype(int))
    paged = paged.assign(ratio=[r.time_queued_ms / flat[(r.batch, r.seqlen_k, r.stages_run)]
                                for r in paged.itertuples()])
    t = paged.pivot_table(index=[*KEYS, "page"], columns="stages_run", values="ratio")
    t.columns = [f"stages{c}" for c in t.columns]
    bw = s[s.page_size.isna()].pivot_table(index=KEYS, columns="stages_run", values="floor_ratio_queued")
    bw.columns = [f"stages{c}" for c in bw.columns]
    return ["paged over contiguous, launches queued ahead, by ring depth (stages):",
            fmt(t.reset_index()), "contiguous cache's bandwidth (over the copy's) by ring depth:",
            fmt(bw.reset_index())]


def report(folder: str) -> str:
    d = Path(folder)
    return "\n".join(probe(d) + repeat(d) + stages(d))


if __name__ == "__main__":
    print(report(sys.argv[1]))
