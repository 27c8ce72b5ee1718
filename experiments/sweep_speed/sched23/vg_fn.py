"""Instructions (callgrind's Ir) inside given functions only, per _schedule pass of iosim.predict
(the record problem and its causal twin): collection toggled on at each function's entry and off
at its return (Valgrind's client request, issued through a few bytes of machine code mapped at run
time: a measuring aid, no part of iosim), the other work of the process uncounted, so two runs
of one tree agree to a few hundred instructions (the difference of whole runs moved by ~300k).

    python experiments/sweep_speed/sched23/vg_fn.py TREE [TREE ...] [--calls 10] [--fn _schedule,Trip.stack]
"""
import argparse
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

CHILD = r"""
import ctypes, gc, mmap, sys
args, sys.argv = sys.argv[1:], ["x"]
sys.path.insert(0, {here!r})
import sched_bench as S
from iosim.analysis import predict as P
from iosim.model import timing as T
# push rbx; mov rax,rdi; xor edx,edx; Valgrind's preamble (rol rdi 3, 13, 61, 51); xchg rbx,rbx;
# mov rax,rdx; pop rbx; ret: the client request of the 6 words at rdi
code = bytes.fromhex("534889f831d248c1c70348c1c70d48c1c73d48c1c73348" "87db4889d05bc3")
buf = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
buf.write(code)
req = ctypes.CFUNCTYPE(ctypes.c_ulong, ctypes.c_void_p)(ctypes.addressof(ctypes.c_char.from_buffer(buf)))
BASE = (ord("C") << 24) | (ord("T") << 16)
words = (ctypes.c_ulong * 6)(BASE + 2, 0, 0, 0, 0, 0)  # TOGGLE_COLLECT
toggle = lambda: req(ctypes.addressof(words))
dump_words = [(ctypes.c_ulong * 6)(BASE, 0, 0, 0, 0, 0)]  # DUMP_STATS
depth = [0]

def wrap(owner, name):
    orig = owner.__dict__[name]
    raw = orig.__func__ if isinstance(orig, classmethod) else orig
    def w(*a, **k):
        depth[0] += 1
        if depth[0] == 1:
            toggle()
        try:
            return raw(*a, **k)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                toggle()
    setattr(owner, name, classmethod(w) if isinstance(orig, classmethod) else w)

n, fns = int(args[0]), args[1].split(",")
runs = []
for i in (0, 1):
    p = S.problems(False)[i]
    for _ in range(3):
        P.predict(p, S.hw, S.four)
    runs.append(S.capture(p))
for fn in fns:
    if fn.startswith("Trip."):
        wrap(T.Trip, fn[5:])
    elif fn.startswith("_Rows."):
        wrap(T._Rows, fn[6:])
    else:
        wrap(T, fn)
for calls in runs:
    S.run(calls)
gc.collect()
gc.disable()
for calls in runs:
    req(ctypes.addressof(dump_words[0]))  # (what came before: dumped apart)
    for _ in range(n):
        S.run(calls)
    req(ctypes.addressof(dump_words[0]))
"""


def instructions(tree, calls, fns, tag):
    out = f"/tmp/vg_fn_{os.getpid()}_{tag}.out"
    child = CHILD.format(here=os.path.join(tree, "experiments/sweep_speed/sched22"))
    r = subprocess.run(["valgrind", "--tool=callgrind", "--collect-atstart=no", f"--callgrind-out-file={out}",
                        sys.executable, "-c", child, str(calls), fns], capture_output=True, text=True,
                       cwd=tree, env={**os.environ, "PYTHONPATH": tree, "PYTHONHASHSEED": "0"})
    if r.returncode:
        sys.exit(r.stderr[-3000:])
    got = []
    for part in sorted(f for f in os.listdir("/tmp") if f.startswith(os.path.basename(out) + ".")):
        text = open(os.path.join("/tmp", part)).read()
        m = re.search(r"^summary: (\d+)", text, re.M) or re.search(r"^totals: (\d+)", text, re.M)
        got.append((int(part.rsplit(".", 1)[1].split("-")[0]), int(m.group(1)) if m else 0))
        os.remove(os.path.join("/tmp", part))
    if os.path.exists(out):
        os.remove(out)
    got = [v for _, v in sorted(got)]
    return got[1] / calls, got[3] / calls  # (dumps: before, record, before, causal)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trees", nargs="+")
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--fn", default="_schedule")
    a = ap.parse_args()
    jobs = [(t, f) for t in a.trees for f in a.fn.split(";")]
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda j: instructions(j[0], a.calls, j[1], abs(hash(j)) % 10**8), jobs))
    for (t, f), (rec, cau) in zip(jobs, got):
        print(f"{t} {f}: per pass: record {rec:,.0f}, causal {cau:,.0f} instructions")


if __name__ == "__main__":
    main()
