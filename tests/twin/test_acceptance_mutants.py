"""The acceptance model's fit pinned on counts whose answer is known (no servers): counts drawn exactly from a
decay curve, whose maximum-likelihood fit is that curve, with the covariance from the curve's Fisher information;
the fallback to the prior decay at each edge of the (tau, gamma) grid, with its note and alphas; classes of one
or no measured position; a ridge of equally likely curves above the cap; alphas within a grid step of their
range's ends under the prior decay; a decay nearer a range's end than the grid's second point; the clipped
log-likelihood, the numerical Hessian's inverse and the test of a resolved decay; pooling single steps,
conditional rates, and the predictability rule's defaults
(``spectrn.twin.acceptance``)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from spectrn.twin.acceptance import ClassCounts, _inverse_hessian, _nll, _resolved, fallback_alphas, fit_decay

CAP = 0.98
PRIOR_TAU, PRIOR_GAMMA = 7.0, 4.0
PRIOR_NOTE = (
    "no decay of acceptance with position is resolved in the measured positions: the prior decay "
    "(tau 7, gamma 4) is used beyond them"
)
GRID_STEP = 0.999 / 399  # the alpha grid under the prior decay: 400 points from 0.001 to 1


def exact(name: str, alpha: float, tau: float, gamma: float, positions: int, reached: float = 1e5) -> ClassCounts:
    """Counts whose accepted share at each position is exactly the curve's: the curve maximizes their likelihood."""
    i = np.arange(positions)
    a = np.minimum(CAP, alpha * np.exp(-((i / tau) ** gamma)))
    return ClassCounts(name, reached=[reached] * positions, accepted=[reached * float(v) for v in a])


def log_likelihood(alpha: float, tau: float, gamma: float, reached: list[float], accepted: list[float]) -> float:
    total = 0.0
    for i, (n, k) in enumerate(zip(reached, accepted, strict=True)):
        p = min(CAP, alpha * math.exp(-((i / tau) ** gamma)))
        total += k * math.log(p) + (n - k) * math.log(1 - p)
    return total


def best_alpha_under_prior(c: ClassCounts) -> float:
    """The maximum-likelihood alpha in (0, 1] under the prior decay, by a dense search."""
    alphas = np.linspace(0.001, 1.0, 99_901)
    ll = [log_likelihood(float(a), PRIOR_TAU, PRIOR_GAMMA, c.reached, c.accepted) for a in alphas[::100]]
    i = int(np.argmax(ll)) * 100
    fine = alphas[max(0, i - 100) : i + 101]
    ll = [log_likelihood(float(a), PRIOR_TAU, PRIOR_GAMMA, c.reached, c.accepted) for a in fine]
    return float(fine[int(np.argmax(ll))])


def fisher_covariance(classes: list[tuple[float, int, float]], tau: float, gamma: float) -> np.ndarray:
    """Inverse Fisher information over (alpha per class, log tau, log gamma) for (alpha, positions, reached) each;
    no position at the cap. At counts drawn exactly from the curve it is the inverse Hessian of the likelihood."""
    m = len(classes) + 2
    info = np.zeros((m, m))
    for c, (alpha, positions, n) in enumerate(classes):
        for i in range(positions):
            u = (i / tau) ** gamma
            f = math.exp(-u)
            p = alpha * f
            g = np.zeros(m)
            g[c] = f  # dp / d alpha
            g[-2] = alpha * f * gamma * u  # dp / d log tau
            g[-1] = -alpha * f * u * gamma * math.log(i / tau) if i else 0.0  # dp / d log gamma
            info += n / (p * (1 - p)) * np.outer(g, g)
    return np.linalg.inv(info)


def assert_covariance_close(got: np.ndarray, want: np.ndarray) -> None:
    """Each entry within 5% of sqrt(var_i var_j): the fit sits a grid step off the curve, where the curvature differs
    by that much at most."""
    scale = np.sqrt(np.outer(np.diag(want), np.diag(want)))
    assert np.all(np.abs(got - want) <= 0.05 * scale), (got, want)


# ---- ClassCounts ---------------------------------------------------------------------------------------------


def test_a_single_step_is_pooled_and_a_position_reached_once_is_kept() -> None:
    c = ClassCounts("one")
    c.add([0.5, 0.25], 1, "single")
    assert (c.reached, c.accepted, c.steps, c.sources) == ([1.0, 0.5], [0.5, 0.25], 1, ["single (1 steps)"])
    # position 0 reached in exactly one step: a = 0.5, error sqrt(max(0.25, 0.25 / 1) / 1) = 0.5; position 1 was
    # reached in half a step and is left out
    assert c.conditional() == ([0.5], [0.5])


def test_more_accepted_than_reached_is_read_as_always_accepted() -> None:
    # a = min(1, 3 / 2) = 1, whose error is the floor sqrt(0.25 / 2 / 2) = 0.25
    assert ClassCounts("over", reached=[2.0], accepted=[3.0]).conditional() == ([1.0], [0.25])


# ---- the likelihood and its curvature ------------------------------------------------------------------------


def test_the_log_likelihood_clips_certain_outcomes_short_of_infinity() -> None:
    # p = 1 with one rejection and p = 0 with one acceptance: each is clipped 1e-9 from the bound
    got = float(_nll(np.array([1.0, 0.0]), np.array([4.0, 2.0]), np.array([3.0, 1.0])))
    want = -(3 * math.log1p(-1e-9) + math.log(1e-9) + math.log(1e-9) + math.log1p(-1e-9))
    assert got == pytest.approx(want, rel=1e-6)


def test_the_inverse_hessian_of_a_cubic_is_the_inverse_of_its_exact_hessian() -> None:
    def f(x: np.ndarray) -> float:
        return float(x[0] ** 2 + x[0] * x[1] + 2 * x[1] ** 2 + x[1] * x[2] + 3 * x[2] ** 2 + 0.1 * x[0] ** 3)

    # at (0.5, -2, 3), away from the minimum: d2f/dx0^2 = 2 + 0.6 x0 = 2.3; central differences are exact on cubics
    hess = np.array([[2.3, 1.0, 0.0], [1.0, 4.0, 1.0], [0.0, 1.0, 6.0]])
    got = _inverse_hessian(f, np.array([0.5, -2.0, 3.0]))
    assert got == pytest.approx(np.linalg.inv(hess), rel=1e-6, abs=1e-9)


def test_the_inverse_hessian_at_zero_steps_by_the_floor_and_keeps_a_weak_but_resolved_direction() -> None:
    # curvatures 1e-3 and 1e-11: the smaller is 1e-8 of the larger, above the 1e-9 flatness threshold
    got = _inverse_hessian(lambda x: 0.5 * (1e-3 * x[0] ** 2 + 1e-11 * x[1] ** 2), np.zeros(2))
    assert got == pytest.approx(np.diag([1e3, 1e11]), rel=1e-6)


def test_a_direction_flat_relative_to_the_steepest_has_no_inverse() -> None:
    flat = np.full((2, 2), np.nan)
    # curvatures 1e6 and 1e-4: a ratio of 1e-10
    got = _inverse_hessian(lambda x: 0.5 * (1e6 * x[0] ** 2 + 1e-4 * x[1] ** 2), np.zeros(2))
    np.testing.assert_array_equal(got, flat)
    # a ratio of exactly 1e-9 is flat too
    np.testing.assert_array_equal(_inverse_hessian(lambda x: 0.5 * (x[0] ** 2 + 1e-9 * x[1] ** 2), np.zeros(2)), flat)
    np.testing.assert_array_equal(_inverse_hessian(lambda x: x[0] ** 2, np.zeros(2)), flat)  # x1 not in f


def test_a_decay_is_resolved_by_the_standard_errors_of_log_tau_and_log_gamma_alone() -> None:
    # standard errors 0.2 and 0.3 on the diagonal; large covariances elsewhere do not matter
    assert _resolved(np.array([[1.0, 0.2, 0.2], [0.2, 0.04, 0.2], [0.2, 0.2, 0.09]]))
    assert not _resolved(np.diag([1.0, 0.3**2, 0.01]))  # log tau's error at its bound 0.3
    assert not _resolved(np.diag([1.0, 0.01, 0.5**2]))  # log gamma's error at its bound 0.5
    assert not _resolved(np.diag([1.0, 1.0, 0.01]))  # tau unknown, gamma known
    assert not _resolved(np.diag([1.0, 0.01, 1.0]))  # tau known, gamma unknown


# ---- the predictability rule ---------------------------------------------------------------------------------


def test_predictabilities_exactly_five_hundredths_apart_are_distinct_enough() -> None:
    # open (p = 0): 0.5; p = 0.05: 0.95 x 0.5 + 0.05 a_s = 0.52, so a_s = 0.045 / 0.05 = 0.9
    got = fallback_alphas({"a": 0.5, "b": 0.52}, {"a": 0.0, "b": 0.05}, {})
    assert got == pytest.approx((0.5, 0.9), abs=1e-9)


def test_a_class_without_a_weight_counts_as_much_as_a_weight_of_one() -> None:
    # equal weights: the least-squares line through (0, 0.4), (0.5, 0.8), (1, 0.9) has slope
    # (0.5 x 0.3 + 0.5 x 0.2) / 0.5 = 0.5 and passes through (0.5, 0.7): 0.45 at p = 0, 0.95 at p = 1
    got = fallback_alphas({"o": 0.4, "m": 0.8, "s": 0.9}, {"o": 0.0, "m": 0.5, "s": 1.0}, {"o": 1.0, "s": 1.0})
    assert got == pytest.approx((0.45, 0.95), abs=1e-9)


# ---- the decay fit -------------------------------------------------------------------------------------------


def test_counts_exactly_on_a_curve_fit_that_curve_with_its_fisher_covariance() -> None:
    # two classes on tau 6, gamma 3 and one class measured at position 0 only, with an acceptance of 0.0012
    classes = [
        exact("a", 0.85, 6.0, 3.0, 8),
        exact("b", 0.4, 6.0, 3.0, 8),
        ClassCounts("c", reached=[1e5], accepted=[120.0]),
    ]
    fit = fit_decay(classes, cap=CAP, prior_tau=PRIOR_TAU, prior_gamma=PRIOR_GAMMA)
    assert (fit.identified, fit.note) == (True, None)
    assert fit.names == ["alpha_a", "alpha_b", "alpha_c", "log_tau", "log_gamma"]
    assert list(fit.alphas) == ["a", "b", "c"]
    assert fit.alphas["a"] == pytest.approx(0.85, abs=3e-4)
    assert fit.alphas["b"] == pytest.approx(0.4, abs=3e-4)
    assert fit.alphas["c"] == pytest.approx(0.0012, abs=3e-5)  # 120 / 1e5: position 0 does not decay
    assert fit.tau == pytest.approx(6.0, rel=1e-3) and fit.gamma == pytest.approx(3.0, rel=1e-3)
    want = fisher_covariance([(0.85, 8, 1e5), (0.4, 8, 1e5), (0.0012, 1, 1e5)], 6.0, 3.0)
    assert_covariance_close(np.asarray(fit.covariance), want)


@pytest.mark.parametrize(
    ("tau", "gamma"),
    [(0.49, 1.0), (100.0, 1.0), (3.0, 0.5), (4.0, 10.0)],
    ids=["small-tau", "large-tau", "small-gamma", "large-gamma"],
)
def test_a_decay_near_but_inside_the_grid_is_identified(tau: float, gamma: float) -> None:
    fit = fit_decay(
        [exact("a", 0.9, tau, gamma, 8, reached=1e6)], cap=CAP, prior_tau=PRIOR_TAU, prior_gamma=PRIOR_GAMMA
    )
    assert (fit.identified, fit.note) == (True, None)
    assert fit.alphas["a"] == pytest.approx(0.9, abs=3e-4)
    assert fit.tau == pytest.approx(tau, rel=2e-3) and fit.gamma == pytest.approx(gamma, rel=2e-3)


@pytest.mark.parametrize(
    ("tau", "gamma"),
    [
        (0.3 * math.exp(0.02), 1.0),
        (200.0 * math.exp(-0.02), 1.0),
        (3.0, 0.3 * math.exp(0.02)),
        (4.5, 20 * math.exp(-0.02)),
    ],
    ids=["tau-at-0.3", "tau-at-200", "gamma-at-0.3", "gamma-at-20"],
)
def test_a_decay_at_the_edge_of_the_grid_falls_back_to_the_prior(tau: float, gamma: float) -> None:
    c = exact("a", 0.9, tau, gamma, 8, reached=1e6)
    fit = fit_decay([c], cap=CAP, prior_tau=PRIOR_TAU, prior_gamma=PRIOR_GAMMA)
    assert (fit.identified, fit.note, fit.tau, fit.gamma) == (False, PRIOR_NOTE, PRIOR_TAU, PRIOR_GAMMA)
    assert fit.names == ["alpha_a", "log_tau", "log_gamma"]
    assert list(fit.alphas) == ["a"]
    assert fit.alphas["a"] == pytest.approx(best_alpha_under_prior(c), abs=GRID_STEP)


def test_classes_of_one_or_a_once_reached_position_under_the_prior_decay() -> None:
    classes = [
        ClassCounts("first", reached=[1000.0], accepted=[620.0]),
        ClassCounts("once", reached=[1.0], accepted=[0.5]),
        # 98%, 90%, 80% at positions 0..2: two decaying positions do not resolve tau and gamma with a cap
        ClassCounts("steep", reached=[1000.0] * 3, accepted=[980.0, 900.0, 800.0]),
    ]
    fit = fit_decay(classes, cap=CAP, prior_tau=2.0, prior_gamma=1.0)
    note = PRIOR_NOTE.replace("tau 7, gamma 4", "tau 2, gamma 1")
    assert (fit.identified, fit.note, fit.tau, fit.gamma) == (False, note, 2.0, 1.0)
    assert fit.names == ["alpha_first", "alpha_once", "alpha_steep", "log_tau", "log_gamma"]
    assert list(fit.alphas) == ["first", "once", "steep"]
    assert fit.alphas["first"] == pytest.approx(0.62, abs=GRID_STEP)  # position 0 does not decay: 620 / 1000
    assert fit.alphas["once"] == pytest.approx(0.5, abs=GRID_STEP)  # reached in exactly one step, half accepted
    # under tau 2, gamma 1 the curve is min(0.98, alpha), alpha e^-0.5, alpha e^-1: positions 1 and 2 ask for
    # alpha 0.9 e^0.5 = 1.48 and 0.8 e = 2.17, position 0 is at the cap for any alpha above 0.98: the likelihood
    # still rises at 1, the top of alpha's range
    assert fit.alphas["steep"] == 1.0


def test_counts_above_the_cap_at_two_positions_leave_a_ridge_of_curves_unidentified() -> None:
    # positions 0 and 1 accept 99.8% and 99.2%, above the cap (0.98) for every curve that reaches it there: only
    # positions 2 (4700 / 4950) and 3 (3600 / 4700) constrain alpha, tau and gamma, two shares for three parameters,
    # so equally likely curves lie along a ridge and the decay is not resolved
    c = ClassCounts("cap", reached=[5000.0, 4990.0, 4950.0, 4700.0], accepted=[4990.0, 4950.0, 4700.0, 3600.0])
    fit = fit_decay([c], cap=CAP, prior_tau=PRIOR_TAU, prior_gamma=PRIOR_GAMMA)
    assert (fit.identified, fit.note, fit.tau, fit.gamma) == (False, PRIOR_NOTE, PRIOR_TAU, PRIOR_GAMMA)
    assert fit.alphas["cap"] == pytest.approx(best_alpha_under_prior(c), abs=2e-5)


def test_a_class_without_a_measured_position_has_alpha_zero() -> None:
    # listed first, before a class whose counts do not resolve the decay either
    classes = [ClassCounts("empty"), ClassCounts("steep", reached=[1000.0] * 2, accepted=[980.0, 900.0])]
    fit = fit_decay(classes, cap=CAP, prior_tau=2.0, prior_gamma=1.0)
    note = PRIOR_NOTE.replace("tau 7, gamma 4", "tau 2, gamma 1")
    assert (fit.identified, fit.note, fit.tau, fit.gamma) == (False, note, 2.0, 1.0)
    assert fit.names == ["alpha_empty", "alpha_steep", "log_tau", "log_gamma"]
    assert fit.alphas == {"empty": 0.0, "steep": 1.0}


def test_a_class_without_a_measured_position_leaves_the_decay_of_the_others_identified() -> None:
    # the empty class's alpha is fixed at 0, not estimated: it neither flattens the likelihood nor has an error
    fit = fit_decay(
        [ClassCounts("empty"), exact("a", 0.85, 6.0, 3.0, 8)], cap=CAP, prior_tau=PRIOR_TAU, prior_gamma=PRIOR_GAMMA
    )
    assert (fit.identified, fit.note) == (True, None)
    assert fit.names == ["alpha_empty", "alpha_a", "log_tau", "log_gamma"]
    assert list(fit.alphas) == ["empty", "a"]
    assert fit.alphas["empty"] == 0.0 and fit.alphas["a"] == pytest.approx(0.85, abs=3e-4)
    assert fit.tau == pytest.approx(6.0, rel=1e-3) and fit.gamma == pytest.approx(3.0, rel=1e-3)
    cov = np.asarray(fit.covariance)
    assert cov[0].tolist() == [0.0] * 4 and cov[:, 0].tolist() == [0.0] * 4
    assert_covariance_close(cov[1:, 1:], fisher_covariance([(0.85, 8, 1e5)], 6.0, 3.0))


def test_an_alpha_between_the_last_two_grid_points_is_found() -> None:
    # alpha 0.999 lies between the coarse grid's last two points (0.9975 and 1): the finer search reaches up to 1
    fit = fit_decay([exact("top", 0.999, 6.0, 3.0, 8)], cap=CAP, prior_tau=PRIOR_TAU, prior_gamma=PRIOR_GAMMA)
    assert (fit.identified, fit.note) == (True, None)
    assert fit.alphas["top"] == pytest.approx(0.999, abs=3e-4)
    assert fit.tau == pytest.approx(6.0, rel=1e-3) and fit.gamma == pytest.approx(3.0, rel=1e-3)


@pytest.mark.parametrize(
    ("alpha", "tau", "gamma"),
    [(0.8, 4.5, 12.0), (0.85, 5.0, 8.0), (0.9, 5.2, 16.0), (0.7, 9.5, 1.4), (0.75, 2.3, 5.5)],
)
def test_a_sharp_cutoff_between_coarse_grid_points_is_found(alpha: float, tau: float, gamma: float) -> None:
    # a large gamma makes a narrow valley in (log tau, log gamma) that the coarse grid misses by more than one of its
    # steps: at tau 4.5, gamma 12 the search once settled at tau 4.60, gamma 17.1, 1007 nats short of the curve
    c = exact("a", alpha, tau, gamma, 7)
    fit = fit_decay([c], cap=CAP, prior_tau=PRIOR_TAU, prior_gamma=PRIOR_GAMMA)
    assert fit.identified
    assert fit.tau == pytest.approx(tau, rel=2e-3)
    assert fit.gamma == pytest.approx(gamma, rel=5e-3)
    assert fit.alphas["a"] == pytest.approx(alpha, rel=1e-3)
    truth = log_likelihood(alpha, tau, gamma, c.reached, c.accepted)
    assert log_likelihood(fit.alphas["a"], fit.tau, fit.gamma, c.reached, c.accepted) == pytest.approx(truth, abs=1.0)


def exact_log_likelihood(alpha: float, tau: float, gamma: float, reached: list[float], accepted: list[float]) -> float:
    """``log_likelihood`` where a curve has decayed to exactly 0 (p = 0 with nothing accepted adds 0)."""
    total = 0.0
    for i, (n, k) in enumerate(zip(reached, accepted, strict=True)):
        p = min(CAP, alpha * math.exp(-((i / tau) ** gamma)))
        total += (k * math.log(p) if k else 0.0) + (n - k) * math.log1p(-p)
    return total


@pytest.mark.parametrize(
    ("tau", "gamma", "positions"),
    [(0.3 * math.exp(0.09), 1.0, 8), (200.0 * math.exp(-0.09), 1.0, 30), (3.0, 0.3 * math.exp(0.09), 8)],
    ids=["small-tau", "large-tau", "small-gamma"],
)
def test_a_decay_between_the_grid_s_first_two_points_is_found(tau: float, gamma: float, positions: int) -> None:
    # 0.09 inside the range's end: past the edge test's 0.05, short of the coarse grid's first step (0.138 in log
    # tau, 0.120 in log gamma), so the refining windows must reach down to the range's end itself
    c = exact("a", 0.9, tau, gamma, positions)
    fit = fit_decay([c], cap=CAP, prior_tau=PRIOR_TAU, prior_gamma=PRIOR_GAMMA)
    assert (fit.identified, fit.note) == (True, None)
    assert fit.tau == pytest.approx(tau, rel=3e-3) and fit.gamma == pytest.approx(gamma, rel=3e-3)
    truth = exact_log_likelihood(0.9, tau, gamma, c.reached, c.accepted)  # counts on the curve: the maximum
    got = exact_log_likelihood(fit.alphas["a"], fit.tau, fit.gamma, c.reached, c.accepted)
    assert got == pytest.approx(truth, abs=0.5)


def test_a_decay_nearer_the_range_s_end_than_the_grid_s_second_point_is_found() -> None:
    # tau 0.06 (in log) above 0.3: past the edge test's 0.05, nearer the range's end than half the coarse grid's step
    # (0.069), so the polish starts on the end itself, with a simplex that must step into the range
    tau = 0.3 * math.exp(0.06)
    c = exact("a", 0.9, tau, 1.0, 8)
    fit = fit_decay([c], cap=CAP, prior_tau=PRIOR_TAU, prior_gamma=PRIOR_GAMMA)
    assert (fit.identified, fit.note) == (True, None)
    assert fit.tau == pytest.approx(tau, rel=1e-6) and fit.gamma == pytest.approx(1.0, rel=1e-6)
    assert fit.alphas["a"] == pytest.approx(0.9, abs=1e-6)


def test_a_cutoff_near_the_top_of_gamma_s_range_reaches_the_likelihood_s_maximum() -> None:
    # tau 3, gamma 18.6 (0.07 below log 20, inside the edge test's 0.05): positions 0-2 near alpha, 3 at alpha / e,
    # 4 on at 0. The likelihood is nearly flat along a narrow valley toward smaller gamma (gamma is known to about
    # 25% here): a search that settles in it early (at gamma 14.3, say) is two nats short of the curve
    c = exact("a", 0.9, 3.0, 18.6, 8)
    fit = fit_decay([c], cap=CAP, prior_tau=PRIOR_TAU, prior_gamma=PRIOR_GAMMA)
    assert (fit.identified, fit.note) == (True, None)
    truth = exact_log_likelihood(0.9, 3.0, 18.6, c.reached, c.accepted)
    got = exact_log_likelihood(fit.alphas["a"], fit.tau, fit.gamma, c.reached, c.accepted)
    assert got == pytest.approx(truth, abs=1e-6)
    assert fit.gamma == pytest.approx(18.6, rel=1e-4) and fit.tau == pytest.approx(3.0, rel=1e-6)


def test_a_cutoff_at_the_top_of_gamma_s_range_is_not_identified() -> None:
    # gamma 19.6 is 0.02 below log 20: the polished fit reaches it, inside the edge test's 0.05, so the prior is kept
    fit = fit_decay([exact("a", 0.9, 3.0, 19.6, 8)], cap=CAP, prior_tau=PRIOR_TAU, prior_gamma=PRIOR_GAMMA)
    assert (fit.identified, fit.note, fit.tau, fit.gamma) == (False, PRIOR_NOTE, PRIOR_TAU, PRIOR_GAMMA)


def drawn(name: str, alpha: float, tau: float, gamma: float, positions: int, steps: int, seed: int) -> ClassCounts:
    """Counts drawn binomially from a curve, position after position: the curve is not their maximum."""
    rng = np.random.default_rng(seed)
    reached: list[float] = []
    accepted: list[float] = []
    n = steps
    for i in range(positions):
        k = int(rng.binomial(n, min(CAP, alpha * math.exp(-((i / tau) ** gamma)))))
        reached.append(float(n))
        accepted.append(float(k))
        n = k
    return ClassCounts(name, reached=reached, accepted=accepted)


def joint_log_likelihood(classes: list[ClassCounts], alphas: list[float], tau: float, gamma: float) -> float:
    """Every class's ``exact_log_likelihood`` under its alpha and the shared decay; p kept off 0 and 1 by 1e-9."""
    total = 0.0
    for c, alpha in zip(classes, alphas, strict=True):
        for i, (n, k) in enumerate(zip(c.reached, c.accepted, strict=True)):
            p = min(1 - 1e-9, max(1e-9, min(CAP, alpha * math.exp(-((i / tau) ** gamma)))))
            total += k * math.log(p) + (n - k) * math.log1p(-p)
    return total


def independent_maximum(classes: list[ClassCounts], starts: list[list[float]]) -> float:
    """The largest log-likelihood Powell's method (no derivative: the cap's kink) reaches from each start over
    (alpha per class, log tau, log gamma), each run restarted from its end until it stops improving."""
    from scipy.optimize import minimize

    def neg(x: np.ndarray) -> float:
        return -joint_log_likelihood(classes, [float(a) for a in x[:-2]], math.exp(x[-2]), math.exp(x[-1]))

    best = -math.inf
    for start in starts:
        x, value = np.asarray(start, dtype=float), neg(np.asarray(start, dtype=float))
        for _ in range(20):
            res = minimize(neg, x, method="Powell", options={"xtol": 1e-12, "ftol": 1e-15, "maxfev": 200_000})
            if not res.fun < value - 1e-12:
                break
            x, value = res.x, float(res.fun)
        best = max(best, -value)
    return best


@pytest.mark.parametrize(
    ("classes", "truth"),
    [
        ([exact("a", 0.8, 4.5, 12.0, 7)], [0.8, 4.5, 12.0]),  # a sharp cutoff between coarse grid points
        ([exact("a", 0.865, 9.97, 15.7, 10)], [0.865, 9.97, 15.7]),  # a narrow valley along a sharp cutoff
        ([drawn("a", 0.8, 4.5, 12.0, 8, 3000, 1)], [0.8, 4.5, 12.0]),  # the same cutoff, drawn
        ([drawn("a", 0.85, 0.36, 1.0, 6, 20000, 2)], [0.85, 0.36, 1.0]),  # tau 0.18 above the range's start
        ([drawn("a", 0.9, 3.0, 0.36, 12, 20000, 3)], [0.9, 3.0, 0.36]),  # gamma 0.18 above the range's start
        ([drawn("a", 0.9, 6.0, 18.0, 9, 5000, 4)], [0.9, 6.0, 18.0]),  # gamma 0.1 below the range's end
        (  # two classes, one of them accepted above the cap at its first positions (the curve's kink)
            [drawn("a", 0.999, 6.0, 3.0, 9, 8000, 5), drawn("b", 0.6, 6.0, 3.0, 7, 4000, 6)],
            [0.999, 0.6, 6.0, 3.0],
        ),
    ],
    ids=["cutoff-exact", "valley-exact", "cutoff-drawn", "small-tau", "small-gamma", "large-gamma", "cap-two"],
)
def test_the_fit_reaches_the_likelihood_s_maximum(classes: list[ClassCounts], truth: list[float]) -> None:
    # the grids' best point is polished to the maximum: no finer grid would find a more likely curve
    fit = fit_decay(classes, cap=CAP, prior_tau=PRIOR_TAU, prior_gamma=PRIOR_GAMMA)
    assert (fit.identified, fit.note) == (True, None)
    got = [fit.alphas[c.name] for c in classes] + [math.log(fit.tau), math.log(fit.gamma)]
    start = [*truth[:-2], math.log(truth[-2]), math.log(truth[-1])]
    best = independent_maximum(classes, [start, got])
    assert joint_log_likelihood(classes, got[:-2], fit.tau, fit.gamma) == pytest.approx(best, abs=1e-6)


@pytest.mark.parametrize(
    ("reached", "accepted", "alpha"),
    [
        # position 0 alone does not decay: alpha is its share, 150 / 1e5, between the coarse alpha grid's first two
        # points (0.001 and 0.0035)
        ([1e5], [150.0], 0.0015),
        # under tau 2, gamma 1 the curve is min(0.98, alpha), alpha e^-0.5: position 0 at the cap for any alpha above
        # 0.98, position 1 accepted at 0.9992 e^-0.5, between the coarse grid's last two points (0.9975 and 1)
        ([1000.0, 1000.0], [980.0, 1000 * 0.9992 * math.exp(-0.5)], 0.9992),
    ],
    ids=["near-the-bottom", "near-the-top"],
)
def test_an_alpha_within_a_grid_step_of_its_range_s_end_is_refit_under_the_prior_decay(
    reached: list[float], accepted: list[float], alpha: float
) -> None:
    # the refit under the prior decay once started on the range's end (0.001 or 1), where the bounded simplex's
    # reflections, clipped onto that end, collapsed it there: alpha came out 0.001 and 1.0
    fit = fit_decay([ClassCounts("a", reached=reached, accepted=accepted)], cap=CAP, prior_tau=2.0, prior_gamma=1.0)
    note = PRIOR_NOTE.replace("tau 7, gamma 4", "tau 2, gamma 1")
    assert (fit.identified, fit.note, fit.tau, fit.gamma) == (False, note, 2.0, 1.0)
    assert fit.alphas["a"] == pytest.approx(alpha, abs=1e-6)


def test_a_curve_decayed_to_the_likelihood_floor_is_found_from_another_grid_minimum() -> None:
    # A sharp cutoff (tau 1.31, gamma 5.93) whose third position accepts 0.18 of 1e5 steps: the grid's best point
    # lies on a plateau where the curve is below the likelihood's floor, and a polish from there alone stopped at
    # tau 1.20, gamma 8.8, 1.2 nats short ("not identified"). From the grid's other local minima the polish reaches
    # the curve itself.
    alpha, tau, gamma = 0.5017550937644757, 1.306374644851319, 5.9340816050318566
    c = exact("a", alpha, tau, gamma, 8)
    assert 0.1 < c.accepted[2] < 0.2
    fit = fit_decay([c], cap=CAP, prior_tau=PRIOR_TAU, prior_gamma=PRIOR_GAMMA)
    assert fit.identified and fit.note is None
    assert (fit.tau, fit.gamma, fit.alphas["a"]) == pytest.approx((tau, gamma, alpha), rel=1e-4)
