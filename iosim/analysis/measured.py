"""Summaries of committed measurements (experiments/fwd_grid/<gpu>/measured.csv) for people."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from iosim.core.rows import read_rows

OURS = ["naive", "fa1", "fa2"]
PEERS = ["torch_flash", "torch_cudnn"]


def ratios(df: pd.DataFrame, ours: tuple[str, ...] = ("fa2",)) -> pd.DataFrame:
    """TFLOP/s per (head_dim, causal, N) for our kernels and torch's, and each of `ours`'s ratio
    to the flash and cuDNN backends measured in the same run."""
    ok = df[df.status == "ok"]
    wide = ok.pivot_table(index=["head_dim", "causal", "seqlen_q"], columns="schedule",
                          values="tflops", aggfunc="last")
    for s in ours:
        for peer in PEERS:
            if s in wide and peer in wide:
                wide[f"{s}/{peer.removeprefix('torch_')}"] = wide[s] / wide[peer]
    if "naive" in ok.schedule.values and "floor_ratio" in ok:
        floor = ok[ok.schedule == "naive"].set_index(["head_dim", "causal", "seqlen_q"]).floor_ratio
        wide["naive/HBM floor"] = floor
    return wide


def readme_table(data_dir: Path) -> str:
    parts = []
    for csv in sorted(Path(data_dir).glob("*/measured.csv")):
        df = read_rows(csv)
        gpu = df.gpu_name.dropna().iloc[0] if "gpu_name" in df else csv.parent.name
        w = ratios(df)
        cols = [c for c in OURS + PEERS if c in w] + [c for c in w if "/" in c]
        head = "| d | causal | N | " + " | ".join(cols) + " |"
        lines = [f"{gpu} ({csv.relative_to(Path(data_dir).parent.parent)}), bf16, batch = 16384/N, "
                 "heads = 2048/d; TFLOP/s (FlashAttention convention) and ratios:", "",
                 head, "|" + "---|" * (3 + len(cols))]
        for (d, c, n), r in w.iterrows():
            vals = [("" if pd.isna(r[k]) else f"{r[k]:.2f}" if "/" in k else f"{r[k]:.0f}")
                    for k in cols]
            lines.append(f"| {d} | {'yes' if c else 'no'} | {n} | " + " | ".join(vals) + " |")
        parts.append("\n".join(lines))
    return "\n\n".join(parts) or "(no measurements committed yet)"


def decode_run_ms(r, hw) -> float:
    """Today's model's time (ms) for one measured row of a decode run (`iosim bench --schedule
    decode`, with the split count it ran: `kv_splits` if forced, else `splits`; and the older
    experiments/decode/decode_bench.py rows, whose `impl` names decode, decode_paged, fa2, fa3),
    re-predicted on `hw`."""
    import numpy as np

    from iosim.core.problem import Problem
    from iosim.core.rows import measured_page_ahead
    from iosim.model import memory, timing
    from iosim.schedules import Tiles, plan

    def num(c):
        v = r.get(c, np.nan)
        return None if pd.isna(v) or v < 0 else int(v)

    if "impl" in r and pd.notna(r["impl"]):  # decode_bench.py's rows
        schedule = "decode" if r["impl"].startswith("decode") else r["impl"]
        causal, align = schedule != "decode", "bottom-right"
    else:
        schedule, causal, align = r["schedule"], str(r["causal"]) == "True", r["causal_align"]
    p = Problem(batch=int(r["batch"]), heads=int(r["heads"]), kv_heads=int(r["kv_heads"]),
                seqlen_q=int(r["seqlen_q"]), seqlen_k=int(r["seqlen_k"]),
                head_dim=int(r["head_dim"]), causal=causal, causal_align=align,
                window=num("window"), page_size=num("page_size"))
    # the split count the row ran: forced, or the Plan's of its day (`splits`)
    ran = num("kv_splits") or num("splits")
    # and the paged gather it ran (rows without `page_ahead`: the earlier one)
    pl = plan(schedule, p, hw, Tiles(kv_splits=ran, page_ahead=measured_page_ahead(r))
              if schedule == "decode" else Tiles())
    # rows run before the combine was fused (decode.cu combine_last) ran it as a kernel of its
    # own (their `kernels` column says how many the Plan had): each launch more costs the
    # profile's launch overhead (the combine's own work, a few KB a row, is the fused one's)
    ran_kernels = num("kernels") if "impl" not in r or pd.isna(r["impl"]) else 1 + ((ran or 1) > 1)
    extra = max(0, (ran_kernels or 0) - len(pl.kernels)) if schedule == "decode" else 0
    return 1e3 * (sum(t.seconds for t in timing.predict(pl, hw, memory.estimate(pl, hw)))
                  + extra * hw.launch_overhead_s)
