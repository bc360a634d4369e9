"""predict.py on synthetic per-position data and the simulator's ground truth (exactness, not just shape)."""

from __future__ import annotations

import math

import pytest

from spectrn.errors import AnalysisError
from spectrn.sim import load_settings
from spectrn.sweep.predict import (
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
