"""A/B speedups of one scope with bootstrap intervals: baseline / speculative latencies, throughput and cost.

Speedups pair the two variants by schedule index (both got the same prompt at the same index) and resample
indices; the ITL speedup resamples the sampled requests present in both variants. An llmperf run cannot be
paired (its files do not say which prompt each response answered): its speedups resample each variant on its
own and say so.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from typing import Any

from spectrn.analyze import metric_table
from spectrn.analyze.accumulator import Accumulator, _arr
from spectrn.analyze.shares import decode_spans
from spectrn.analyze.stats import BOOT_RESAMPLES, bootstrap, paired_median_ratio_ci, subsample
from spectrn.analyze.throughput import in_flight, ratio_ci
from spectrn.run.summary import ClassSummary, Speedup, Speedups


def speedups(
    base: Accumulator,
    spec: Accumulator,
    *,
    paired: bool = True,
    seed: int = 0,
    walls: tuple[float, float] | None = None,
    bills: tuple[float, float] | None = None,
) -> Speedups:
    """baseline / speculative for latencies (> 1 = speculation faster), speculative / baseline for throughput.

    ``walls``: each variant's wall time in real seconds (``VariantSummary.duration_s``), for the aggregate
    throughput ratio; without them that ratio is left out. ``bills``: each variant's billed seconds
    (``Cost.billed_s``) when they differ from the walls (a class of a mixed level), for the cost ratio; without
    them the cost ratio is the aggregate throughput ratio (one price, one wall)."""
    import numpy as np

    bi, si = np.frombuffer(base.index, dtype=np.int64), np.frombuffer(spec.index, dtype=np.int64)
    if paired:
        _, pb, ps = np.intersect1d(bi, si, assume_unique=False, return_indices=True)
    else:
        pb, ps = np.arange(bi.size), np.arange(si.size)
    out = Speedups(paired_requests=int(pb.size) if paired else 0, paired=paired)
    if pb.size == 0 or ps.size == 0:
        return out

    def col(acc: Accumulator, name: str, pick: Any) -> Any:
        return _arr(getattr(acc, name))[pick]

    # the paired speedups the metric table declares: each pairs one accumulator column, each with its own seed
    declared = [(m, sd) for m, sd in metric_table.speedups() if sd.column is not None]
    pairs = {str(sd.column): (col(base, str(sd.column), pb), col(spec, str(sd.column), ps)) for _, sd in declared}
    if paired:
        sel = subsample(pb.size, seed)
        pairs = {k: (x[sel], y[sel]) for k, (x, y) in pairs.items()}

    def paired_stat(f: Callable[..., Any], num: Any, den: Any) -> Callable[[Any], Any]:
        return lambda i: f(num[i], axis=-1) / f(den[i], axis=-1)

    def unpaired_stat(f: Callable[..., Any], num: Any, den: Any) -> Callable[[Any], Any]:
        gen = np.random.default_rng(seed + 99)

        def stat(rows: Any) -> Any:  # rows: the (resamples x n) index matrix of a vectorized bootstrap
            a = num[gen.integers(0, num.size, (rows.shape[0], num.size))]
            b = den[gen.integers(0, den.size, (rows.shape[0], den.size))]
            return f(a, axis=-1) / f(b, axis=-1)

        return stat

    specs: dict[str, tuple[int, Callable[..., Any], Any, Any]] = {}
    for m, sd in declared:
        b_col, s_col = pairs[str(sd.column)]
        # latencies: baseline / speculative; higher-is-better metrics: speculative / baseline (> 1: speculation helps)
        num_col, den_col = (s_col, b_col) if m.better == "higher" else (b_col, s_col)
        specs[sd.field] = (sd.seed, np.nanmedian if sd.center == "median" else np.nanmean, num_col, den_col)
    with warnings.catch_warnings():
        # numpy's divide / invalid / all-NaN warnings: all-NaN resamples (no TPOT) give NaN, dropped
        warnings.simplefilter("ignore", RuntimeWarning)
        for name, (k, f, num, den) in specs.items():
            value = float(f(num) / f(den))
            fn = paired_stat(f, num, den) if paired else unpaired_stat(f, num, den)
            n = max(num.size, den.size)  # paired: the same size
            ci = bootstrap(fn, n, seed=seed + 100 + k, resamples=BOOT_RESAMPLES, vectorized=True)
            setattr(out, name, Speedup(value=value if math.isfinite(value) else None, ci95=ci))
        out.itl_p50 = _itl_speedup(base, spec, paired=paired, seed=seed + 110)
    if walls is not None:
        out.aggregate_throughput = _aggregate_speedup(base, spec, walls, (pb, ps) if paired else None, seed + 120)
        out.cost = out.aggregate_throughput
    if bills is not None:
        out.cost = _aggregate_speedup(base, spec, bills, (pb, ps) if paired else None, seed + 130, spans=True)
    return out


def _aggregate_speedup(
    base: Accumulator,
    spec: Accumulator,
    walls: tuple[float, float],
    pairs: Any,
    seed: int,
    spans: bool = False,
) -> Speedup | None:
    """Aggregate throughput speculative / baseline: the point from all requests (each variant's tokens / wall);
    the interval resamples the paired requests with their e2e (``spectrn.analyze.throughput``). ``spans``: the
    requests' time is their decode slot time and ``walls`` the billed seconds (a class's cost ratio)."""
    wb, ws = walls
    tb, ts = _arr(base.out_tokens), _arr(spec.out_tokens)
    if spans:
        eb, es = decode_spans(_arr(base.ttft), _arr(base.e2e)), decode_spans(_arr(spec.ttft), _arr(spec.e2e))
    else:
        eb, es = _arr(base.e2e), _arr(spec.e2e)
    if wb <= 0 or ws <= 0 or tb.sum() <= 0:
        return None
    value = (float(ts.sum()) / ws) / (float(tb.sum()) / wb)
    # L (the load in flight) comes from all of a variant's requests; the resampled units are the pairs
    lb, ls = in_flight(eb, wb), in_flight(es, ws)
    if pairs is not None:
        pb, ps = pairs
        num, den = (ts[ps], es[ps], ls), (tb[pb], eb[pb], lb)
    else:
        num, den = (ts, es, ls), (tb, eb, lb)
    return Speedup(value=value, ci95=ratio_ci(num, den, paired=pairs is not None, seed=seed))


def _bills(cs: ClassSummary) -> tuple[float, float] | None:
    """The billed seconds of a class's baseline and speculative (None: either has no cost)."""
    b, s = cs.variants["baseline"].cost, cs.variants["speculative"].cost
    if b is None or s is None or b.billed_s is None or s.billed_s is None:
        return None
    return b.billed_s, s.billed_s


def _itl_speedup(base: Accumulator, spec: Accumulator, *, paired: bool, seed: int) -> Speedup | None:
    pb, ps = base.itl.stats().p50, spec.itl.stats().p50
    if not pb or not ps:
        return None
    value = pb / ps
    if not paired:
        return Speedup(value=value)
    sb = {idx: (v, w) for _, idx, v, w in base.itl_sample}
    ss = {idx: (v, w) for _, idx, v, w in spec.itl_sample}
    common = sorted(set(sb) & set(ss))
    if len(common) < 2:
        return Speedup(value=value)
    ci = paired_median_ratio_ci([sb[i] for i in common], [ss[i] for i in common], seed=seed)
    return Speedup(value=value, ci95=ci)
