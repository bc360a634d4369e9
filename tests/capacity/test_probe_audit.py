"""One capacity probe judged from its summary (pass or fail, the reasons a user reads, the figures it carries),
its run spec and its label; and the search's boundaries: precision, doubling, bisection, monotonicity."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from spectrn.capacity.probe import load_label, probe_config, verdict_of
from spectrn.capacity.search import Bracket, precision_text, requests_per_probe
from spectrn.configuration.sources import build_config
from spectrn.run.capacity import Estimate, ProbeVerdict
from spectrn.run.summary import SloCheck


def check(slo: str, observed: float | None, threshold: float, n: int = 100) -> SloCheck:
    met = None if observed is None else observed <= threshold
    return SloCheck(slo=slo, metric="tpot", percentile=90.0, threshold_s=threshold, observed_s=observed, met=met, n=n)


def summary(checks: list[SloCheck] | None, *, completed: int = 100, error_rate: float = 0.0) -> Any:
    goodput = SimpleNamespace(checks=checks, fraction=0.75) if checks is not None else None
    return SimpleNamespace(
        goodput=goodput,
        requests=SimpleNamespace(completed=completed, error_rate=error_rate),
        output_tokens_per_s=SimpleNamespace(aggregate=250.0, aggregate_ci95=(240.0, 260.0)),
        cost=SimpleNamespace(usd_per_million_output_tokens=24.5, usd_per_million_output_tokens_ci95=(23.0, 26.0)),
        tpot_s=SimpleNamespace(p50=0.031),
        ttft_s=SimpleNamespace(p50=0.125),
    )


def test_a_probe_passes_with_every_slo_met_and_the_error_rate_at_the_limit() -> None:
    ok = check("p90:tpot<=45ms", 0.045, 0.045)  # observed equal to the target meets it (<=)
    got = verdict_of(summary([ok], error_rate=0.05), max_error_rate=0.05)  # at the limit, not above it
    assert got == ProbeVerdict(
        passed=True, reasons=[], checks=[ok], completed=100, error_rate=0.05,
        output_tokens_per_s=Estimate(value=250.0, ci95=(240.0, 260.0)),
        usd_per_million_output_tokens=Estimate(value=24.5, ci95=(23.0, 26.0)),
        tpot_p50_s=0.031, ttft_p50_s=0.125, goodput_fraction=0.75,
    )  # fmt: skip


def test_a_failing_probe_says_why_in_milliseconds() -> None:
    checks = [check("p90:tpot<=45ms", 0.0475, 0.045), check("p50:ttft<=2s", 1.5, 2.0),
              check("structured/p99:e2e<=3s", None, 3.0, n=0)]  # fmt: skip
    got = verdict_of(summary(checks, error_rate=0.1), max_error_rate=0.05)
    assert not got.passed
    assert got.reasons == [
        "p90:tpot<=45ms: observed 47.5 ms",
        "structured/p99:e2e<=3s: nothing to judge (no value on 0 requests)",
        "error rate 10.0% above bench.max_error_rate 5.0%",
    ]


def test_a_probe_without_completions_or_slos_fails() -> None:
    got = verdict_of(summary(None, completed=0), max_error_rate=0.05)
    assert (got.passed, got.reasons) == (False, ["no request completed", "no percentile SLO binds these requests"])
    assert got.goodput_fraction is None and got.checks == []


def test_a_probe_without_a_cost_has_none() -> None:
    vs = summary([check("p90:tpot<=45ms", 0.01, 0.045)])
    vs.cost = None
    assert verdict_of(vs, 0.05).usd_per_million_output_tokens == Estimate(value=None, ci95=None)


def test_the_probes_run_spec_holds_one_load_level_and_its_requests() -> None:
    cfg = build_config({}, None, {})
    rate = probe_config(cfg, "rate", 2.5, 40)
    assert (rate.bench.request_rate, rate.bench.requests) == ([2.5], 40)
    closed = probe_config(cfg, "concurrency", 8.0, 120)
    assert (closed.bench.request_rate, closed.bench.concurrency, closed.bench.requests) == (None, [8], 120)
    assert closed.bench.slo == cfg.bench.slo and closed.pricing == cfg.pricing
    # a config that asks for an open loop still probes a closed one when the search is on concurrency
    open_cfg = build_config({}, {"bench.request_rate": [1.0]}, {})
    assert probe_config(open_cfg, "concurrency", 8.0, 120).bench.request_rate is None


def test_load_labels_name_the_kind_and_the_load() -> None:
    assert [load_label("concurrency", 4.0), load_label("rate", 2.5), load_label("rate", 3.0)] == ["c4", "r2.5", "r3"]


# ---- the search's boundaries ----------------------------------------------------------------------------------


def drive(b: Bracket, passes: Any) -> list[float]:
    probed = []
    while (x := b.next_load()) is not None:
        probed.append(x)
        b.record(x, passes(x))
    return probed


def test_bisection_probes_the_floor_of_the_midpoint() -> None:
    b = Bracket("concurrency", 1, 64, 1)
    # threshold 5: 1, 2, 4, 8 (fail); then floor((4 + 8) / 2) = 6 (fail), floor((4 + 6) / 2) = 5 (pass): adjacent
    assert drive(b, lambda x: x <= 5) == [1, 2, 4, 8, 6, 5]
    assert (b.capacity, b.first_fail, b.reached_max, b.monotone) == (5, 6, False, True)
    odd = Bracket("concurrency", 3, 64, 1)
    # threshold 7 from 3: 3, 6, 12 (fail), 9 (fail), floor(7.5) = 7 (pass), 8 (fail)
    assert drive(odd, lambda x: x <= 7) == [3, 6, 12, 9, 7, 8]
    assert (odd.capacity, odd.first_fail) == (7, 8)


def test_a_concurrency_precision_of_four_stops_at_a_width_of_four() -> None:
    b = Bracket("concurrency", 1, 64, 4)
    # threshold 20: 1 .. 16 pass, 32 fails: width 16 > 4; 24 fails (8 > 4); 20 passes: width 4, done
    assert drive(b, lambda x: x <= 20) == [1, 2, 4, 8, 16, 32, 24, 20]
    assert (b.capacity, b.first_fail) == (20, 24)


def test_a_rate_search_stops_once_the_width_is_ten_percent_of_the_pass() -> None:
    b = Bracket("rate", 1, 64, 0.10)
    # threshold 11: 1 .. 8 pass, 16 fails; 12 fails; 10 passes; 11 passes: (12 - 11) / 11 = 9.1 % <= 10 %
    # (relative to the pass: to the fail it would be 8.3 %, and (12 - 10) / 10 = 20 % still bisects)
    assert drive(b, lambda x: x <= 11) == [1, 2, 4, 8, 16, 12, 10, 11]
    assert (b.capacity, b.first_fail) == (11, 12)
    edge = Bracket("rate", 1, 64, 0.10)
    edge.record(10, True)
    edge.record(11, False)  # exactly 10 %: within the precision
    assert edge.next_load() is None and edge.within_precision()
    wide = Bracket("rate", 1, 256, 0.10)
    wide.record(100, True)
    wide.record(111, False)  # 11 / 100 = 11 % of the pass: bisect (over the fail it would be 9.9 %)
    assert not wide.within_precision() and wide.next_load() == 105.5


def test_doubling_stops_at_the_maximum_and_says_it_was_reached() -> None:
    b = Bracket("concurrency", 3, 20, 1)
    assert drive(b, lambda x: True) == [3, 6, 12, 20]
    assert (b.capacity, b.first_fail, b.reached_max) == (20, None, True)
    below = Bracket("concurrency", 3, 20, 1)
    below.record(12, True)
    assert not below.reached_max


def test_a_fail_below_a_pass_is_not_monotone_and_the_bracket_keeps_its_consistent_side() -> None:
    b = Bracket("concurrency", 1, 64, 1)
    for x, ok in [(1, True), (2, False), (4, True)]:
        b.record(x, ok)
    assert (b.capacity, b.first_fail, b.monotone) == (1, 2, False)
    late = Bracket("concurrency", 1, 64, 1)
    for x, ok in [(1, True), (4, True), (8, False), (2, False)]:  # a fail below a pass: kept out of the bracket
        late.record(x, ok)
    assert (late.capacity, late.first_fail, late.monotone) == (4, 8, False)
    twice = Bracket("concurrency", 1, 64, 1)
    for x, ok in [(1, True), (2, False), (4, True), (8, False)]:  # 4 passes above the lowest fail, 2
        twice.record(x, ok)
    assert not twice.monotone
    ordered = Bracket("concurrency", 1, 64, 1)
    for x, ok in [(4, False), (2, True), (3, False), (1, True)]:
        ordered.record(x, ok)
    assert (ordered.capacity, ordered.first_fail, ordered.monotone) == (2, 3, True)


def test_the_precision_rule_in_words() -> None:
    assert precision_text("concurrency", 1) == "adjacent concurrencies"
    assert precision_text("concurrency", 4) == "within 4 concurrent requests"
    assert precision_text("rate", 0.1) == "within 10% of the capacity (relative)"


@pytest.mark.parametrize(("kind", "load", "expected"), [("concurrency", 64, 128), ("concurrency", 50, 100),
                                                        ("concurrency", 51, 102), ("rate", 400.0, 100)])  # fmt: skip
def test_a_closed_loop_probe_runs_two_requests_per_stream(kind: str, load: float, expected: int) -> None:
    # p90 needs 100 requests; 2 x 50 = 100 ties it, 2 x 51 = 102 exceeds it; an open loop has no streams
    assert requests_per_probe([90], kind=kind, load=load) == expected  # type: ignore[arg-type]
    assert requests_per_probe([]) == 10  # no percentile SLO: ten requests
