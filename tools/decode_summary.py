"""Summarise a decode run (`iosim bench --schedule decode` rows, experiments/decode/run.sh): per
point our decode kernel's time beside the best torch SDPA backend and compiled FlexAttention of
the same run, the K/V bandwidth each reaches as a fraction of the copy bandwidth measured in the
same run (floor_ratio: KV bytes / copy bandwidth / time), the model's fresh prediction
(the GPU's calibrated profile, today's model; decode rows were never fitted) and its error; the paged
cache against the contiguous one of the same run; the Plan's split count against the best of
the forced ones (--kv-splits); and every row that did not pass, with its status.
Also reads the older H100 run's CSV (experiments/decode/h100/decode.csv, decode_bench.py's rows).
Usage: python tools/decode_summary.py experiments/decode/h200/bench.csv [experiments/decode/h200/variants.csv]"""

from __future__ import annotations

import sys

import pandas as pd

from iosim.analysis.measured import decode_run_ms
from iosim.core.hardware import load
from iosim.gpu.bench import profile_for

SDPA = ["torch_flash", "torch_cudnn", "torch_efficient", "torch_math"]
FLEX = "torch_flex"
KEYS = ["batch", "heads", "kv_heads", "seqlen_k"]


def fmt(df: pd.DataFrame) -> str:
    return df.to_string(index=False, float_format=lambda x: f"{x:.3f}")


def split_sweep(ok: pd.DataFrame, flat: pd.DataFrame) -> list[str]:
    """The Plan's split count (the grid's row) against the best measured (forced or not), as
    timed and (q) with the launches queued ahead."""
    forced = ok[(ok.schedule == "decode") & ok.kv_splits.notna() & ok.page_size.isna()]
    lines = []
    for k, g in forced.groupby(KEYS):
        if k not in flat.index:
            continue
        for col, tag in (("time_ms", ""), ("time_queued_ms", " (q)")):
            if col not in g or g[col].isna().all():
                continue
            pick = flat.loc[k]
            both = pd.concat([g[["splits", col]], pd.DataFrame([pick[["splits", col]]])],
                             ignore_index=True)
            top = both.loc[both[col].idxmin()]
            lines.append(f"splits{tag} B={k[0]} H={k[1]} KVH={k[2]} Nk={k[3]}: the Plan's "
                         f"{int(pick.splits)} {pick[col]:.4f} ms, measured best {int(top.splits)} "
                         f"{top[col]:.4f} ms ({100 * (pick[col] / top[col] - 1):.1f}% slower); forced: "
                         + ", ".join(f"{int(s)}: {m:.4f}" for s, m in sorted(zip(g.splits, g[col]))))
    return lines


def variants(path: str) -> list[str]:
    """Other tiles and split counts at batch 1 (run.sh's variants.csv): the bandwidth of the
    step (launches queued ahead) and of the split kernel alone, the combine's time."""
    v = pd.read_csv(path)
    t = v.assign(bw_q=v.hbm_floor_ms / v.time_queued_ms, split_kernel_bw=v.hbm_floor_ms / v.attn_ms,
                 forced=v.kv_splits.notna())[
        ["variant", "seqlen_k", "block_n", "warps", "stages", "splits", "forced", "time_queued_ms",
         "attn_ms", "other_kernels_ms", "bw_q", "split_kernel_bw"]]
    return [f"batch 1, other tiles and split counts ({path.rsplit('/', 1)[-1]}; bw_q: the step, "
            "launches queued ahead; split_kernel_bw: the split kernel alone):",
            fmt(t.sort_values(["seqlen_k", "variant", "splits"]))]


def from_decode_bench(df: pd.DataFrame) -> pd.DataFrame:
    """The older run's rows (experiments/decode/decode_bench.py, removed since; its `impl` names
    decode, decode_paged, decode_split_sweep, the torch backends, fa2 and fa3) in bench's columns."""
    if "impl" not in df:
        return df
    sweep = df.impl == "decode_split_sweep"
    return df.assign(schedule=df.impl.where(~df.impl.str.startswith("decode"), "decode"),
                     kv_splits=df.splits.where(sweep), floor_ratio=df.kv_bw_fraction)


def forwards(ok: pd.DataFrame) -> list[str]:
    """fa2 and fa3 forward rows (the sliding windows beside causal), against today's model."""
    fw = ok[ok.schedule.isin(["fa2", "fa3"])]
    if not len(fw):
        return []
    hw = load(profile_for(fw.gpu_name.iloc[0]).split("-")[0])
    fw = fw.assign(pred_ms=[decode_run_ms(r, hw) for _, r in fw.iterrows()],
                   window=fw.window.fillna(-1).astype(int))
    fw = fw.assign(pred_err_pct=100 * (fw.pred_ms / fw.time_ms - 1))
    return ["fa2, fa3 forward (window -1: causal only):",
            fmt(fw[["schedule", "batch", "heads", "seqlen_q", "window", "time_ms", "tflops",
                    "pred_ms", "pred_err_pct"]])]


def report(path: str, variants_path: str | None = None) -> str:
    df = from_decode_bench(pd.read_csv(path))
    for c in ("page_size", "kv_splits"):
        if c not in df:
            df[c] = float("nan")
    ok = df[df.status == "ok"].copy()
    gpu = df.gpu_name.dropna().iloc[0] if "gpu_name" in df and df.gpu_name.notna().any() else "H100"
    hw = load(profile_for(gpu).split("-")[0])  # today's model, the calibrated profile of the GPU
    ours = ok[(ok.schedule == "decode") & ok.kv_splits.isna()].copy()
    ours["pred_ms"] = [decode_run_ms(r, hw) for _, r in ours.iterrows()]
    flat, paged = (ours[ours.page_size.isna()].set_index(KEYS),
                   ours[ours.page_size.notna()].set_index(KEYS))
    sdpa = ok[ok.schedule.isin(SDPA) & ok.page_size.isna()]
    best = sdpa.loc[sdpa.groupby(KEYS).time_ms.idxmin()].set_index(KEYS)
    flex = ok[ok.schedule == FLEX]
    flex_flat, flex_paged = (flex[flex.page_size.isna()].set_index(KEYS),
                             flex[flex.page_size.notna()].set_index(KEYS))
    t = pd.DataFrame({
        "splits": flat.splits.astype(int), "decode_ms": flat.time_ms, "decode_bw": flat.floor_ratio,
        "best_torch": best.schedule.str.removeprefix("torch_"), "torch_ms": best.time_ms,
        "torch/decode": best.time_ms / flat.time_ms, "torch_bw": best.floor_ratio,
        "flex_ms": flex_flat.time_ms, "flex/decode": flex_flat.time_ms / flat.time_ms,
        "flex_bw": flex_flat.floor_ratio,
        "pred_ms": flat.pred_ms, "pred_err_pct": 100 * (flat.pred_ms / flat.time_ms - 1),
    }).reset_index().dropna(axis=1, how="all")
    # the same rows timed with their launches queued ahead (no host launch cost), if they were
    q = pd.DataFrame({
        "decode_q_ms": flat.get("time_queued_ms"), "decode_q_bw": flat.get("floor_ratio_queued"),
        "comb_ms": flat.get("other_kernels_ms"),
        "torch_q_bw": sdpa.groupby(KEYS).floor_ratio_queued.max() if "floor_ratio_queued" in sdpa else None,
        "torch_q/decode_q": sdpa.groupby(KEYS).time_queued_ms.min() / flat.time_queued_ms
        if "time_queued_ms" in sdpa else None,
        "flex_q_bw": flex_flat.get("floor_ratio_queued"),
    }, index=flat.index).reset_index().dropna(axis=1, how="all")
    # how the L2 was flushed before each repetition (iosim bench --flush; runs before it: write)
    flush = ", ".join(sorted(df.flush.dropna().unique())) if "flush" in df else "write"
    lines = [f"{gpu}; copy bandwidth (read + write) {df.copy_bw_bytes_per_s.max() / 1e12:.2f} TB/s; "
             f"bw = KV bytes / copy bandwidth / time (floor_ratio); L2 flush: {flush}",
             "contiguous K/V cache:", fmt(t),
             f"decode >= best torch SDPA backend at {(t['torch/decode'] >= 1).sum()} of "
             f"{t['torch/decode'].notna().sum()} points"
             + (f", >= FlexAttention at {(t['flex/decode'] >= 1).sum()} of "
                f"{t['flex/decode'].notna().sum()}" if "flex/decode" in t else "") + "; model MAPE "
             f"{t.pred_err_pct.abs().mean():.1f}% (worst {t.pred_err_pct.abs().max():.1f}%)"]
    if q.drop(columns=KEYS).notna().any().any():
        lines += ["timed with the launches queued ahead of the start event (q: the host's launch "
                  "cost left out" + ("; comb_ms: the combine kernel alone" if "comb_ms" in q else "")
                  + "):", fmt(q)]
    if len(paged):
        pg = pd.DataFrame({
            "page_size": paged.page_size.astype(int), "splits": paged.splits.astype(int),
            "paged_ms": paged.time_ms, "contiguous_ms": flat.time_ms.reindex(paged.index),
            "paged/contiguous": paged.time_ms / flat.time_ms.reindex(paged.index),
            "q": paged.get("time_queued_ms", pd.Series(dtype=float)).reindex(paged.index)
            / flat.get("time_queued_ms", pd.Series(dtype=float)).reindex(paged.index),
            "paged_bw": paged.floor_ratio, "flex_paged_ms": flex_paged.time_ms.reindex(paged.index),
            "flex/decode": flex_paged.time_ms.reindex(paged.index) / paged.time_ms,
            "pred_ms": paged.pred_ms, "pred_err_pct": 100 * (paged.pred_ms / paged.time_ms - 1),
        }).reset_index().dropna(axis=1, how="all")
        lines += ["paged K/V cache (pages in a random order; torch SDPA takes none), against the "
                  "contiguous one of the same run:", fmt(pg),
                  f"paged within {100 * (pg['paged/contiguous'].max() - 1):.1f}% of contiguous at "
                  f"worst" + (f" ({100 * (pg.q.max() - 1):.1f}% with the launches queued, q)" if "q" in pg else "")
                  + f"; model MAPE {pg.pred_err_pct.abs().mean():.1f}%"]
    lines += forwards(ok)
    lines += split_sweep(ok, flat)
    if variants_path is not None:
        lines += variants(variants_path)
    bad = df[(df.status != "ok") & ~df.status.astype(str).str.startswith("unsupported: torch SDPA takes no paged")]
    if len(bad):
        lines.append("rows that did not pass:")
        bad = bad.assign(page_size=bad.page_size.fillna(-1).astype(int),
                         status=bad.status.astype(str).str.slice(0, 90))
        for (sched, status), g in bad.groupby(["schedule", "status"]):
            pts = ", ".join(f"B={r.batch} Nk={r.seqlen_k}" + (f" P={r.page_size}" if r.page_size > 0 else "")
                            for r in g.itertuples())
            lines.append(f"  {sched}: {status} ({pts})")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(*sys.argv[1:3]))
