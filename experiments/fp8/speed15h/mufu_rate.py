"""Results per clock per SM of the exponential's forms and of P's conversions (issue 24, session
15; mufu_rate.cu beside this file, one kernel per FORM). GPU: builds each form with nvcc, runs
one CTA of 1024 threads per SM, SM cycles from clock64 around the loop (median over the CTAs),
then results / cycle / SM = 1024 * U * iters * results-per-op / cycles. No GPU (--sass): the
loop body's SASS per form from an offline build (instructions per op, which opcodes).

    python3 experiments/fp8/speed15h/mufu_rate.py OUT.csv          (GPU)
    python3 experiments/fp8/speed15h/mufu_rate.py --sass OUT.txt   (nvcc, cuobjdump on PATH)
"""

from __future__ import annotations

import collections
import csv
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
U = 16  # mufu_rate.cu's chains per thread
# FORM: (name, results per op, SASS opcode that marks one op, how many per op)
FORMS = {
    0: ("ex2.approx.ftz.f32", 1, "MUFU", 1),
    1: ("ex2.approx.f16x2", 2, "MUFU", 2),
    2: ("ex2.approx.ftz.bf16x2", 2, "MUFU", 2),
    3: ("ex2.approx.f16", 1, "MUFU", 1),
    4: ("cvt.rn.f16x2.f32 (pack)", 2, "F2FP", 1),
    5: ("cvt.rn.satfinite.e4m3x2.f16x2", 2, "F2FP", 1),
    6: ("cvt.rn.satfinite.e4m3x2.f32", 2, "F2FP", 1),
    7: ("exp2 f16x2 polynomial (fa3.cu exp2_h2)", 2, "HMNMX2", 1),
    8: ("FFMA (reference)", 1, "FFMA", 1),
    9: ("half ex2.approx.ftz.f32, half f16x2 polynomial", 1.5, "HMNMX2", 0.5),
}


def build(form: int, out: Path) -> Path:
    cubin = out / f"f{form}.cubin"
    subprocess.run(["nvcc", "-std=c++17", "-gencode=arch=compute_90a,code=sm_90a", "-cubin",
                    f"-DFORM={form}", str(HERE / "mufu_rate.cu"), "-o", str(cubin)], check=True)
    return cubin


def loop_body(cubin: Path) -> list[str]:
    """Opcodes of the timed loop: from the backward branch's target to the branch."""
    text = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True,
                          check=True).stdout
    ins = [(int(m.group(1), 16), m.group(2).strip()) for m in
           re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", text)]
    for addr, op in reversed(ins):
        b = re.search(r"BRA\s+(?:`\(\.L_x_\d+\)|0x([0-9a-f]+))", op)
        if b and b.group(1) and int(b.group(1), 16) < addr:
            lo = int(b.group(1), 16)
            return [re.sub(r"^@!?U?P[T0-9]\s+", "", o).split()[0] for a, o in ins if lo <= a <= addr]
    raise SystemExit(f"error: no backward branch in {cubin}")


def sass(path: str) -> None:
    lines = []
    with tempfile.TemporaryDirectory() as t:
        for form, (name, _, mark, per_op) in FORMS.items():
            body = loop_body(build(form, Path(t)))
            ops = collections.Counter(o.split(".")[0] for o in body)
            n_ops = ops[mark] / per_op
            full = collections.Counter(body)
            lines.append(f"FORM {form} {name}: {len(body)} instructions for {n_ops:g} ops "
                         f"({len(body) / n_ops:.2f} per op); per op: "
                         + ", ".join(f"{o} {c / n_ops:g}" for o, c in full.most_common()))
    Path(path).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def measure(path: str) -> None:
    import cupy as cp

    sms = cp.cuda.Device().attributes["MultiProcessorCount"]
    iters = 4096
    rows = []
    with tempfile.TemporaryDirectory() as t:
        for form, (name, per_op, _, _) in FORMS.items():
            fn = cp.RawModule(path=str(build(form, Path(t)))).get_function("rate")
            out = cp.empty(sms * 1024, dtype=cp.uint32)
            cyc = cp.zeros(sms, dtype=cp.int64)
            for _ in range(3):  # the first launch warms up; the median of the last two kept
                fn((sms,), (1024,), (out, cyc, cp.int32(iters)))
                cp.cuda.Device().synchronize()
                c = float(cp.median(cyc))
            rate = 1024 * U * iters * per_op / c
            rows.append({"form": form, "name": name, "results_per_op": per_op,
                         "cycles_median": int(c), "results_per_clk_sm": round(rate, 3)})
            print(f"FORM {form} {name:48s} {rate:8.2f} results/clk/SM", flush=True)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[:1] == ["--sass"] and len(a) == 2:
        sass(a[1])
    elif len(a) == 1 and not a[0].startswith("-"):
        measure(a[0])
    else:
        sys.exit("error: usage: mufu_rate.py OUT.csv | mufu_rate.py --sass OUT.txt")
