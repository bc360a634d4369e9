"""The twin's uncertainty means what it says: standard errors that cover the truth at their nominal rate over many
seeds, and prediction intervals as wide as a 95% interval of the fit's spread (not merely around the point)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from spectrn.twin.acceptance import ClassCounts
from spectrn.twin.costs import PARAMS, fit_costs
from spectrn.twin.model import Covariance
from spectrn.twin.predict import predict

from .conftest import CAL_WINDOW, Hidden
from .test_units import PRIOR, TRUE, synthetic_steps

Z95 = 1.959964  # the standard normal's 97.5th percentile


@pytest.mark.slow  # 40 fits: about 20 s
def test_cost_standard_errors_cover_the_true_costs_95_percent_of_the_time() -> None:
    """40 fits of steps drawn from the model with TRUE costs and 0.5 ms of Gaussian noise (fixed seeds): each
    parameter's value +- 1.96 standard errors holds its true value in about 95% of them. Pooled over the 8
    parameters (320 intervals) the count of hits is binomial(320, 0.95): mean 304, sd 3.9, so [288, 317] is
    +-4 sd; intervals of half the width would hit about 68% (218) and fail, as would 50% intervals (160)."""
    hits = {name: 0 for name in PARAMS}
    for seed in range(1000, 1040):
        fit = fit_costs(synthetic_steps(random.Random(seed)), PRIOR)
        for name in PARAMS:
            p = fit.params[name]
            assert p.status == "fitted" and p.se is not None and p.se > 0, (seed, name, p)
            hits[name] += abs(p.value - TRUE[name]) <= Z95 * p.se
    total = sum(hits.values())
    print("cost interval coverage per parameter (of 40):", hits)
    assert 288 <= total <= 317, (total, hits)
    assert min(hits.values()) >= 33, hits  # no parameter below 82% (binomial(40, 0.95): P(< 34) is about 1.4%)


def test_acceptance_standard_errors_cover_the_true_acceptance_95_percent_of_the_time() -> None:
    """Conditional acceptance per position from 300 speculative steps of known probabilities, 200 seeds: the
    measured a_i +- 1.96 se_i holds the true a_i about 95% of the time at every position that is reached often
    (a binomial proportion's Wald interval; 200 x 4 = 800 intervals, expected 760, sd 6.2)."""
    true_cond = np.array([0.9, 0.8, 0.7, 0.6])
    hits = 0
    rng = np.random.default_rng(7)
    for _ in range(200):
        draws = rng.random((300, 4)) < true_cond
        accepted = np.cumprod(draws, axis=1).sum(axis=1)  # accepted prefix length per step
        c = ClassCounts("x")
        c.add([float((accepted > i).mean()) for i in range(4)], 300, "synthetic")
        probs, ses = c.conditional()
        assert len(probs) == 4
        hits += sum(abs(p - t) <= Z95 * se for p, t, se in zip(probs, true_cond, ses, strict=True))
    assert 735 <= hits <= 785, hits


@pytest.mark.slow
def test_prediction_interval_is_the_fits_95_percent_spread(hidden: Hidden) -> None:
    """The hidden twin with all of its uncertainty removed but a 10% standard deviation on the weights read: the
    baseline's time per token at one stream is T + (w' - w) (one sequence, memory bound: the weights are read
    once per token), so its 95% interval is point x (1 +- 1.96 sd / T) and its width 3.92 sd x point / T; the
    engine's point and the analytic T agree to a few percent, so the width is 3.92 sd within 6% (a 90%
    interval would be 3.29 sd, a 50% one 1.35 sd). Throughput at that level is tokens over time: its interval is
    the reciprocal spread."""
    twin = hidden.twin
    cal = twin.calibration
    w = twin.preset.cost.weights_read_s
    sd = 0.1 * w
    only_weights = cal.model_copy(
        update={
            "cost_covariance": Covariance(names=["weights_read_s"], matrix=[[sd**2]]),
            "acceptance": [c.model_copy(update={"position_se": [0.0] * len(c.position_se)}) for c in cal.acceptance],
            "decay": cal.decay.model_copy(update={"covariance": Covariance()}),
        }
    )
    pred = predict(twin.model_copy(update={"calibration": only_weights}), windows=[CAL_WINDOW], levels=[1],
                   samples=4000, seed=3)  # fmt: skip
    base = next(c for c in pred.cells if c.window is None and c.concurrency == 1)
    tpot = base.tpot_s["mix"]
    assert tpot.ci95 is not None
    lo, hi = tpot.ci95
    assert hi - lo == pytest.approx(2 * Z95 * sd, rel=0.06), (lo, tpot.value, hi, sd)
    assert (lo + hi) / 2 == pytest.approx(tpot.value, rel=0.01)  # symmetric: a normal draw, a linear figure
    thr = base.throughput_tok_s
    assert thr.ci95 is not None
    half = Z95 * sd / tpot.value  # relative half-width of the time per token
    # the engine point stands in for the analytic T in half, hence 2% (the bounds are about -15% and +20% here)
    assert thr.ci95[0] == pytest.approx(thr.value / (1 + half), rel=0.02)
    assert thr.ci95[1] == pytest.approx(thr.value / (1 - half), rel=0.02)
