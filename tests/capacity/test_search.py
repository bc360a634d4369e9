"""The bracketing search and the requests-per-probe rule, on probes whose threshold the test knows."""

from __future__ import annotations

import math

import pytest

from spectrn.capacity.search import Bracket, requests_for_percentile, requests_per_probe


def drive(b: Bracket, threshold: float) -> list[float]:
    """Run the search against a load that passes up to ``threshold``; returns the loads probed in order."""
    probed = []
    while (x := b.next_load()) is not None:
        assert x not in probed, f"load {x} probed twice"
        probed.append(x)
        b.record(x, x <= threshold)
    return probed


@pytest.mark.parametrize("threshold", [1, 2, 3, 7, 8, 9, 31, 100, 255])
def test_concurrency_search_finds_the_threshold_exactly(threshold: int) -> None:
    b = Bracket("concurrency", 1, 512, 1)
    probed = drive(b, threshold)
    assert b.capacity == threshold and b.first_fail == threshold + 1
    # doubling: 1, 2, 4, ... up to the first power of two above the threshold; then bisection: about log2 more
    doubling = [2.0**k for k in range(int(math.log2(threshold)) + 2)]
    assert probed[: len(doubling)] == doubling
    assert len(probed) <= len(doubling) + math.ceil(math.log2(max(2, doubling[-1] / 2)))
    assert all(x == int(x) for x in probed)


def test_concurrency_precision_wider_than_one_stops_early() -> None:
    b = Bracket("concurrency", 1, 512, 4)
    drive(b, 37)
    assert b.capacity is not None and b.first_fail is not None
    assert b.capacity <= 37 < b.first_fail and b.first_fail - b.capacity <= 4


@pytest.mark.parametrize("threshold", [0.7, 1.0, 3.3, 12.5, 40.0])
def test_rate_search_is_within_its_relative_precision(threshold: float) -> None:
    b = Bracket("rate", 0.5, 256, 0.10)
    drive(b, threshold)
    assert b.capacity is not None and b.first_fail is not None
    assert b.capacity <= threshold < b.first_fail
    assert (b.first_fail - b.capacity) / b.capacity <= 0.10
    assert threshold - b.capacity <= 0.10 * b.capacity  # the capacity is within 10 % below the truth


def test_start_failing_and_maximum_passing_are_reported() -> None:
    low = Bracket("concurrency", 4, 64, 1)
    assert drive(low, 2) == [4]
    assert low.capacity is None and low.first_fail == 4
    high = Bracket("concurrency", 1, 48, 1)
    assert drive(high, 1000) == [1, 2, 4, 8, 16, 32, 48]
    assert high.capacity == 48 and high.reached_max and high.first_fail is None


def test_a_non_monotone_verdict_keeps_the_consistent_bracket() -> None:
    b = Bracket("concurrency", 1, 64, 1)
    for x, ok in [(1, True), (2, True), (4, False), (3, False), (8, True)]:
        b.record(x, ok)
    assert b.capacity == 2 and b.first_fail == 3 and not b.monotone


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError, match="start"):
        Bracket("concurrency", 8, 4, 1)
    with pytest.raises(ValueError, match="integers"):
        Bracket("concurrency", 1.5, 4, 1)
    with pytest.raises(ValueError, match="precision"):
        Bracket("rate", 1, 4, 0)


@pytest.mark.parametrize(("p", "n"), [(50, 20), (90, 100), (95, 200), (99, 1000), (99.9, 10000), (100, 10000)])
def test_requests_rule_leaves_ten_requests_beyond_the_percentile(p: float, n: int) -> None:
    assert requests_for_percentile(p) == n
    if p < 100:
        assert n * (1 - p / 100) == pytest.approx(10)  # ten requests at or above the percentile


def test_requests_per_probe_takes_the_largest_need() -> None:
    assert requests_per_probe([50, 90]) == 100
    assert requests_per_probe([90], minimum=150) == 150
    assert requests_per_probe([90], minimum=10) == 100
    assert requests_per_probe([90], kind="concurrency", load=64) == 128  # two requests per stream
    assert requests_per_probe([90], kind="rate", load=64) == 100
