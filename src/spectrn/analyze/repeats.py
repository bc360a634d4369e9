"""N runs of one configuration -> ``Repeats``: each figure's mean over runs, its interval holding run-to-run noise.

Per (load level, prompt class or ``all``, variant): TPOT p50, TTFT p50, aggregate throughput, $/M output tokens;
per (level, scope): the speedups of TPOT p50, TTFT p50 and aggregate throughput (= the cost ratio). The point
is the mean of the runs' own figures (each run's ``summary.json``).

The interval is a two-stage (hierarchical) bootstrap. Stage 2 first, once per run: the figure's request-level
bootstrap values, exactly the resampling behind that run's own interval (``stats.replicates``; throughput
and its ratio through ``spectrn.analyze.throughput``, speedups paired by schedule index). Stage 1, per
resample: draw N runs with replacement and, for each drawn run, one of its request-level values (an
independent column, so a run drawn twice contributes two independent request resamples); the resample's
value is their mean. The 2.5th and 97.5th percentiles of these means are the interval. It costs N request-level
bootstraps plus index arithmetic, so it is no slower than analysing the N runs.

It is conservative for a few runs: the spread of run points already holds within-run noise, and stage 2
adds it again (docs/benchmarks.md, "Repeated runs", gives the factor).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from spectrn.analyze.accumulator import Accumulator
from spectrn.analyze.difference import ALL, scoped
from spectrn.analyze.settings import Settings
from spectrn.analyze.shares import decode_spans
from spectrn.analyze.stats import BOOT_RESAMPLES, percentile_interval, replicates, rng, subsample
from spectrn.analyze.throughput import aggregate_replicates, in_flight, ratio_replicates
from spectrn.analyze.variant import usd_per_million
from spectrn.run.folder import RunFolder
from spectrn.run.repeats import (
    REPEATS_FILE,
    RepeatedFigure,
    RepeatedLevel,
    RepeatedScope,
    RepeatedSpeedups,
    RepeatedVariant,
    RepeatRun,
    Repeats,
)
from spectrn.run.summary import ClassSummary, Interval, Summary, VariantSummary

VARIANT_FIGURES = ("tpot_p50_s", "ttft_p50_s", "output_tokens_per_s", "usd_per_million_output_tokens")
SPEEDUP_FIGURES = ("tpot_p50", "ttft_p50", "aggregate_throughput")
SPEEDUP = "speedup"  # the "variant" slot of a speedup figure's key
METHOD = (
    "two-stage bootstrap: {resamples} resamples of the {n} runs drawn with replacement, each drawn run "
    "contributing one of its own {resamples} request-level bootstrap values; point = mean of the runs' figures"
)

Key = tuple[str, str, str, str]  # (level, scope, variant or "speedup", figure)
Figure = tuple[float | None, Any]  # a run's point and its request-level bootstrap values (None: too few)


def _arr(a: Any) -> Any:
    import numpy as np

    return np.frombuffer(a, dtype=float) if len(a) else np.zeros(0)


def _median_reps(values: Any, *, seed: int, resamples: int) -> Any:
    """Bootstrap values of the median of the finite ``values`` (as ``stats_with_ci`` resamples them)."""
    import numpy as np

    v = values[np.isfinite(values)]
    sub = v[subsample(v.size, seed)]
    return replicates(lambda i: np.median(sub[i], axis=-1), sub.size, seed=seed, resamples=resamples)


def _variant_figures(
    acc: Accumulator, vs: VariantSummary, st: Settings, *, seed: int, resamples: int
) -> dict[str, Figure]:
    import numpy as np

    thr = aggregate_replicates(_arr(acc.out_tokens), _arr(acc.e2e), vs.duration_s, seed=seed + 40, resamples=resamples)
    bought = thr
    billed = vs.cost.billed_s if vs.cost is not None else None
    if billed is not None and billed != vs.duration_s:  # a class of a mixed level: its billed share (analyze/shares)
        spans = decode_spans(_arr(acc.ttft), _arr(acc.e2e))
        bought = aggregate_replicates(_arr(acc.out_tokens), spans, billed, seed=seed + 45, resamples=resamples)
    cost = None
    if bought is not None:
        with np.errstate(invalid="ignore", divide="ignore"):
            cost = np.where(bought > 0, usd_per_million(st, 1.0) / bought, np.nan)  # $/M = price / throughput
    return {
        "tpot_p50_s": (vs.tpot_s.p50, _median_reps(_arr(acc.tpot), seed=seed + 10, resamples=resamples)),
        "ttft_p50_s": (vs.ttft_s.p50, _median_reps(_arr(acc.ttft), seed=seed, resamples=resamples)),
        "output_tokens_per_s": (vs.output_tokens_per_s.aggregate, thr),
        "usd_per_million_output_tokens": (vs.cost.usd_per_million_output_tokens if vs.cost else None, cost),
    }


def _ratio_reps(f: Callable[..., Any], num: Any, den: Any, *, paired: bool, seed: int, resamples: int) -> Any:
    """Bootstrap values of f(num) / f(den): pairs resampled together, or each side on its own (unpaired)."""
    if min(num.size, den.size) < 2:
        return None
    if paired:
        return replicates(lambda i: f(num[i], axis=-1) / f(den[i], axis=-1), num.size, seed=seed, resamples=resamples)
    gen = rng(seed + 99)

    def stat(rows: Any) -> Any:  # rows only sets how many resamples: each side draws its own indices
        a = num[gen.integers(0, num.size, (rows.shape[0], num.size))]
        b = den[gen.integers(0, den.size, (rows.shape[0], den.size))]
        return f(a, axis=-1) / f(b, axis=-1)

    return replicates(stat, max(num.size, den.size), seed=seed, resamples=resamples)


def _speedup_figures(
    base: Accumulator, spec: Accumulator, cs: ClassSummary, *, paired: bool, seed: int, resamples: int
) -> dict[str, Figure]:
    """The speedups' points (the run's summary) and their request-level bootstrap values, paired by schedule
    index as in ``spectrn.analyze.speedups.speedups``."""
    import numpy as np

    sp = cs.speedup
    vb, vs = cs.variants["baseline"], cs.variants["speculative"]
    bi, si = np.frombuffer(base.index, dtype=np.int64), np.frombuffer(spec.index, dtype=np.int64)
    if paired:
        _, pb, ps = np.intersect1d(bi, si, return_indices=True)
        sel = subsample(pb.size, seed)
        pb, ps = pb[sel], ps[sel]
    else:
        pb, ps = np.arange(bi.size), np.arange(si.size)

    def col(acc: Accumulator, name: str, pick: Any) -> Any:
        return _arr(getattr(acc, name))[pick]

    out: dict[str, Figure] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN resamples (no TPOT): NaN, dropped
        for k, (name, metric) in enumerate((("tpot_p50", "tpot"), ("ttft_p50", "ttft"))):
            b, s = col(base, metric, pb), col(spec, metric, ps)
            reps = _ratio_reps(np.nanmedian, b, s, paired=paired, seed=seed + 100 + k, resamples=resamples)
            point = getattr(sp, name) if sp is not None else None
            out[name] = (point.value if point is not None else None, reps)
        tb, ts, eb, es = (_arr(a) for a in (base.out_tokens, spec.out_tokens, base.e2e, spec.e2e))
        lb, ls = in_flight(eb, vb.duration_s), in_flight(es, vs.duration_s)
        num, den = (ts[ps], es[ps], ls), (tb[pb], eb[pb], lb)
        agg = ratio_replicates(num, den, paired=paired, seed=seed + 120, resamples=resamples)
    point = sp.aggregate_throughput if sp is not None else None
    out["aggregate_throughput"] = (point.value if point is not None else None, agg)
    return out


def run_figures(
    folder: RunFolder, summary: Summary, *, seed: int = 0, resamples: int = BOOT_RESAMPLES
) -> dict[Key, Figure]:
    """Every figure of one run: its point (from ``summary``) and its request-level bootstrap values."""
    meta = folder.meta
    st = Settings.of(meta, seed)
    accs = scoped(folder.records(), meta, seed)
    out: dict[Key, Figure] = {}
    for lv in summary.levels:
        for cls, cs in lv.scopes():
            for v, vs in cs.variants.items():
                acc = accs.get((lv.label, cls, v))
                if acc is None:
                    continue
                for name, fig in _variant_figures(acc, vs, st, seed=seed, resamples=resamples).items():
                    out[(lv.label, cls, v, name)] = fig
            base, spec = accs.get((lv.label, cls, "baseline")), accs.get((lv.label, cls, "speculative"))
            if base is not None and spec is not None and {"baseline", "speculative"} <= set(cs.variants):
                figs = _speedup_figures(base, spec, cs, paired=st.paired, seed=seed, resamples=resamples)
                for name, fig in figs.items():
                    out[(lv.label, cls, SPEEDUP, name)] = fig
    return out


def two_stage_interval(figures: Sequence[Figure], *, seed: int, resamples: int = BOOT_RESAMPLES) -> Interval | None:
    """95% interval of the mean over runs: runs drawn with replacement, then one request-level bootstrap value
    of each drawn run (a run without them contributes its point: no within-run spread known)."""
    import numpy as np

    rows = []
    for point, reps in figures:
        if point is None or not math.isfinite(point):
            continue
        r = np.asarray(reps, dtype=float) if reps is not None else None
        rows.append(r if r is not None and r.size == resamples else np.full(resamples, float(point)))
    if len(rows) < 2:
        return None
    table = np.vstack(rows)  # runs x request-level resamples
    n = table.shape[0]
    gen = rng(seed)
    runs = gen.integers(0, n, (resamples, n))
    cols = gen.integers(0, resamples, (resamples, n))
    return percentile_interval(table[runs, cols].mean(axis=1), resamples)


def repeated_figure(figures: Sequence[Figure], *, seed: int, resamples: int = BOOT_RESAMPLES) -> RepeatedFigure:
    """Point = mean of the runs' points; interval from ``two_stage_interval``; between-run CV."""
    import numpy as np

    points = [p if p is not None and math.isfinite(p) else None for p, _ in figures]
    have = np.asarray([p for p in points if p is not None], dtype=float)
    if have.size == 0:
        return RepeatedFigure(runs=points)
    mean = float(have.mean())
    cv = float(have.std(ddof=1) / abs(mean)) if have.size > 1 and mean != 0 else None
    ci = two_stage_interval(figures, seed=seed, resamples=resamples)
    return RepeatedFigure(point=mean, ci95=ci, runs=points, cv=cv)


def aggregate(
    run_dirs: Sequence[Path], run_id: str, *, parent: Path, seed: int = 0, resamples: int = BOOT_RESAMPLES
) -> Repeats:
    """The aggregate of analysed run folders (each with its ``summary.json``), in run order. ``parent``: the
    folder ``repeats.json`` goes to (run folders are named relative to it)."""
    runs: list[RepeatRun] = []
    per_run: list[dict[Key, Figure]] = []
    warnings_: list[str] = []
    keys: dict[Key, None] = {}  # first-seen order: load order, "all" first, classes sorted, as each summary
    for d in run_dirs:
        folder = RunFolder.open(d)
        summary = folder.require_summary()
        figs = run_figures(folder, summary, seed=seed, resamples=resamples)
        per_run.append(figs)
        keys.update(dict.fromkeys(figs))
        rel = str(d.relative_to(parent)) if d.is_relative_to(parent) else str(d)
        runs.append(RepeatRun(run_id=summary.run_id, folder=rel, clean=summary.clean,
                              performance=summary.verdict.performance))  # fmt: skip
        if not summary.clean:
            warnings_.append(f"run {summary.run_id} is NOT A CLEAN RUN: " + "; ".join(summary.warnings()))
        elif not summary.verdict.performance:
            warnings_.append(f"run {summary.run_id} is NOT A PERFORMANCE RESULT: " + "; ".join(summary.verdict.reasons))
    figures: dict[Key, RepeatedFigure] = {}
    for n, key in enumerate(keys):
        column = [figs.get(key, (None, None)) for figs in per_run]
        figures[key] = repeated_figure(column, seed=seed + 1000 + n, resamples=resamples)
    partial = sorted(
        {f"{k[0]} {k[1]} {k[2]} {k[3]}" for k, f in figures.items() if None in f.runs and f.point is not None}
    )
    if partial:
        warnings_.append(f"{len(partial)} figure(s) missing from some runs (averaged over the runs that have them), "
                         f"e.g. {partial[0]}")  # fmt: skip
    levels: dict[str, RepeatedLevel] = {}
    for lv, scope, who, _ in keys:
        level = levels.setdefault(lv, RepeatedLevel(label=lv))
        sc = level.scopes.setdefault(scope, RepeatedScope())
        if who == SPEEDUP and sc.speedup is None:
            sc.speedup = RepeatedSpeedups(
                **{f: figures.get((lv, scope, who, f), RepeatedFigure()) for f in SPEEDUP_FIGURES}
            )
        elif who != SPEEDUP and who not in sc.variants:
            sc.variants[who] = RepeatedVariant(
                **{f: figures.get((lv, scope, who, f), RepeatedFigure()) for f in VARIANT_FIGURES}
            )
    for level in levels.values():  # "all" first, as summary.json's scopes
        level.scopes = dict(sorted(level.scopes.items(), key=lambda kv: (kv[0] != ALL, kv[0])))
    return Repeats(
        run_id=run_id,
        repeats=len(runs),
        method=METHOD.format(resamples=resamples, n=len(runs)),
        resamples=resamples,
        runs=runs,
        levels=list(levels.values()),
        warnings=warnings_,
    )


def write_repeats(parent: Path, repeats: Repeats) -> Path:
    """``parent/repeats.json``, written atomically."""
    from spectrn.paths import atomic_write_text

    path = parent / REPEATS_FILE
    atomic_write_text(path, repeats.model_dump_json(indent=2) + "\n")
    return path
