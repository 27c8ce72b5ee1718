"""Issue 26: the model evaluated for many kernels and Plans at once (timing.predict_many,
predict.rows: what sweeps, predict and tune run) gives each kernel and Plan what it gets alone,
a batch of one: counts to the integer, times to 1e-9, the same limiter, busiest unit and relief
times. Seeded random grids over every schedule, both directions, both causal alignments, GQA,
sliding windows, decode, deterministic backward passes and the dtypes, in both of the batch's
modes (every relief in one pass, or the profile's rates first and then the reliefs that can be
a limiter)."""

from __future__ import annotations

import numpy as np
import pytest

from iosim.analysis import table
from iosim.analysis.predict import predictable, rows
from iosim.analysis.predict import rows as predict_rows_of
from iosim.core.hardware import InputError, load
from iosim.core.problem import Direction, Dtype, Problem
from iosim.kernels import kv_splits
from iosim.model import memory, timing
from iosim.schedules import SCHEDULES, plan, shape, shapes
from iosim.schedules.base import BlockMap

HW = ("h100", "a100")
FLOAT_TOL = 1e-9


def problems(seed: int, n: int) -> list[Problem]:
    """`n` valid problems drawn from a seeded grid."""
    rng = np.random.default_rng(seed)
    out: list[Problem] = []
    while len(out) < n:
        heads = int(rng.choice([1, 4, 8, 12, 32]))
        kv = int(rng.choice([h for h in (1, 2, 4, heads) if heads % h == 0]))
        decode = rng.random() < 0.2
        nq = int(rng.choice([1, 2, 7, 16])) if decode else int(rng.choice([64, 100, 333, 1024, 4096, 16384]))
        nk = int(rng.choice([200, 4096, 33000])) if decode else rng.choice([None, None, 50, 777, 8192])
        direction = "fwd" if decode or rng.random() < 0.55 else "bwd"
        causal = bool(rng.random() < 0.6)
        window = int(rng.choice([128, 1000])) if causal and direction == "fwd" and rng.random() < 0.3 else None
        page = int(rng.choice([16, 64])) if decode and rng.random() < 0.3 else None
        try:
            out.append(Problem(
                batch=int(rng.choice([1, 2, 4, 16])), heads=heads, kv_heads=kv, seqlen_q=nq,
                seqlen_k=None if nk is None else int(nk), head_dim=int(rng.choice([64, 80, 128, 256])),
                causal=causal, causal_align=str(rng.choice(["top-left", "bottom-right"])),
                direction=direction, window=window, page_size=page,
                deterministic=direction == "bwd" and bool(rng.random() < 0.2),
                dtype=str(rng.choice(["bf16", "fp16", "bf16", "fp32", "fp8_e4m3"]))))
        except ValueError:
            continue
    return out


def plans(seed: int, n: int) -> list[tuple]:
    """Every (Plan, profile) the schedules can plan for the seeded problems."""
    out = []
    for name in HW:
        hw = load(name)
        for p in problems(seed, n):
            for s in SCHEDULES:
                try:
                    out.append((predictable(plan(s, p, hw, check=True), hw), hw))
                except InputError:
                    continue
    return out


def same_row(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for c, x in a.items():
        y = b[c]
        if isinstance(x, float):
            assert y == pytest.approx(x, rel=FLOAT_TOL), c
        else:  # counts, names, tiles: exactly
            assert x == y and type(x) is type(y), c


@pytest.mark.parametrize("one_pass", [0, 32])
def test_rows_of_a_batch_are_the_rows_alone(monkeypatch, one_pass):
    """predict.rows of several hundred Plans of two GPUs in one batch (the two-pass mode)
    against each Plan's rows alone, alone in one pass or in two."""
    items = plans(seed=26, n=50)
    assert len(items) > 300
    assert {pl.schedule for pl, _ in items} == set(SCHEDULES)  # every schedule is in the grid
    kinds = {(pl.problem.direction.value, pl.problem.causal_align.value, pl.problem.window is not None,
              pl.problem.group > 1) for pl, _ in items}
    assert {k[0] for k in kinds} == {"fwd", "bwd"} and {k[1] for k in kinds} == {"top-left", "bottom-right"}
    assert any(k[2] for k in kinds) and any(k[3] for k in kinds)  # windows, GQA
    together = rows(items)
    monkeypatch.setattr(timing, "ONE_PASS", one_pass)
    for (pl, hw), r in zip(items, together):
        same_row(rows([(pl, hw)])[0], r)


def test_kernel_times_of_a_batch_are_the_kernel_times_alone():
    """predict_many over every kernel of the grid's Plans against kernel_time of each kernel:
    the time, limiter, busiest unit, occupancy, and the time of every relief (where the batch
    did not predict one, its lazy prediction) to 1e-9; and each lower bound holds."""
    items = plans(seed=7, n=25)
    jobs = [(k, d, hw, pl.problem) for pl, hw in items
            for k, d in zip(pl.kernels, memory.estimate(pl, hw))]
    batch, _ = timing.predict_many(jobs)
    assert len(jobs) > timing.ONE_PASS  # the two-pass mode
    for i, (job, kt) in enumerate(zip(jobs, batch)):
        alone = timing.kernel_time(*job)
        assert kt.seconds == pytest.approx(alone.seconds, rel=FLOAT_TOL)
        assert (kt.bound, kt.busiest, kt.ctas_per_sm) == (alone.bound, alone.busiest, alone.ctas_per_sm)
        assert kt.util == pytest.approx(alone.util, rel=FLOAT_TOL)
        if i % 7:  # every relief of a seventh of them (each alone is a prediction)
            continue
        for x in timing.RELIEFS:
            assert kt.relaxed_time(x) == pytest.approx(alone.relaxed_time(x), rel=FLOAT_TOL), x
            assert kt.lower[x] <= kt.relaxed_time(x) * (1 + 1e-12), x


def test_occupancies_tried_are_the_ones_that_can_win(monkeypatch):
    """A large batch schedules each case at its occupancy cap and at fewer CTAs an SM only
    where that could be faster (above the fluid limits and above the fewer's floor,
    timing._busy): the same seconds, relief times and limiters, to the bit, as scheduling every
    occupancy of every case, with a tenth of the rows or more never scheduled."""
    items = plans(seed=17, n=30)
    jobs = [(k, d, hw, pl.problem) for pl, hw in items
            for k, d in zip(pl.kernels, memory.estimate(pl, hw))]
    b = timing.batch_of(jobs)
    starts = np.cumsum([0] + [len(pl.kernels) for pl, _ in items[:-1]])
    scheduled = []
    schedule = timing._schedule
    monkeypatch.setattr(timing, "_schedule", lambda f, *a: scheduled.append(len(f.ctas)) or schedule(f, *a))
    out = {}
    for few in (0, 10**9):  # pruned everywhere; every occupancy of every case
        monkeypatch.setattr(timing, "FEW", few)
        scheduled.clear()
        out[few] = (timing.predict_batch(b, True, starts, kernel_bounds=False), sum(scheduled))
    (pruned, rows), (every, all_rows) = out[0], out[10**9]
    # (0.9 before session 17's kernel edges: the edges lengthen the cap's time, not the floor
    # of fewer occupancies, but for the drain, so fewer are pruned: 5395 of 5698)
    assert len(b) > 300 and rows < 0.95 * all_rows
    assert np.array_equal(pruned.seconds, every.seconds)
    # the relief times both know (which ones each predicts follows what each knows exactly
    # already: timing._busy's `deps`, of the occupancies it tried)
    both = ~np.isnan(pruned.relaxed) & ~np.isnan(every.relaxed)
    assert both[:, : timing.LAUNCH].sum() > len(b)
    assert np.array_equal(pruned.relaxed[both], every.relaxed[both])
    assert pruned.group_bound == every.group_bound


def test_limiter_is_the_exhaustive_ranking():
    """The batch predicts only the reliefs that can be a limiter; the limiters it names are the
    ones every relief's time, predicted one by one, ranks first (timing.limiter)."""
    items = plans(seed=3, n=30)
    times = timing.predict_plans([(pl, hw, memory.estimate(pl, hw)) for pl, hw in items])
    for kts in times:
        total = {x: sum(k.relaxed_time(x) for k in kts) for x in timing.RELIEFS}
        assert kts.bound == timing.limiter(0.0, total)
        assert timing.plan_bound(kts) == kts.bound
        for k in kts:
            assert k.bound == timing.limiter(0.0, {x: k.relaxed_time(x) for x in timing.RELIEFS})


def test_dram_of_a_batch_is_the_dram_alone():
    """memory.estimate_many of the grid's Plans in one pass against each Plan's estimate alone:
    the same integers; and never below the compulsory bytes nor above the two-level count."""
    items = plans(seed=11, n=40)
    together = memory.estimate_many(items)
    for (pl, hw), drams in zip(items, together):
        assert drams == memory.estimate(pl, hw)
        size = memory.sizes(pl.problem, kv_splits(pl))
        for k, d in zip(pl.kernels, drams):
            assert sum(min(v, size[n]) for n, v in k.traffic.reads.items()) - 1 <= d.read <= k.traffic.hbm_read
            assert 0 <= d.write <= k.traffic.hbm_write


def test_a_plan_s_totals_from_its_kernels_are_the_plan_s():
    """table._raw takes a Plan's totals from its kernels' counts (kernel_raw's, each kernel's
    Plan sizes given) without building Plan.traffic and Plan.work: the same integers as those,
    its footprint backing's, and each kernel's counts those kernel_raw finds alone."""
    from iosim.model.backing import footprint_bytes

    for pl, hw in plans(seed=23, n=40):
        r = table._raw(pl, hw)
        t, w = pl.traffic, pl.work
        assert r.counts == [t.hbm_read, t.hbm_write, t.sram, w.tensor_flops, w.exp_ops,
                            w.alu_flops, footprint_bytes(pl)]
        ne = len(timing.EXTENSIVE)
        for i, k in enumerate(pl.kernels):
            alone = timing.kernel_raw(k, hw, pl.problem)
            assert list(alone[0]) == r.ext[i * ne:(i + 1) * ne] and alone[1] == r.inten[i]
            assert alone[0][timing.EXTENSIVE.index("two_r")] == k.traffic.hbm_read
            assert alone[0][timing.EXTENSIVE.index("two_w")] == k.traffic.hbm_write
            assert alone[1][timing.INTENSIVE.index("head")] == timing.first_loads(k)
            assert alone[1][timing.INTENSIVE.index("drain")] == timing.store_drain(k)


def shaped(seed: int, n: int) -> list[Problem]:
    """The seeded problems, each also with other batch sizes and K/V heads (the same heads per
    K/V head): problems of one shape (schedules.shape) but for batch x kv_heads, two of them
    with the same batch x kv_heads (5 x 1 and 1 x 5: one prediction, table._distinct)."""
    out = []
    for p in problems(seed, n):
        out.append(p)
        for b, m in ((3, 1), (1, 5), (16, 2), (7, 3), (5, 1)):
            out.append(p.model_copy(update={"batch": b, "kv_heads": p.kv_heads * m,
                                            "heads": p.heads * m}))
    return out


@pytest.mark.parametrize("name", HW)
def test_a_shape_s_template_predicts_every_problem_of_it(name):
    """table.columns of the problems grouped by shape, each group predicted from one template
    Plan scaled by batch x kv_heads, against each problem's own Plan predicted alone
    (predict.rows): every column equal, counts to the integer, times to 1e-9, for every
    schedule; and the grid has shapes of several problems for each schedule that scales."""
    hw = load(name)
    probs = shaped(seed=5, n=30)
    shared, twins = set(), set()
    for s in SCHEDULES:
        temps, order, errors = table.templates(probs, hw, s)
        if any(len(t.problems) > 1 for t in temps):
            shared.add(s)
        if any(len({table.pairs(p) for p in t.problems}) < len(t.problems) for t in temps):
            twins.add(s)  # problems predicted once for both (table._distinct)
        rows = table.as_rows(table.columns(temps)) if temps else []
        assert len(rows) + sum(n for _, n in errors) == len(probs)
        alone = predict_rows_of([(predictable(plan(s, probs[i], hw, check=True), hw), hw) for i in order])
        for a, r in zip(alone, rows):
            same_row(a, r)
    assert shared == set(SCHEDULES) - ({"fa3"} if not hw.has_wgmma else set())
    assert twins >= {"naive", "fa2"}


@pytest.mark.parametrize("name", HW)
def test_shapes_of_a_grid_are_each_problem_s_shape(name):
    """schedules.shapes (the layout asked once per shape and what it reads of batch x heads)
    gives every problem of a seeded grid, for every schedule, what shape() gives it alone;
    and fa1's grid holds several layouts of one shape (the memo is exercised)."""
    hw = load(name)
    probs = shaped(seed=21, n=30) + [p.model_copy(update={"batch": b, "heads": p.heads * m,
                                                          "kv_heads": p.kv_heads * m})
                                     for p in problems(22, 8) for b in (1, 2, 8, 64, 512)
                                     for m in (1, 3, 16)]
    # fa3's persistent fp8 forward: a layout per (batch, heads) (schedules.LAYOUT_INPUT)
    probs += [p.model_copy(update={"dtype": Dtype.fp8_e4m3, "direction": Direction.fwd,
                                   "causal": False, "window": None, "deterministic": False,
                                   "batch": b})
              for p in probs[:12] for b in (1, 3, 64)]
    given = [p.shape_key() for p in probs]  # predict_many's: one per problem, every schedule
    for s in SCHEDULES:
        want = [shape(s, p, hw) for p in probs]
        assert shapes(s, probs, hw) == want and shapes(s, probs, hw, keys=given) == want, s
    keys = [k for k in shapes("fa1", probs, hw) if k is not None]
    assert len(set(keys)) > len({k[:-1] for k in keys})  # layouts that split one shape
    if hw.has_wgmma:  # fa3's persistent grids: shapes of their own by (batch, heads)
        keys = [k for k in shapes("fa3", probs, hw) if k is not None]
        assert len(set(keys)) > len({k[:-1] for k in keys})


def test_rows_name_the_exhaustive_limiter():
    """predict.rows searches only the groups' limiters (the most promising relief first, then
    those whose lower bound could beat it); its `bound` is the Plan limiter that predicting
    every kernel's every relief names (timing.predict_plans, held to the exhaustive ranking
    above)."""
    items = plans(seed=13, n=40)
    full = timing.predict_plans([(pl, hw, memory.estimate(pl, hw)) for pl, hw in items])
    assert [r["bound"] for r in rows(items)] == [kts.bound for kts in full]
    assert len({kts.bound for kts in full}) >= 4  # several limiters, not one


def kernel_jobs(items: list[tuple]) -> tuple[list, list[int]]:
    """The Plans' kernels as timing's jobs, in order, and where each Plan's begin."""
    jobs, starts = [], []
    for pl, hw in items:
        starts.append(len(jobs))
        jobs += [(k, d, hw, pl.problem) for k, d in zip(pl.kernels, memory.estimate(pl, hw))]
    return jobs, starts


def test_group_search_rules_reliefs_out_on_the_longest_kernel():
    """The groups' search predicts the other reliefs on each group's longest kernel first: some
    are then ruled out with the group's other kernels left unpredicted, and the groups'
    limiters are still those of every relief of every kernel (timing.predict_plans)."""
    items = plans(seed=17, n=40)
    jobs, starts = kernel_jobs(items)
    b = timing.batch_of(jobs)
    pr = timing.predict_batch(b, True, np.array(starts), kernel_bounds=False)
    full = timing.predict_plans([(pl, hw, memory.estimate(pl, hw)) for pl, hw in items])
    assert pr.group_bound == [kts.bound for kts in full]
    ends = starts[1:] + [len(jobs)]
    ruled_out = 0
    for g0, g1 in zip(starts, ends):
        if g1 - g0 < 2:
            continue
        top = g0 + int(np.argmax(pr.seconds[g0:g1]))
        others = np.delete(pr.relaxed[g0:g1], top - g0, axis=0)
        # predicted on the longest kernel (shorter than its time: not a rate it never uses;
        # not the launch's, known without a prediction), on none of the others
        shorter = pr.relaxed[top] < pr.seconds[top]
        shorter[timing.LAUNCH] = False
        ruled_out += int((shorter & np.isnan(others).all(axis=0)).sum())
    assert ruled_out > 0


def test_search_bounds_unequal_ctas_below_their_times(monkeypatch):
    """The groups' search bounds a kernel of unequal CTAs before predicting it (timing._busy's
    `bound`: the spread of its summed durations, at every occupancy): each such bound is at or
    below the kernel's time with that relief, most strictly, and the other kernels' times come
    out the same to the bit, in a large batch's pass over occupancies and a small one's; the
    search predicts in full a minority of the unequal rows it bounds, and names the groups'
    limiters of every relief of every kernel."""
    items = plans(seed=19, n=40)
    jobs, starts = kernel_jobs(items)
    b = timing.batch_of(jobs)
    unequal = b.pidx >= 0
    assert unequal.sum() > 20 and (~unequal).sum() > 20
    k = np.arange(len(b)).repeat(timing.LAUNCH)
    x = np.tile(np.arange(1, timing.LAUNCH + 1), len(b))
    exact, _ = timing._busy(b, k, x)
    u = unequal[k]
    for few in (0, 10**9):  # fewer occupancies where they could win (large); all (small)
        monkeypatch.setattr(timing, "FEW", few)
        bound, _ = timing._busy(b, k, x, bound=True)
        assert np.array_equal(bound[~u], exact[~u])
        assert (bound[u] <= exact[u]).all() and (bound[u] < exact[u]).mean() > 0.5
    monkeypatch.undo()
    rows = {False: 0, True: 0}  # unequal rows predicted in full, bounded
    busy = timing._busy

    def counted(b, kidx, relief, deps=False, bound=False):
        if not deps:
            rows[bound] += int((b.pidx[kidx] >= 0).sum())
        return busy(b, kidx, relief, deps, bound)

    monkeypatch.setattr(timing, "_busy", counted)
    pr = timing.predict_batch(b, True, np.array(starts), kernel_bounds=False)
    assert 0 < rows[False] < rows[True]
    full = timing.predict_plans([(pl, hw, memory.estimate(pl, hw)) for pl, hw in items])
    assert pr.group_bound == [kts.bound for kts in full]


def test_predict_many_is_predict_of_each_problem():
    """iosim.predict_many of seeded problems (with shapes shared by several) against
    iosim.predict of each problem: the same rows, schedule by schedule, problems in order;
    time only (limiter=False) leaves `bound` empty and every time as it was."""
    import iosim

    hw = load("h100")
    probs = shaped(seed=9, n=6)
    df = iosim.predict_many(probs, hw, ["fa2", "naive", "decode"])
    at = 0  # rows are matched by schedule, then problem order
    for s in ("fa2", "naive", "decode"):
        for p in probs:
            try:
                one = iosim.predict(p, hw, [s])
            except InputError:
                continue
            r, a = df.iloc[at], one.iloc[0]
            assert r["schedule"] == s and r["batch"] == p.batch and r["heads"] == p.heads
            assert r["time_pred_ms"] == pytest.approx(a["time_pred_ms"], rel=FLOAT_TOL)
            assert r["bound"] == a["bound"] and r["dram_read_bytes"] == a["dram_read_bytes"]
            at += 1
    assert at == len(df) and sum(df.attrs["skipped"].values()) == 3 * len(probs) - at
    fast = iosim.predict_many(probs, hw, ["fa2", "naive", "decode"], limiter=False)
    assert fast["bound"].isna().all()
    assert fast["time_pred_ms"].tolist() == df["time_pred_ms"].tolist()


@pytest.mark.parametrize("call", ["predict_many", "predict", "predict_rows"])
def test_predictions_pause_the_collector_and_leave_it_as_it_was(call, monkeypatch):
    """predict_many, predict and predict_rows pause Python's cyclic garbage collector for
    their call (they make no cycles: its passes over their short-lived objects are waste) and
    give it back as they found it, on or off, also when the call fails."""
    import gc

    import iosim
    from iosim.analysis import predict as P
    from iosim.analysis import table

    hw, probs = load("h100"), shaped(seed=9, n=2)
    run = {"predict_many": lambda s: iosim.predict_many(probs, hw, s, limiter=False),
           "predict": lambda s: iosim.predict(probs[0], hw, s),
           "predict_rows": lambda s: P.predict_rows(probs[0], hw, s)}[call]
    during = []
    columns = table.columns
    monkeypatch.setattr(table, "columns", lambda *a, **k: during.append(gc.isenabled()) or columns(*a, **k))
    was = gc.isenabled()
    try:
        for on in (True, False):
            gc.enable() if on else gc.disable()
            run(["fa2"])
            assert gc.isenabled() is on
            with pytest.raises(InputError):
                run(["nope"])
            assert gc.isenabled() is on
        assert during and not any(during)  # paused while the tables were made
        gc.collect()
        gc.disable()
        run(["naive", "fa1", "fa2", "fa3"])
        assert gc.collect() == 0  # nothing for the collector to free
    finally:
        gc.enable() if was else gc.disable()


@pytest.mark.parametrize("ahead", [True, False])
def test_paged_decode_waits_predict_alike_in_a_batch_and_alone(ahead):
    """Paged decode Plans, today's gather and the earlier one whose trips wait for table reads
    (its spec's sync_loads on an `async` trip: timing's latency term): the rows of a batch and
    each kernel's time in a batch against each Plan and kernel alone, to 1e-9 (the templates
    of paged shapes: test_a_shape_s_template_predicts_every_problem_of_it)."""
    from iosim.schedules import Tiles

    hw = load("h100")
    t = Tiles(page_ahead=ahead)
    probs = [Problem(batch=b, heads=4 * kv, kv_heads=kv, seqlen_q=nq, seqlen_k=nk, head_dim=128,
                     page_size=ps, causal=nq > 1, causal_align="bottom-right")
             for b, kv in ((1, 8), (4, 2), (8, 8), (32, 8))
             for nq, nk, ps in ((1, 32768, 16), (4, 5000, 64), (1, 131072, 256))]
    items = [(predictable(plan("decode", p, hw, t, check=True), hw), hw) for p in probs]
    assert all(pl.main.defines["PAGE_AHEAD"] == int(ahead) for pl, _ in items)
    for (pl, h), r in zip(items, rows(items)):
        same_row(rows([(pl, h)])[0], r)
    jobs = [(k, d, h, pl.problem) for pl, h in items for k, d in zip(pl.kernels, memory.estimate(pl, h))]
    for job, kt in zip(jobs, timing.predict_many(jobs)[0]):
        alone = timing.kernel_time(*job)
        assert kt.seconds == pytest.approx(alone.seconds, rel=FLOAT_TOL)
        assert kt.bound == alone.bound


def test_period_stacks_hold_each_kernel_s_period():
    """Batch.stacks, the unequal CTA periods laid end to end once for every _schedule pass:
    each kernel's entries there are its own (trips, masked trips), and kernels whose CTAs are
    alike have none (length 0)."""
    items = plans(seed=21, n=20)
    jobs = [(k, d, hw, pl.problem) for pl, hw in items
            for k, d in zip(pl.kernels, memory.estimate(pl, hw))]
    b = timing.batch_of(jobs)
    lengths, start, (trips, masked) = b.stacks
    assert len(b.periods) > 10 and len(set(lengths[1:].tolist())) > 2  # several lengths
    for i in range(len(b)):
        pid = int(b.pidx[i])
        if pid < 0:
            assert lengths[0] == 0
            continue
        one, low = b.periods[pid]
        size, at = int(lengths[pid + 1]), int(start[pid + 1])
        assert size == len(one) > 1
        assert np.array_equal(trips[at:at + size], np.asarray(one, np.float64))
        assert np.array_equal(masked[at:at + size], np.asarray(low, np.float64))


def test_rows_of_several_lengths_sum_as_each_length_alone():
    """timing._Rows: periods of several lengths laid end to end give each row's sum, running
    sum and max to the bit as a (rows, length) array of each length's rows alone does."""
    rng = np.random.default_rng(7)
    size = np.sort(rng.choice([2, 3, 8, 11, 31, 64, 171, 256], 60))
    rows = timing._Rows.of(size)
    x = rng.uniform(1e-7, 1e-5, int(size.sum()))
    sums, cums, tops = rows.sums(x), rows.cumsums(x), rows.max(x)
    for n in np.unique(size):
        i = np.flatnonzero(size == n)
        block = np.array([x[rows.off[k]:rows.off[k + 1]] for k in i])
        assert np.array_equal(sums[i], block.sum(axis=1))
        assert np.array_equal(tops[i], block.max(axis=1))
        assert np.array_equal(np.array([cums[rows.off[k]:rows.off[k + 1]] for k in i]),
                              np.cumsum(block, axis=1))


@pytest.mark.parametrize("causal", [False, True])
def test_a_plan_planned_again_launches_the_same_period_arrays(causal):
    """fa2's and fa3's CTAs, launched last query block first: planning the problem again gives
    the same trip arrays (the objects, read-only), so timing remembers their period instead of
    working it out anew; the arrays are the block map's, reversed."""
    hw = load("h100")
    p = Problem(batch=2, heads=8, seqlen_q=3000, head_dim=128, causal=causal)
    for s in ("fa2", "fa3"):
        a, b = plan(s, p, hw).main, plan(s, p, hw).main
        for x in ("trips", "masked", "tile_trips"):
            if getattr(a, x) is not None:
                assert getattr(a, x) is getattr(b, x), (s, x)
                assert not getattr(a, x).flags.writeable
    bm = plan("fa2", p, hw).main
    assert np.array_equal(bm.trips[::-1], BlockMap.of(p, bm.block_m, bm.block_n).row_tiles())


def test_list_schedule_is_its_formula():
    """list_schedule on seeded random periods, launch counts and slots against its formula
    written out (CTA c of the last period, (reps - 1) x period + c in launch order, starts at
    once while a slot is free): the same bits."""
    rng = np.random.default_rng(4)
    for size in (1, 3, 64, 129):
        dc = rng.uniform(1e-7, 1e-5, (200, size))
        reps = rng.integers(1, 9, 200).astype(np.float64)
        slots = rng.integers(1, 3 * size * 8, 200).astype(np.float64)
        total = dc.sum(axis=1, keepdims=True)
        residual = (dc * dc).sum(axis=1, keepdims=True) / (2 * total)
        before = np.cumsum(dc, axis=1) - dc + (reps[:, None] - 1) * total
        index = (reps[:, None] - 1) * size + np.arange(size)
        start = np.where(index < slots[:, None], 0.0,
                         np.maximum(0.0, before / slots[:, None] - residual))
        want = (start + dc).max(axis=1)
        assert np.array_equal(timing.list_schedule(dc, reps, slots), want)
        assert timing.list_schedule(dc[0], reps[0], slots[0]) == want[0]
        assert (want > dc.max(axis=1)).any() and (want == dc.max(axis=1)).any()  # both regimes


def test_trip_times_of_each_policy_alone_are_those_of_all_entries(monkeypatch):
    """Trip.time evaluates each overlap policy on its own entries (a gather of them) or on all
    entries at once (a select of each policy's answer), the bandwidth shared and not as a
    leading axis: the seconds, relief times and limiters of a batch of every schedule come out
    the same to the bit either way."""
    items = plans(seed=15, n=20)
    jobs = [(k, d, hw, pl.problem) for pl, hw in items
            for k, d in zip(pl.kernels, memory.estimate(pl, hw))]
    b = timing.batch_of(jobs)
    assert len(set(b.table[:, timing.FACTS.index("policy")].tolist())) >= 5  # the policies mix
    starts = np.cumsum([0] + [len(pl.kernels) for pl, _ in items[:-1]])
    out = []
    for subset in (0, 10**9):  # each policy on its own entries; every policy on all entries
        monkeypatch.setattr(timing, "SUBSET", subset)
        out.append(timing.predict_batch(b, True, starts, kernel_bounds=False))
    assert np.array_equal(out[0].seconds, out[1].seconds)
    assert np.array_equal(out[0].relaxed, out[1].relaxed, equal_nan=True)
    assert out[0].group_bound == out[1].group_bound


def test_pnorm_of_one_exponent_is_its_general_form():
    """pnorm with one finite exponent as a float (its fast path: a batch of one profile) gives
    the bits of the same exponent as an array, terms of zero (the largest term itself) and
    mixed shapes included; an infinite exponent is the largest term."""
    rng = np.random.default_rng(26)
    t = [rng.random(50) * 1e-6, rng.random((2, 50)) * 1e-6, np.where(rng.random(50) < 0.3, 0.0, 1e-7)]
    t[0][:5] = t[1][:, :5] = t[2][:5] = 0.0  # all terms zero: the answer is 0
    for q in (1.0, 1.8607719711091264, 3.0):
        fast = timing.pnorm(t, q)
        assert np.array_equal(fast, timing.pnorm(t, np.full(50, q)))
        assert np.all(fast[:, :5] == 0) and np.all(fast >= timing._max(*t))
    assert np.array_equal(timing.pnorm(t, np.inf), timing._max(*t))


def test_counts_beyond_int64_are_exact_alone_and_in_a_batch():
    """A problem whose counts pass int64 (N = 2^31 - 1): predict's rows (a template of one
    problem) and a batch of its shape give Python ints equal to each Plan's own counts."""
    from iosim.analysis.predict import predict_many, predict_rows

    hw = load("h100")
    p = Problem(batch=1, heads=1, seqlen_q=2**31 - 1, head_dim=128)
    out, _ = predict_rows(p, hw, ["fa2"])
    want = plan("fa2", p, hw).work.tensor_flops
    assert want > 2**63 and type(out[0]["tensor_flops"]) is int and out[0]["tensor_flops"] == want
    q = p.model_copy(update={"batch": 3})
    df = predict_many([p, q], hw, ["fa2"])
    assert df.tensor_flops.tolist() == [want, plan("fa2", q, hw).work.tensor_flops]


def test_a_frame_of_typed_columns_is_the_frame_of_the_lists():
    """table.as_frame turns a list column of one plain type into the array pandas would infer
    from it (faster): the frame, dtypes included, is the one pandas builds from the lists (a
    cell a row lacks: None), for a table with windows (cells some rows lack), None tiles, GQA,
    and ints past int64's reach."""
    import pandas as pd

    hw = load("h100")
    probs = [p for p in problems(seed=5, n=40) if p.direction.value == "fwd"]
    temps = [t for s in ("naive", "fa1", "fa2", "decode") for t in table.templates(probs, hw, s)[0]]
    cols = table.columns(temps)
    cols["huge"] = [2**70] + [1] * (len(cols["hw"]) - 1)
    assert any(table.ABSENT in c for c in cols.values() if isinstance(c, list))
    want = pd.DataFrame({c: col if isinstance(col, np.ndarray) else
                         [None if v is table.ABSENT else v for v in col] for c, col in cols.items()})
    got = table.as_frame(cols)
    assert got.equals(want) and got.dtypes.tolist() == want.dtypes.tolist()
    order = list(range(len(cols["hw"])))[::-1]
    assert table.as_frame(table.take(cols, order)).equals(want.iloc[order].reset_index(drop=True))


def test_coded_columns_make_the_frame_of_the_rows():
    """table.columns(coded=True) (a template's values and names coded, not a value a row), taken
    and made a frame, is the frame of the plain columns taken: values, dtypes (Arrow strings
    included) and columns, for windows and fp8 (cells some rows lack), None tiles, GQA, decode,
    ints past int64's reach, in a new order and as a subset with repeats; its plain columns are
    columns()'."""
    hw = load("h100")
    probs = [p for p in problems(seed=7, n=60) if p.direction.value == "fwd"]
    probs += [p.model_copy(update={"batch": 2 * p.batch}) for p in probs[::2]]  # shapes of two
    big = Problem(batch=2**20, heads=128, seqlen_q=2**20, head_dim=256)
    probs += [big, big.model_copy(update={"batch": 3})]
    temps = [t for s in ("naive", "fa1", "fa2", "fa3", "decode") for t in table.templates(probs, hw, s)[0]]
    plain, coded = table.columns(temps), table.columns(temps, coded=True)
    assert any(isinstance(c, table._Coded) and table.ABSENT in c.values for c in coded.values())
    n = len(plain["hw"])
    for order in (list(range(n))[::-1], [3, 3, 0, n - 1, 1]):
        want = table.as_frame(table.take(plain, order))
        got = table.as_frame(table.take(coded, order))
        assert got.equals(want) and got.dtypes.tolist() == want.dtypes.tolist()
        assert list(got.columns) == list(want.columns)
    for c, col in coded.items():
        same = table._plain(col)
        assert type(same) is type(plain[c]) and getattr(same, "dtype", None) == getattr(plain[c], "dtype", None)
        assert table._py(same) == table._py(plain[c]), c


def test_fits_of_many_templates_are_each_template_s_fit():
    """table._fits (every template's a + b x pairs in one numpy pass) against table._fit of
    each template alone (Python's ints and floats): the same a and b, to the integer, and the
    same templates found not whole, for seeded Plans of every schedule
    (floats among the counts: fill and L2 bytes), fitted through a second Plan (the papers'
    baseline), proportional to pairs, and past int64's reach."""
    items = []
    for pl, hw in plans(seed=41, n=25):
        p = pl.problem
        probe = plan(pl.schedule, p.model_copy(update={"batch": 2 * p.batch}), hw, check=True)
        for second in (probe, None):
            items.append((table._flat(table._raw(pl, hw)),
                          None if second is None else table._flat(table._raw(second, hw)),
                          table.pairs(p), 0 if second is None else table.pairs(second.problem)))

    def each(v0, v1, u0, u1) -> list:  # _fits' answer cut per template, as _fit gives it
        a, b, bad = table._fits(v0, v1, u0, u1)
        ends = np.cumsum([len(v) for v in v0]).tolist()
        return [None if no else (a[e - len(v):e].tolist(), b[e - len(v):e].tolist())
                for no, e, v in zip(bad, ends, v0)]

    v0, v1, u0, u1 = (list(x) for x in zip(*items))
    want = [table._fit(*x) for x in items]
    got = each(v0, v1, u0, u1)
    assert got == want
    assert any(w is None for w in want) and any(w is not None for w in want)
    # the Plan's totals (the last 7) Python's ints, as _fit's
    assert all(type(v) is int for g in got if g for v in g[0][-7:] + g[1][-7:])
    # one count past int64: every template in Python's ints, the same answers
    v0[0] = v0[0][:-1] + [2**70 * u0[0]]
    assert each(v0, v1, u0, u1) == [table._fit(*x) for x in zip(v0, v1, u0, u1)]


def test_intensity_of_a_column_is_python_s_division():
    """table._intensity in float64 where the ints are floats exactly, else as Python divides
    them: each row the float (tensor + ALU FLOPs) / max(DRAM bytes, 1) of Python's ints, past
    2^53 too."""
    rng = np.random.default_rng(3)
    tf = rng.integers(0, 2**61, 400) >> rng.integers(0, 61, 400)
    alu = rng.integers(0, 2**60, 400) >> rng.integers(0, 60, 400)
    dr = rng.integers(0, 2**58, 400) >> rng.integers(0, 58, 400)
    dw = rng.integers(0, 4, 400)
    want = [(int(a) + int(b)) / max(int(c) + int(d), 1) for a, b, c, d in zip(tf, alu, dr, dw)]
    assert table._intensity(tf, alu, dr, dw).tolist() == want
    assert table._intensity(tf.tolist(), alu.tolist(), dr, dw).tolist() == want


def test_distinct_pairs_are_first_seen_per_template():
    """table._distinct: each template's distinct pairs in the order first seen, and each
    problem's entry among them, as a dict per template gives them."""
    rng = np.random.default_rng(8)
    t = np.sort(rng.integers(0, 30, 500))
    t = np.unique(t, return_inverse=True)[1]  # templates 0.. without gaps
    u = rng.choice([1, 2, 3, 8, 16, 48, 2**40], 500)
    du, dm, back = table._distinct(t, u)
    want_u, want_m, want_back = [], [], []
    for k in range(t.max() + 1):
        index = {x: i for i, x in enumerate(dict.fromkeys(u[t == k].tolist()))}
        want_back += [len(want_u) + index[x] for x in u[t == k].tolist()]
        want_u += list(index)
        want_m.append(len(index))
    assert du.tolist() == want_u and dm.tolist() == want_m and back.tolist() == want_back


def _predict_cases() -> list[tuple]:
    """(problem, profile, schedules, tiles) for predict: both directions, causal, a sliding
    window, GQA, decode (paged, ragged), fp8, tiles given, a schedule that cannot be planned,
    counts past int64's reach, three GPUs."""
    from iosim.schedules import Tiles

    p = Problem(batch=4, heads=32, seqlen_q=4096, head_dim=128)
    four = ["naive", "fa1", "fa2", "fa3"]
    return [
        (p, "h100", four, Tiles()),
        (p, "a100", None, Tiles()),
        (p.model_copy(update={"direction": Direction.bwd, "causal": True}), "h200", four, Tiles()),
        (Problem(batch=2, heads=16, seqlen_q=9000, head_dim=64, causal=True, window=1000), "h100", None, Tiles()),
        (Problem(batch=3, heads=32, kv_heads=8, seqlen_q=2048, head_dim=128, causal=True), "a100", four, Tiles()),
        (Problem(batch=16, heads=32, kv_heads=8, seqlen_q=1, seqlen_k=8192, head_dim=128), "h100", None, Tiles()),
        (Problem(batch=2, heads=32, kv_heads=4, seqlen_q=1, seqlen_k=4096, head_dim=128, page_size=16,
                 seqlens_k=(1000, 4096)), "h200", None, Tiles()),
        (p.model_copy(update={"dtype": Dtype.fp8_e4m3}), "h100", four, Tiles()),
        (p, "h100", ["fa1", "fa2", "naive"], Tiles(block_m=64, block_n=64)),
        (p, "h100", four, Tiles(block_m=256, block_n=128)),  # fa1's and fa3's over the SRAM
        (p, "h200", four, Tiles(block_m=256, block_n=256)),  # naive's row alone
        (p, "a100", ["fa2", "fa3"], Tiles()),  # fa3 on a GPU without wgmma: skipped
        (Problem(batch=1, heads=1, seqlen_q=2**31 - 1, head_dim=128), "h100", ["naive", "fa2"], Tiles()),
    ]


def _strings(arrow: bool):
    """A context with pandas' str dtype as it is (`arrow`), or off (an option of pandas 3,
    deprecated: object strings); the test skipped where this pandas has no such option."""
    import contextlib
    import warnings

    import pandas as pd

    if arrow:
        return contextlib.nullcontext()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            pd.get_option("future.infer_string")
    except KeyError:
        pytest.skip("this pandas has no str inference to switch off")
    return pd.option_context("future.infer_string", False)


@pytest.mark.parametrize("arrow", [True, False])
def test_predict_s_frame_is_the_frame_of_its_rows(arrow):
    """predict builds its frame from the columns (table.as_frame), not from a dict a row: the
    frame, values, dtypes (Arrow or object strings, None tiles as float64 or object, ints past
    int64) and column order included, and the skipped schedules are pandas' frame of
    predict_rows' dicts, whose ratios to naive are Python's of each row's values."""
    import warnings

    import pandas as pd

    from iosim.analysis.predict import predict, predict_rows

    off = _strings(arrow)
    kinds = set()
    with warnings.catch_warnings(), off:
        warnings.simplefilter("ignore", DeprecationWarning)
        for p, name, schedules, tiles in _predict_cases():
            hw = load(name)
            rows, skipped = predict_rows(p, hw, schedules, tiles)
            got, want = predict(p, hw, schedules, tiles), pd.DataFrame(rows)
            pd.testing.assert_frame_equal(got, want, check_exact=True)
            assert got.dtypes.tolist() == want.dtypes.tolist() and got.columns.dtype == want.columns.dtype
            assert got.attrs["skipped"] == skipped
            kinds |= {str(d) for d in got.dtypes} | {str(got.columns.dtype)}
            base = next((r for r in rows if r["schedule"] == "naive"), None)
            for r in rows if base else ():
                two = base["hbm_read_bytes_2level"] + base["hbm_write_bytes_2level"]
                assert r["hbm_vs_naive"] == (r["hbm_read_bytes_2level"] + r["hbm_write_bytes_2level"]) / two
                assert r["time_vs_naive"] == r["time_pred_ms"] / base["time_pred_ms"]
    strings = {"str"} if arrow else {"object"}
    assert {"int64", "float64", "bool", "object"} | strings <= kinds, kinds  # each kind met


@pytest.mark.parametrize("arrow", [True, False])
def test_a_short_frame_is_pandas_frame_of_its_cells_types(arrow):
    """A short table (predict's) is built by the layout its names and types give, worked out
    once (table._short_frame): a table of the same names whose cells' types differ (a float
    among ints, ints past int64's reach, tiles past float64's exact ints (objects past
    int64's), a None among str, an int32 or object array) is still the frame pandas infers
    from it, Arrow strings on, off and held in Python; the layout serves the tables it fits. With `dicts`
    (predict's), the frame of the rows' dicts where a row lacks a cell."""
    import warnings

    import pandas as pd

    try:
        from pandas.api.internals import create_dataframe_from_blocks
    except ImportError:  # pandas < 3: as_frame is pd.DataFrame's frame
        create_dataframe_from_blocks = None
    off = _strings(arrow)
    base = {"s": ["a", "b", "c"], "i": [1, 2, 3], "f": [0.5, 2.0, 3.0], "b": [True, False, True],
            "tile": [None, 64, None], "none": [None] * 3, "arr": np.arange(3), "x": np.ones(3),
            "t": ["x", "y", "z"], "fits": np.array([True, True, False])}
    changes = [{}, {"i": [1, 2.5, 3]}, {"i": [1, 2**70, 3]}, {"tile": [None, 2**53 + 1, None]},
               {"tile": [None, 2**64, None]}, {"tile": [None, -(2**63) - 5, 0]}, {"tile": [None, 2**53 - 1, 0]}, {"s": ["a", None, "c"]}, {"none": [None, 1.5, None]},
               {"arr": np.arange(3, dtype=np.int32)}, {"arr": np.array(["p", "q", "r"], dtype=object)},
               {"f": [1, 2, 3]}, {"t": [1, 2, 3]}, {}]
    with warnings.catch_warnings(), off:
        warnings.simplefilter("ignore", DeprecationWarning)
        for change in changes:
            cols = {**base, **change}
            want = pd.DataFrame(cols)
            got = table.as_frame(cols)
            pd.testing.assert_frame_equal(got, want, check_exact=True)
            assert got.dtypes.tolist() == want.dtypes.tolist() and got.columns.dtype == want.columns.dtype
        if create_dataframe_from_blocks is not None:  # the layout's frame
            assert table._short_frame(base, 3, create_dataframe_from_blocks) is not None
        # predict's (dicts): pandas' frame of the rows' dicts, a column the first row lacks last
        for lacking in ({}, {"tile": [table.ABSENT, 64, None]}, {"s": ["a", "b", table.ABSENT]}):
            cols = {**base, **lacking}
            want = pd.DataFrame(table.as_rows(cols))
            pd.testing.assert_frame_equal(table.as_frame(cols, dicts=True), want, check_exact=True)
            assert (want.columns[-1] == "tile") == ("tile" in lacking)
    if arrow:  # pandas' str held in Python (names of their own: an Index is kept per names)
        with pd.option_context("mode.string_storage", "python"):
            cols = {f"{c} (python)": col for c, col in base.items()}
            pd.testing.assert_frame_equal(table.as_frame(cols), pd.DataFrame(cols), check_exact=True)


@pytest.mark.parametrize("arrow", [True, False])
def test_a_short_frame_through_pandas_blocks_is_the_frame_of_its_public_builder(arrow, monkeypatch):
    """A short frame (predict's) is built from pandas' own block classes where this pandas has
    them (private API: table._pandas_blocks, table._built), else through the public
    create_dataframe_from_blocks: each way, predict's frame is pandas' frame of predict_rows'
    dicts, values, dtypes (Arrow or object strings, str held in Arrow or Python), the
    columns' dtype and a dtype's columns as one array (pandas takes a block's rows in its
    columns' order); each way is the one taken (str held in Python: neither, pandas infers
    them)."""
    import warnings

    import pandas as pd

    from iosim.analysis.predict import predict, predict_rows

    built = []
    real = table._built
    monkeypatch.setattr(table, "_built", lambda *a: built.append(1) or real(*a))
    ways = [True, False] if table._pandas_blocks() is not None else [False]
    storages = ["pyarrow", "python"] if arrow else [pd.get_option("mode.string_storage")]
    with warnings.catch_warnings(), _strings(arrow):
        warnings.simplefilter("ignore", DeprecationWarning)
        for fast in ways:
            with monkeypatch.context() as m:
                if not fast:  # as where this pandas lacks them
                    m.setattr(table, "_PANDAS_BLOCKS", False)
                for storage in storages:
                    with pd.option_context("mode.string_storage", storage):
                        for p, name, schedules, tiles in _predict_cases()[:9]:
                            hw = load(name)
                            built.clear()
                            got = predict(p, hw, schedules, tiles)
                            want = pd.DataFrame(predict_rows(p, hw, schedules, tiles)[0])
                            pd.testing.assert_frame_equal(got, want, check_exact=True)
                            assert got.dtypes.tolist() == want.dtypes.tolist()
                            assert got.columns.dtype == want.columns.dtype
                            for kind in ("int64", "float64", "bool"):  # a block's array as pandas takes it
                                pd.testing.assert_frame_equal(pd.DataFrame(got.select_dtypes(kind).to_numpy()),
                                                              pd.DataFrame(want.select_dtypes(kind).to_numpy()))
                            # (pandas' str held in Python: as_frame's general way, no layout)
                            assert bool(built) == (fast and not (arrow and storage == "python"))


def test_a_str_column_made_directly_is_pandas_own():
    """table._arrow_strs: a short frame's str column made of an Arrow slice by pandas' own
    maker (_from_pyarrow_array, private API) or directly (its three attributes set) is
    pandas' array of the strs, attributes alike."""
    import pandas as pd

    try:
        import pyarrow as pa
        from pandas.arrays import ArrowStringArray

        dtype = pd.StringDtype("pyarrow", na_value=np.nan)
    except (ImportError, TypeError):
        pytest.skip("no pyarrow, or a pandas without its str dtype")
    cells = pa.chunked_array([pa.array(["x", "a", "b", "c"], pa.large_string())]).slice(1, 3)
    made = [table._arrow_strs(dtype, direct) for direct in (True, False)]
    for make in made:
        got = make(cells)
        pd.testing.assert_extension_array_equal(got, pd.array(["a", "b", "c"], dtype=dtype))
        assert got.dtype == dtype and type(got) is ArrowStringArray
    assert vars(made[0](cells)).keys() == vars(made[1](cells)).keys()


def test_the_str_mode_read_from_pandas_options_is_pd_get_option_s():
    """table._str_mode reads pandas' str storage from its options dict (private API) where
    that dict holds it, else through pd.get_option: both readers answer as pd.get_option,
    for each storage pandas is set to."""
    import pandas as pd

    fast, slow = table._str_mode_reader(), table._str_mode_reader(private=False)
    for storage in ("python", "pyarrow", pd.get_option("mode.string_storage")):
        with pd.option_context("mode.string_storage", storage):
            assert fast() == slow() == (slow()[0], storage)
            assert table._str_mode() == slow()


def test_as_frame_without_pandas_blocks_is_pandas_frame(monkeypatch):
    """Where pandas lacks create_dataframe_from_blocks (before pandas 3), as_frame is
    pd.DataFrame's frame of the columns, the same frame its blocks make; predict's likewise."""
    import pandas as pd
    import pandas.api.internals

    from iosim.analysis.predict import predict

    hw = load("h100")
    for p, name, schedules, tiles in _predict_cases()[:4]:
        fast = predict(p, load(name), schedules, tiles)
        with monkeypatch.context() as m:
            m.delattr(pandas.api.internals, "create_dataframe_from_blocks")
            slow = predict(p, load(name), schedules, tiles)
        pd.testing.assert_frame_equal(fast, slow, check_exact=True)
    p = Problem(batch=2, heads=16, seqlen_q=9000, head_dim=64, causal=True, window=1000)
    temps = [t for s in ("naive", "fa1", "fa2") for t in table.templates([p, p.model_copy(update={"batch": 3})], hw, s)[0]]
    for cols in (table.columns(temps), table.columns(temps, coded=True)):
        fast = table.as_frame(cols)
        with monkeypatch.context() as m:
            m.delattr(pandas.api.internals, "create_dataframe_from_blocks")
            slow = table.as_frame(cols)
        pd.testing.assert_frame_equal(fast, slow, check_exact=True)


def test_dram_bytes_past_int64_stay_whole_numbers():
    # an astronomically large problem: naive's DRAM estimate passes 2^63 bytes. Its bytes stay
    # whole Python ints, as the counts do (an int64 cast wrapped them to -2^63, and the
    # intensity with them), alike one problem at a time and many at once
    from iosim.analysis.predict import predict_many, predict_rows

    hw = load("h100")
    big = Problem(batch=2**20, heads=128, seqlen_q=2**20, head_dim=256)
    rows, _ = predict_rows(big, hw, ["naive", "fa2"])
    naive = rows[0]
    assert naive["dram_read_bytes"] >= 2**63 and type(naive["dram_read_bytes"]) is int
    for r in rows:
        assert r["dram_read_bytes"] > 0 and r["dram_write_bytes"] > 0
        assert r["intensity_flop_per_byte"] == (r["tensor_flops"] + r["alu_flops"]) / (
            r["dram_read_bytes"] + r["dram_write_bytes"])
    df = predict_many([big, Problem(batch=4, heads=8, seqlen_q=1024, head_dim=64)], hw, ["naive", "fa2"])
    at = df.seqlen_q == big.seqlen_q
    assert df.dram_read_bytes[at].tolist() == [r["dram_read_bytes"] for r in rows]
    assert (df.dram_read_bytes > 0).all()


def test_a_frame_follows_the_string_storage_pandas_is_set_to_after_a_first_frame():
    """The column Index and frame layout kept for predict's names (table._columns_index,
    _short_frame) are kept apart by where pandas keeps the strs it infers: predict's frame
    after `mode.string_storage` changes is still pd.DataFrame of its rows' dicts (a kept
    Index of the first storage's dtype would differ in its columns' dtype)."""
    import pandas as pd

    from iosim.analysis.predict import predict, predict_rows

    hw, p = load("h100"), Problem(batch=2, heads=8, seqlen_q=1024, head_dim=64)
    before = pd.get_option("mode.string_storage")
    predict(p, hw)
    for storage in {"python", "pyarrow"} - {before}:
        with pd.option_context("mode.string_storage", storage):
            got, want = predict(p, hw), pd.DataFrame(predict_rows(p, hw)[0])
            pd.testing.assert_frame_equal(got, want, check_exact=True)
            assert got.columns.dtype == want.columns.dtype
    pd.testing.assert_frame_equal(predict(p, hw), pd.DataFrame(predict_rows(p, hw)[0]), check_exact=True)


def test_a_few_rows_python_values_are_the_arrays_values():
    """table.columns of a few rows (predict's) keeps some columns as Python values: the DRAM
    bytes as int() of the estimate (the int64 cast's values: truncated; a NaN the cast's), and
    TFLOP/s as Python divides (numpy's float64 divisions, to the bit; numpy's own where a time
    is 0)."""
    import warnings

    x = np.array([0.0, 1.5, 2.9, 2.0**52 + 1, 2.0**61, 12859813285.0])
    assert table._whole(x, True) == table._whole(x).tolist()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        nan = np.array([np.nan, 3.0])
        assert np.array_equal(table._whole(nan, True), table._whole(nan))
    rng = np.random.default_rng(3)
    flops, t = rng.uniform(1e9, 1e16, 64), rng.uniform(1e-6, 1.0, 64)
    few = table._tflops(flops.tolist(), t, True)
    assert type(few) is list and np.array_equal(np.array(few), flops / t / 1e12)
    with np.errstate(divide="ignore"):
        assert isinstance(table._tflops([1.0, 2.0], np.array([0.0, 1.0]), True), np.ndarray)


def test_unstack_is_the_first_axis_entries():
    """timing.unstack: the entries of an array's (or tuple's) first axis, the rows as views of
    it, as iterating gives them, at every length (its getters' and past them)."""
    rng = np.random.default_rng(24)
    for n in (0, 1, 2, 3, 9, 16, 17, 40):
        a = rng.random((n, 5))
        got, want = timing.unstack(a), tuple(a)
        assert isinstance(got, tuple) and len(got) == n
        for g, w in zip(got, want):
            assert np.array_equal(g, w) and g.base is a  # a view of the array, not a copy
        assert timing.unstack(tuple(range(n))) == tuple(range(n))



def _split_by_hand(bh: int, tm: int, slots: int, hi, outer: str) -> int:
    """The FlashAttention-1 library's split rule (base.split_blocks_many's docstring) one
    count at a time, in plain Python: each even split count's splits laid out block by block."""
    import math

    from iosim.schedules.base import KV_LOAD_TRIPS, SPLIT_EFFICIENCY

    counts = sorted({-(-tm // qb) for qb in range(1, tm + 1)})
    if hi is None or len(set(hi.tolist())) == 1:  # the waves' efficiency
        eff = [w / math.ceil(w) for w in (bh * c / slots for c in counts)]
        return -(-tm // counts[next(i for i, e in enumerate(eff) if e >= SPLIT_EFFICIENCY * max(eff))])
    spans = []
    for c in counts:
        qb = -(-tm // c)
        work = []
        for start in range(0, tm, qb):
            part = hi.tolist()[start:start + qb]
            steps = max(part) if outer == "max" else sum(v > 0 for v in part)
            work.append(sum(part) + KV_LOAD_TRIPS * steps)
        spans.append(max(max(work), math.ceil(bh * len(work) / slots) * (sum(work) / len(work))))
    return -(-tm // counts[next(i for i, x in enumerate(spans) if x * SPLIT_EFFICIENCY <= min(spans))])


def test_split_blocks_of_many_batch_heads_are_the_rule_by_hand():
    """base.split_blocks_many (fa1's layouts of a shape at once, and through split_blocks of
    one Plan) picks, for every batch x heads, what the FlashAttention-1 library's rule picks
    worked out by hand: even rows, causal rows (`hi`) and the backward's key blocks
    (`col_visits`, outer="count"), as Python ints, over slot counts of one wave and past it."""
    from iosim.schedules.base import split_blocks, split_blocks_many

    rng = np.random.default_rng(24)
    bh = np.unique(rng.integers(1, 20_000, 60)).astype(np.int64)
    for n, causal in ((100, False), (4096, False), (4096, True), (9000, True), (777, True)):
        p = Problem(batch=1, heads=1, seqlen_q=n, head_dim=128, causal=causal)
        bm = BlockMap.of(p, 64, 128)
        for slots in (132, 264, 1081):
            for blocks, hi, outer in ((bm.tm, bm.hi if causal else None, "max"),
                                      (bm.tn, bm.col_visits(), "count")):
                want = [_split_by_hand(b, blocks, slots, hi, outer) for b in bh.tolist()]
                got = split_blocks_many(bh, blocks, slots, hi, outer)
                assert got == want and all(type(x) is int for x in got)
                assert [split_blocks(b, blocks, slots, hi, outer) for b in bh.tolist()] == want


@pytest.mark.parametrize("knob", [{}, {"split_rows": 256}, {"split_cols": 128}])
def test_fa1_shapes_of_a_grid_with_split_knobs_are_each_problem_s(knob):
    """fa1's batched layouts (schedules.BATCHED) with the split knobs a user may set (a knob
    wins over the split, a deterministic backward is never split) are shape()'s of each
    problem alone, on both directions and every batch x heads of a seeded grid."""
    from iosim.schedules import Tiles

    hw, t = load("h100"), Tiles(**knob)
    probs = [p.model_copy(update={"batch": b, "heads": p.heads * m, "kv_heads": p.kv_heads * m})
             for p in problems(24, 12) for b in (1, 3, 8, 64, 640) for m in (1, 5, 16)]
    probs += [p.model_copy(update={"direction": Direction.bwd, "deterministic": d, "window": None})
              for p in probs[:60] for d in (False, True)]
    want = [shape("fa1", p, hw, t) for p in probs]
    assert shapes("fa1", probs, hw, t) == want
    assert sum(w is not None for w in want) > len(probs) // 3  # (most planned: the test bites)


def test_large_strings_are_arrows_array_of_the_strings():
    """table._large_strings, made from its buffers, is Arrow's array of the strings (offsets,
    bytes and type): ASCII ones (a str's length its bytes'), multi-byte UTF-8, empty strings,
    and none at all."""
    pa = pytest.importorskip("pyarrow")
    for strs in ([], [""], ["naive", "fa1", "", "h100-sxm5-80gb"], ["ℓ = Σ exp", "Bc=128 tiles", "日本", ""]):
        got = table._large_strings(strs)
        assert got.equals(pa.array(strs, pa.large_string())) and got.type == pa.large_string()
        assert got.to_pylist() == strs
