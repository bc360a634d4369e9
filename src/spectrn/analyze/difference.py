"""Run B against run A: ratios B / A of TPOT p50, aggregate throughput and $/M with bootstrap intervals.

Two runs are different request sets (no request of A is the same request of B), so each run's requests are
resampled on their own, with independent draws: TPOT p50 ratio = median(B*) / median(A*); aggregate
throughput ratio = (L_B T_B* / S_B*) / (L_A T_A* / S_A*) (``spectrn.analyze.throughput``); $/M ratio =
(price_B / price_A) / throughput ratio, so its bounds are the throughput ratio's mapped and swapped. The points
are the two summaries' own figures (B's p50 over A's, B's aggregate over A's, B's $/M over A's).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from typing import Any

from spectrn import labels
from spectrn.analyze.accumulator import Accumulator
from spectrn.analyze.settings import Settings
from spectrn.analyze.stats import BOOT_RESAMPLES, bootstrap, rng, subsample
from spectrn.analyze.summary import accumulate
from spectrn.analyze.throughput import in_flight, ratio_ci
from spectrn.run.records import RequestRecord, RunMeta
from spectrn.run.summary import Interval, Summary, VariantSummary

ALL = labels.ALL_CLASSES
METRICS = ("TPOT p50", "aggregate tok/s", "$/M output tokens")


def scoped(records: Iterable[RequestRecord], meta: RunMeta, seed: int = 0) -> dict[tuple[str, str, str], Accumulator]:
    """Accumulators per (level, prompt class, variant), plus each level's classes pooled as class ``all``."""
    accs = accumulate(records, Settings.of(meta, seed))
    out: dict[tuple[str, str, str], Accumulator] = {}
    for (lv, variant, cls), acc in accs.items():
        out[(lv, cls, variant)] = acc
        pooled = out.get((lv, ALL, variant))
        if pooled is None:
            pooled = out[(lv, ALL, variant)] = Accumulator(window=acc.window, semantics=acc.semantics, seed=seed)
        pooled.merge(acc)
    return out


def _arr(a: Any) -> Any:
    import numpy as np

    return np.frombuffer(a, dtype=float) if len(a) else np.zeros(0)


def tpot_ratio_ci(a: Accumulator, b: Accumulator, *, seed: int, resamples: int = BOOT_RESAMPLES) -> Interval | None:
    """median(TPOT of B*) / median(TPOT of A*), each run's requests resampled on its own."""
    import numpy as np

    ta, tb = _arr(a.tpot), _arr(b.tpot)
    ta, tb = ta[np.isfinite(ta)], tb[np.isfinite(tb)]
    if ta.size < 2 or tb.size < 2:
        return None
    ta, tb = ta[subsample(ta.size, seed)], tb[subsample(tb.size, seed + 1)]
    gen = rng(seed + 99)

    def stat(rows: Any) -> Any:  # rows only sets how many resamples: each run draws its own indices
        ia = gen.integers(0, ta.size, (rows.shape[0], ta.size))
        ib = gen.integers(0, tb.size, (rows.shape[0], tb.size))
        return np.median(tb[ib], axis=-1) / np.median(ta[ia], axis=-1)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return bootstrap(stat, max(ta.size, tb.size), seed=seed, resamples=resamples, vectorized=True)


def ratios(
    a: Accumulator, b: Accumulator, va: VariantSummary, vb: VariantSummary, *, seed: int
) -> dict[str, tuple[float | None, Interval | None]]:
    """The three ratios B / A of one (level, class, variant): point (from the summaries) and 95% interval."""
    out: dict[str, tuple[float | None, Interval | None]] = {}
    pa, pb = va.tpot_s.p50, vb.tpot_s.p50
    out["TPOT p50"] = (pb / pa if pa and pb is not None else None, tpot_ratio_ci(a, b, seed=seed))
    xa, xb = va.output_tokens_per_s.aggregate, vb.output_tokens_per_s.aggregate
    thr: Interval | None = None
    if xa and xb:
        la, lb = in_flight(_arr(a.e2e), va.duration_s), in_flight(_arr(b.e2e), vb.duration_s)
        num = (_arr(b.out_tokens), _arr(b.e2e), lb)
        den = (_arr(a.out_tokens), _arr(a.e2e), la)
        thr = ratio_ci(num, den, paired=False, seed=seed + 10)
    out["aggregate tok/s"] = (xb / xa if xa and xb is not None else None, thr)
    ca = va.cost.usd_per_million_output_tokens if va.cost else None
    cb = vb.cost.usd_per_million_output_tokens if vb.cost else None
    cost_ci: Interval | None = None
    if ca and cb is not None and xa and xb and thr is not None and thr[0] > 0:
        # $/M = price / throughput: B/A = (price_B / price_A) / (throughput_B / throughput_A)
        price = (cb * xb) / (ca * xa)
        cost_ci = (price / thr[1], price / thr[0])
    out["$/M output tokens"] = (cb / ca if ca and cb is not None else None, cost_ci)
    return out


def differences(
    sa: Summary,
    sb: Summary,
    accs_a: dict[tuple[str, str, str], Accumulator],
    accs_b: dict[tuple[str, str, str], Accumulator],
    pairs: list[tuple[str, str]],
    *,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """One row per (level pair, prompt class, variant, metric) present in both runs: ratio B / A, its interval."""
    la = {lv.label: lv for lv in sa.levels}
    lb = {lv.label: lv for lv in sb.levels}
    rows: list[dict[str, Any]] = []
    for level_a, level_b in pairs:
        view_a, view_b = dict(la[level_a].scopes()), dict(lb[level_b].scopes())
        level = level_a if level_a == level_b else f"{level_a} vs {level_b}"
        for cls in [c for c in view_a if c in view_b]:
            for variant in ("baseline", "speculative"):
                va, vb = view_a[cls].variants.get(variant), view_b[cls].variants.get(variant)
                aa, ab = accs_a.get((level_a, cls, variant)), accs_b.get((level_b, cls, variant))
                if va is None or vb is None or aa is None or ab is None:
                    continue
                for metric, (value, ci) in ratios(aa, ab, va, vb, seed=seed).items():
                    rows.append(
                        {"level": level, "prompt_class": cls, "variant": variant, "metric": metric,
                         "ratio": value, "ci95": list(ci) if ci else None}
                    )  # fmt: skip
    return rows
