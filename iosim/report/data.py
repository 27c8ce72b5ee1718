"""The rows an `iosim report` page draws: predictions (sweeps, and today's predictions of the
measured problems) and measurements, labelled with their problem shape and hardware variant,
thinned to a page budget, and the menus' choices.

A row's shape is the (batch, heads) split its series is drawn for: "B=4 H=32", or for a family of
problems that keeps batch·N and heads·d fixed (as `iosim bench` measures) "B·N=16384 H·d=2048".
A row's variant names what a what-if sweep (`iosim sweep --set`) changed from the real profile
("hbm_bandwidth=8 TB/s"); rows on the real profile are "as profiled".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd

from iosim.analysis.accuracy import canonical_hw, join
from iosim.core import hardware
from iosim.core.hardware import HardwareProfile, InputError
from iosim.core.rows import (
    COUNT_COLUMNS,
    MEASURED_NEEDS,
    PREDICTION_COLUMNS,
    PROBLEM_COLUMNS,
    measured_ok,
    normalize,
)
from iosim.schedules import SCHEDULES

MENU_DIMS = ["hw", "direction", "dtype", "causal", "head_dim"]  # one configuration at a time
N, VARIANT, SHAPE = "seqlen_k", "variant", "shape"
ALL = "__all__"
STOCK = "as profiled"  # the variant label of rows on the real profile


@dataclass(frozen=True)
class Budget:
    """What one page draws at most, whatever the input (about 0.5 kB of HTML per predicted row
    over all charts, plus 4.6 MB of plotly.js)."""

    rows: int = 12_000  # predicted rows over all configurations
    n_values: int = 40  # points per line (N values, log-spaced; measured ones kept)
    shapes: int = 6  # (batch, heads) shapes per configuration
    variants: int = 8  # hardware variants in the N charts (the what-if charts keep all)


def as_text(v: object) -> str:
    """One string per value, the same in trace meta and in the menus."""
    if isinstance(v, bool) or type(v).__name__ == "bool_":
        return str(bool(v))
    if isinstance(v, float) or type(v).__name__.startswith("float"):
        return str(int(v)) if float(v).is_integer() else f"{float(v):g}"
    return str(v)


def ordered(values) -> list[str]:
    def key(v: str) -> tuple:
        try:
            return (0, float(v), v)
        except ValueError:
            return (1, 0.0, v)
    uniq = values.unique() if isinstance(values, pd.Series) else set(values)  # a million rows, few values
    return sorted({as_text(v) for v in uniq}, key=key)


def si(v: float, unit: str, digits: int = 3) -> str:
    """SI prefixes: 3.35e12 B/s -> '3.35 TB/s'."""
    if v is None or pd.isna(v):
        return "–"
    for scale, p in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.{digits}g} {p}{unit}"
    return f"{v:.{digits}g} {unit}".strip()


def numbers(df: pd.DataFrame, *names: str) -> pd.Series:
    """The first of `names` that `df` has, as numbers (NaN where absent). After a join a predicted
    column is suffixed `_pred` when the measured file had it too: ask for both."""
    for c in names:
        if c in df.columns:
            return pd.to_numeric(df[c], errors="coerce")
    return pd.Series(float("nan"), index=df.index)


def roof_profile(name: str) -> HardwareProfile:
    """The profile whose ceilings the roofline draws for GPU `name`: its calibrated profile
    (hwprofiles/<name>.calibrated.toml, written by `iosim calibrate`) where one is shipped."""
    from iosim.analysis.validate import preferred

    return preferred(name)


def gpu_key(name: str) -> str:
    """The GPU a row is on, whichever of its profiles predicted it: the menus' hardware."""
    return canonical_hw(str(name)).removesuffix(".calibrated")


def achievable(profile: HardwareProfile) -> dict[str, tuple[float, str]]:
    """The ceilings a real kernel can reach: datasheet peak x the profile's efficiency field,
    each with a label saying which field and whether it was measured, fitted or is a default.
    The one place the report reads `efficiency`."""
    e, prov = profile.efficiency, profile.provenance

    def src(f: str) -> str:
        how = next((k for k in ("measured", "fitted") if f"efficiency.{f}" in prov.get(k, "")),
                   "calibrated profile's default" if prov else "datasheet profile's default")
        return f"efficiency.{f} {getattr(e, f):.2f}, {how}"

    out = {"hbm": (profile.hbm_bandwidth_bytes_per_s * e.hbm, src("hbm")),
           "l2": (profile.l2_bandwidth_bytes_per_s * e.l2, src("l2"))}
    for d, peak in profile.tensor_flops_per_s.items():
        if profile.has_wgmma:
            out[f"wgmma {d}"] = (peak * e.tensor_wgmma, src("tensor_wgmma"))
        out[f"mma.sync {d}"] = (peak * e.tensor_mma_sync, src("tensor_mma_sync"))
    return out


def profile_field(profile: HardwareProfile, path: str) -> object:
    obj: object = profile
    for part in path.split("."):
        obj = obj.get(part) if isinstance(obj, dict) else getattr(obj, part)
    return obj


def unit_of(field_name: str) -> str:
    for suffix, unit in (("_bytes_per_s", "B/s"), ("_flops_per_s", "FLOP/s"), ("_exp_per_s", "exp/s"),
                         ("_bytes", "B"), ("_hz", "Hz"), ("as_text", "s")):
        if field_name.endswith(suffix):
            return unit
    return ""


def setting(field_name: str, v: float) -> str:
    """A what-if change as people read it: 'hbm_bandwidth=8 TB/s' for hbm_bandwidth_bytes_per_s."""
    unit = unit_of(field_name)
    if not unit:
        return f"{field_name}={as_text(v)}"
    short = field_name.removesuffix({"B/s": "_bytes_per_s", "FLOP/s": "_flops_per_s", "exp/s": "_exp_per_s",
                                     "B": "_bytes", "Hz": "_hz", "s": "as_text"}[unit])
    return f"{short}={si(float(v), unit, 4)}"


def set_columns(*frames: pd.DataFrame) -> list[str]:
    return sorted({c for f in frames for c in f.columns if c.startswith("set_")})


SPLIT = ["batch", "heads", "kv_heads", "head_dim"]


def _family(df: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"bn": df["batch"] * df["seqlen_q"], "hd": df["heads"] * df["head_dim"],
                         "kv": df["heads"] // df["kv_heads"]}, index=df.index)


@dataclass(frozen=True)
class Shapes:
    """Which rows of one input file make lines across N: a (batch, heads) split that the file
    has at several N (a sweep's grid) is its own series; its other rows join a FlashAttention-
    convention family where one holds batch·N, heads·d (and heads/kv_heads) fixed across several
    N, as `iosim bench` measures (batch = 16384/N)."""

    grid: pd.DataFrame  # SPLIT values seen at more than one N
    families: pd.DataFrame  # (bn, hd, kv) seen at more than one N for some d

    @classmethod
    def of(cls, *frames: pd.DataFrame) -> Shapes:
        f = pd.concat([x[[*SPLIT, "seqlen_q"]] for x in frames if len(x)], ignore_index=True)
        n = f.groupby(SPLIT)["seqlen_q"].transform("nunique")
        grid = f.loc[n > 1, SPLIT].drop_duplicates()
        rest = f[n <= 1]
        fam = pd.concat([_family(rest), rest[["seqlen_q", "head_dim"]]], axis=1)
        g = fam.groupby(["bn", "hd", "kv", "head_dim"])["seqlen_q"].nunique()
        return cls(grid, g[g > 1].reset_index()[["bn", "hd", "kv"]].drop_duplicates())

    def labels(self, df: pd.DataFrame) -> pd.Series:
        """ "B=4 H=32" for a split of the grid, "B·N=16384 H·d=2048" for a family member."""
        fam = _family(df).reset_index(drop=True)
        in_grid = df[SPLIT].reset_index(drop=True).merge(self.grid.assign(g=True), on=SPLIT, how="left")["g"]
        in_fam = fam.merge(self.families.assign(f=True), on=["bn", "hd", "kv"], how="left")["f"]
        family = (in_fam.notna() & in_grid.isna()).to_numpy()
        kv = np.where(df.kv_heads != df.heads, "/" + df.kv_heads.astype(str) + " kv", "")
        out = np.where(family, "B·N=" + fam["bn"].astype(str).to_numpy() + " H·d=" + fam["hd"].astype(str).to_numpy(),
                       "B=" + df.batch.astype(str) + " H=" + df.heads.astype(str))
        nq = np.where(df.seqlen_q != df.seqlen_k, " Nq=" + df.seqlen_q.astype(str), "")
        return pd.Series(out, index=df.index).astype(str) + kv + nq


def variant_labels(df: pd.DataFrame) -> pd.Series:
    """Each row's hardware variant, named by what it changes from its profile
    ("hbm_bandwidth_bytes_per_s=8 TB/s"); rows on the real profile are `STOCK`."""
    labels = pd.Series("", index=df.index, dtype=object)
    for col in set_columns(df):
        name = col[4:]
        vals = pd.to_numeric(df[col], errors="coerce")
        for hw, idx in df.groupby("hw", sort=False).groups.items():
            v = vals.loc[idx]
            try:
                real = float(profile_field(hardware.load(str(hw)), name))
            except (InputError, AttributeError, KeyError, TypeError, ValueError):
                real = float("nan")
            changed = v.notna() & ~np.isclose(v.to_numpy(float), real, rtol=1e-9, equal_nan=False)
            text = {x: setting(name, x) for x in v[changed].unique()}
            part = v.map(text).where(changed, "")
            labels.loc[idx] = [a + (", " if a and b else "") + b for a, b in zip(labels.loc[idx], part)]
    return labels.replace("", STOCK).astype(str)


def _with_labels(df: pd.DataFrame) -> pd.DataFrame:
    """One input file's rows, normalized, with their GPU, shape (decided within the file: a
    sweep's grid, a bench's family) and variant."""
    df = normalize(df)
    names = df["hw"].unique()
    if "profile" not in df.columns:  # the profile that predicted the row (sweeps: its hw)
        df["profile"] = df["hw"].map({h: canonical_hw(h) for h in names})
    df["hw"] = df["hw"].map({h: gpu_key(h) for h in names})
    df[SHAPE] = Shapes.of(df).labels(df)
    df[VARIANT] = variant_labels(df)
    return df


def _fresh_predictions(measured: pd.DataFrame) -> pd.DataFrame:
    from iosim.analysis.validate import repredict

    ours = measured[measured.schedule.isin(list(SCHEDULES))]
    if ours.empty:
        return pd.DataFrame()
    fresh = normalize(repredict(ours))
    fresh = fresh.merge(ours.drop_duplicates(PROBLEM_COLUMNS)[[*PROBLEM_COLUMNS, SHAPE]], on=PROBLEM_COLUMNS)
    fresh[VARIANT] = STOCK
    return fresh


@dataclass
class Data:
    """Rows ready to draw: predictions (sweeps, plus today's predictions of the measured
    problems) and measurements, thinned to the budget; what was left out, and the what-if rows."""

    pred: pd.DataFrame
    meas: pd.DataFrame
    whatif: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    total_pred: int = 0
    total_meas: int = 0

    @property
    def shapes_vary(self) -> bool:
        """More than one (batch, heads) shape drawn: series names then say which."""
        return pd.concat([self.pred[SHAPE], self.meas[SHAPE]]).nunique() > 1

    @cached_property
    def joined(self) -> pd.DataFrame:
        """Measured rows beside today's prediction for the same problem on the real hardware
        (torch's backends kept, with no prediction); `bound` is the prediction's."""
        if self.meas.empty:
            return self.meas
        j = join(for_join(self.pred), self.meas, how="left")
        if "bound_pred" in j.columns:
            j["bound"] = j["bound_pred"]
        return j


def _spread(values: Sequence, k: int, keep: Sequence = ()) -> list:
    """At most k of the sorted `values`, evenly spread (log-spaced for N), with `keep` first."""
    vals = list(values)
    if len(vals) <= k:
        return vals
    chosen = [v for v in vals if v in set(keep)][:k]
    rest = k - len(chosen)
    if rest > 0:
        idx = np.unique(np.round(np.linspace(0, len(vals) - 1, rest)).astype(int))
        chosen += [vals[i] for i in idx if vals[i] not in chosen]
    return [v for v in vals if v in set(chosen)]


def prepare_data(pred_frames: Sequence[pd.DataFrame], meas_frames: Sequence[pd.DataFrame],
                 budget: Budget = Budget()) -> Data:
    """Label, re-predict and thin the input rows (see the module docstring)."""
    meas = (pd.concat([_with_labels(m) for m in meas_frames], ignore_index=True)
            if meas_frames else pd.DataFrame(columns=[*MEASURED_NEEDS, SHAPE, VARIANT]))
    # a problem measured again (a resumed bench, another file): the newest row wins, drawn on the
    # family line where any file has it on one
    family = meas[meas[SHAPE].str.startswith("B·N=")].drop_duplicates(PROBLEM_COLUMNS, keep="last")
    meas = meas.drop_duplicates(PROBLEM_COLUMNS, keep="last")
    if len(family):
        on = meas[PROBLEM_COLUMNS].merge(family[[*PROBLEM_COLUMNS, SHAPE]], on=PROBLEM_COLUMNS, how="left")
        meas[SHAPE] = on[SHAPE].fillna(pd.Series(meas[SHAPE].to_numpy())).to_numpy()
    # the prediction a bench stored beside its measurement is stale: today's is made below
    meas = meas.drop(columns=[c for c in [*COUNT_COLUMNS, *PREDICTION_COLUMNS, "block_m", "block_n"]
                              if c in meas.columns])
    parts = [_with_labels(p) for p in pred_frames]
    if len(meas):
        parts.append(_fresh_predictions(meas))
    parts = [p for p in parts if len(p)]
    if not parts:
        raise InputError("no prediction rows: pass an `iosim sweep` or `iosim predict` CSV, or "
                         "measurements of naive/fa1/fa2/fa3 to predict")
    pred = pd.concat(parts, ignore_index=True)
    for c in ("block_m", "block_n"):
        if c not in pred.columns:
            pred[c] = np.nan
    pred = pred.drop_duplicates([*PROBLEM_COLUMNS, VARIANT], keep="first")
    data = Data(pred, meas, pred.iloc[:0], total_pred=len(pred), total_meas=len(meas))
    _thin(data, budget)
    return data


def _thin(data: Data, budget: Budget) -> None:
    """Keep the page within `budget`; say on the page what was left out."""
    pred, meas, notes = data.pred, data.meas, data.notes
    full = pred
    variants = ordered(pred[VARIANT])
    if len(variants) > budget.variants:
        keep = _spread(variants, budget.variants, [STOCK])
        pred = pred[pred[VARIANT].isin(keep)]
        notes.append(f"the N charts draw {len(keep)} of the {len(variants)} hardware variants "
                     "(the what-if charts draw all)")
    ns = sorted(pred[N].unique())
    if len(ns) > budget.n_values:
        keep = _spread(ns, budget.n_values, sorted(meas[N].unique()) if len(meas) else [])
        pred = pred[pred[N].isin(keep)]
        notes.append(f"lines show {len(keep)} of the {len(ns)} values of N (spread evenly; "
                     "measured ones kept)")
    counts = pred.groupby(MENU_DIMS + [SHAPE], sort=False).size().rename("rows").reset_index()
    if len(meas):
        mc = meas.groupby(MENU_DIMS + [SHAPE], sort=False).size().rename("measured").reset_index()
        counts = counts.merge(mc, on=MENU_DIMS + [SHAPE], how="left")
    counts["measured"] = counts.get("measured", pd.Series(0, index=counts.index)).fillna(0)
    counts = counts.sort_values(["measured", "rows"], ascending=False, kind="stable")
    counts["rank"] = counts.groupby(MENU_DIMS, sort=False).cumcount()
    if (counts["rank"] >= budget.shapes).any():
        most = int(counts.groupby(MENU_DIMS, sort=False).size().max())
        notes.append(f"each configuration draws at most {budget.shapes} of its (batch, heads) "
                     f"shapes (up to {most} in the data): measured ones first, then those with "
                     "most rows")
        counts = counts[counts["rank"] < budget.shapes]
        pred = pred.merge(counts[MENU_DIMS + [SHAPE]], on=MENU_DIMS + [SHAPE])
    slices = counts.groupby(MENU_DIMS, sort=False)[["measured", "rows"]].sum().reset_index()
    slices = slices.sort_values(["measured", "rows"], ascending=False, kind="stable")
    if slices["rows"].sum() > budget.rows:
        fits = slices["rows"].cumsum() <= budget.rows
        fits.iloc[0] = True  # at least the best configuration
        kept = slices[fits]
        notes.append(f"{len(kept)} of the {len(slices)} configurations (hardware, direction, dtype, "
                     f"causal, d) are drawn, those with most measured, then predicted, rows; "
                     f"the menus offer only these")
        pred = pred.merge(kept[MENU_DIMS], on=MENU_DIMS)
        slices = kept
    if full[VARIANT].nunique() > 1:
        _whatif_rows(data, full, counts.merge(slices[MENU_DIMS], on=MENU_DIMS), budget)
    if len(meas):
        present = pred[MENU_DIMS].drop_duplicates()
        meas = meas.merge(present, on=MENU_DIMS)
    data.pred, data.meas = pred.reset_index(drop=True), meas.reset_index(drop=True)


def _whatif_rows(data: Data, full: pd.DataFrame, shapes: pd.DataFrame, budget: Budget) -> None:
    """The what-if charts' rows: every variant, at the largest N of the first swept shape of each
    drawn configuration (`shapes`: in order of priority), configurations while they fit the budget."""
    w = full[full[set_columns(full)].notna().any(axis=1)]
    swept = w[MENU_DIMS + [SHAPE]].drop_duplicates()
    shapes = shapes.merge(swept, on=MENU_DIMS + [SHAPE]).drop_duplicates(MENU_DIMS)  # keeps order
    w = w.merge(shapes[MENU_DIMS + [SHAPE]], on=MENU_DIMS + [SHAPE])
    w = w[w[N] == w.groupby(MENU_DIMS)[N].transform("max")]
    per = w.groupby(MENU_DIMS, sort=False).size().rename("n").reset_index()
    per = shapes[MENU_DIMS].merge(per, on=MENU_DIMS)  # in priority order
    fits = per["n"].cumsum() <= budget.rows
    if not fits.all():
        fits.iloc[0] = True
        data.notes.append(f"the what-if charts cover {int(fits.sum())} of the {len(per)} configurations")
        w = w.merge(per[fits][MENU_DIMS], on=MENU_DIMS)
    data.whatif = w


def filter_options(data: Data) -> dict[str, list[str]]:
    """The menus: each configuration dimension with more than one value, the variants, and N."""
    frames = [data.pred, data.meas]
    opts = {d: vals for d in MENU_DIMS
            if len(vals := ordered(v for f in frames if d in f.columns for v in f[d])) > 1}
    variants = ordered(data.pred[VARIANT])
    if len(variants) > 1:
        opts[VARIANT] = [STOCK] + [v for v in variants if v != STOCK] if STOCK in variants else variants
    ns = ordered(v for f in frames if len(f) for v in f[N])
    if len(ns) > 1:
        opts[N] = ns
    return opts


def combinations(data: Data, options: dict[str, list[str]]) -> list[dict[str, str]]:
    """The configurations that exist, over the menus of `options`, each with its N values under
    "_n" (for dependent menus)."""
    dims = [d for d in MENU_DIMS if d in options]
    rows = pd.concat([f[MENU_DIMS + [N]] for f in (data.pred, data.meas) if len(f)]).drop_duplicates()
    out = []
    for key, g in rows.groupby(MENU_DIMS, sort=True):
        conf = dict(zip(MENU_DIMS, key, strict=True))
        out.append({**{d: as_text(conf[d]) for d in dims}, "_n": ordered(g[N])})
    return out


def default_choice(data: Data, options: dict[str, list[str]]) -> dict[str, str]:
    """Among the configurations with measured rows (if any), the one with most rows, measured and
    predicted; every variant; every N."""
    chosen = {d: ALL for d in (VARIANT, N) if d in options}
    dims = [d for d in MENU_DIMS if d in options]
    if not dims:
        return chosen
    score = data.pred.groupby(dims).size().rename("rows").to_frame()
    if len(data.meas):
        ok = data.meas[measured_ok(data.meas)]  # a failed check (or a corrupt time) has nothing to draw
        score = score.join(ok.groupby(dims).size().rename("measured"), how="outer")
    score["measured"] = score.get("measured", pd.Series(0, index=score.index)).fillna(0)
    score = score.fillna(0).assign(any=lambda t: t["measured"] > 0, all=lambda t: t["measured"] + t["rows"])
    score = score.sort_values(["any", "all"], ascending=False, kind="stable")
    best = score.index[0] if len(dims) > 1 else (score.index[0],)
    chosen.update({d: as_text(v) for d, v in zip(dims, best, strict=True)})
    return chosen


def stock_rows(pred: pd.DataFrame) -> pd.DataFrame:
    """Predictions on the real hardware, without the what-if columns."""
    p = pred[pred[VARIANT] == STOCK]
    return p.drop(columns=[c for c in p.columns if c.startswith("set_")])


def for_join(pred: pd.DataFrame) -> pd.DataFrame:
    """Stock predictions to join measured rows with (the measured rows keep their own labels)."""
    return stock_rows(pred).drop(columns=[SHAPE, VARIANT])
