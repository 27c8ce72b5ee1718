"""Are a change's predictions the same as before it? Sweeps over grids that reach every
schedule, both directions, three GPUs, decode (contiguous and paged K/V, GQA), sliding
windows, fp8 and tile knobs, and predict_many / predict_rows, saved before a change and
compared after: counts and names exactly, times to 1e-9 relative (and how many floats are not
bit-identical).

    PYTHONPATH=<tree before> python tools/sweep_exactness.py save /tmp/before.pkl
    PYTHONPATH=<tree after>  python tools/sweep_exactness.py check /tmp/before.pkl
"""

from __future__ import annotations

import argparse
import math
import pickle

import iosim
from iosim.analysis import predict as P
from iosim.analysis import sweep
from iosim.core.hardware import load

GRIDS = [
    {"seqlen": "256..16384", "head_dim": "64,128,256", "causal": "both", "batch": "1,3,8",
     "heads": "8,24", "schedule": "all", "direction": "both", "hw": "h100,h200,a100"},
    {"seqlen": "1,4,16", "seqlen_k": "1024,8192,65536", "head_dim": "64,128", "batch": "1,16",
     "heads": "32", "kv_heads": "8,32", "schedule": "decode", "direction": "fwd", "hw": "h100,a100",
     "page_size": "16,256"},
    {"seqlen": "1,8", "seqlen_k": "4096,100000", "head_dim": "128", "batch": "1,64", "heads": "32",
     "kv_heads": "4", "schedule": "naive,standard,fa1,fa2,fa3,decode", "direction": "fwd",
     "hw": "h100,h200"},
    {"seqlen": "1000,4096,9000", "head_dim": "64,128", "causal": "both", "window": "256,1024",
     "batch": "2,5", "heads": "16", "schedule": "all", "direction": "fwd", "hw": "h100,a100"},
    {"seqlen": "1000,4096", "head_dim": "64,128", "causal": "both", "window": "256,1024",
     "batch": "2,5", "heads": "16", "schedule": "all", "direction": "fwd", "hw": "h200",
     "causal_align": "both", "seqlen_k": "2000,8192"},
    {"seqlen": "512..8192", "head_dim": "64,128,256", "causal": "both",
     "dtype": "fp8_e4m3,bf16,fp16", "batch": "1,4", "heads": "16,32", "schedule": "all",
     "direction": "both", "hw": "h100,h200"},
    {"seqlen": "256..131072", "head_dim": "64,128,256", "causal": "both", "batch": "1..32",
     "heads": "8..128", "schedule": "all", "direction": "fwd", "hw": "h100,a100"},  # issue 26's
    {"seqlen": "2048,4096", "head_dim": "128", "batch": "4", "heads": "16", "schedule": "fa2,fa1",
     "block_m": "64,128", "block_n": "32,64,128", "warps": "4,8", "hw": "h100,a100"},
]


def columns(df) -> dict:
    return {c: df[c].tolist() for c in df.columns}


def collect() -> dict:
    out = {}
    for i, g in enumerate(GRIDS):
        r = sweep.sweep_result(g, workers=1)
        out[f"grid{i}"] = (columns(r.rows), dict(r.skipped))
    hw = load("h100")
    five = ["naive", "fa1", "fa2", "fa3", "standard"]
    probs = [iosim.Problem(batch=b, heads=h, seqlen_q=n, head_dim=d, causal=c)
             for n in (512, 4096, 16384) for d in (64, 128) for c in (False, True)
             for b in (1, 4) for h in (8, 64)]
    out["many"] = columns(P.predict_many(probs, hw, five))
    out["many_time_only"] = columns(P.predict_many(probs, hw, five, limiter=False))
    out["rows"] = [P.predict_rows(p, hw, [*five, "fa1_paper"]) for p in probs[:12]]
    for name in ("h200", "a100"):
        out[f"rows_{name}"] = [P.predict_rows(p, load(name)) for p in probs[::5]]
    return out


def compare(a, b, path: str, inexact: list) -> None:
    """AssertionError at the first difference; floats that differ within 1e-9 go to `inexact`."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), (path, set(a) ^ set(b))
        for k in a:
            compare(a[k], b[k], f"{path}.{k}", inexact)
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            compare(x, y, f"{path}[{i}]", inexact)
    elif isinstance(a, float) and isinstance(b, float) and not (math.isnan(a) and math.isnan(b)):
        if a != b:
            inexact.append(path)
        assert abs(a - b) <= 1e-9 * max(abs(a), abs(b)), (path, a, b)
    elif not (isinstance(a, float) and math.isnan(a)):
        assert type(a) is type(b) and a == b, (path, a, b)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["save", "check"])
    ap.add_argument("file")
    args = ap.parse_args()
    now = collect()
    rows = sum(len(next(iter(v[0].values()), [])) for k, v in now.items() if k.startswith("grid"))
    if args.what == "save":
        with open(args.file, "wb") as f:
            pickle.dump(now, f)
        print(f"saved: {rows:,} sweep rows")
        return
    with open(args.file, "rb") as f:
        before = pickle.load(f)
    inexact: list = []
    compare(before, now, "", inexact)
    print(f"equal: {rows:,} sweep rows; {len(inexact)} floats not bit-identical {inexact[:5]}")


if __name__ == "__main__":
    main()
