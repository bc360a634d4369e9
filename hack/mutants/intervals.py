"""Hand-made mutants of the twin's uncertainty (see ``hack/mutants/__init__.py``): standard errors and prediction
intervals that no longer mean what they say. Their tests are marked slow (40 fits; the hidden simulator's twin),
so these run with slow tests (the seventh field)."""

from __future__ import annotations

COVERAGE = "tests/twin/test_interval_meaning.py"

MANUAL: tuple[tuple[str, str, str, str, tuple[str, ...], str, bool], ...] = (
    (
        "twin-interval-90-percent",
        "src/spectrn/twin/predict.py",
        "np.nanpercentile(ratios, [2.5, 97.5])",
        "np.nanpercentile(ratios, [5, 95])",
        (f"{COVERAGE}::test_prediction_interval_is_the_fits_95_percent_spread",),
        "every prediction interval of the twin is a 90% one, labelled ci95",
        True,
    ),
    (
        "twin-cost-se-is-the-variance",
        "src/spectrn/twin/costs.py",
        "float(np.sqrt(max(cov[k, k], 0.0)))",
        "float(max(cov[k, k], 0.0))",
        (f"{COVERAGE}::test_cost_standard_errors_cover_the_true_costs_95_percent_of_the_time",),
        "a fitted cost's standard error is its variance (seconds squared): intervals far too narrow",
        True,
    ),
    (
        "twin-cost-covariance-unscaled",
        "src/spectrn/twin/costs.py",
        "    cov = sigma2 * np.linalg.pinv(xf.T @ xf)",
        "    cov = np.linalg.pinv(xf.T @ xf)",
        (f"{COVERAGE}::test_cost_standard_errors_cover_the_true_costs_95_percent_of_the_time",),
        "the cost covariance forgets the residual scale: standard errors in the wrong units",
        True,
    ),
    (
        "twin-acceptance-se-is-the-sd",
        "src/spectrn/twin/acceptance.py",
        "ses.append((max(a * (1 - a), 0.25 / n) / n) ** 0.5)",
        "ses.append(max(a * (1 - a), 0.25 / n) ** 0.5)",
        (f"{COVERAGE}::test_acceptance_standard_errors_cover_the_true_acceptance_95_percent_of_the_time",),
        "acceptance standard errors are the per-step standard deviation: intervals sqrt(steps) times too wide",
        False,
    ),
)
