"""PV_OVERLAP (iosim/model/timing.py) against the measured rounds: fa3.cu's FP8 kernel at d = 128
with PV_WAIT_TOP over without it, the model's speed-up of the attention kernel alone for each
multiple given, beside the rounds' (median of each variant's rounds, same call).

Usage: python tools/pv_overlap.py [MULTIPLE ...]   (default: 1.15 1.2 1.25)
"""

import sys
from pathlib import Path

import pandas as pd

import iosim.model.timing as timing
import iosim.schedules.fa3 as fa3
from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.model import memory
from iosim.schedules import plan

ROUNDS = Path(__file__).resolve().parents[1] / "experiments/fp8/h100/speed14c/c1/variants.csv"


def kernel_ms(p: Problem, hw, top: int) -> float:
    fa3.FP8_PV_WAIT_TOP[128] = top
    pl = plan("fa3", p, hw)
    times = timing.predict(pl, hw, memory.estimate(pl, hw), limiter_too=False)
    return 1e3 * times[[k.name for k in pl.kernels].index("fa3_fwd_fp8")].seconds


def main() -> None:
    hw, held = load("h100"), dict(fa3.FP8_PV_WAIT_TOP)
    rounds = pd.read_csv(ROUNDS).query("status == 'ok' and head_dim == 128")
    print("multiple      N  model  measured")
    for mult in [float(x) for x in sys.argv[1:]] or [1.15, 1.2, 1.25]:
        timing.PV_OVERLAP = mult
        for n in sorted(rounds.seqlen.unique()):
            p = Problem(batch=16384 // n, heads=16, seqlen_q=int(n), head_dim=128, dtype="fp8_e4m3")
            g = rounds[rounds.seqlen == n].groupby("kind").attn_ms.median()
            print(f"{mult:8.2f} {n:6d} {kernel_ms(p, hw, 0) / kernel_ms(p, hw, 1):6.3f} {g['base'] / g['top']:9.3f}")
    fa3.FP8_PV_WAIT_TOP.update(held)


if __name__ == "__main__":
    main()
