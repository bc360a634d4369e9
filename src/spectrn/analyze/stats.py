"""Numbers -> distributions with bootstrap confidence intervals (pure, numpy).

Two kinds of distribution:
- one value per request (TTFT, TPOT, e2e, throughput): kept exactly in compact float arrays, so quantiles are
  exact and the bootstrap resamples requests;
- one value per token or per event (per-token ITL, chunk latency), millions in a long run: summarised by a
  DDSketch (``ddsketch`` from PyPI) with relative accuracy ``SKETCH_ACCURACY`` (every quantile within 0.5% of
  the exact one); mean, min, max and standard deviation stay exact. Their confidence intervals resample whole
  requests (tokens of one request are correlated) from a fixed-size sample of requests.

Bootstrap: percentile intervals, seeded, ``BOOT_RESAMPLES`` resamples; above ``BOOT_MAX_REQUESTS`` units the
resampling runs on a seeded sub-sample (point estimates always use every value).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from spectrn.run.summary import CI95, Interval, Stats

if TYPE_CHECKING:
    from ddsketch import DDSketch

QUANTILES = (50, 90, 95, 99)
BOOT_RESAMPLES = 1000
BOOT_MAX_REQUESTS = 2000
SKETCH_ACCURACY = 0.005


def rng(seed: int) -> Any:
    import numpy as np

    return np.random.default_rng(seed)


def describe(values: Any) -> Stats:
    """Exact mean, quantiles, min, max and standard deviation of ``values`` (any sequence or array)."""
    import numpy as np

    a = np.asarray(values, dtype=float)
    a = a[np.isfinite(a)]
    if a.size == 0:
        return Stats()
    qs = np.percentile(a, QUANTILES)
    return Stats(
        n=int(a.size),
        mean=float(a.mean()),
        **{f"p{q}": float(v) for q, v in zip(QUANTILES, qs, strict=True)},
        min=float(a.min()),
        max=float(a.max()),
        stddev=float(a.std(ddof=1)) if a.size > 1 else 0.0,
    )


def bootstrap(
    stat: Callable[[Any], Any],
    n: int,
    *,
    resamples: int = BOOT_RESAMPLES,
    seed: int = 0,
    vectorized: bool = False,
) -> Interval | None:
    """95% percentile-bootstrap interval of ``stat(indices)`` over ``n`` units, or None if n < 2.

    With ``vectorized``, ``stat`` takes a (resamples x n) index matrix and returns one value per row, which
    replaces a Python loop of ``resamples`` calls by a few array operations.
    """
    import numpy as np

    if n < 2:
        return None
    if vectorized:
        return percentile_interval(replicates(stat, n, resamples=resamples, seed=seed), resamples)
    gen = rng(seed)
    out = []
    for _ in range(resamples):
        v = stat(gen.integers(0, n, n))
        if v is not None and math.isfinite(v):
            out.append(v)
    return percentile_interval(np.asarray(out, dtype=float), resamples)


def replicates(stat: Callable[[Any], Any], n: int, *, resamples: int = BOOT_RESAMPLES, seed: int = 0) -> Any:
    """The ``resamples`` bootstrap values of a vectorized ``stat`` over ``n`` units (NaN kept), or None if n < 2:
    what ``bootstrap`` takes its percentiles of, for a caller that resamples further (``spectrn.analyze.repeats``
    draws runs, then one of these values per drawn run)."""
    import numpy as np

    if n < 2:
        return None
    gen = rng(seed)
    chunks = []
    for start in range(0, resamples, 250):  # bounded memory: 250 x n indices at a time
        rows = gen.integers(0, n, (min(250, resamples - start), n))
        chunks.append(np.asarray(stat(rows), dtype=float))
    return np.concatenate(chunks)


def bootstrap_units(
    stat: Callable[[Any], Any],
    counts: Any,
    *,
    resamples: int = BOOT_RESAMPLES,
    seed: int = 0,
) -> Interval | None:
    """The percentile bootstrap of ``bootstrap`` over ``n = sum(counts)`` units of which ``counts[j]`` are
    identical (same values): resampling n units with replacement draws each distinct unit a Multinomial(n,
    counts / n) number of times, so ``stat`` takes a (rows x distinct) matrix of draw counts and returns one
    value per row. Same distribution as the index bootstrap; memory in distinct units, not in units."""
    import numpy as np

    c = np.asarray(counts, dtype=float)
    n = int(c.sum())
    if n < 2:
        return None
    gen = rng(seed)
    p = c / n
    chunks = []
    for start in range(0, resamples, 250):
        draws = gen.multinomial(n, p, size=min(250, resamples - start)).astype(float)
        chunks.append(np.asarray(stat(draws), dtype=float))
    return percentile_interval(np.concatenate(chunks), resamples)


def subsample(n: int, seed: int) -> Any:
    """Indices of at most ``BOOT_MAX_REQUESTS`` of ``n`` units (all of them when fewer), sorted."""
    import numpy as np

    if n <= BOOT_MAX_REQUESTS:
        return np.arange(n)
    return np.sort(rng(seed + 7).choice(n, BOOT_MAX_REQUESTS, replace=False))


def stats_with_ci(values: Any, *, seed: int = 0, resamples: int = BOOT_RESAMPLES) -> Stats:
    """``describe`` plus bootstrap CIs of the mean and the median."""
    import numpy as np

    out = describe(values)
    a = np.asarray(values, dtype=float)
    a = a[np.isfinite(a)]
    sub = a[subsample(a.size, seed)]
    out.ci95 = CI95(
        mean=bootstrap(lambda i: sub[i].mean(axis=-1), sub.size, seed=seed, resamples=resamples, vectorized=True),
        p50=bootstrap(
            lambda i: np.median(sub[i], axis=-1), sub.size, seed=seed + 1, resamples=resamples, vectorized=True
        ),
    )
    return out


def new_sketch() -> DDSketch:
    from ddsketch import DDSketch

    return DDSketch(relative_accuracy=SKETCH_ACCURACY)


class TokenDistribution:
    """A per-token (or per-event) distribution accumulated request by request in bounded memory.

    ``add(values, weights)`` takes one request's values (e.g. its event gaps divided by the tokens they carry,
    weighted by those tokens). Exact: count, sum, sum of squares, min, max. Quantiles: a DDSketch.
    """

    def __init__(self) -> None:
        self.sketch = new_sketch()
        self.count = 0.0
        self.total = 0.0
        self.total_sq = 0.0
        self.lo = math.inf
        self.hi = -math.inf

    def add(self, values: Sequence[float], weights: Sequence[float] | None = None) -> None:
        ws = weights if weights is not None else [1.0] * len(values)
        for v, w in zip(values, ws, strict=True):
            if w <= 0 or not math.isfinite(v):
                continue
            v = max(v, 0.0)
            self.sketch.add(v, w)
            self.count += w
            self.total += v * w
            self.total_sq += v * v * w
            self.lo = min(self.lo, v)
            self.hi = max(self.hi, v)

    def merge(self, other: TokenDistribution) -> None:
        if other.count == 0:
            return
        self.sketch.merge(other.sketch)
        self.count += other.count
        self.total += other.total
        self.total_sq += other.total_sq
        self.lo = min(self.lo, other.lo)
        self.hi = max(self.hi, other.hi)

    def quantile(self, q: float) -> float | None:
        """The weighted quantile ``q`` (0 < q <= 1) as ``stats`` reports it (sketch, clipped to min/max)."""
        if self.count == 0:
            return None
        return _clip(self.sketch.get_quantile_value(q), self.lo, self.hi)

    def stats(self) -> Stats:
        if self.count == 0:
            return Stats()
        n = self.count
        mean = self.total / n
        var = max(self.total_sq / n - mean * mean, 0.0) * (n / (n - 1) if n > 1 else 0.0)
        qs = {f"p{q}": _clip(self.sketch.get_quantile_value(q / 100.0), self.lo, self.hi) for q in QUANTILES}
        return Stats(
            n=int(round(n)),
            mean=mean,
            **qs,
            min=self.lo,
            max=self.hi,
            stddev=math.sqrt(var),
            relative_error=SKETCH_ACCURACY,
        )


def _clip(v: float | None, lo: float, hi: float) -> float | None:
    return None if v is None else min(max(float(v), lo), hi)


class BinnedGroups:
    """Per-group (request) weighted values on the sketch's logarithmic bins, as a dense matrix, so that a
    bootstrap over groups is a matrix product: resample counts (resamples x groups) @ histograms (groups x bins).

    Medians from it carry the sketch's relative accuracy (``SKETCH_ACCURACY``); means are exact."""

    def __init__(self, groups: Sequence[tuple[Any, Any]]) -> None:
        import numpy as np

        gamma = (1 + SKETCH_ACCURACY) / (1 - SKETCH_ACCURACY)
        self.log_gamma = math.log(gamma)
        keys_per_group = []
        self.sums = np.zeros(len(groups))
        self.weights = np.zeros(len(groups))
        for g, (v, w) in enumerate(groups):
            v = np.maximum(np.asarray(v, dtype=float), 1e-12)
            w = np.asarray(w, dtype=float)
            keys_per_group.append((np.ceil(np.log(v) / self.log_gamma).astype(np.int64), w))
            self.sums[g] = float(np.sum(v * w))
            self.weights[g] = float(np.sum(w))
        allkeys = np.unique(np.concatenate([k for k, _ in keys_per_group])) if keys_per_group else np.zeros(0, int)
        self.keys = allkeys
        self.hist = np.zeros((len(groups), allkeys.size))
        for g, (k, w) in enumerate(keys_per_group):
            np.add.at(self.hist[g], np.searchsorted(allkeys, k), w)
        # a bin's representative value: its geometric centre (within SKETCH_ACCURACY of every value in it)
        self.values = 2 * np.exp(allkeys * self.log_gamma) / (1 + gamma)

    def __len__(self) -> int:
        return int(self.hist.shape[0])

    def counts(self, n_resamples: int, seed: int) -> Any:
        """A (resamples x groups) matrix of how often each group is drawn."""
        import numpy as np

        n = len(self)
        idx = rng(seed).integers(0, n, (n_resamples, n))
        out = np.zeros((n_resamples, n))
        np.add.at(out, (np.arange(n_resamples)[:, None], idx), 1.0)
        return out

    def medians(self, counts: Any) -> Any:
        import numpy as np

        hist = counts @ self.hist
        cum = np.cumsum(hist, axis=1)
        half = cum[:, -1:] / 2.0
        pos = np.minimum((cum < half).sum(axis=1), self.keys.size - 1)
        return self.values[pos]

    def means(self, counts: Any) -> Any:
        import numpy as np

        with np.errstate(invalid="ignore", divide="ignore"):
            return (counts @ self.sums) / (counts @ self.weights)


def percentile_interval(values: Any, resamples: int) -> Interval | None:
    """The 2.5th and 97.5th percentiles of the finite ``values`` (None when fewer than half the resamples are)."""
    import numpy as np

    vals = np.asarray(values, dtype=float)
    vals = vals[np.isfinite(vals)]
    if vals.size < resamples // 2:
        return None
    lo, hi = np.percentile(vals, [2.5, 97.5])
    return float(lo), float(hi)


def clustered_ci(groups: Sequence[tuple[Any, Any]], *, seed: int = 0, resamples: int = BOOT_RESAMPLES) -> CI95:
    """CIs of the mean and median of weighted values, resampling whole groups (requests).

    ``groups``: per request, (values, weights) arrays, e.g. event gaps / tokens and the tokens."""
    groups = [(v, w) for v, w in groups if len(v)]
    if len(groups) < 2:
        return CI95()
    binned = BinnedGroups(groups)
    counts = binned.counts(resamples, seed)
    return CI95(
        mean=percentile_interval(binned.means(counts), resamples),
        p50=percentile_interval(binned.medians(counts), resamples),
    )


def paired_median_ratio_ci(
    a: Sequence[tuple[Any, Any]], b: Sequence[tuple[Any, Any]], *, seed: int = 0, resamples: int = BOOT_RESAMPLES
) -> Interval | None:
    """CI of median(a) / median(b) of weighted values, resampling pairs of groups (the same request in both)."""
    if len(a) < 2 or len(a) != len(b):
        return None
    ba, bb = BinnedGroups(a), BinnedGroups(b)
    counts = ba.counts(resamples, seed)
    import numpy as np

    with np.errstate(invalid="ignore", divide="ignore"):
        return percentile_interval(ba.medians(counts) / bb.medians(counts), resamples)
