"""Kernel variants timed beside torch's backward in one run (experiments/fa3_bwd/variants.py's CSV):
per shape, each variant's best of its timed runs in TFLOP/s, its ratio to torch's cuDNN and flash
backward (time of the peer / time of the variant) and to the first variant (`base`). Given a
run.log of experiments/fa3_bwd/run.sh instead, the ratio table that its dqwarp steps printed
(what is left where the CSV did not come back from the GPU machine).
Usage: python tools/variant_ratios.py experiments/fa3_bwd/h100/speed10/run1/variants_dq.csv
       python tools/variant_ratios.py experiments/fa3_bwd/h100/speed10/run2/run.log"""

import sys

import pandas as pd

KEY = ["head_dim", "seqlen_q", "causal"]


def from_log(path: str) -> str:
    lines, out, on = open(path).read().splitlines(), [], False
    for line in lines:
        on = on or line.startswith("variant ")
        if on and (line.startswith("60 rows") or line.startswith("elapsed") or "rows in" in line):
            break
        if on:
            out.append(line)
    return "\n".join(out)


def report(path: str) -> str:
    if path.endswith(".log"):
        return from_log(path)
    d = pd.read_csv(path)
    if (d.status != "ok").any():
        return f"not all rows ok: {d[d.status != 'ok'][KEY + ['variant', 'status']].to_string()}"
    ms = d.groupby(KEY + ["variant"]).time_ms.min().unstack()
    tf = d.groupby(KEY + ["variant"]).tflops.max().unstack()
    ours = [v for v in dict.fromkeys(d.variant) if not v.startswith("torch")]
    out = tf[ours].round(1)
    for v in ours:
        out[f"{v}/cudnn"] = (ms["torch_cudnn"] / ms[v]).round(3)
    for v in ours:
        out[f"{v}/flash"] = (ms["torch_flash"] / ms[v]).round(3)
    for v in ours[1:]:
        out[f"{v}/{ours[0]}"] = (ms[ours[0]] / ms[v]).round(3)
    runs = d[d.variant == ours[0]].groupby(KEY).size().max()
    return (f"TFLOP/s: best of {runs} runs each; ratios: time of the peer (or {ours[0]}) / time of "
            f"the variant\n" + out.to_string())


if __name__ == "__main__":
    print(report(sys.argv[1]))
