"""SLO verdicts at their boundaries: a value equal to the target meets it (the target is an upper bound, '<='),
for percentile and per-request SLOs alike; a verdict with nothing to judge; the canonical spelling at one
second; the week limit. Values are exact binary fractions so that equality is equality."""

from __future__ import annotations

import math

import pytest

from spectrn.analyze.slo import PercentileOutcome as Outcome
from spectrn.analyze.slo import RequestValues, Slo, SloResult, SloSyntaxError, evaluate, parse_slo

TTFT = [0.25, 0.5, 0.75, 1.0, 1.25]
TPOT = [0.03125, 0.0625, 0.125, math.nan, 0.25]
TOKENS = [4.0, 8.0, 16.0, 1.0, 64.0]


def values(ttft: list[float] = TTFT) -> RequestValues:
    return RequestValues(ttft, TPOT, [2 * t for t in ttft], TPOT, TOKENS, prompt_class=None)


def test_a_percentile_equal_to_its_target_meets_it() -> None:
    # the median of five is the third value, 0.75; p100 is the largest, 1.25; p25: rank 0.25 x 4 = 1 -> 0.5
    slos = [Slo("ttft", 50.0, 0.75), Slo("ttft", 100.0, 1.25), Slo("ttft", 25.0, 0.5), Slo("e2e", 50.0, 1.0)]
    res = evaluate(slos, values(), wall_s=8.0)
    assert res.percentiles == (
        Outcome(slo=slos[0], observed_s=0.75, met=True, n=5),
        Outcome(slo=slos[1], observed_s=1.25, met=True, n=5),
        Outcome(slo=slos[2], observed_s=0.5, met=True, n=5),
        Outcome(slo=slos[3], observed_s=1.5, met=False, n=5),  # e2e = 2 x TTFT here: median 1.5 > 1.0
    )
    assert res.met is False


def test_a_request_equal_to_its_target_is_within_it() -> None:
    slo = Slo("ttft", None, 0.75)
    res = evaluate([slo], values(), wall_s=8.0, attempted=10)
    # 0.25, 0.5 and 0.75 (equal) meet it: 3 requests of 4 + 8 + 16 = 28 tokens over 8 s; 3 of 10 attempted
    assert res == SloResult(
        percentiles=(), per_request=(slo,), requests_within=3, share_within=0.3,
        goodput_requests_per_s=3 / 8, goodput_tokens_per_s=28 / 8,
    )  # fmt: skip


def test_a_request_without_a_value_misses_a_per_request_slo_however_loose() -> None:
    res = evaluate([Slo("tpot", None, 1000.0)], values(), wall_s=2.0)
    # request 3 has no TPOT (one token): not shown to meet it, so 4 of 5 with 4 + 8 + 16 + 64 = 92 tokens
    assert (res.requests_within, res.share_within, res.goodput_tokens_per_s) == (4, 0.8, 46.0)


def test_the_verdict_is_unknown_when_a_percentile_cannot_be_judged_and_none_failed() -> None:
    judged = Slo("ttft", 50.0, 1.0)
    unjudged = Slo("ttft", 50.0, 1.0, prompt_class="structured")  # no request has a class here
    assert evaluate([judged], values(), wall_s=1.0).met is True
    assert evaluate([judged, unjudged], values(), wall_s=1.0).met is None
    assert evaluate([Slo("ttft", 50.0, 0.5), unjudged], values(), wall_s=1.0).met is False
    assert evaluate([], values(), wall_s=1.0).met is None


def test_goodput_needs_wall_time_and_attempted_requests() -> None:
    res = evaluate([Slo("ttft", None, 0.75)], values(), wall_s=0.0, attempted=0)
    assert (res.requests_within, res.share_within, res.goodput_requests_per_s, res.goodput_tokens_per_s) == (
        3, None, None, None
    )  # fmt: skip


def test_one_second_is_spelled_in_seconds_and_below_it_in_milliseconds() -> None:
    assert parse_slo("p90:ttft<=1000ms").text == "p90:ttft<=1s"
    assert parse_slo("p90:ttft<=999ms").text == "p90:ttft<=999ms"
    assert parse_slo("p99.9:tpot<=0.5s").text == "p99.9:tpot<=500ms"


def test_a_limit_is_below_a_week() -> None:
    assert parse_slo("e2e<=100000s").threshold_s == 100000.0  # over a day: still a limit
    with pytest.raises(SloSyntaxError, match="below a week"):
        parse_slo("e2e<=604800s")  # 7 x 86400 s: a week exactly is refused
