"""The KernelSpecs (iosim/kernels.py) against the kernels' sources and the schedules' Plans:
every entry exists where its spec says, with the defines and the MODEL_* static_asserts the spec
names; every Plan the schedules make names its kernels' specs, passes exactly their defines,
uses their shared-memory formulas and satisfies their tile rules; and the launcher's refusal
(supported) says yes exactly where every spec accepts the problem."""

import itertools
import re
from pathlib import Path

import pytest

from iosim.core.hardware import InputError, load
from iosim.core.problem import CausalAlign, Problem
from iosim.gpu.compile import kernel_path
from iosim.kernels import SPECS, kernel_rules, supported
from iosim.schedules import SCHEDULES, plan

ROOT = Path(__file__).resolve().parents[1]
HWS = [load("h100-sxm5-80gb"), load("a100-sxm4-80gb")]


def strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", "", text)


@pytest.mark.parametrize("entry", sorted(SPECS))
def test_every_spec_names_an_entry_its_defines_and_the_model_checks_in_the_source(entry):
    s = SPECS[entry]
    code = strip_comments(kernel_path(s.source).read_text())
    m = re.search(rf'extern "C" __global__ void(?:(?!extern).)*?\b{s.function}\(', code, re.S)
    assert m, f"no entry {s.function} in {s.source}"
    if s.select:  # the selector guards the entry
        guards = [g.start() for g in re.finditer(rf"#ifdef {s.select}\b|defined\({s.select}\)", code)]
        assert guards and min(guards) < m.start(), f"{entry} not under #ifdef {s.select}"
    for d in s.defines:
        assert re.search(rf"\b{d}\b", code), f"{s.source} never reads {d} ({entry})"
    for c in s.checks:  # the kernel holds the Plan's fact against its own constexpr
        assert re.search(rf"static_assert\([^;]*\b{c}\b", code), \
            f"{s.source} has no static_assert on {c} ({entry})"
    for arg in s.writes:
        assert arg in s.args, (entry, arg)


def test_the_contract_table_lists_each_entry_s_arguments_in_the_spec_s_order():
    doc = (ROOT / "docs" / "kernel-contract.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| [^|]+ \| `([^`]+)`", doc, re.M)
    assert {e for e, _ in rows} >= set(SPECS) - {"naive_bwd_dv", "naive_bwd_dk", "naive_bwd_dp",
                                                 "naive_bwd_dq", "fa1_bwd_init", "fa1_bwd_convert",
                                                 "fa2_bwd_pre", "fa2_bwd_convert",
                                                 "fa3_bwd_pre", "fa3_bwd_convert"}
    for entry, args in rows:
        assert tuple(a.strip() for a in args.split(",")) == SPECS[entry].args, entry


def problems():
    for d, causal, align, direction, dtype in itertools.product(
            (32, 64, 72, 96, 128, 136, 192, 200, 256, 264), (False, True),
            (CausalAlign.top_left, CausalAlign.bottom_right), ("fwd", "bwd"),
            ("bf16", "fp16", "fp8_e4m3", "fp32")):
        if align is CausalAlign.bottom_right and not causal:
            continue
        yield Problem(batch=1, heads=4, kv_heads=2, seqlen_q=1000, seqlen_k=1500, head_dim=d,
                      causal=causal, causal_align=align, direction=direction, dtype=dtype)


def accepts(s, p, arch) -> bool:
    return ((s.head_dims is None and p.head_dim % 8 == 0 and p.head_dim <= 256)
            or p.head_dim in (s.head_dims or ())) and p.dtype.value in s.dtypes \
        and (not p.causal or p.causal_align in s.aligns) and arch in s.archs


def test_every_plan_refers_to_specs_that_accept_it_exactly_when_the_launcher_does():
    n_real = n_model = 0
    for hw, p in itertools.product(HWS, problems()):
        for name in SCHEDULES:
            try:
                pl = plan(name, p, hw)
            except InputError:
                continue
            for k in pl.kernels:
                if k.name not in SPECS:  # modelled only (fa3's backward): no source
                    assert k.source is None, k.name
                    continue
                s = SPECS[k.name]
                assert k.source == s.source, k.name
                assert set(k.defines) == set(s.defines) | set(s.checks) | {s.select} - {None}, \
                    (k.name, sorted(k.defines))
                if s.smem is not None:
                    assert k.smem_bytes == s.smem(k.defines, p.elem_bytes), k.name
            specs = [SPECS.get(k.name) for k in pl.kernels]
            ok = None not in specs and all(accepts(s, p, hw.arch) for s in specs)
            try:
                supported(pl)
                runs = True
            except InputError:
                runs = False
            assert runs == ok, (name, hw.name, p)
            if runs:  # the schedule's own tiles pass every static_assert the spec mirrors
                assert all(holds for _, holds, _ in kernel_rules(pl)), \
                    (name, p, [r for r in kernel_rules(pl) if not r[1]])
            n_real, n_model = n_real + runs, n_model + (not runs)
    assert n_real > 100 and n_model > 100  # both sides of the contract were exercised


def test_the_model_facts_a_plan_passes_are_the_spec_s():
    p = Problem(batch=1, heads=2, seqlen_q=4096, head_dim=200, direction="bwd")
    k = plan("fa1", p, HWS[0]).main
    rd = SPECS["fa1_bwd"].bwd_readers(k.defines)
    # fa1.cu's warp grid over the padded rows (256): 64x32 tiles, 8 warps -> W3Q 2, W3D 4,
    # NT3 = 256/4/8 = 8 n8 tiles in passes of 4: dS read W3D * 2 = 8 times
    assert (k.defines["HEAD_DIM_PAD"], k.defines["MODEL_W3Q"], k.defines["MODEL_DS_DQ"]) == \
        (256, 2, 8) == (256, rd.k_dq, rd.ds_dq)
    # d = 160 pads to 192: NT3 = 192/4/8 = 6, fa1.cu's passes of 2 (6 % 4 != 0): dS read 4 * 3
    k = plan("fa1", p.model_copy(update={"head_dim": 160}), HWS[0]).main
    assert (k.defines["HEAD_DIM_PAD"], k.defines["MODEL_DS_DQ"]) == (192, 12)
    f = plan("fa3", Problem(head_dim=64), HWS[0]).main
    assert f.defines["MODEL_KV_READERS"] == f.defines["NUM_WARPS"] // 4 == 3
