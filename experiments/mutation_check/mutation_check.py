"""Which tests kill which mutation of the timing and memory model.

    python experiments/mutation_check/mutation_check.py   (writes experiments/mutation_check/mutation_check.json)
    python experiments/mutation_check/mutation_check.py --from-logs LOG...   (the JSON of a check
        run in parts, from the results its runs printed)
    python experiments/mutation_check/mutation_check.py WORDS   (only the mutations whose name
        contains WORDS, or one of several phrases separated by "|", and the baseline; printed,
        the JSON file left as it is)
    options, before or after WORDS: --jobs N (mutations at a time, default 2), --first (stop each run at
        its first failing test: `by` names one killer, not all; for a many-core machine's
        10-minute limit), --out FILE (write the JSON there instead)

Each mutation below (the ones that once left every test green) is applied to a copy of the
package in a temporary directory, and the accuracy and invariant tests run against it, less the
README snapshot (`SNAPSHOT`: it fails on any change of any number, so it says nothing about a
mechanism). A mutation that no test kills is a hole in the tests; `by` names each test that
kills it. Two mutations run at a time; on the 2-core CI-class machine it takes 20-30 minutes.
Not part of CI (the tests it runs are).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the mechanism tests first: with --first, most runs stop within them
TESTS = ["tests/test_mechanisms.py", "tests/test_timing.py", "tests/test_bound.py",
         "tests/test_memory.py", "tests/test_calibrate.py", "tests/test_validation.py",
         "tests/test_published.py"]
SNAPSHOT = "tests/test_validation.py::test_readme_generated_blocks_are_current"
# (name, file, old, new): each `old` must occur exactly once; `old` and `new` may be tuples of
# replacements made together (one mechanism in two places).
MUTATIONS = [
    ("none (baseline: every test must pass)", "iosim/model/timing.py", "MMA_FLOPS = 2 * 16 * 8 * 16",
     "MMA_FLOPS = 2 * 16 * 8 * 16"),
    ("fa2 overlap made serial", "iosim/model/timing.py",
     '(policy == POLICIES["async"]) & (stages <= 1)', '(policy == POLICIES["async"])'),
    ("tensor_mma_sync 0.665 -> 0.35 (profile)", "hwprofiles/h100-sxm5-80gb.calibrated.toml",
     '"tensor_mma_sync" = 0.665', '"tensor_mma_sync" = 0.35'),
    ("list-schedule residual 0", "iosim/model/timing.py",
     "residual = rows.sums(dc * dc) / (2 * total)", "residual = 0.0 * total"),
    ("occupancy ignores registers", "iosim/core/plan.py",
     "hw.registers_per_sm // (min(k.regs_per_thread, hw.max_registers_per_thread)",
     "hw.registers_per_sm // (1"),
    ("throughput term n = 1", "iosim/model/timing.py",
     "thr = n * _max(self.dispatch,", "thr = 1 * _max(self.dispatch,"),
    ("fa2 ALU count per tile x2 (closed form)", "iosim/schedules/flash.py",
     "alu_flops=3 * rc + mask + sr * (6 + d),", "alu_flops=6 * rc + mask + sr * (6 + d),"),
    ("warp chain ignored (perfect overlap)", "iosim/model/timing.py",
     "warp = self.warp_mma + self.warp_other", "warp = 0.0"),
    ("synchronous phases overlap perfectly", "iosim/model/timing.py",
     "hw.pipeline.sync_overlap, nsync,", 'float("inf"), nsync,'),
    ("SM load path unbounded", "iosim/model/timing.py",
     "port=hw.pipeline.sm_load_bytes_per_clk * hw.clock_hz,", "port=1e30,"),
    ("fa2 backward's barrier-phased trips overlap perfectly", "iosim/model/timing.py",
     "return _max(pnorm([port + warp, thr], sync_overlap), level)",
     "return _max(port + warp, thr, level)"),
    ("fa2 backward's bandwidth share a synchronous phase, the port off its chain (before session 16)",
     "iosim/model/timing.py",
     "return _max(pnorm([port + warp, thr], sync_overlap), level)",
     "return pnorm([warp, level, thr], sync_overlap)"),
    ("fa2 backward's port off its warps' chain", "iosim/model/timing.py",
     "return _max(pnorm([port + warp, thr], sync_overlap), level)",
     "return _max(pnorm([warp, thr], sync_overlap), level)"),
    ("reductions cross the SM's port twice (their L2 reads too)", "iosim/model/timing.py",
     "np.array([rd - f.red, rd_f, rd1, rd, rd_f, rd1])", "np.array([rd, rd_f, rd1, rd, rd_f, rd1])"),
    ("fa3 backward's SPLIT_D consumers take turns, not in step", "iosim/kernels.py",
     "turn_waits=_fa3_bwd_turn_waits, consumers_in_step=fa3_bwd_split_d,",
     "turn_waits=_fa3_bwd_turn_waits,"),
    ("fa3 backward's ragged tiles counted as fractions", "iosim/schedules/fa3.py",
     "tile_trips=whole_tiles_bwd(p, k))", "tile_trips=None)"),
    ("fa3 backward's in-step softmax at its warps' issue alone, not the MUFU's and FP32 pipes'",
     "iosim/model/timing.py", "np.maximum(self.warp_other, sfu_alu),", "self.warp_other,"),
    ("fa2 backward reads each operand once (no warp grids)", "iosim/kernels.py",
     "def _fa2_bwd_readers(d: Defines) -> Readers:", "def _fa2_bwd_readers(d: Defines) -> Readers:\n    return Readers()"),
    ("fa3 softmax hides under wgmma perfectly", "iosim/model/timing.py",
     "soft = pnorm([self.tensor, pipes], _one(pv) if isinstance(sync_overlap, float) else pv)",
     "soft = max(self.tensor, self.sfu, self.alu)"),
    ("fa3 pipeline never fills", "iosim/model/timing.py",
     "fill = np.where(ws, ws_fill, _ZERO)", "fill = np.where(ws, 0.0 * turn, _ZERO)"),
    ("fa3 forward: consumers without turns, one warp's exp2 and FP32 work added, not overlapped", "iosim/model/timing.py",
     "pipes = np.where(self.apart > _ZERO,", "pipes = np.where(self.apart < _ZERO,"),
    ("fa3 forward: consumers without turns fill like ping-pong (one warpgroup's turn)", "iosim/model/timing.py",
     "np.where(apart > _ZERO, np.maximum(turn, in_step), turn) if np.count_nonzero(apart) else turn", "turn"),
    ("fa3 forward: ragged tiles cost their share of a trip, not a whole one", "iosim/schedules/fa3.py",
     "tile_trips=whole_tiles(p, k))", "tile_trips=None)"),
    ("fa2 forward: ragged tiles cost their share of a trip, not a whole one", "iosim/schedules/fa2.py",
     "tile_trips=whole_tiles_of(p, bm, trips),", "tile_trips=None,"),
    ("fa2 forward reads K/V from shared memory once per CTA, not once per warp", "iosim/kernels.py",
     'kv_readers=lambda d: max(1, d["NUM_WARPS"]), smem_fills=_QKV),',
     "kv_readers=lambda d: 1, smem_fills=_QKV),"),
    ("fa1 forward reads K/V from shared memory once per CTA, not once per warp", "iosim/kernels.py",
     'kv_readers=lambda d: d["NUM_WARPS"], sync_loads=_fa1_fwd_kv_wait,',
     "kv_readers=lambda d: 1, sync_loads=_fa1_fwd_kv_wait,"),
    ("fa1 forward's warps in step (bandwidth share a synchronous phase: `none`, not `drift`)",
     "iosim/schedules/fa1.py", 'reuse=GQA_REUSE, overlap="drift",', 'reuse=GQA_REUSE, overlap="none",'),
    ("fluid scheduling (no tail waves, no causal list schedule)", "iosim/model/timing.py",
     ("np.maximum(full * d_c + last, ctas * d / slots)",
      "out[ix] = np.maximum(listed, spread)",
      "out[ix[two]] = np.maximum(end, spread[two])"),
     ("ctas * d / slots", "out[ix] = spread + 0.0 * listed",
      "out[ix[two]] = np.maximum(0.0, spread[two])")),
    ("mma.sync dispatch: the larger of tensor time and issue, not their sum", "iosim/model/timing.py",
     "np.add(tensor, issued * inst_r / issue_r, out=t[8])", "np.copyto(t[8], tensor)"),
    ("fa1 backward's synchronous loads cost no round trip", "iosim/model/timing.py",
     "lat = f.nsync * np.where(f.l2sync > _ZERO, r.l2_latency, r.load_latency)",
     "lat = 0.0 * f.nsync"),
    ("round trips to L2 priced as DRAM's (one load latency for both)", "iosim/model/timing.py",
     "lat = f.nsync * np.where(f.l2sync > _ZERO, r.l2_latency, r.load_latency)",
     "lat = f.nsync * r.load_latency"),
    ("fa1 forward's one-stage K/V load waits no round trip", "iosim/kernels.py",
     'kv_readers=lambda d: d["NUM_WARPS"], sync_loads=_fa1_fwd_kv_wait,',
     'kv_readers=lambda d: d["NUM_WARPS"],'),
    ("a lone CTA waits its ring's first stage only with `async` trips (before session 15)",
     "iosim/model/timing.py",
     "ring = staged & ~ws & (f.total_trips > _ZERO)",
     "ring = staged & (f.policy == _ASYNC) & (f.total_trips > _ZERO)"),
    ("a partial last wave at the full waves' residency (before session 15b)", "iosim/model/timing.py",
     "res = np.maximum(_ONE, np.ceil(left / f.sms))", "res = n + 0.0 * left"),
    ("one wave of unequal CTAs: pairs shared all through, fewer at a time allowed (before session 15b)",
     "iosim/model/timing.py",
     ("paired = (cap == 2) & (b.pidx[kidx] >= 0)", "two = ((held == 2)"),
     ("paired = (cap < 0) & (b.pidx[kidx] >= 0)", "two = ((held < 0)")),
    ("unequal CTAs past the first wave at two an SM: shared all through, none alone (before session 16)",
     "iosim/model/timing.py",
     "two = ((held == 2) & (g[:, _CTAS] > sms))",
     "two = ((held == 2) & (g[:, _CTAS] > sms) & (g[:, _CTAS] <= on))"),
    ("the longest CTA of a wave alone on the bandwidth, no share of it (before session 15c)",
     "iosim/model/timing.py",
     "share = np.minimum(conc, reps * rows.sums(np.minimum(dc, at)) / d)",
     "share = 0.0 * conc"),
    ("fa1 forward's warps released at its barrier drift at once (no queue at the tensor core; before session 17)",
     "iosim/model/timing.py", "self.warp_mma + self.warp_other + self.queue", "self.warp_mma + self.warp_other + 0.0 * self.queue"),
    ("naive's GEMM loop instructions issue like the others on the warp's chain (no dependent address chain; before session 18)",
     "iosim/model/timing.py", "chained * chain_r", "chained * inst_r"),
    ("a warp's synchronous loads never wait behind another resident CTA's bytes at the port (before session 17)",
     "iosim/model/timing.py", "queued = (n - _ONE) * share * port", "queued = 0.0 * share * port"),
    ("decode's fused combine: three round trips, not decode.cu's five", "iosim/kernels.py",
     "COMBINE_ROUND_TRIPS = 5", "COMBINE_ROUND_TRIPS = 3"),
    ("fa3 backward's consumer waits cost nothing", "iosim/model/timing.py",
     "chain = self.tensor / self.groups + other + latency",
     "chain = self.tensor / self.groups + other"),
    ("PyTorch's broadcast mask add waits no round trips", "iosim/schedules/standard.py",
     'overlap="async", round_trips=1)', 'overlap="async", round_trips=0)'),
    ("row kernels' block reduction costs nothing", "iosim/schedules/naive.py",
     "merge_alu, merge_exp = spec.row_merge if ours else (0, 0)",
     "merge_alu, merge_exp = 0, 0"),
    ("a row kernel's loads are a prologue added to its trip", "iosim/schedules/naive.py",
     'streamed=ins if ours else (),', 'streamed=(),'),
    ("row kernels' CTAs run their phases in step", "iosim/schedules/naive.py",
     'overlap="spread" if ours else "async"', 'overlap="async"'),
    ("naive GEMM: k loop's instructions beyond the MMAs uncounted", "iosim/schedules/base.py",
     "loop_issue=SPECS[name].loop_issue(defines, e) if SPECS[name].loop_issue else 0.0,",
     "loop_issue=0.0,"),
    ("naive GEMM: one-chunk C stores an epilogue added after the trip", "iosim/schedules/base.py",
     "streamed=(a, b, c) if chunks == 1 else (a, b),", "streamed=(a, b),"),
    ("naive GEMM: A and B a prologue when read once", "iosim/schedules/base.py",
     "streamed=(a, b, c) if chunks == 1 else (a, b),", "streamed=(a, b, c) if chunks == 1 else (),"),
    ("cp.async fills carried by the shared-memory pipe (acc13)", "iosim/model/timing.py",
     "np.subtract(sram, fill, out=sram)", "np.subtract(sram, 0.0, out=sram)"),
    ("a CTA alone on its SM waits for no first ring stage (acc13)", "iosim/model/timing.py",
     "ring = np.where(ring, r.load_latency + port1 + drain, _ZERO)",
     "ring = np.where(ring, drain, _ZERO)"),
    ("a kernel's first wave waits its first loads through no share of L2/DRAM (model17a)",
     "iosim/model/timing.py", "burst = np.minimum(ctas * solo[2], chain)",
     "burst = 0.0 * np.minimum(ctas * solo[2], chain)"),
    ("a CTA's end waits for no drain of its stores (model17a)", "iosim/model/timing.py",
     "drain = f.drain * r.load_latency", "drain = 0.0 * f.drain * r.load_latency"),
    ("fa1 backward: no instructions beyond the counts on the chain (loop_issue)",
     "iosim/schedules/fa1.py", "loop_issue=SPECS[main].loop_issue(defines, p.elem_bytes),",
     "loop_issue=0.0,"),
    ("fa1 backward: no instructions in the MMAs' shadow (loop_shadow)", "iosim/schedules/fa1.py",
     "loop_shadow=SPECS[main].loop_shadow(defines, p.elem_bytes)))", "loop_shadow=0.0))"),
    ("fa1 backward: prefetch overlap as synchronous phases (`none`, not `prefetch`)",
     "iosim/schedules/fa1.py", 'overlap="prefetch", source=source(main), defines=defines,',
     'overlap="none", source=source(main), defines=defines,'),
    # (session 18: "fa3 backward's GEMM-turn waits priced as memory round trips" is gone: the
    # refit put the waits within 5% of the L2 round trip and the data no longer tell them apart;
    # tests/test_mechanisms.py::test_fa3_backward_waits_at_its_gemm_turns says so)
    ("calibrate fits fa3 backward rows to the Plan's dQ reduction, not the one they ran",
     "iosim/analysis/calibrate.py", "dq_bulk=measured_dq_bulk(r))", "dq_bulk=None)"),
    ("bound is the busiest unit, not the limiter", "iosim/model/timing.py",
     ("bound = _chosen(relaxed)", 'known = getattr(times, "bound", None)  # found by the batch',
      "    return best_relief(times)",
      "out.group_bound = _chosen(np.add.reduceat(relaxed, starts, axis=0))"),
     ("bound = [LIMITS[b] for b in busiest]", "known = None  # found by the batch",
      "    return max(times, key=lambda t: t.seconds).busiest",
      "out.group_bound = [LIMITS[busiest[a + int(np.argmax(out.seconds[a:e]))]]\n"
      "                           for a, e in zip(starts, np.append(starts[1:], n))]")),
    ("fa3 fp8 persistent grid: the L2 model counts CTAs, not tiles", "iosim/model/memory.py",
     "ctas.append(k.units)", "ctas.append(k.ctas)"),
    ("fa3 fp8 persistent grid: the batched L2 model counts CTAs, not tiles", "iosim/analysis/table.py",
     'ext[:, EXT["units"]],', 'ext[:, EXT["ctas"]],'),
    ("fa3 fp8: the softmax under its own P·V overlaps no better (PV_WAIT_TOP ignored)",
     "iosim/model/timing.py", "PV_OVERLAP = 1.2", "PV_OVERLAP = 1.0"),
    ("fa3 fp8 persistent grid: each CTA's Q and O in a once-per-CTA phase", "iosim/schedules/fa3.py",
     'streamed=(*k.streamed, "Q8", "Qs", "O", "LSE"),', "streamed=k.streamed,"),
    ("fa1 backward: prefetched lines never evicted before their load (no DRAM re-read)",
     "iosim/model/memory.py",
     "again = 0.0 if ahead is None else refetched(count, ahead, wk, l2k)", "again = 0.0"),
    ("fa1 backward: D_i two ops an element and dQ added on the SM", "iosim/schedules/flash.py",
     "    per_rd = 1\n", "    per_rd = 3 if fa1 else 1\n"),
    ("H200 calibrated with the H100's HBM efficiency", "hwprofiles/h200-sxm-141gb.calibrated.toml",
     '"hbm" = 0.8729', '"hbm" = 0.8956473806319617'),
    ("a transfer carries the source GPU's HBM efficiency", "iosim/analysis/calibrate.py",
     'OWN = ("efficiency.hbm",)', "OWN = ()"),
]


def extra_paths() -> list[str]:
    # where the caller's PYTHONPATH holds packages (the GPU machine's carried wheels), not this tree
    return [q for q in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if q and Path(q).resolve() != ROOT]


def run(name: str, rel: str, old: str, new: str, first: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        dst = Path(tmp) / "repo"
        shutil.copytree(ROOT, dst, ignore=shutil.ignore_patterns(".git", "*.pyc", "__pycache__",
                                                                 ".whl", ".hypothesis", "reports/*.html"))
        f = dst / rel
        text = f.read_text()
        olds, news = (old, new) if isinstance(old, tuple) else ((old,), (new,))
        for o, n in zip(olds, news):
            if text.count(o) != 1:
                return {"mutation": name, "status": f"not applied: pattern found {text.count(o)} times"}
            text = text.replace(o, n)
        f.write_text(text)
        t = time.time()
        r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                            "--hypothesis-seed=0", "-m", "not gpu", *(["-x"] if first else []), "--deselect", SNAPSHOT,
                            *TESTS], cwd=dst,
                           capture_output=True, text=True,
                           env={"PYTHONPATH": os.pathsep.join([str(dst), *extra_paths()]),
                                "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1",
                                "OPENBLAS_NUM_THREADS": "1"})  # one core a run: --jobs runs at a time
        failed = [ln.split(" - ")[0].split(" ")[1] + ": " + ln.split(" - ", 1)[-1][:120]
                  for ln in r.stdout.splitlines() if ln.startswith("FAILED")]
        return {"mutation": name, "killed": r.returncode != 0, "by": failed,
                "seconds": round(time.time() - t, 1)}


def from_logs(paths: list[str], out: Path) -> None:
    """The JSON of a check run in parts (a call that timed out before its last mutations, the
    rest run apart): each mutation's latest result printed in the logs, in MUTATIONS' order;
    every mutation must have one."""
    import ast

    got = {}
    for path in paths:
        for line in Path(path).read_text().splitlines():
            if line.startswith("{'mutation': "):
                r = ast.literal_eval(line)
                got[r["mutation"]] = r
    missing = [m[0] for m in MUTATIONS if m[0] not in got]
    if missing:
        print(f"error: no result in {', '.join(paths)} for: {'; '.join(missing)}", file=sys.stderr)
        sys.exit(2)
    out.write_text(json.dumps([got[m[0]] for m in MUTATIONS], indent=1) + "\n")


def main() -> None:
    args = sys.argv[1:]
    if args[:1] == ["--from-logs"]:
        from_logs(args[1:], Path(__file__).with_name("mutation_check.json"))
        return
    jobs, first, out, phrases = 2, False, None, []
    while args:  # options anywhere: one after the phrases is an option, not more of a phrase
        opt = args.pop(0)
        if not opt.startswith("--"):
            phrases.append(opt)
        elif opt == "--first":
            first = True
        elif opt in ("--jobs", "--out") and args:
            val = args.pop(0)
            jobs, out = (int(val), out) if opt == "--jobs" else (jobs, Path(val))
        else:
            print(f"error: unknown option {opt}; allowed: --jobs N, --first, --out FILE", file=sys.stderr)
            sys.exit(2)

    # one pytest process per mutation, `jobs` at a time (each single-threaded); each result
    # printed as it comes
    def one(m):
        r = run(*m, first=first)
        print(r, flush=True)
        return r

    words = " ".join(phrases)  # phrases separated by "|": a mutation named by any of them
    chosen = [m for i, m in enumerate(MUTATIONS)
              if i == 0 or any(w.strip() in m[0] for w in words.split("|"))]
    if words and len(chosen) == 1:  # (the baseline alone: a phrase that names no mutation)
        print(f"error: no mutation's name contains '{words}'", file=sys.stderr)
        sys.exit(2)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        results = list(pool.map(one, chosen))
    if out or not words:
        (out or Path(__file__).with_name("mutation_check.json")).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
