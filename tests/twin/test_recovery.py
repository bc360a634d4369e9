"""Parameter recovery through real HTTP: a simulator with hidden costs and acceptance, benched at two loads with
one window, is calibrated; the fit finds the hidden values, and the twin's predictions for other windows and
loads match what the hidden simulator then measures."""

from __future__ import annotations

import math

import pytest

from spectrn.sim.model import predictability
from spectrn.twin.compare import compare_runs

from .conftest import HIDDEN_ACCEPTANCE, HIDDEN_COST, HIDDEN_DRAFT, Hidden, bench, sim_pair

pytestmark = pytest.mark.slow

HIDDEN = {
    **HIDDEN_COST,
    "draft_run_s": HIDDEN_DRAFT["run_s"],
    "draft_kv_read_per_token_s": HIDDEN_DRAFT["kv_read_per_token_s"],
}


def test_fitted_costs_are_the_hidden_ones(hidden: Hidden) -> None:
    cal = hidden.twin.calibration
    errors = {k: cal.costs[k].value / v - 1 for k, v in HIDDEN.items()}
    print("cost recovery errors:", {k: f"{e:+.2%}" for k, e in errors.items()})
    for name, err in errors.items():
        assert cal.costs[name].status == "fitted", (name, cal.costs[name])
        assert abs(err) < 0.05, (name, cal.costs[name].value, HIDDEN[name])
    # the speculative steps at 16 streams were compute bound, and the fit saw them as such
    assert cal.regime.compute_bound_steps > 50
    # the preset carries the fitted values where the simulator reads them
    p = hidden.twin.preset
    assert p.cost.weights_read_s == cal.costs["weights_read_s"].value
    assert p.drafts[cal.draft].run_s == cal.costs["draft_run_s"].value
    assert p.profile == "neuron-fork" and cal.semantics == "nxdi" and p.max_num_seqs == 16


def test_fitted_acceptance_is_the_hidden_one(hidden: Hidden) -> None:
    acc = hidden.twin.preset.acceptance
    cal = hidden.twin.calibration
    errors = {k: getattr(acc, k) / v - 1 for k, v in HIDDEN_ACCEPTANCE.items()}
    print("acceptance recovery errors:", {k: f"{e:+.2%}" for k, e in errors.items()})
    assert cal.decay.identified
    for name, err in errors.items():
        assert abs(err) < 0.05, (name, getattr(acc, name), HIDDEN_ACCEPTANCE[name])
    # per class and position: the hidden model's acceptance of that class's prompts
    h = HIDDEN_ACCEPTANCE
    for c in cal.acceptance:
        assert c.predictability is not None
        alpha = h["alpha_open"] + (h["alpha_structured"] - h["alpha_open"]) * c.predictability
        truth = [min(0.98, alpha * math.exp(-((i / h["decay_tau"]) ** h["decay_gamma"]))) for i in range(8)]
        for i, (p, se) in enumerate(zip(c.position_probs, c.position_se, strict=True)):
            # each measured position: within its own sampling error (3 standard errors); within 5% where
            # it was reached often enough to be known that well
            assert abs(p - truth[i]) < 3 * se, (c.name, i, p, truth[i], se)
            if se < 0.01 * truth[i]:
                assert p == pytest.approx(truth[i], rel=0.05), (c.name, i, p, truth[i])
    # prompts the twin did not see follow the fitted predictability rule
    assert acc.class_for("Tell me about your day") is None
    assert predictability("Tell me about your day") < 0.5


def test_predictions_for_other_windows_and_loads_match_the_hidden_simulator(hidden: Hidden) -> None:
    runs = []
    for window in (5, 13):  # inside and far beyond the calibrated window (9): 13 extrapolates the acceptance
        with sim_pair(hidden.preset, window, hidden.root / "logs") as urls:
            runs.append(bench(urls, hidden.root / "runs", f"hidden-k{window}", window=window, levels=[3, 12],
                              requests=32))  # fmt: skip
    points = compare_runs(hidden.twin, runs, samples=100)
    print("prediction errors:")
    for p in points:
        print(
            f"  k{p.window or 0} c{p.concurrency} {p.scope} {p.metric}: measured {p.measured:.5g}, "
            f"predicted {p.predicted.value:.5g} ({p.error:+.2%})"
        )
    assert len(points) == 2 * 2 * 2 * 3  # 2 windows x 2 loads x (baseline, speculative) x (2 classes + throughput)
    worst = max(points, key=lambda p: abs(p.error))
    assert abs(worst.error) < 0.05, worst
    # the compute-bound cell (window 13 at 12 streams) speculation does not pay there, and the twin says so
    spec = {(p.window, p.concurrency, p.scope): p for p in points if p.metric == "tpot_s"}
    base = {(p.concurrency, p.scope): p for p in points if p.metric == "tpot_s" and p.window is None}
    assert spec[(13, 12, "open")].predicted.value > base[(12, "open")].predicted.value
    assert spec[(13, 12, "open")].measured > base[(12, "open")].measured


def test_calibrate_fits_the_step_costs_with_blas_in_one_thread(hidden: Hidden, monkeypatch: pytest.MonkeyPatch) -> None:
    from threadpoolctl import threadpool_info, threadpool_limits

    from spectrn.twin import calibrate as calibrate_module

    def blas_threads() -> list[int]:
        return [int(i["num_threads"]) for i in threadpool_info() if i["user_api"] == "blas"]

    seen: list[list[int]] = []
    real = calibrate_module.fit_costs

    def spy(*args: object, **kwargs: object) -> object:
        seen.append(blas_threads())
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(calibrate_module, "fit_costs", spy)
    with threadpool_limits(limits=2, user_api="blas"):
        twin = calibrate_module.calibrate([hidden.calibration_run])
        after = blas_threads()
    assert seen and seen == [[1] * len(seen[0])] and seen[0]  # numpy's BLAS is there, and ran one thread
    assert after == [2] * len(after)  # and the caller's setting is back afterwards
    assert twin.calibration.costs == hidden.twin.calibration.costs  # the same fit either way
