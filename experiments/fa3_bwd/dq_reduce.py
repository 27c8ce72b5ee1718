"""FA3 backward's dQ reduction three ways in one run, each checked against the float32 gradients
(NaN-poisoned first, fresh data) before it is timed: vector atomics (red.global.add.v2.f32, DQ_BULK=0;
the Plan's kernel until the dQ warp, DQ_BULK=2, replaced it at d = 128), a bulk reduce-add of staged rows (fa3_bwd.cu DQ_BULK=1; d = 128 only: at d = 64
its staging does not fit beside the three dSᵀ buffers) and the deterministic mode
(Problem.deterministic, fa3_bwd_det); torch's cuDNN backward beside them. Each variant then runs
REPEATS more times on the same inputs: `same_bits` says whether every run's fp32 dQ accumulator
had the first run's bits.
Usage (GPU machine, after experiments/gpu_env.sh):
  python3 experiments/fa3_bwd/dq_reduce.py OUT.csv
  python3 experiments/fa3_bwd/dq_reduce.py --once VARIANT HEAD_DIM   (one run of one variant at
      N = 8192, not causal: what ncu profiles)"""

import sys
from pathlib import Path

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.gpu import backward, bench
from iosim.schedules import plan

sys.path.insert(0, str(Path(__file__).parent))
from variants import cases, peer_row, variant, write_rows  # noqa: E402  (the same shapes and peer)

VARIANTS = ("atomic", "bulk", "deterministic")
REPEATS = 3


def variant_plan(p: Problem, hw, name: str):
    if name == "deterministic":
        return plan("fa3", p.model_copy(update={"deterministic": True}), hw)
    return variant(plan("fa3", p, hw), p, DQ_BULK=0 if name == "atomic" else 1)


def bits(torch, t):
    return t.view(torch.int32).clone()


def measure(torch, timer, hw, p: Problem, name: str, q, k, v, do, ref, bound) -> dict:
    launcher = backward.BackwardLauncher(variant_plan(p, hw, name), hw, q, k, v, do)
    launcher.poison()
    launcher()
    torch.cuda.synchronize()
    err = backward.grad_err(torch, launcher.outputs(), ref, p)
    row = dict(max_rel_err=err, err_bound=bound, status="ok" if err <= bound else "failed_check")
    if err <= bound:
        first = bits(torch, launcher.buf["dQacc"])
        same = True
        for _ in range(REPEATS):
            launcher()
            torch.cuda.synchronize()
            same &= bool(torch.equal(bits(torch, launcher.buf["dQacc"]), first))
        ms = timer(launcher)
        row.update(same_bits=same, time_ms=ms, tflops=p.fa_flops() / (ms * 1e-3) / 1e12)
    return row


def main(out: str) -> None:
    torch = bench.require_gpu()
    hw = load(bench.profile_for(torch.cuda.get_device_name()))
    timer = bench.Timer(torch, hw.l2_bytes)
    rows = []
    for p, q, k, v, do, ref, bound in cases(torch, hw, (64, 128), 11):
        key = dict(gpu=torch.cuda.get_device_name(), head_dim=p.head_dim, seqlen_q=p.seqlen_q,
                   causal=p.causal)
        for name in VARIANTS if p.head_dim == 128 else ("atomic", "deterministic"):
            rows.append(key | {"variant": name} | measure(torch, timer, hw, p, name, q, k, v, do,
                                                          ref, bound))
            print(rows[-1], flush=True)
        rows.append(key | peer_row(torch, timer, p, q, k, v, do, ref, bound))
        print(rows[-1], flush=True)
    write_rows(out, rows)

def once(name: str, d: int) -> None:
    torch = bench.require_gpu()
    hw = load(bench.profile_for(torch.cuda.get_device_name()))
    p = Problem(batch=2, heads=2048 // d, seqlen_q=8192, head_dim=d, direction="bwd")
    q, k, v = bench.inputs(torch, p, 1)
    launcher = backward.BackwardLauncher(variant_plan(p, hw, name), hw, q, k, v,
                                         backward.grad_output(torch, p, 1))
    launcher.poison()
    launcher()
    torch.cuda.synchronize()


if __name__ == "__main__":
    if sys.argv[1] == "--once":
        once(sys.argv[2], int(sys.argv[3]))
    else:
        main(sys.argv[1])
