"""FA3 backward stage by stage in one run: the main kernel with the consumers' ping-pong turns
(PINGPONG=1, the Plan's default at BLOCK_N = 128) and without (0), or (`stages`) at d = 128 with
the Plan's two-stage Q/dO ring and a three-stage one, or (`dq`) at d = 128 its dQ by vector
atomics in the consumers (DQ_BULK=0), by the dQ warp's TMA reduce-adds of the consumers' staged
units (DQ_BULK=2) and that without the ping-pong turns, or (`dq3`) at d = 128 DQ_BULK=2 and 3
(one staging buffer, the consumers in turn) and at d = 64 DQ_BULK=0 and 3, or (`d256`) at
d = 256 its dQ by the consumers' vector atomics (DQ_BULK=0) and by the dQ warp's TMA reduce-adds
of units staged in the step's Q/dO ring slot (DQ_BULK=2), N = 4096, 8192, 16384; the variants
of `stages`, `dq`, `dq3` and `d256` timed alternately twice; each checked against the float32 gradients
(NaN-poisoned first) before it is timed; torch's cuDNN backward beside them (`dq`: and torch's
flash backward; `dq3` too).
Usage (GPU machine, after experiments/gpu_env.sh):
    python3 experiments/fa3_bwd/variants.py OUT.csv [pingpong|stages|dq|dq3|d256]"""

import csv
import sys
from dataclasses import replace

from iosim.core.hardware import load
from iosim.core.problem import Problem
from iosim.gpu import backward, bench
from iosim.kernels import SPECS, kernel_defines
from iosim.schedules import Tiles, plan


def variant(pl, p, **change: int):
    """The Plan with fa3_bwd's defines changed (its shared memory as the spec counts it)."""
    ks = []
    for k in pl.kernels:
        if k.name == "fa3_bwd":
            values = {n: v for n, v in k.defines.items() if not n.startswith("MODEL_")} | change
            k = replace(k, defines=kernel_defines(k.name, **values),
                        smem_bytes=SPECS[k.name].smem(values, p.elem_bytes))
        ks.append(k)
    return replace(pl, kernels=tuple(ks))


def plans(p, hw, what: str) -> list[tuple[str, object]]:
    """(name, Plan) of each variant, in the order they are timed."""
    if what == "stages":  # twice each, alternately
        two, three = plan("fa3", p, hw), plan("fa3", p, hw, Tiles(stages=3))
        return [("stages=2", two), ("stages=3", three)] * 2
    if what == "dq":  # twice each, alternately; the dQ warp also without the ping-pong turns
        pl = plan("fa3", p, hw)
        return [("dq_bulk=0", variant(pl, p, DQ_BULK=0)), ("dq_bulk=2", variant(pl, p, DQ_BULK=2)),
                ("dq_bulk=2,pingpong=0", variant(pl, p, DQ_BULK=2, PINGPONG=0))] * 2
    if what == "d256":  # the consumers' atomics or the dQ warp (units in the ring slot)
        pl = plan("fa3", p, hw)
        return [(f"dq_bulk={b}", variant(pl, p, DQ_BULK=b)) for b in (0, 2)] * 2
    if what == "dq3":  # d = 128: one dQ buffer a consumer or one shared; d = 64: atomics or shared
        pl = plan("fa3", p, hw)
        return [(f"dq_bulk={b}", variant(pl, p, DQ_BULK=b))
                for b in ((2, 3) if p.head_dim == 128 else (0, 3))] * 2
    return [(f"pingpong={pp}", variant(plan("fa3", p, hw), p, PINGPONG=pp)) for pp in (1, 0)]


def cases(torch, hw, dims, seed: int, seqlens=(4096, 16384)):
    """The runs' shapes (batch = 16384/N, heads = 2048/d; N 4096 and 16384; causal both), each
    with fresh inputs, the float32 reference gradients and the error bound tied to torch's
    same-dtype backward: (p, q, k, v, do, ref, bound)."""
    for d in dims:
        for n in seqlens:
            for causal in (False, True):
                p = Problem(batch=16384 // n, heads=2048 // d, seqlen_q=n, head_dim=d,
                            causal=causal, direction="bwd")
                q, k, v = bench.inputs(torch, p, seed)
                do = backward.grad_output(torch, p, seed)
                ref, s_max = backward.reference_grads(torch, q, k, v, do, p)
                same = backward.grad_err(torch, backward.sdpa_grads(torch, q, k, v, do, p), ref, p)
                yield p, q, k, v, do, ref, bench.error_bound("fa3", p, same, s_max)


def peer_row(torch, timer, p, q, k, v, do, ref, bound, name: str = "torch_cudnn") -> dict:
    """A torch backward (cuDNN's, flash's) on the same inputs, checked and timed as a peer."""
    cud = backward._peer(torch, timer, q, k, v, do, p, name, ref, bound)
    return {"variant": name, "err_bound": bound} | {
        x: cud.get(x) for x in ("max_rel_err", "status", "time_ms", "tflops")}


def write_rows(out: str, rows: list[dict]) -> None:
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(dict.fromkeys(x for r in rows for x in r)))
        w.writeheader()
        w.writerows(rows)


def main(out: str, what: str = "pingpong") -> None:
    torch = bench.require_gpu()
    hw = load(bench.profile_for(torch.cuda.get_device_name()))
    timer = bench.Timer(torch, hw.l2_bytes)
    rows = []
    dims = (128,) if what in ("stages", "dq") else (256,) if what == "d256" else (64, 128)
    grid = what.startswith("dq") or what == "d256"
    seqlens = (4096, 8192, 16384) if grid else (4096, 16384)
    peers = ("torch_cudnn", "torch_flash") if grid else ("torch_cudnn",)
    for p, q, k, v, do, ref, bound in cases(torch, hw, dims, 7, seqlens):
        key = dict(head_dim=p.head_dim, seqlen_q=p.seqlen_q, causal=p.causal)
        for name, pl in plans(p, hw, what):
            launcher = backward.BackwardLauncher(pl, hw, q, k, v, do)
            launcher.poison()
            launcher()
            torch.cuda.synchronize()
            err = backward.grad_err(torch, launcher.outputs(), ref, p)
            row = key | dict(variant=name, max_rel_err=err, err_bound=bound,
                             status="ok" if err <= bound else "failed_check")
            if err <= bound:
                ms = timer(launcher)
                row.update(time_ms=ms, tflops=p.fa_flops() / (ms * 1e-3) / 1e12)
            rows.append(row)
            print(row, flush=True)
            del launcher
        for name in peers:
            rows.append(key | peer_row(torch, timer, p, q, k, v, do, ref, bound, name))
            print(rows[-1], flush=True)
    write_rows(out, rows)

if __name__ == "__main__":
    main(*sys.argv[1:3])
