"""predict.py on synthetic per-position data and the simulator's ground truth (exactness, not just shape)."""

from __future__ import annotations

import math

import pytest

from spectrn.errors import AnalysisError
from spectrn.sim import load_settings
from spectrn.sweep.predict import (
    CostFit,
    StepPoint,
    acceptance_lengths,
    clean_per_position,
    compare_prediction,
    conditional_acceptance,
    fit_costs,
    iid_expected_length,
    mix_prediction,
    predict_tpot,
)


def cumulative(cond: list[float]) -> list[float]:
    """Per-position counter rates P_i = prod_{j<=i} a_j from conditional acceptances a_j."""
    out, run = [], 1.0
    for a in cond:
        run *= a
        out.append(run)
    return out


def test_lengths_match_the_textbook_formula_for_constant_acceptance() -> None:
    a = 0.8
    lengths = acceptance_lengths(cumulative([a] * 15))
    for k in range(16):
        assert lengths[k] == pytest.approx(iid_expected_length(a, k), rel=1e-12)
    assert iid_expected_length(1.0, 7) == 8.0
    assert iid_expected_length(0.0, 7) == 1.0


def test_nxdi_window_k_has_k_minus_1_proposals() -> None:
    """NxDI speculation_length = k proposes k - 1 tokens: L(k) = 1 + P_0 + ... + P_{k-2}, at most k tokens."""
    per_pos = [0.9, 0.8, 0.5]  # measured at window 4 on NxDI: 3 proposals
    lengths = acceptance_lengths(per_pos, semantics="nxdi")
    assert lengths == pytest.approx([1.0, 1.0, 1.9, 2.7, 3.2])  # L(0..4); window 1 proposes nothing
    assert iid_expected_length(1.0, 7, "nxdi") == 7.0  # at most k tokens per step
    assert iid_expected_length(0.5, 3, "nxdi") == pytest.approx(1 + 0.5 + 0.25)
    with pytest.raises(AnalysisError, match="larger than the measured window 4"):
        acceptance_lengths(per_pos, 5, semantics="nxdi")


def test_conditional_acceptance_recovers_the_inputs() -> None:
    cond = [0.9, 0.85, 0.5, 0.25]
    got = conditional_acceptance(cumulative(cond))
    assert got == pytest.approx(cond)
    assert conditional_acceptance([0.5, 0.0, 0.0])[2] is None


def test_counter_noise_is_clipped_and_reported() -> None:
    probs, notes = clean_per_position([0.9, 0.95, 0.4, -0.1])
    assert probs == [0.9, 0.9, 0.4, 0.0]
    assert len(notes) == 1 and "position 1" in notes[0]
    with pytest.raises(AnalysisError, match="per-position acceptance 1"):
        clean_per_position([0.9, float("nan")])


def test_cost_fit_two_points_is_exact_and_three_points_is_least_squares() -> None:
    fit = fit_costs([StepPoint(0, 0.045, 1.0), StepPoint(15, 0.020, 4.5)])
    assert fit.exact and fit.max_rel_residual is None
    assert fit.intercept_s == pytest.approx(0.045)
    assert fit.draft_s == pytest.approx((0.020 * 4.5 - 0.045) / 15)
    assert fit.draft_to_target == pytest.approx(fit.draft_s / 0.045)
    # points on a known line plus symmetric noise: the line comes back
    line = [(0, 0.040), (5, 0.050), (10, 0.060), (15, 0.070)]
    noisy = [StepPoint(k, s + (0.001 if i % 2 else -0.001), 1.0) for i, (k, s) in enumerate(line)]
    fit3 = fit_costs(noisy)
    assert not fit3.exact
    assert fit3.draft_s == pytest.approx(0.002, rel=0.1)
    assert fit3.max_rel_residual is not None and fit3.max_rel_residual < 0.05
    with pytest.raises(AnalysisError, match="two different windows"):
        fit_costs([StepPoint(7, 0.02, 3.0), StepPoint(7, 0.021, 3.0)])


def test_draft_to_target_divides_by_the_measured_baseline_step_not_the_fitted_intercept() -> None:
    """Steps 40, 50 and 54 ms at windows 0, 4 and 8: the least-squares line is 41 ms + 1.75 ms x k (mean window
    4, mean step 48 ms, slope (-4 x -8 + 4 x 6) / 32 ms), but the target's step was measured: 40 ms."""
    fit = fit_costs([StepPoint(0, 0.040, 1.0), StepPoint(4, 0.025, 2.0), StepPoint(8, 0.018, 3.0)])
    assert fit.intercept_s == pytest.approx(0.041) and fit.draft_s == pytest.approx(0.00175)
    assert fit.target_s == pytest.approx(0.040)
    assert fit.draft_to_target == pytest.approx(0.00175 / 0.040)
    assert fit.to_dict()["draft_to_target"] == pytest.approx(0.04375)
    # without a baseline point the intercept stands in for the target's step
    assert fit_costs([StepPoint(4, 0.025, 2.0), StepPoint(8, 0.018, 3.0)]).draft_to_target == pytest.approx(
        0.001 / 0.046
    )


def test_prediction_is_exact_on_the_simulator_cost_and_acceptance_model() -> None:
    """The simulator's step cost is linear in the window, so two speculative points fix it exactly; its
    per-position probabilities give L(k) exactly. Predicted TPOT must then equal its ground truth."""
    prompt = "Count from 1 to 300, separated by commas, and nothing else: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"
    batch, ctx = 4, 4 * (64 + 300)
    truth = {}
    for k in range(1, 16):
        m = load_settings(None, profile="upstream", speculative=True, window=k).resolved()
        truth[k] = (m.step_s(batch, ctx), m.expected_tokens_per_step(prompt))
    big = load_settings(None, profile="upstream", speculative=True, window=15).resolved()
    per_pos = cumulative(big.position_probs(prompt))
    points = [StepPoint(k, truth[k][0] / truth[k][1], truth[k][1]) for k in (3, 15)]
    pred = predict_tpot(per_pos, fit_costs(points))
    for k in range(1, 16):
        assert pred.lengths[k] == pytest.approx(truth[k][1], rel=1e-9)
        assert pred.tpot_s[k] == pytest.approx(truth[k][0] / truth[k][1], rel=1e-9)
    best_truth = min(truth, key=lambda k: truth[k][0] / truth[k][1])
    # upstream window 6 proposes what NxDI window 7 does (the preset's calibrated optimum, spectrn.windows)
    assert pred.best_window == best_truth == 6


def test_prediction_with_baseline_point_stays_close_and_picks_the_same_window() -> None:
    prompt = "Repeat the phrase 'hello world' over and over without stopping: hello world hello world"
    batch, ctx = 4, 4 * 400
    base = load_settings(None, profile="upstream", speculative=False).resolved().step_s(batch, ctx)
    m15 = load_settings(None, profile="upstream", speculative=True, window=15).resolved()
    l15 = m15.expected_tokens_per_step(prompt)
    fit = fit_costs([StepPoint(0, base, 1.0), StepPoint(15, m15.step_s(batch, ctx) / l15, l15)])
    pred = predict_tpot(cumulative(m15.position_probs(prompt)), fit, windows=[5, 7, 10, 15], baseline_tpot_s=base)
    true = {}
    for k in (5, 7, 10):
        mk = load_settings(None, profile="upstream", speculative=True, window=k).resolved()
        true[k] = mk.step_s(batch, ctx) / mk.expected_tokens_per_step(prompt)
        assert pred.tpot_s[k] == pytest.approx(true[k], rel=0.03)  # verify-overhead intercept is folded into the slope
    assert pred.best_window == min(true, key=true.__getitem__)
    assert pred.speedup[7] == pytest.approx(base / pred.tpot_s[7])


def test_prediction_refuses_windows_beyond_the_measured_one() -> None:
    fit = fit_costs([StepPoint(0, 0.04, 1.0), StepPoint(7, 0.015, 4.0)])
    with pytest.raises(AnalysisError, match="measured window is 7"):
        predict_tpot([0.9] * 7, fit, windows=[5, 10])
    with pytest.raises(AnalysisError, match="larger than the measured window"):
        acceptance_lengths([0.9] * 3, max_window=4)


def test_ties_in_prediction_go_to_the_smaller_window_and_negative_slope_is_flagged() -> None:
    fit = fit_costs([StepPoint(0, 0.04, 1.0), StepPoint(4, 0.01, 3.0)])  # slope < 0: noisy measurement
    pred = predict_tpot([1.0, 0.0, 0.0, 0.0], fit)
    assert any("negative" in n for n in pred.notes)
    flat = fit_costs([StepPoint(0, 0.04, 1.0), StepPoint(4, 0.04 / 2, 2.0)])  # no draft cost at all
    pred2 = predict_tpot([1.0, 0.0, 0.0, 0.0], flat)
    assert pred2.tpot_s[2] == pytest.approx(pred2.tpot_s[4])
    assert pred2.best_window == 1  # L(1) = 2 already; equal TPOT for k >= 1: smallest wins


def test_mix_prediction_and_comparison() -> None:
    fit = fit_costs([StepPoint(0, 0.04, 1.0), StepPoint(8, 0.02, 3.2)])
    structured = predict_tpot(cumulative([0.9] * 8), fit, baseline_tpot_s=0.04)
    open_ = predict_tpot(cumulative([0.3] * 8), fit, baseline_tpot_s=0.04)
    mix = mix_prediction(
        {"structured": structured, "open": open_}, {"structured": 3, "open": 1}, {"structured": 0.04, "open": 0.04}
    )
    assert mix["weights"] == {"structured": 0.75, "open": 0.25}
    for k in range(1, 9):
        assert mix["tpot_s"][k] == pytest.approx(0.75 * structured.tpot_s[k] + 0.25 * open_.tpot_s[k])
    assert mix["best_window"] == min(mix["tpot_s"], key=lambda k: mix["tpot_s"][k])
    with pytest.raises(AnalysisError, match="mix"):
        mix_prediction({"open": open_}, {"structured": 1}, {})
    rows = compare_prediction({5: 0.011, 7: 0.010}, {7: 0.0105, 9: 0.02})
    assert len(rows) == 1 and rows[0]["window"] == 7
    assert rows[0]["error"] == pytest.approx((0.010 - 0.0105) / 0.0105)
    assert math.isfinite(rows[0]["error"])


# ---- every field, message and boundary ----------------------------------------------------------------


def test_cleaning_notes_by_hand() -> None:
    assert clean_per_position([1.5, 0.5, 0.5]) == ([1.0, 0.5, 0.5], [])  # clipped to 1, equal neighbours are fine
    probs, notes = clean_per_position([0.9, 0.95])
    assert probs == [0.9, 0.9]
    assert notes == ["position 1: 0.9500 above position 0 (0.9000); clipped (counter noise)"]
    with pytest.raises(AnalysisError) as e:
        clean_per_position([0.9, None])
    assert e.value.message == "per-position acceptance 1 is missing or not a number"
    assert e.value.hint == "re-run the large-window configuration; the server's counters were incomplete"


def test_error_hints() -> None:
    with pytest.raises(AnalysisError) as e:
        acceptance_lengths([0.9] * 3, max_window=4)
    assert e.value.message == "window 4 is larger than the measured window 3"
    assert e.value.hint == "predict only windows up to the one that was measured; run a larger window to go further"
    with pytest.raises(ValueError, match="^window must be >= 0$"):
        iid_expected_length(0.5, -1)
    with pytest.raises(AnalysisError) as e:
        fit_costs([])
    assert e.value.message == "the cost model needs measured steps at two different windows, got none"
    assert e.value.hint == "measure the baseline (window 0) and one speculative window, or two speculative windows"
    fit = fit_costs([StepPoint(0, 0.04, 1.0), StepPoint(4, 0.015, 3.0)])
    with pytest.raises(AnalysisError) as e:
        predict_tpot([], fit)
    assert (e.value.message, e.value.hint) == (
        "no per-position acceptance to predict from", "measure a speculative window first")  # fmt: skip
    with pytest.raises(AnalysisError) as e:
        predict_tpot([0.9] * 4, fit, windows=[0, 5])
    assert e.value.message == "cannot predict window(s) [0, 5]: the measured window is 4"
    assert e.value.hint == "predict windows 1..4, or measure a larger window first"
    with pytest.raises(AnalysisError) as e:
        mix_prediction({}, {"open": 1.0}, {})
    assert e.value.message == "none of the mix's prompt classes has a prediction"
    assert e.value.hint == "use classes among none in --mix"
    pred = predict_tpot([0.9] * 4, fit)
    with pytest.raises(AnalysisError) as e:
        mix_prediction({"b": pred, "a": pred}, {"open": 1.0}, {})
    assert e.value.hint == "use classes among a, b in --mix"


def test_cost_fit_keeps_only_usable_points_and_the_baseline_step() -> None:
    good = [StepPoint(0, 0.040, 1.0, "base"), StepPoint(0, 0.050, 1.0, "base2"), StepPoint(8, 0.02, 3.0, "k8")]
    bad = [StepPoint(4, float("nan"), 2.0), StepPoint(4, -0.01, 2.0), StepPoint(4, 0.0, 2.0), StepPoint(4, 0.01, 0.5)]
    fit = fit_costs(good + bad)
    assert fit == fit_costs(good)
    assert fit.target_s == pytest.approx(0.045)  # the mean of the two baseline steps
    assert not fit.exact and fit.max_rel_residual == pytest.approx(0.005 / 0.040)  # two points at window 0
    assert fit.points == [
        {"window": 0, "step_s": 0.040, "tpot_s": 0.040, "length": 1.0, "label": "base"},
        {"window": 0, "step_s": 0.050, "tpot_s": 0.050, "length": 1.0, "label": "base2"},
        {"window": 8, "step_s": pytest.approx(0.06), "tpot_s": 0.02, "length": 3.0, "label": "k8"},
    ]
    assert fit_costs([StepPoint(3, 0.02, 2.0), StepPoint(8, 0.02, 3.0)]).target_s is None  # no baseline


def test_cost_fit_to_dict() -> None:
    fit = fit_costs([StepPoint(0, 0.04, 1.0), StepPoint(8, 0.02, 3.0, "k8")])
    d = fit.to_dict()
    assert d["intercept_s"] == pytest.approx(0.04) and d["draft_s"] == pytest.approx(0.0025)
    assert d["target_s"] == pytest.approx(0.04) and d["exact"] is True and d["max_rel_residual"] is None
    assert d["draft_to_target"] == pytest.approx(0.0025 / 0.04)
    assert d["points"] == fit.points and d["residuals_s"] == fit.residuals_s


def test_prediction_fields_and_to_dict_on_nxdi() -> None:
    """NxDI: 3 per-position values were measured at window 4; L(k) = 1 + P_0 + ... + P_{k-2}."""
    fit = fit_costs([StepPoint(0, 0.04, 1.0), StepPoint(4, 0.02, 2.5)])  # step 0.04 + 0.0025 k
    pred = predict_tpot([0.8, 0.5, 0.2], fit, semantics="nxdi", baseline_tpot_s=0.05)
    assert pred.measured_window == 4 and pred.per_position == [0.8, 0.5, 0.2] and pred.cost is fit
    assert pred.lengths == pytest.approx({1: 1.0, 2: 1.8, 3: 2.3, 4: 2.5})
    tpot = {k: (0.04 + 0.0025 * k) / pred.lengths[k] for k in range(1, 5)}
    assert pred.tpot_s == pytest.approx(tpot)
    assert pred.speedup == pytest.approx({k: 0.05 / t for k, t in tpot.items()})  # the baseline given, not the fit's
    assert pred.best_window == 4 and pred.notes == []
    d = pred.to_dict()
    assert d == {
        "measured_window": 4,
        "per_position": [0.8, 0.5, 0.2],
        "lengths": {str(k): v for k, v in pred.lengths.items()},
        "tpot_s": {str(k): v for k, v in pred.tpot_s.items()},
        "speedup": {str(k): v for k, v in pred.speedup.items()},
        "best_window": 4,
        "cost": fit.to_dict(),
        "notes": [],
    }
    own = predict_tpot([0.8, 0.5, 0.2], fit, semantics="nxdi")  # no baseline given: the fit's baseline step
    assert own.speedup[4] == pytest.approx(0.04 / tpot[4])


def test_draft_cost_notes_only_when_negative() -> None:
    zero = CostFit(intercept_s=0.04, draft_s=0.0, target_s=0.04, points=[], residuals_s=[], exact=True)
    assert predict_tpot([0.5], zero).notes == []
    neg = CostFit(intercept_s=0.04, draft_s=-0.00125, target_s=0.04, points=[], residuals_s=[], exact=True)
    assert predict_tpot([0.5], neg).notes == [
        "the fitted draft cost per token is negative (-1.25 ms): the measured steps are too noisy to separate draft "
        "from verify cost; treat the prediction with caution"
    ]


def test_a_zero_step_has_no_speedup() -> None:
    free = CostFit(intercept_s=0.0, draft_s=0.0, target_s=0.04, points=[], residuals_s=[], exact=True)
    pred = predict_tpot([0.5, 0.2], free)
    assert pred.tpot_s == {1: 0.0, 2: 0.0} and pred.speedup == {1: None, 2: None}


def test_mix_prediction_by_hand() -> None:
    fit = fit_costs([StepPoint(0, 0.04, 1.0), StepPoint(2, 0.03, 1.5)])  # step 0.04 + 0.0025 k
    a = predict_tpot([0.5, 0.25], fit)  # L = 1.5, 1.75
    b = predict_tpot([1.0, 1.0], fit)  # L = 2, 3
    mix = mix_prediction({"a": a, "b": b, "zero": b}, {"a": 1, "b": 3, "zero": 0}, {"a": 0.04, "b": 0.06})
    t1 = 0.25 * 0.0425 / 1.5 + 0.75 * 0.0425 / 2
    t2 = 0.25 * 0.045 / 1.75 + 0.75 * 0.045 / 3
    assert mix["weights"] == {"a": 0.25, "b": 0.75}  # a zero weight is no part of the mix
    assert mix["tpot_s"] == pytest.approx({1: t1, 2: t2})
    base = 0.25 * 0.04 + 0.75 * 0.06
    assert mix["speedup"] == pytest.approx({1: base / t1, 2: base / t2})
    assert mix["best_window"] == 2 and set(mix) == {"weights", "tpot_s", "speedup", "best_window"}
    no_base = mix_prediction({"a": a, "b": b}, {"a": 1, "b": 3}, {"a": 0.04})
    assert no_base["speedup"] == {1: None, 2: None}  # a class without its baseline: no mix speedup


def test_mix_prediction_with_a_zero_time() -> None:
    free = CostFit(intercept_s=0.0, draft_s=0.0, target_s=0.04, points=[], residuals_s=[], exact=True)
    pred = predict_tpot([0.5], free)
    assert mix_prediction({"a": pred}, {"a": 1}, {"a": 0.04})["speedup"] == {1: None}


def test_compare_prediction_rows() -> None:
    assert compare_prediction({3: 0.012, 5: 0.011}, {3: 0.0, 5: 0.010, 9: 1.0}) == [
        {"window": 3, "predicted_s": 0.012, "measured_s": 0.0, "error": None},
        {"window": 5, "predicted_s": 0.011, "measured_s": 0.010, "error": pytest.approx(0.1)},
    ]


def test_predictions_within_a_picosecond_are_a_tie() -> None:
    """TPOT(2) is 2e-13 s below TPOT(1): no measurement resolves that, so the smaller window wins (rounding at
    1e-12 s), in a single prediction and in a mix."""
    c = 0.04
    fit = CostFit(intercept_s=c, draft_s=c - 1.2e-12, target_s=c, points=[], residuals_s=[], exact=True)
    pred = predict_tpot([1.0, 1.0], fit)  # L(1) = 2, L(2) = 3
    assert pred.tpot_s[1] - pred.tpot_s[2] == pytest.approx(2e-13, rel=1e-3)
    assert pred.best_window == 1
    assert mix_prediction({"a": pred}, {"a": 1.0}, {"a": c})["best_window"] == 1


def test_notes_and_residuals_in_their_units() -> None:
    neg = CostFit(intercept_s=0.04, draft_s=-0.0125, target_s=0.04, points=[], residuals_s=[], exact=True)
    assert "(-12.50 ms)" in predict_tpot([0.5], neg).notes[0]
    fit = fit_costs([StepPoint(0, 0.040, 1.0), StepPoint(0, 0.050, 1.0), StepPoint(8, 0.02, 3.0)])
    assert fit.to_dict()["max_rel_residual"] == pytest.approx(0.125)
