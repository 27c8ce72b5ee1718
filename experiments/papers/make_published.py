"""Writes published.csv: the FlashAttention papers' published numbers, one row per number, as
they were read (README.md in this folder says from where and how). Usage, from the repository
root: python experiments/papers/make_published.py

Every TFLOP/s value below is a label printed above a bar (exact to the integer printed) unless
its figure's entry says it was read off the bar's height. time_ms is derived from the TFLOP/s
with FlashAttention's convention (iosim.core.problem.Problem.fa_flops: 4·B·H·N²·d forward,
2.5x that backward, 3.5x forward + backward, halved when causal).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from iosim.core.problem import Problem

# (batch, N) of every figure: 16k tokens (the FA2 README, FA3 paper Sec. 4.1 "Benchmark settings";
# benchmarks/benchmark_flash_attention.py bs_seqlen_vals). FP8 (FA3 paper App. C.2): "512, 1024,
# 2048, 4224, 8448, 16896 ... divisible by 132 (number of SMs in H100 SXM5)", plotted as 4k, 8k,
# 16k; the batches are hopper/benchmark_flash_attention_fp8.py's at 5018ac6a (2024-07-30, the
# in-kernel V transpose the paper describes): [(32, 512), ..., (4, 4224), (2, 8448), (1, 16896)]
BS_N = [(32, 512), (16, 1024), (8, 2048), (4, 4096), (2, 8192), (1, 16384)]
FP8_BS_N = [(32, 512), (16, 1024), (8, 2048), (4, 4224), (2, 8448), (1, 16896)]
H100, A100 = ("h100-sxm5-80gb", "NVIDIA H100 80GB SXM5"), ("a100-sxm4-80gb", "NVIDIA A100 80GB SXM4")
REPO = "flash-attention repository (Dao-AILab) at 0251105a"
FA2_README_A100 = f"FA2 paper Fig. 4 = {REPO} assets/flash2_a100_fwd_bwd_benchmark.png"
FA2_README_H100 = f"FA2 paper Fig. 7 = {REPO} assets/flash2_h100_fwd_bwd_benchmark.png"
FA3_FWD = f"FA3 paper Fig. 5 = {REPO} assets/flash3_fp16_fwd.png"
# the FA3 paper's own PDF (arXiv 2407.08608v2, 12 Jul 2024; the PDF's sha256 3d05ca10...c6cb), its
# text as pdftotext lays it out: each printed bar label at its place; a label is assigned to
# its bar by its column among the group's bars (legend order, left to right)
FA3_PDF = "FA3 paper arXiv 2407.08608v2 PDF (sha256 3d05ca10…c6cb), bar labels in its text"

# (source, figure panel, gpu, direction, dtype, head_dim, causal, {schedule: [TFLOP/s per N]}),
# None where the bar is missing (OOM) or its label cannot be read; a value in READ_OFF was read
# off the bar's height (its label hidden behind the legend).
FIGURES = [
    (FA2_README_A100, "(a) fwd+bwd, no causal, d=64", A100, "fwd+bwd", "fp16", 64, False,
     {"standard": [36, 40, 43, 45, 46, None], "fa1": [91, 92, 104, 108, 110, 110],
      "fa2": [132, 153, 162, 171, 175, 176]}),
    (FA2_README_A100, "(b) fwd+bwd, no causal, d=128", A100, "fwd+bwd", "fp16", 128, False,
     {"standard": [53, 67, 76, 79, 86, None], "fa1": [76, 72, 76, 80, 82, 83],
      "fa2": [151, 173, 187, 196, 201, 203]}),
    (FA2_README_A100, "(c) fwd+bwd, causal, d=64", A100, "fwd+bwd", "fp16", 64, True,
     {"standard": [15, 16, 17, 18, 18, None], "fa1": [58, 70, 77, 87, 92, 97],
      "fa2": [88, 119, 140, 156, 165, 171]}),
    (FA2_README_A100, "(d) fwd+bwd, causal, d=128", A100, "fwd+bwd", "fp16", 128, True,
     {"standard": [23, 28, 32, 32, 34, None], "fa1": [55, 62, 69, 76, 80, 83],
      "fa2": [99, 133, 155, 173, 182, 189]}),
    (FA2_README_H100, "(a) fwd+bwd, no causal, d=64", H100, "fwd+bwd", "fp16", 64, False,
     {"standard": [62, 72, 81, 86, 87, None], "fa1": [157, 159, 161, 161, 166, 168],
      "fa2": [215, 254, 274, 288, 294, 296]}),
    (FA2_README_H100, "(b) fwd+bwd, no causal, d=128", H100, "fwd+bwd", "fp16", 128, False,
     {"standard": [93, 120, 145, 160, 167, None], "fa1": [127, 127, 128, 131, 137, 139],
      "fa2": [248, 294, 320, 326, 335, 338]}),
    (FA2_README_H100, "(c) fwd+bwd, causal, d=64", H100, "fwd+bwd", "fp16", 64, True,
     {"standard": [26, 29, 31, 32, 32, None], "fa1": [104, 123, 136, 138, 149, 156],
      "fa2": [141, 192, 232, 257, 273, 284]}),
    (FA2_README_H100, "(d) fwd+bwd, causal, d=128", H100, "fwd+bwd", "fp16", 128, True,
     {"standard": [40, 50, 57, 61, 63, None], "fa1": [98, 109, 108, 126, 135, 137],
      "fa2": [163, 221, 265, 294, 308, 328]}),
    (FA3_FWD, "(a) fwd, no causal, d=64", H100, "fwd", "fp16", 64, False,
     {"standard": [52, 63, 67, 72, 73, None], "fa2": [282, 306, 318, 321, 322, 324],
      "fa3": [333, 392, 460, 476, 496, 497]}),
    (FA3_FWD, "(b) fwd, causal, d=64", H100, "fwd", "fp16", 64, True,
     {"standard": [16, 18, 18, 18, 18, None], "fa2": [180, 229, 262, 284, 295, 299],
      "fa3": [197, 265, 371, 420, 460, 473]}),
    (FA3_FWD, "(c) fwd, no causal, d=128", H100, "fwd", "fp16", 128, False,
     {"standard": [74, 100, 119, 133, 139, None], "fa2": [309, 350, 362, 368, 370, 370],
      "fa3": [467, 565, 625, 638, 646, 648]}),
    (FA3_FWD, "(d) fwd, causal, d=128", H100, "fwd", "fp16", 128, True,
     {"standard": [26, 31, 34, 35, 35, None], "fa2": [191, 260, 298, 319, 333, 335],
      "fa3": [292, 423, 521, 579, 602, 616]}),
    (FA3_FWD, "(e) fwd, no causal, d=256", H100, "fwd", "fp16", 256, False,
     {"fa2": [275, 313, 321, 323, 324, 326], "fa3": [482, None, 707, 736, 746, 756]}),
    (FA3_FWD, "(f) fwd, causal, d=256", H100, "fwd", "fp16", 256, True,
     {"fa2": [208, 251, 278, 293, 297, 298], "fa3": [286, 427, 537, 612, 628, 642]}),
    (FA3_PDF, "Fig. 6 (a) bwd, no causal, d=64", H100, "bwd", "fp16", 64, False,
     {"standard": [68, 76, 88, 92, 95, None], "fa2": [198, 238, 264, 279, 287, 291],
      "fa3": [272, 363, 422, 453, 472, 474]}),
    (FA3_PDF, "Fig. 6 (b) bwd, no causal, d=128", H100, "bwd", "fp16", 128, False,
     {"standard": [104, 131, 159, 174, 181, None], "fa2": [214, 260, 291, 310, 318, 322],
      "fa3": [316, 424, 501, 542, 559, 561]}),
    # FP8 forward (the inputs in e4m3): Fig. 7 = App. C.2 Fig. 9 (e), (f) (the same labels);
    # N = 4224, 8448, 16896 where the axis says 4k, 8k, 16k (FP8_BS_N)
    (FA3_PDF, "Fig. 7 (a) fwd FP8, no causal, d=256", H100, "fwd", "fp8_e4m3", 256, False,
     {"fa3": [510, 744, 931, 966, 1151, 1171]}),
    (FA3_PDF, "Fig. 7 (b) fwd FP8, causal, d=256", H100, "fwd", "fp8_e4m3", 256, True,
     {"fa3": [329, 521, 703, 856, 960, 1024]}),
    (FA3_PDF, "Fig. 9 (a) fwd FP8, no causal, d=64", H100, "fwd", "fp8_e4m3", 64, False,
     {"fa3": [240, 396, 462, 568, 596, 613]}),
    (FA3_PDF, "Fig. 9 (b) fwd FP8, causal, d=64", H100, "fwd", "fp8_e4m3", 64, True,
     {"fa3": [164, 244, 369, 475, 533, 572]}),
    (FA3_PDF, "Fig. 9 (c) fwd FP8, no causal, d=128", H100, "fwd", "fp8_e4m3", 128, False,
     {"fa3": [348, 596, 733, 918, 974, 1008]}),
    (FA3_PDF, "Fig. 9 (d) fwd FP8, causal, d=128", H100, "fwd", "fp8_e4m3", 128, True,
     {"fa3": [241, 367, 553, 716, 815, 881]}),
]
# (figure, schedule, N) whose label is hidden behind the legend: read off the bar, ±3 TFLOP/s
READ_OFF = {(FA2_README_A100, "(a) fwd+bwd, no causal, d=64", "fa2", 1024),
            (FA2_README_A100, "(b) fwd+bwd, no causal, d=128", "fa2", 512),
            (FA2_README_A100, "(b) fwd+bwd, no causal, d=128", "fa2", 1024)}
# FA3 Fig. 5 (e) fa3 at N = 1k, hidden by the legend in the README's image: its label, 627, is
# in the PDF's text (under the legend; the one label of that group left once FA2's 313 and
# cuDNN's 546, at the group's centre, are placed)
FIG5E_1K = (FA3_PDF + " (the label under the legend)", 627.0)

# FA3 paper Table 2 (Sec. 4.2, a printed table): non-causal FP16 FlashAttention-3, {batch, seqlen,
# nheads, hdim} = {4, 8448, 16, 128}, H100. The two ablated variants are no schedule of the model
# (it has no knob that turns the GEMM-softmax pipelining or the warp specialisation off): their
# rows carry names validate does not know, so it counts them as skipped.
FA3_TABLE2 = "FA3 paper arXiv 2407.08608v2 Table 2 (printed)"
TABLE2 = [("fa3", "FlashAttention-3", 3.538, 661),
          ("fa3_no_gemm_softmax_pipelining", "No GEMM-Softmax Pipelining, Warp-Specialization",
           4.021, 582),
          ("fa3_no_warp_specialization", "GEMM-Softmax Pipelining, No Warp-Specialization",
           4.105, 570)]

# The tiles (BLOCK_M x BLOCK_N x warps) the FA2 library runs, which the FA2 bars of both papers
# timed: csrc/flash_attn/src/flash_fwd_launch_template.h and flash_bwd_launch_template.h at
# v2.0.0 (the FA2 paper) and v2.5.8 (the FA3 paper's "FlashAttention 2.5.8"), the same in both:
# no dropout, an A100 or H100 (sm80 and sm90 are not "sm8x"; 164 and 227 KB of shared memory a
# block, >= 144 KB). d = 256 forward: 128x64x8 only where a block has >= 128 KB and an SM < 192
# KB (A100), else 64x64x4 (H100). `iosim validate` predicts each pass with them (ran_tiles).
FA2_LIB_TILES = {("fwd", 64): "128x128x4", ("bwd", 64): "128x128x8", ("fwd", 128): "128x64x4",
                 ("bwd", 128): "64x128x8"}


def fa2_lib_tiles(hw: tuple[str, str], direction: str, d: int) -> str:
    """ran_tiles of a published FA2 row: "fwd BMxBNxW; bwd BMxBNxW" (the passes it times)."""
    passes = ("fwd", "bwd") if direction == "fwd+bwd" else (direction,)
    tiles = FA2_LIB_TILES | {("fwd", 256): "128x64x8" if hw == A100 else "64x64x4"}
    return "; ".join(f"{x} {tiles[(x, d)]}" for x in passes)


def ran(sched: str, hw: tuple[str, str], direction: str, d: int) -> str | None:
    """ran_tiles of a published row: the FA2 library's tiles (fa2); FA3's backward bars ran
    the paper's Algorithm 3 (App. B.1), whose consumers leave dQ in shared memory for a
    dQ-writer warp that adds it to global memory ("bwd dq-writer", at the Plan's own tiles)."""
    if sched == "fa2":
        return fa2_lib_tiles(hw, direction, d)
    return "bwd dq-writer" if (sched, direction) == ("fa3", "bwd") else None


# FA1 paper (arXiv 2205.14135) Fig. 2 left, a printed table: GPT-2 medium attention, forward +
# backward, N = 1024, d = 64, 16 heads, batch 64, A100 (fp16 and causal: see README.md).
FA1_FIG2 = "FA1 paper (arXiv 2205.14135) Fig. 2 left (table)"
FA1_TABLE = {"standard": {"GFLOPs": 66.6, "HBM R/W (GB)": 40.3, "Runtime (ms)": 41.7},
             "fa1": {"GFLOPs": 75.2, "HBM R/W (GB)": 4.4, "Runtime (ms)": 7.3}}


def fa_flops(direction: str, batch: int, heads: int, n: int, d: int, dtype: str,
             causal: bool) -> float:
    p = Problem(batch=batch, heads=heads, seqlen_q=n, head_dim=d, dtype=dtype, causal=causal,
                direction="fwd" if direction == "fwd+bwd" else direction)
    return p.fa_flops() * (3.5 if direction == "fwd+bwd" else 1.0)


def base(hw: tuple[str, str], schedule: str, direction: str, batch: int, heads: int, n: int,
         d: int, dtype: str, causal: bool) -> dict:
    return {"hw": hw[0], "schedule": schedule, "direction": direction, "batch": batch,
            "heads": heads, "kv_heads": heads, "seqlen_q": n, "seqlen_k": n, "head_dim": d,
            "dtype": dtype, "causal": causal, "status": "ok", "gpu_name": hw[1]}


def figure_rows() -> list[dict]:
    rows = []
    for source, fig, hw, direction, dtype, d, causal, series in FIGURES:
        for sched, values in series.items():
            if (fig, sched) == ("(e) fwd, no causal, d=256", "fa3"):
                values = [FIG5E_1K[1] if v is None else v for v in values]
            pairs = FP8_BS_N if dtype == "fp8_e4m3" else BS_N
            for (b, n), v in zip(pairs, values, strict=True):
                if v is None:
                    continue
                h = 2048 // d  # hidden 2048
                hidden = (fig, sched, n) == ("(e) fwd, no causal, d=256", "fa3", 1024)
                src = FIG5E_1K[0] if hidden else source
                off = (source, fig, sched, n) in READ_OFF
                t = fa_flops(direction, b, h, n, d, dtype, causal) / (v * 1e12) * 1e3
                rows.append(base(hw, sched, direction, b, h, n, d, dtype, causal) | {
                    "time_ms": t, "tflops": float(v), "paper": src[:3], "source": src,
                    "figure": fig,
                    "read_off": off, "precision": 3.0 if off else 0.5,
                    "published_value": float(v), "published_unit": "TFLOP/s",
                    "ran_tiles": ran(sched, hw, direction, d)})
    return rows


def fa1_rows() -> list[dict]:
    rows = []
    for sched, numbers in FA1_TABLE.items():
        ms = numbers["Runtime (ms)"]
        tflops = fa_flops("fwd+bwd", 64, 16, 1024, 64, "fp16", True) / (ms * 1e9)
        for what, v in numbers.items():
            unit = what[what.index("(") + 1:-1] if "(" in what else what
            rows.append(base(A100, sched, "fwd+bwd", 64, 16, 1024, 64, "fp16", True) | {
                # only the runtime row is a time; the others carry their number alone
                "time_ms": ms if unit == "ms" else None,
                "tflops": tflops if unit == "ms" else None,
                "paper": "FA1", "source": FA1_FIG2, "figure": f"GPT-2 medium: {what}", "read_off": False,
                "precision": 0.05, "published_value": v, "published_unit": unit})
    return rows


def table2_rows() -> list[dict]:
    """FA3 Table 2: a printed time (ms) and TFLOP/s per configuration; the row's time is the
    printed one (4·4·16·8448²·128 FLOPs over 3.538 ms is the printed 661 TFLOP/s)."""
    rows = []
    for sched, config, ms, tflops in TABLE2:
        rows.append(base(H100, sched, "fwd", 4, 16, 8448, 128, "fp16", False) | {
            "time_ms": ms, "tflops": float(tflops), "paper": "FA3", "source": FA3_TABLE2,
            "figure": f"Table 2: {config}", "read_off": False, "precision": 0.0005,
            "published_value": ms, "published_unit": "ms"})
    return rows


def main() -> None:
    out = Path(__file__).with_name("published.csv")
    rows = fa1_rows() + figure_rows() + table2_rows()
    pd.DataFrame(rows).to_csv(out, index=False, float_format="%.6g")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
