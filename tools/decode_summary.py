"""Summarise a decode run (experiments/decode/decode_bench.py's CSV): per point our decode
kernel's time beside the best torch SDPA backend of the same run, the K/V bandwidth each reaches
as a fraction of the measured copy bandwidth (KV bytes / copy bandwidth / time), the model's
fresh prediction (calibrated profile; decode rows were never fitted) and its error, and for the
split-count sweep the Plan's choice against the measured best; paged caches against the
contiguous one of the same run.
Usage: python tools/decode_summary.py experiments/decode/h100/decode.csv"""

from __future__ import annotations

import sys

import pandas as pd

from iosim.analysis.measured import decode_run_ms
from iosim.core.hardware import load

PEERS = ["torch_flash", "torch_cudnn", "torch_efficient"]
KEYS = ["batch", "heads", "kv_heads", "seqlen_k"]


def report(path: str) -> str:
    df = pd.read_csv(path)
    ok = df[df.status == "ok"].copy()
    # today's model, not the prediction the run wrote beside its rows
    hw = load("h100")
    ok["time_pred_ms"] = [decode_run_ms(r, hw) if r["impl"] in ("decode", "decode_paged", "fa2", "fa3")
                          else float("nan") for _, r in ok.iterrows()]
    ours = ok[ok.impl == "decode"].set_index(KEYS)
    peers = ok[ok.impl.isin(PEERS)]
    best = peers.loc[peers.groupby(KEYS).time_ms.idxmin()].set_index(KEYS)
    t = pd.DataFrame({
        "splits": ours.splits.astype(int), "decode_ms": ours.time_ms,
        "best_torch": best.impl.str.removeprefix("torch_"), "torch_ms": best.time_ms,
        "torch/decode": best.time_ms / ours.time_ms,
        "decode_bw": ours.kv_bw_fraction, "torch_bw": best.kv_bw_fraction,
        "pred_ms": ours.time_pred_ms, "pred_err_pct": 100 * (ours.time_pred_ms / ours.time_ms - 1),
    }).reset_index()
    lines = [f"copy bandwidth (read + write) {df.copy_bw_bytes_per_s.iloc[0] / 1e12:.2f} TB/s; "
             "bw = KV bytes / copy bandwidth / time",
             t.to_string(index=False, float_format=lambda x: f"{x:.3f}"),
             f"decode >= best torch backend at {(t['torch/decode'] >= 1).sum()} of {len(t)} points; "
             f"model MAPE {t.pred_err_pct.abs().mean():.1f}% (worst {t.pred_err_pct.abs().max():.1f}%)"]
    paged = ok[ok.impl == "decode_paged"]
    if len(paged):
        flat = ours.time_ms
        pg = paged.assign(contiguous_ms=[flat.get(tuple(r[k] for k in KEYS)) for _, r in paged.iterrows()])
        pg = pg.assign(**{"paged/contiguous": pg.time_ms / pg.contiguous_ms,
                          "pred_err_pct": 100 * (pg.time_pred_ms / pg.time_ms - 1)})
        lines.append("paged K/V (pages in a random order), against the contiguous cache of the same run:")
        lines.append(pg[[*KEYS, "page_size", "splits", "time_ms", "contiguous_ms", "paged/contiguous",
                         "kv_bw_fraction", "time_pred_ms", "pred_err_pct"]].astype({"page_size": int, "splits": int})
                     .to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        lines.append(f"paged within {100 * (pg['paged/contiguous'].max() - 1):.1f}% of contiguous at worst; "
                     f"model MAPE {pg.pred_err_pct.abs().mean():.1f}%")
    win = ok[ok.impl.isin(["fa2", "fa3"])]
    if len(win):
        lines.append("sliding window, forward (window -1: causal only):")
        lines.append(win.assign(pred_err_pct=100 * (win.time_pred_ms / win.time_ms - 1))[
            ["impl", "batch", "heads", "seqlen_q", "window", "time_ms", "tflops", "time_pred_ms",
             "pred_err_pct"]].astype({"window": int}).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    sweep = ok[ok.impl == "decode_split_sweep"]
    for key, g in sweep.groupby(KEYS):
        top = g.loc[g.time_ms.idxmin()]
        pick = g[g.chosen.astype(str) == "True"].iloc[0]
        lines.append(f"splits B={key[0]} H={key[1]} KVH={key[2]} Nk={key[3]}: chosen {int(pick.splits)} "
                     f"{pick.time_ms:.4f} ms, measured best {int(top.splits)} {top.time_ms:.4f} ms "
                     f"({100 * (pick.time_ms / top.time_ms - 1):.1f}% slower); "
                     + ", ".join(f"{int(s)}: {m:.4f}" for s, m in zip(g.splits, g.time_ms)))
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(sys.argv[1]))
