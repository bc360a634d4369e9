"""spectrn.analyze.stats, value by value: exact statistics worked out by hand, the bootstrap's bookkeeping
(resample counts, seeds, dropped values, the 50% rule), the per-token sketch's exact moments and its stated
accuracy, the binned (per-request) bootstrap and the weighted median's convention."""

from __future__ import annotations

import math

import numpy as np
import pytest

from doubles.oracle import weighted_median
from spectrn.analyze.stats import (
    BOOT_MAX_REQUESTS,
    SKETCH_ACCURACY,
    BinnedGroups,
    TokenDistribution,
    bootstrap,
    bootstrap_units,
    clustered_ci,
    describe,
    paired_median_ratio_ci,
    percentile_interval,
    stats_with_ci,
    subsample,
)

# ---- describe ----------------------------------------------------------------------------------------


def test_describe_by_hand() -> None:
    d = describe([4.0, 1.0, 3.0, 2.0])
    assert (d.n, d.mean, d.min, d.max) == (4, 2.5, 1.0, 4.0)
    assert d.p50 == 2.5 and d.p90 == pytest.approx(3.7)  # linear: 3 + 0.7 x (4 - 3)
    assert d.stddev == pytest.approx(math.sqrt(5 / 3))  # sample standard deviation: sum of squares 5 over n - 1


def test_describe_two_values_and_one_value() -> None:
    assert describe([1.0, 3.0]).stddev == pytest.approx(math.sqrt(2.0))
    one = describe([5.0])
    assert (one.n, one.mean, one.p50, one.p99, one.stddev) == (1, 5.0, 5.0, 5.0, 0.0)


def test_describe_drops_missing_and_non_finite_values() -> None:
    d = describe([1.0, None, float("nan"), 3.0, float("inf")])
    assert (d.n, d.mean, d.max) == (2, 2.0, 3.0)
    assert describe([None, float("nan")]).n == 0


# ---- bootstrap -----------------------------------------------------------------------------------------


def test_bootstrap_percentiles_by_hand() -> None:
    """A statistic that ignores its resample and counts calls: the values are 0..999, so the interval is the
    2.5th and 97.5th percentiles of 0..999 by linear interpolation: 24.975 and 974.025."""
    calls = iter(range(10_000))
    assert bootstrap(lambda i: float(next(calls)), 5) == pytest.approx((24.975, 974.025))


def test_bootstrap_vectorized_draws_exactly_the_resamples_in_bounded_blocks() -> None:
    for resamples in (1000, 600, 100):
        blocks: list[int] = []

        def stat(rows: np.ndarray, blocks: list[int] = blocks) -> np.ndarray:
            assert rows.ndim == 2 and rows.shape[1] == 7
            blocks.append(rows.shape[0])
            return rows.mean(axis=-1)

        assert bootstrap(stat, 7, resamples=resamples, vectorized=True) is not None
        assert sum(blocks) == resamples and max(blocks) <= 250, (resamples, blocks)


@pytest.mark.parametrize("vectorized", [False, True])
def test_bootstrap_draws_every_unit(vectorized: bool) -> None:
    """Unit 0 is the only non-zero value: resamples that contain it must occur (index 0 is drawn)."""
    x = np.array([9.0, 0.0, 0.0])
    ci = bootstrap(lambda i: x[i].mean(axis=-1), 3, vectorized=vectorized)
    assert ci is not None and ci[0] == 0.0 and ci[1] >= 6.0  # two of three draws of unit 0: mean 6


def test_bootstrap_needs_two_units() -> None:
    x = np.array([1.0, 3.0])
    assert bootstrap(lambda i: x[i].mean(axis=-1), 2, vectorized=True) == (1.0, 3.0)
    assert bootstrap(lambda i: x[i].mean(axis=-1), 1, vectorized=True) is None


def test_bootstrap_drops_undefined_values_and_needs_half_of_them() -> None:
    # one call in two has no value (None or NaN): 500 of 1000 remain, exactly half: still an interval
    calls = iter(range(10_000))

    def half(_: object) -> float | None:
        k = next(calls)
        return None if k % 4 == 0 else (math.nan if k % 4 == 2 else float(k))

    assert bootstrap(half, 5) is not None
    # 5 of 11 kept: 11 // 2 = 5, enough
    calls2 = iter(range(100))
    assert bootstrap(lambda _: float(k) if (k := next(calls2)) % 2 else None, 5, resamples=11) is not None
    # 4 of 10 kept: fewer than half, no interval
    calls3 = iter(range(100))
    assert bootstrap(lambda _: float(k) if (k := next(calls3)) % 5 in (0, 1) else None, 5, resamples=10) is None


def test_bootstrap_vectorized_drops_undefined_values() -> None:
    def stat(rows: np.ndarray) -> list[float | None]:
        return [None if r[0] == 0 else float(r.mean()) for r in rows]

    ci = bootstrap(stat, 4, vectorized=True)
    assert ci is not None and 0.25 <= ci[0] <= ci[1] <= 3.0


# ---- subsample and stats_with_ci ---------------------------------------------------------------------


def test_subsample_keeps_everything_up_to_the_cap_then_a_seeded_distinct_sample() -> None:
    assert subsample(5, 0).tolist() == [0, 1, 2, 3, 4]
    assert subsample(BOOT_MAX_REQUESTS, 3).tolist() == list(range(BOOT_MAX_REQUESTS))
    s = subsample(5000, 1)
    assert s.shape == (BOOT_MAX_REQUESTS,) and np.unique(s).size == BOOT_MAX_REQUESTS
    assert s.tolist() == sorted(s.tolist()) and 0 <= s.min() and s.max() < 5000
    assert s.tolist() == subsample(5000, 1).tolist()  # reproducible
    assert s.tolist() != subsample(5000, 2).tolist()  # and the seed matters


def test_stats_with_ci_intervals_are_seeded_reproducible_and_of_the_right_width() -> None:
    x = np.random.default_rng(1).normal(10.0, 2.0, 400)
    a, b = stats_with_ci(x, seed=3), stats_with_ci(x, seed=3)
    assert a == b and a.ci95 is not None and a.ci95.mean is not None and a.ci95.p50 is not None
    other = stats_with_ci(x, seed=4)
    assert other.ci95 is not None and other.ci95.mean != a.ci95.mean and other.ci95.p50 != a.ci95.p50
    lo, hi = a.ci95.mean
    assert lo < x.mean() < hi and hi - lo == pytest.approx(2 * 1.96 * 2.0 / 20, rel=0.25)  # 1.96 sigma / sqrt(n)
    lo, hi = a.ci95.p50
    assert lo < float(np.median(x)) < hi and hi - lo == pytest.approx(2 * 1.96 * 1.2533 * 2.0 / 20, rel=0.35)
    # one resample: both bounds are that resample's value
    one = stats_with_ci(x, resamples=1)
    assert one.ci95 is not None and one.ci95.mean is not None and one.ci95.mean[0] == one.ci95.mean[1]
    assert one.ci95.p50 is not None and one.ci95.p50[0] == one.ci95.p50[1]


def test_stats_with_ci_above_the_cap_resamples_a_sample() -> None:
    x = np.arange(3000, dtype=float)
    s = stats_with_ci(x)
    assert s.n == 3000 and s.mean == 1499.5  # point estimates use every value
    assert s.ci95 is not None and s.ci95.mean is not None and s.ci95.mean[0] < 1499.5 < s.ci95.mean[1]


# ---- TokenDistribution ---------------------------------------------------------------------------------


def test_token_distribution_exact_moments_by_hand() -> None:
    t = TokenDistribution()
    t.add([0.01, 0.03], [3, 1])  # 0.01 x 3, 0.03 x 1
    s = t.stats()
    assert s.n == 4 and s.mean == pytest.approx(0.015) and (s.min, s.max) == (0.01, 0.03)
    # weighted sample variance: sum w (v - mean)^2 / (n - 1) = (3 x 0.005^2 + 0.015^2) / 3
    assert s.stddev == pytest.approx(math.sqrt((3 * 0.005**2 + 0.015**2) / 3))
    assert s.p50 == pytest.approx(0.01, rel=SKETCH_ACCURACY)
    assert s.relative_error == SKETCH_ACCURACY


def test_token_distribution_without_weights_counts_one_each() -> None:
    t = TokenDistribution()
    t.add([2.0, 4.0])
    s = t.stats()
    assert (s.n, s.mean, s.min, s.max) == (2, 3.0, 2.0, 4.0) and s.stddev == pytest.approx(math.sqrt(2.0))


def test_token_distribution_one_value() -> None:
    t = TokenDistribution()
    t.add([0.25])
    s = t.stats()
    assert (s.n, s.mean, s.p50, s.min, s.max, s.stddev) == (1, 0.25, 0.25, 0.25, 0.25, 0.0)
    assert TokenDistribution().stats().n == 0


def test_token_distribution_skips_what_is_not_a_sample() -> None:
    """A zero or negative weight, or a NaN or infinite value, is not a sample, and what follows it still is."""
    t = TokenDistribution()
    t.add([5.0, 1.0, float("nan"), 2.0, float("inf"), 9.0, 3.0], [0, 1, 1, 1, 1, -2, 1])
    s = t.stats()
    assert (s.n, s.mean, s.min, s.max) == (3, 2.0, 1.0, 3.0)


def test_token_distribution_weights_must_match_values() -> None:
    with pytest.raises(ValueError, match="zip"):
        TokenDistribution().add([1.0, 2.0], [1])


def test_token_distribution_quantile_is_the_weighted_quantile_within_the_range() -> None:
    """``quantile`` (what SLO checks read) is what ``stats`` reports: the sketch's weighted quantile, clipped to
    the values seen, and nothing for an empty distribution."""
    assert TokenDistribution().quantile(0.5) is None
    one = TokenDistribution()
    one.add([0.25])
    assert [one.quantile(q) for q in (0.01, 0.5, 1.0)] == [0.25, 0.25, 0.25]  # clipped: exactly the one value
    t = TokenDistribution()
    t.add([1.0, 3.0, 2.0], [1, 9, 2])  # 1.0 x 1, 2.0 x 2, 3.0 x 9 (12 samples)
    assert t.quantile(0.05) == pytest.approx(1.0, rel=SKETCH_ACCURACY)  # rank 0.55: the first sample
    assert t.quantile(0.15) == pytest.approx(2.0, rel=SKETCH_ACCURACY)  # rank 1.65: the second
    assert t.quantile(0.5) == pytest.approx(3.0, rel=SKETCH_ACCURACY)
    assert 1.0 <= min(t.quantile(q) or 0 for q in (0.0, 0.001)) and max(t.quantile(q) or 9 for q in (0.999, 1.0)) <= 3.0
    s = t.stats()
    assert (t.quantile(0.5), t.quantile(0.9), t.quantile(0.99)) == (s.p50, s.p90, s.p99)


def test_token_distribution_weighted_quantiles() -> None:
    """Weights count in the quantiles: 1.0 x 1 and 3.0 x 9 has its median at 3.0 (unweighted it would be 2.0)."""
    t = TokenDistribution()
    t.add([1.0, 3.0], [1, 9])
    s = t.stats()
    assert s.p50 == pytest.approx(3.0, rel=SKETCH_ACCURACY) and s.p90 == pytest.approx(3.0, rel=SKETCH_ACCURACY)


def test_token_distribution_quantiles_within_the_stated_accuracy() -> None:
    values = np.linspace(1, 100, 1000)
    t = TokenDistribution()
    t.add(list(values))
    s = t.stats()
    for q in (50, 90, 95, 99):
        exact = float(np.percentile(values, q))
        got = getattr(s, f"p{q}")
        assert abs(got / exact - 1) <= SKETCH_ACCURACY, (q, got, exact)


def test_token_distribution_merge_equals_one_distribution() -> None:
    a, b, both = TokenDistribution(), TokenDistribution(), TokenDistribution()
    a.add([0.5], [1])  # exactly one sample
    b.add([0.1, 0.2, 0.4], [2, 1, 1])
    both.add([0.5, 0.1, 0.2, 0.4], [1, 2, 1, 1])
    a.merge(b)
    got, want = a.stats(), both.stats()
    for field in ("n", "mean", "p50", "p90", "p95", "p99", "min", "max", "stddev"):
        assert getattr(got, field) == pytest.approx(getattr(want, field), rel=1e-12), field
    empty = TokenDistribution()
    empty.merge(TokenDistribution())
    assert empty.stats().n == 0
    c = TokenDistribution()
    c.add([0.3])
    c.merge(TokenDistribution())  # merging nothing changes nothing
    assert c.stats().n == 1 and c.stats().mean == 0.3


# ---- the binned (per-request) bootstrap --------------------------------------------------------------


def test_binned_groups_use_the_sketch_bins() -> None:
    """Bounded bins: values spanning 1..1000 fall into about log(1000) / log(gamma) bins, whatever their number;
    each bin's value is within the sketch's accuracy of the values in it."""
    values = np.linspace(1.0, 1000.0, 20_000)
    b = BinnedGroups([(values, np.ones(values.size))])
    gamma = (1 + SKETCH_ACCURACY) / (1 - SKETCH_ACCURACY)
    assert b.keys.size <= math.log(1000) / math.log(gamma) + 2
    idx = np.searchsorted(b.keys, np.ceil(np.log(values) / b.log_gamma))
    assert np.all(np.abs(b.values[idx] / values - 1) <= SKETCH_ACCURACY + 1e-12)


def test_binned_medians_and_means_by_hand() -> None:
    b = BinnedGroups([([1.0], [1.0]), ([5.0], [1.0]), ([5.0, 1.0], [1.0, 3.0])])
    ones = np.ones((1, 3))
    # weights: 1.0 x 4, 5.0 x 2: median 1.0, weighted mean (1 x 4 + 5 x 2) / 6
    assert b.medians(ones)[0] == pytest.approx(1.0, rel=SKETCH_ACCURACY)
    assert b.means(ones)[0] == pytest.approx(14 / 6)
    # drawing the second group twice and the first once: 1.0 x 1, 5.0 x 2: the median is the top bin
    top = np.array([[1.0, 2.0, 0.0]])
    assert b.medians(top)[0] == pytest.approx(5.0, rel=SKETCH_ACCURACY)
    assert b.means(top)[0] == pytest.approx(11 / 3)


def test_binned_groups_of_no_groups_are_empty() -> None:
    b = BinnedGroups([])
    assert len(b) == 0 and b.keys.size == 0 and b.hist.shape == (0, 0) and b.values.size == 0


def test_binned_counts_draw_every_resample_as_many_groups_as_there_are() -> None:
    """Each resample (row) draws n groups with replacement: its counts are whole numbers summing to n."""
    b = BinnedGroups([([1.0], [1.0]), ([2.0], [1.0]), ([3.0], [1.0])])
    counts = b.counts(200, seed=4)
    assert counts.shape == (200, 3)
    assert np.all(counts.sum(axis=1) == 3) and np.all(counts == np.round(counts)) and counts.min() == 0
    assert counts.max() == 3  # some resample draws one group three times


def test_clustered_ci_drops_resamples_without_weight_silently() -> None:
    """A group whose weights are all 0 adds nothing; a resample that draws only it has no mean and is dropped
    (no RuntimeWarning: the test suite turns warnings into errors)."""
    ci = clustered_ci([([1.0, 2.0], [1.0, 1.0]), ([5.0], [0.0])], seed=1)
    assert ci.mean == pytest.approx((1.5, 1.5))  # every resample with weight sees only the first group


def test_clustered_ci_brackets_the_weighted_mean_and_median() -> None:
    gen = np.random.default_rng(5)
    groups = []
    for _ in range(200):
        k = gen.integers(1, 5, 30).astype(float)
        groups.append((gen.lognormal(np.log(0.02), 0.2, 30) / k, k))
    ci = clustered_ci(groups, seed=2)
    v = np.concatenate([g[0] for g in groups])
    w = np.concatenate([g[1] for g in groups])
    assert ci.mean is not None and ci.p50 is not None
    assert ci.mean[0] < float(np.sum(v * w) / np.sum(w)) < ci.mean[1]
    assert ci.p50[0] <= weighted_median(v, w) <= ci.p50[1]
    assert clustered_ci(groups, seed=2) == ci and clustered_ci(groups, seed=3) != ci


def test_clustered_ci_needs_two_non_empty_groups_and_draws_every_group() -> None:
    two = clustered_ci([([1.0], [1.0]), ([3.0], [1.0])])
    assert two.mean == pytest.approx((1.0, 3.0)) and two.p50 is not None
    assert clustered_ci([([1.0], [1.0]), ([], [])]).mean is None
    # group 0 is the only slow one: resamples that draw it twice must show
    ci = clustered_ci([([9.0], [1.0]), ([1.0], [1.0]), ([1.0], [1.0])])
    assert ci.mean is not None and ci.mean[1] >= 6.3


def test_paired_median_ratio_ci() -> None:
    gen = np.random.default_rng(7)
    a, b = [], []
    for _ in range(60):
        base = gen.lognormal(np.log(0.03), 0.1, 20)
        a.append((2 * base, np.ones(20)))
        b.append((base, np.ones(20)))
    ci = paired_median_ratio_ci(a, b, seed=1)
    assert ci is not None and 2.0 * (1 - 3 * SKETCH_ACCURACY) <= ci[0] <= ci[1] <= 2.0 * (1 + 3 * SKETCH_ACCURACY)
    assert paired_median_ratio_ci(a, b, seed=1) == ci
    other = paired_median_ratio_ci([(3 * x, w) for x, w in b[:30]] + a[30:], b, seed=1)
    assert other is not None and other[0] >= 2.0 and other[1] > ci[1] * 1.2  # half the pairs at 3x
    assert paired_median_ratio_ci(a[:2], b[:2]) is not None
    assert paired_median_ratio_ci(a[:1], b[:1]) is None
    assert paired_median_ratio_ci(a[:3], b[:2]) is None


def test_interval_by_hand() -> None:
    assert percentile_interval(np.arange(1000.0), 1000) == pytest.approx((24.975, 974.025))
    assert percentile_interval(np.arange(500.0), 1000) is not None  # exactly half finite: enough
    assert percentile_interval(np.arange(499.0), 1000) is None
    assert percentile_interval(np.arange(500.0), 1001) is not None  # 1001 // 2 = 500
    assert percentile_interval(np.arange(400.0), 1000) is None
    assert percentile_interval([1.0, None, 3.0, float("nan")], 4) == pytest.approx((1.05, 2.95))


# ---- weighted median -------------------------------------------------------------------------------


def test_weighted_median_conventions() -> None:
    assert weighted_median([1.0, 2.0, 3.0], [1, 1, 1]) == 2.0  # odd count: the middle one
    assert weighted_median([3.0, 1.0, 2.0, 4.0], [1, 1, 1, 1]) == 2.5  # even: the mean of the middle two
    assert weighted_median([3.0], [1]) == 3.0
    assert math.isnan(weighted_median([1.0, 2.0], [0, 0]))


def test_merging_a_single_sample() -> None:
    a, one = TokenDistribution(), TokenDistribution()
    a.add([0.1, 0.3])
    one.add([0.5])
    a.merge(one)
    s = a.stats()
    assert (s.n, s.max) == (3, 0.5) and s.mean == pytest.approx(0.3)


def test_stats_with_ci_drops_missing_values_like_describe() -> None:
    s = stats_with_ci([1.0, None, 3.0, float("nan"), 2.0])
    assert (s.n, s.mean) == (3, 2.0) and s.ci95 is not None and s.ci95.mean is not None


def test_paired_median_ratio_ci_is_reproducible_on_noisy_pairs() -> None:
    gen = np.random.default_rng(11)
    a = [(gen.lognormal(np.log(0.06), 0.3, 10), np.ones(10)) for _ in range(40)]
    b = [(gen.lognormal(np.log(0.03), 0.3, 10), np.ones(10)) for _ in range(40)]
    ci = paired_median_ratio_ci(a, b, seed=4)
    assert ci is not None and ci[0] < 2.0 < ci[1]
    assert paired_median_ratio_ci(a, b, seed=4) == ci and paired_median_ratio_ci(a, b, seed=5) != ci


def test_paired_median_ratio_ci_is_set_by_its_seed_alone() -> None:
    """Pairs whose levels spread over many sketch bins (one level per request, lognormal with sigma 1), so the
    interval moves with the draws: one seed gives one interval every time, other seeds give others. (On pairs
    that fill few bins the medians, hence the intervals, coincide across most draws.)"""
    gen = np.random.default_rng(12)
    a = [(np.full(3, gen.lognormal(np.log(0.06), 1.0)), np.ones(3)) for _ in range(60)]
    b = [(np.full(3, gen.lognormal(np.log(0.03), 1.0)), np.ones(3)) for _ in range(60)]
    same = {paired_median_ratio_ci(a, b, seed=4) for _ in range(4)}
    assert len(same) == 1
    (ci,) = same
    assert ci is not None and ci[0] < 2.0 < ci[1]  # the levels' medians are in the ratio 2
    assert len(same | {paired_median_ratio_ci(a, b, seed=s) for s in (5, 6, 7)}) == 4


# ---- bootstrap over distinct units ---------------------------------------------------------------------


@pytest.mark.parametrize("resamples", [1000, 1100, 7])
def test_distinct_unit_bootstrap_draws_exactly_the_resamples_each_of_all_units(resamples: int) -> None:
    """Every row of draw counts is one resample of all n units (its counts sum to n), and there are exactly
    ``resamples`` rows, made in blocks of at most 250."""
    counts = np.array([3.0, 1.0, 6.0])
    blocks: list[np.ndarray] = []

    def stat(d: np.ndarray) -> np.ndarray:
        blocks.append(d)
        return d @ np.array([1.0, 2.0, 3.0]) / d.sum(axis=1)

    bootstrap_units(stat, counts, resamples=resamples, seed=4)
    assert sum(b.shape[0] for b in blocks) == resamples and max(b.shape[0] for b in blocks) <= 250
    assert all(b.shape[1] == 3 and np.all(b.sum(axis=1) == 10) for b in blocks)


def test_distinct_unit_bootstrap_follows_its_seed_and_needs_two_units() -> None:
    values = np.array([1.0, 2.0, 5.0, 9.0])
    counts = np.array([5.0, 3.0, 1.0, 1.0])

    def mean(d: np.ndarray) -> np.ndarray:
        return (d @ values) / d.sum(axis=1)

    a = bootstrap_units(mean, counts, seed=0)
    assert a is not None and a == bootstrap_units(mean, counts)  # the default seed is 0
    assert a == bootstrap_units(mean, counts, seed=0) and a != bootstrap_units(mean, counts, seed=1)
    assert a[0] < (counts @ values) / counts.sum() < a[1]  # the point estimate (2.9) lies inside

    def total(d: np.ndarray) -> np.ndarray:
        return d.sum(axis=1)

    assert bootstrap_units(total, [2]) == (2.0, 2.0)  # two identical units: an interval (degenerate, but there)
    assert bootstrap_units(total, [1]) is None and bootstrap_units(total, [0, 1]) is None  # one unit: none
