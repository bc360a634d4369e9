"""Fixtures that tell each sweep rule from its opposite: the tie-break order (window before draft, not the
reverse) and the throughput half of the load-crossover rule (the CI's upper bound, strictly below 1), each
with the speedup half held clearly paying so that only the rule under test decides."""

from __future__ import annotations

import pytest

from spectrn.sweep.recommend import ALL, crossovers, recommend

from .test_sweep_recommend import row


def test_among_ties_the_smaller_window_wins_even_with_a_larger_draft() -> None:
    rows = [
        row("qwen3-1.7b", 5, 2.9, (2.6, 3.2)),
        row("qwen3-0.6b", 10, 3.0, (2.7, 3.3)),  # best, smaller draft, larger window
        row("qwen3-4b", 5, 2.8, (2.6, 3.1)),
        row("qwen3-0.6b", 3, 2.0, (1.9, 2.1)),  # smallest window of all, but no overlap: not a tie
    ]
    rec = recommend(rows, "structured", "c4")
    assert rec.best is not None and (rec.best.draft, rec.best.window) == ("qwen3-0.6b", 10)
    # window first: (1.7b, 5); the opposite order (draft first) would pick the best itself, (0.6b, 10)
    assert rec.chosen is not None and (rec.chosen.draft, rec.chosen.window) == ("qwen3-1.7b", 5)
    # the ties in cost order: window, then draft size
    assert [(r.draft, r.window) for r in rec.ties] == [("qwen3-1.7b", 5), ("qwen3-4b", 5), ("qwen3-0.6b", 10)]


def test_equal_speedups_name_the_cheaper_configuration_best() -> None:
    rows = [row("qwen3-1.7b", 9, 2.5, None), row("qwen3-0.6b", 9, 2.5, None), row("qwen3-4b", 7, 2.5, None)]
    rec = recommend(rows, "structured", "c4")
    assert rec.best is not None and (rec.best.draft, rec.best.window) == ("qwen3-4b", 7)
    rows = [row("qwen3-1.7b", 9, 2.5, None), row("qwen3-0.6b", 9, 2.5, None)]
    rec = recommend(rows, "structured", "c4")
    assert rec.best is not None and rec.best.draft == "qwen3-0.6b"


# speedup CI well above 1 at every level: only throughput can end the gain
PAYING = (1.8, 2.2)


@pytest.mark.parametrize(
    ("thr", "thr_ci", "stops"),
    [
        (0.97, (0.90, 1.04), False),  # point below 1, CI reaches above 1: not significant, still pays
        (0.92, (0.85, 0.99), True),  # CI upper bound below 1: significantly lower throughput
        (0.95, (0.90, 1.00), False),  # upper bound exactly 1: not below it
        (1.05, (0.80, 1.30), False),  # lower bound below 1 does not matter, only the upper one
        (0.99, None, True),  # no CI: the point decides
        (1.00, None, False),
    ],
)
def test_throughput_crossover_uses_the_upper_bound_strictly_below_one(
    thr: float, thr_ci: tuple[float, float] | None, stops: bool
) -> None:
    rows = [
        row("d", 7, 2.0, PAYING, cls=ALL, level="c1", thr=1.5, thr_ci=(1.4, 1.6)),
        row("d", 7, 2.0, PAYING, cls=ALL, level="c8", thr=thr, thr_ci=thr_ci),
    ]
    (c,) = crossovers(rows, ALL)
    assert c["crossover"] == ("c8" if stops else None), c["text"]


def test_a_speedup_interval_touching_one_stops_the_gain_whatever_the_throughput() -> None:
    rows = [
        row("d", 7, 2.0, PAYING, cls=ALL, level="c1", thr=1.5, thr_ci=(1.4, 1.6)),
        row("d", 7, 1.3, (1.0, 1.6), cls=ALL, level="c8", thr=1.5, thr_ci=(1.4, 1.6)),
        row("d", 7, 1.3, (1.01, 1.6), cls=ALL, level="c16", thr=1.5, thr_ci=(1.4, 1.6)),
    ]
    (c,) = crossovers(rows, ALL)
    assert c["crossover"] == "c8"  # lower bound 1.0 (<= 1) at c8; c16's 1.01 alone would still pay
