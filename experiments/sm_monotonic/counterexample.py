"""The counterexample Hypothesis found (random draws, not CI's derandomized ones) to
tests/test_timing.py::test_more_sms_or_bandwidth_never_slower: fa1 forward, causal, batch 3,
heads 32, N 100, d 256, bf16 on the H100 profile, its 192 CTAs of unequal lengths (trips 1
and 2). The same kernel on GPUs of 100..264 SMs (the tensor peaks grown with the SMs, as the
test's `grown` does), with the DRAM bytes of the H100's estimate; and, at 191 and 192 SMs,
the parts of _schedule's unequal-CTA path (the list schedule with the longest CTA's bound,
the shared ends of two CTAs an SM).

    python experiments/sm_monotonic/counterexample.py > experiments/sm_monotonic/counterexample.log
"""

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.model import memory
from iosim.model import timing as tm
from iosim.schedules import Tiles, plan

p = Problem(batch=3, heads=32, seqlen_q=100, head_dim=256, causal=True)
hw = load("h100")
pl = plan("fa1", p, hw)
dram = memory.estimate(pl, hw)


def grown(n: int):
    return hw.with_changes(sm_count=n, **{f"tensor_flops_per_s.{k}": v * n / hw.sm_count
                                          for k, v in hw.tensor_flops_per_s.items()})


def fwd_seconds(n: int) -> float:
    big = grown(n)
    pl2 = plan("fa1", p, big, Tiles(split_rows=pl.main.defines.get("SPLIT_ROWS")))
    return tm.predict(pl2, big, dram)[1].seconds


print(f"fa1_fwd: {pl.kernels[1].ctas} CTAs, trips {pl.kernels[1].trips.tolist()}")
print("SMs  fa1_fwd seconds")
for n in (100, 120, 132, 150, 170, 191, 192, 198, 264):
    print(f"{n:4d} {fwd_seconds(n):.4e}")

seen = {}
for name in ("_list_schedule", "_shared_ends"):
    def spy(*a, _f=getattr(tm, name), _n=name):
        out = _f(*a)
        seen[_n] = float(out.max())
        return out
    setattr(tm, name, spy)
for n in (191, 192):
    seen.clear()
    s = fwd_seconds(n)
    print(f"{n} SMs: {s:.4e} s; list schedule (longest CTA's bound) max {seen.get('_list_schedule', float('nan')):.3e}, "
          f"shared ends of two CTAs an SM max {seen.get('_shared_ends', float('nan')):.3e}"
          + (" (a row with two CTAs on some SM takes these in place of its list schedule)" if "_shared_ends" in seen else ""))
