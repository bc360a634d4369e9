"""The twin's arithmetic pinned by hand (no servers): pooled acceptance counts and their errors, the shrunk table,
the predictability rule's alphas, how steps are cut into segments, and the compared workload's ramps and errors
(``spectrn.twin.acceptance``, ``costs``, ``compare``)."""

from __future__ import annotations

import math
from typing import Any, cast

import pytest

from spectrn.errors import AnalysisError
from spectrn.twin.acceptance import SHRINK_TRIALS, ClassCounts, fallback_alphas, shrunk
from spectrn.twin.compare import Point, default_ramps
from spectrn.twin.costs import SEGMENT_STEPS, StepSet, _arrays, fit_costs
from spectrn.twin.predict import Analytic, Estimate
from spectrn.twin.steps import Step


def two_runs() -> ClassCounts:
    c = ClassCounts("structured")
    c.add([0.8, 0.4], 100, "run1")
    c.add([0.5, 0.25, 0.1], 200, "run2")
    return c


def test_counts_pool_reached_and_accepted_positions_across_runs_of_any_window() -> None:
    c = two_runs()
    # run1: reached 100, 100 x 0.8 = 80; accepted 80, 40. run2: reached 200, 100, 50; accepted 100, 50, 20
    assert c.reached == [300.0, 180.0, 50.0]
    assert c.accepted == [180.0, 90.0, 20.0]
    assert (c.steps, c.sources) == (300, ["run1 (100 steps)", "run2 (200 steps)"])
    c.add([0.9], 0, "empty")  # no steps: nothing to pool
    c.add([], 50, "no positions")
    assert (c.steps, c.reached, c.sources[-1]) == (300, [300.0, 180.0, 50.0], "run2 (200 steps)")


def test_conditional_acceptance_and_its_binomial_error() -> None:
    probs, ses = two_runs().conditional()
    assert probs == pytest.approx([0.6, 0.5, 0.4])  # 180 / 300, 90 / 180, 20 / 50
    # sqrt(a (1 - a) / n): 0.24 / 300, 0.25 / 180, 0.24 / 50
    assert ses == pytest.approx([math.sqrt(0.24 / 300), math.sqrt(0.25 / 180), math.sqrt(0.24 / 50)])
    sure = ClassCounts("all-accepted", reached=[4.0, 0.5], accepted=[4.0, 0.5])
    # a = 1 has no binomial spread: the floor 0.25 / n gives sqrt(0.25 / 4 / 4) = 0.125; a position reached in
    # less than one step is left out
    assert sure.conditional() == ([1.0], [0.125])


def test_the_replayed_table_shrinks_each_position_toward_the_curve_by_twenty_pseudo_steps() -> None:
    assert SHRINK_TRIALS == 20.0
    # curve: min(0.8, 0.9 exp(-i / 2)) = 0.8, 0.9 e^-0.5, 0.9 e^-1
    curve = [0.8, 0.9 * math.exp(-0.5), 0.9 * math.exp(-1.0)]
    want = [(180 + 20 * curve[0]) / 320, (90 + 20 * curve[1]) / 200, (20 + 20 * curve[2]) / 70]
    assert shrunk(two_runs(), alpha=0.9, tau=2.0, gamma=1.0, cap=0.8) == pytest.approx(want)


def test_the_predictability_rule_solves_for_the_open_and_structured_alphas() -> None:
    # open (p = 0): a_open = 0.4; structured (p = 0.9): 0.1 x 0.4 + 0.9 a_s = 0.85, so a_s = 0.81 / 0.9 = 0.9
    got = fallback_alphas({"structured": 0.85, "open": 0.4}, {"structured": 0.9, "open": 0.0}, {})
    assert got == pytest.approx((0.4, 0.9))
    # a_s = (1.0 - 0.25) / 0.5 = 1.5 is clamped to a probability
    assert fallback_alphas({"s": 1.0, "o": 0.5}, {"s": 0.5, "o": 0.0}, {}) == pytest.approx((0.5, 1.0))


def test_the_predictability_rule_weighs_classes_by_their_steps() -> None:
    # a class with almost no steps barely pulls the line through the two heavy ones
    alphas = {"open": 0.4, "structured": 0.9, "rare": 0.1}
    pred = {"open": 0.0, "structured": 1.0, "rare": 0.5}
    got = fallback_alphas(alphas, pred, {"open": 1000, "structured": 1000, "rare": 1e-6})
    assert got == pytest.approx((0.4, 0.9), abs=1e-6)


def test_the_predictability_rule_needs_two_distinct_predictabilities() -> None:
    assert fallback_alphas({"a": 0.5, "b": 0.6}, {"a": 0.5, "b": 0.54}, {}) is None  # 0.04 apart
    assert fallback_alphas({"a": 0.5, "b": 0.6}, {"a": 0.5, "b": 0.56}, {}) is not None  # 0.06 apart
    assert fallback_alphas({"a": 0.5, "b": 0.6}, {"a": 0.0}, {}) is None  # b has no predictability


def step(index: int, decode: int = 2, context: int = 100, prefill: int = 0) -> Step:
    return Step("baseline", "c2", decode, context, 1 if prefill else 0, prefill, 0.05, 0.0, index)


def test_consecutive_steps_form_segments_of_at_most_32() -> None:
    assert SEGMENT_STEPS == 32
    run1 = StepSet("r1", "baseline", 0, 1, [step(i) for i in range(40)] + [step(42), step(43)])
    run2 = StepSet("r2", "speculative", 5, 6, [step(44, decode=3, context=300, prefill=0), step(45, 0, 0, 70)])
    a = _arrays([run1, run2])
    # 0..31 one segment, 32..39 the next, 42..43 (a gap before) a third; a new server starts a fourth
    assert a["seg"].tolist() == [0] * 32 + [1] * 8 + [2, 2] + [3, 3]
    assert a["rows"][-2:] == [("r2", "speculative", "c2", 3, 300, 5, 0), ("r2", "speculative", "c2", 0, 0, 5, 70)]
    assert a["k"].tolist()[-2:] == [5.0, 5.0] and a["t"].tolist()[-2:] == [6.0, 6.0]
    assert a["dec"].tolist()[-2:] == [1.0, 0.0] and a["pre"].tolist()[-2:] == [0.0, 1.0]


def test_too_few_steps_are_refused_naming_the_count() -> None:
    sets = [StepSet("r", "baseline", 0, 1, [step(2 * i) for i in range(19)])]
    with pytest.raises(AnalysisError, match="only 19 usable engine steps in the runs"):
        fit_costs(sets, {})


def test_default_ramps_are_ten_ms_per_stream_capped_at_ten_seconds_in_real_time() -> None:
    # (c - 1) x 10 ms, at most 10 s, divided by the time scale 2
    assert default_ramps([1, 8, 2000], 2.0) == pytest.approx({1: 0.0, 8: 0.035, 2000: 5.0})


def test_a_point_error_is_predicted_over_measured_minus_one() -> None:
    p = Point(run="r", window=7, concurrency=4, scope="all", metric="tpot_s", measured=0.04,
              predicted=Estimate(value=0.05))  # fmt: skip
    assert p.error == pytest.approx(0.25)


class StubModel:
    """A cost model with round numbers: step 10 ms + 1 ms per sequence + 10 us per context token; prefill 20 ms +
    0.1 ms per prompt token; simulated time runs twice as slow as real time (time scale 2)."""

    speculative = True
    time_scale = 2.0

    def step_s(self, batch: int, context: int) -> float:
        return 0.01 + 0.001 * batch + 1e-5 * context

    def prefill_s(self, prompt_tokens: int) -> float:
        return 0.02 + 1e-4 * prompt_tokens


def test_the_analytic_steady_state_by_hand() -> None:
    # class a: acceptance 0.5, 0.5 -> 1 + 0.5 + 0.25 = 1.75 tokens per step; class b: 1.0 -> 2 tokens per step.
    # weights 3 : 1 -> 0.75, 0.25. max_tokens 8: steps per request a 7 / 1.75 = 4, b 7 / 2 = 3.5.
    # time-weighted presence a 3 x (4 + 1) = 15, b 1 x 4.5 = 4.5: context (15 x (100 + 4) + 4.5 x (200 + 4)) / 19.5
    # = 2478 / 19.5 = 127.08 per sequence; mean steps 0.75 x 4 + 0.25 x 3.5 = 3.875; mean prompt 125 tokens.
    a = Analytic(cast(Any, StubModel()), {"a": [0.5, 0.5], "b": [1.0]}, {"a": 3.0, "b": 1.0}, {"a": 100, "b": 200},
                 max_tokens=8)  # fmt: skip
    assert a.weights == {"a": 0.75, "b": 0.25}
    assert a.e == {"a": 1.75, "b": 2.0}
    assert a.ctx == pytest.approx(2478 / 19.5)
    assert a.mean_n == pytest.approx(3.875)
    assert a.prefill == pytest.approx((0.02 + 0.0125) / 2)
    # batch 4: context int(4 x 127.08) = 508; step (0.01 + 0.004 + 0.00508) / 2; each sequence's prefill is
    # spread over its 3.875 steps: + 4 / 3.875 x 0.01625
    per_step = (0.01 + 0.004 + 0.00508) / 2 + 4 / 3.875 * 0.01625
    assert a.per_step(4) == pytest.approx(per_step)
    tpot = a.tpot(4)
    assert tpot == pytest.approx({"a": per_step / 1.75, "b": per_step / 2.0,
                                  "mix": 0.75 * per_step / 1.75 + 0.25 * per_step / 2.0})  # fmt: skip
    assert a.tpot_mix(4) == pytest.approx(tpot["mix"])


def test_the_analytic_baseline_emits_one_token_per_step() -> None:
    model = StubModel()
    model.speculative = False
    a = Analytic(cast(Any, model), {"a": [0.9]}, {"a": 1.0}, {"a": 100}, max_tokens=9)
    assert a.e == {"a": 1.0} and a.mean_n == 8.0  # 9 - 1 = 8 decode steps
