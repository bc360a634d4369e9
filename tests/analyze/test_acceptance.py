"""Stream acceptance: decode-event sizes -> per-position acceptance, with each server's window semantics."""

from __future__ import annotations

import random

import pytest

from spectrn.analyze.acceptance import StreamCounter, combine, counters_from_json, window_contradiction
from spectrn.run.summary import CounterAcceptance, StreamAcceptance
from spectrn.windows import max_tokens_per_step, proposals


def test_window_semantics() -> None:
    assert (proposals("nxdi", 7), max_tokens_per_step("nxdi", 7)) == (6, 7)
    assert (proposals("upstream", 7), max_tokens_per_step("upstream", 7)) == (7, 8)
    with pytest.raises(ValueError, match="window 0 must be at least 1"):
        proposals("nxdi", 0)
    with pytest.raises(ValueError, match="window semantics 'eagle' is not one of"):
        proposals("eagle", 3)  # type: ignore[arg-type]


def test_stream_counts_steps_exactly_and_excludes_coalesced_events() -> None:
    # per request: the first event (prefill) is skipped, and the last one when the request stopped at max_tokens
    chunks = [[1, 3, 1, 4, 2], [1, 8, 9, 1], [1, 2]]
    c = StreamCounter(window=4, semantics="upstream")  # 4 proposals, at most 5 tokens per step
    for toks in chunks:
        c.add(toks, cut_at_max_tokens=True)
    r = c.result()
    # counted: 3, 1, 4 (accepted 2, 0, 3); 8 and 9 carry more than 5 tokens: coalesced, excluded
    assert r.steps == 3 and r.coalesced_events == 2
    assert r.per_position == pytest.approx([2 / 3, 2 / 3, 1 / 3, 0.0])
    assert r.mean_accepted_length == pytest.approx((3 + 1 + 4) / 3)
    assert r.rate == pytest.approx(5 / (3 * 4))

    n = StreamCounter(window=4, semantics="nxdi")  # 3 proposals, at most 4 tokens per step
    for toks in chunks:
        n.add(toks, cut_at_max_tokens=True)
    rn = n.result()
    assert rn.steps == 3 and rn.coalesced_events == 2
    assert rn.per_position == pytest.approx([2 / 3, 2 / 3, 1 / 3])
    assert rn.rate == pytest.approx(5 / (3 * 3))


def test_last_event_counts_when_the_request_ended_on_its_own() -> None:
    c = StreamCounter(window=3, semantics="upstream")
    c.add([1, 2, 4], cut_at_max_tokens=False)
    assert c.result().steps == 2


def test_stream_acceptance_converges_to_the_simulated_truth() -> None:
    cond = [0.95, 0.9, 0.9, 0.7, 0.5, 0.3]  # NxDI window 7: 6 proposals
    rng = random.Random(1)
    c = StreamCounter(window=7, semantics="nxdi")
    for _ in range(400):
        toks = [1]
        for _ in range(30):
            acc = 0
            while acc < len(cond) and rng.random() < cond[acc]:
                acc += 1
            toks.append(acc + 1)
        toks.append(1)
        c.add(toks, cut_at_max_tokens=True)
    r = c.result()
    truth, run = [], 1.0
    for a in cond:
        run *= a
        truth.append(run)
    assert r.per_position == pytest.approx(truth, abs=0.02)
    assert r.mean_accepted_length == pytest.approx(1 + sum(truth), abs=0.05)
    assert r.mean_accepted_length_ci95 is not None
    lo, hi = r.mean_accepted_length_ci95
    assert lo < 1 + sum(truth) < hi and hi - lo < 0.2
    assert r.coalesced_events == 0


def test_counters_that_never_moved_are_not_reported() -> None:
    assert counters_from_json(None) is None
    assert counters_from_json({"source": "counter deltas", "drafts": 0.0, "rate": None}) is None
    got = counters_from_json({"source": "counter deltas", "drafts": 10, "rate": 0.5, "mean_accepted_length": 3.0})
    assert got is not None and got.mean_accepted_length == 3.0


def test_headline_acceptance_prefers_counters_and_states_agreement() -> None:
    stream = StreamAcceptance(window=7, semantics="nxdi", steps=100, rate=0.3, mean_accepted_length=2.8,
                              per_position=[0.7, 0.5])  # fmt: skip
    both = combine(stream, CounterAcceptance(rate=0.31, mean_accepted_length=2.9, per_position=[0.7, 0.5]))
    assert both is not None and both.source == "counters" and both.stream is stream
    assert both.agreement is not None and "agree" in both.agreement and "DISAGREE" not in both.agreement
    off = combine(stream, CounterAcceptance(rate=0.5, mean_accepted_length=3.5))
    assert off is not None and off.agreement is not None and "DISAGREE" in off.agreement
    only_stream = combine(stream, None)
    assert only_stream is not None and only_stream.source == "stream" and only_stream.rate == 0.3
    assert combine(StreamAcceptance(), None) is None


def test_a_declared_window_the_stream_contradicts_is_flagged() -> None:
    # declared window 7 (NxDI: 6 proposals) but every step stops at 2 accepted: the server runs window 3
    c = StreamCounter(window=7, semantics="nxdi")
    for _ in range(40):
        c.add([1, 3, 3, 1, 3, 2, 3, 1], cut_at_max_tokens=False)
    msg = window_contradiction(c.result(), 7, "nxdi")
    assert msg is not None and "looks like 3" in msg
    # steps larger than the declared window allows: the window is larger (or events are coalesced)
    big = StreamCounter(window=3, semantics="nxdi")
    for _ in range(40):
        big.add([1, 5, 6, 5, 2, 1], cut_at_max_tokens=False)
    assert "more than 3 tokens" in (window_contradiction(big.result(), 3, "nxdi") or "")
    # a normal run at the declared window: nothing to say
    ok = StreamCounter(window=7, semantics="nxdi")
    rng = random.Random(2)
    for _ in range(60):
        ok.add([1, *[rng.randint(1, 7) for _ in range(20)]], cut_at_max_tokens=False)
    assert window_contradiction(ok.result(), 7, "nxdi") is None


# ---- StreamCounter, exactly -------------------------------------------------------------------------


def _counter(window: int | None, semantics: str, *requests: list[int], cut: bool = False) -> StreamCounter:
    c = StreamCounter(window=window, semantics=semantics)  # type: ignore[arg-type]
    for toks in requests:
        c.add(toks, cut_at_max_tokens=cut)
    return c


def test_result_carries_window_semantics_and_counts() -> None:
    r = _counter(4, "nxdi", [1, 2, 4, 1]).result()
    assert (r.window, r.semantics, r.steps, r.coalesced_events) == (4, "nxdi", 3, 0)
    assert r.per_position == pytest.approx([2 / 3, 1 / 3, 1 / 3])  # 3 proposals: sizes 2, 4, 1 accept 1, 3, 0
    assert r.rate == pytest.approx(4 / 9) and r.mean_accepted_length == pytest.approx(7 / 3)


def test_zero_token_events_are_skipped_and_what_follows_still_counts() -> None:
    r = _counter(4, "upstream", [1, 3, 0, 2, 0, 5]).result()
    assert r.steps == 3 and r.mean_accepted_length == pytest.approx(10 / 3)
    assert r.per_position == pytest.approx([1.0, 2 / 3, 1 / 3, 1 / 3])


def test_one_step_is_enough_for_a_length() -> None:
    r = _counter(4, "upstream", [1, 3]).result()
    assert r.steps == 1 and r.mean_accepted_length == 3.0 and r.rate == pytest.approx(2 / 4)
    assert r.per_position == [1.0, 1.0, 0.0, 0.0]
    assert r.mean_accepted_length_ci95 is None  # one request: no interval


def test_no_step_no_acceptance() -> None:
    r = _counter(4, "upstream", [1], [1, 9]).result()
    assert (r.steps, r.coalesced_events, r.mean_accepted_length, r.rate, r.per_position) == (0, 1, None, None, [])


def test_unknown_window_reads_positions_as_far_as_observed() -> None:
    r = _counter(None, "upstream", [1, 3, 1, 2], [1, 5, 1]).result()
    assert (r.window, r.steps, r.coalesced_events) == (None, 5, 0)
    # accepted per step 2, 0, 1, 4, 0: position i reached by steps that accepted more than i
    assert r.per_position == pytest.approx([3 / 5, 2 / 5, 1 / 5, 1 / 5])
    assert r.rate is None and r.mean_accepted_length == pytest.approx(12 / 5)
    assert _counter(None, "upstream", [1, 1, 1]).result().per_position == []  # nothing accepted: no position
    assert _counter(None, "upstream", [1, 1, 1]).result().mean_accepted_length == 1.0


def test_merge_adds_positions_steps_and_coalesced_events() -> None:
    a = _counter(None, "upstream", [1, 3, 1])
    b = _counter(None, "upstream", [1, 5, 9, 2])
    a.merge(b)
    whole = _counter(None, "upstream", [1, 3, 1], [1, 5, 9, 2])
    assert a.result() == whole.result()
    assert (a.hits, dict(a.requests), a.coalesced) == ([4, 3, 2, 2, 1, 1, 1, 1], {(2, 2): 1, (3, 13): 1}, 0)
    # the other way round: a wider counter merged into a narrower one
    c, d = _counter(None, "upstream", [1, 9]), _counter(None, "upstream", [1, 2])
    d.merge(c)
    assert d.hits == [2, 1, 1, 1, 1, 1, 1, 1] and dict(d.requests) == {(1, 1): 1, (1, 8): 1}
    e, f = _counter(4, "upstream", [1, 9, 2]), _counter(4, "upstream", [1, 6, 6, 3])
    e.merge(f)
    assert (e.coalesced, dict(e.requests), e.hits) == (3, {(1, 1): 1, (1, 2): 1}, [2, 1, 0, 0])


def test_intervals_are_seeded_and_bracket_the_estimates() -> None:
    rng = random.Random(4)
    c = StreamCounter(window=5, semantics="upstream")
    for _ in range(60):
        c.add([1, *[rng.randint(1, 6) for _ in range(25)]], cut_at_max_tokens=False)
    r = c.result(seed=5)
    assert r.rate is not None and r.rate_ci95 is not None and r.mean_accepted_length_ci95 is not None
    assert r.rate_ci95[0] < r.rate < r.rate_ci95[1] and r.rate_ci95[1] - r.rate_ci95[0] < 0.06
    lo, hi = r.mean_accepted_length_ci95
    assert lo < (r.mean_accepted_length or 0) < hi and hi - lo < 0.3
    assert c.result(seed=5) == r
    other = c.result(seed=6)
    assert other.rate_ci95 != r.rate_ci95 and other.mean_accepted_length_ci95 != r.mean_accepted_length_ci95


# ---- counters and the headline ----------------------------------------------------------------------


def test_counters_from_json_reads_every_field() -> None:
    raw = {
        "source": "counter deltas",
        "drafts": 20,
        "draft_tokens": 80.0,
        "accepted_tokens": 30,
        "rate": 0.375,
        "mean_accepted_length": 2.5,
        "per_position": [0.9, 0.5, "x", 0.1, None],
    }
    got = counters_from_json(raw)
    assert got == CounterAcceptance(kind="v1 counters", drafts=20.0, draft_tokens=80.0, accepted_tokens=30.0,
                                    rate=0.375, mean_accepted_length=2.5, per_position=[0.9, 0.5, 0.1])  # fmt: skip
    gauge = counters_from_json({"source": "v0 gauge (cumulative since server start, not this run)", "rate": 0.7})
    assert gauge is not None and gauge.kind == "v0 gauge" and gauge.rate == 0.7 and gauge.per_position is None
    assert counters_from_json({"rate": None, "mean_accepted_length": 2.0}) == CounterAcceptance(
        kind="v1 counters", mean_accepted_length=2.0
    )
    for bad in (True, "0.5", float("nan")):
        assert counters_from_json({"rate": bad, "mean_accepted_length": None}) is None
    assert counters_from_json([1, 2]) is None


def test_combine_keeps_counters_stream_and_coalesced_events() -> None:
    stream = StreamAcceptance(window=4, semantics="upstream", steps=10, rate=0.5, mean_accepted_length=3.0,
                              per_position=[0.8, 0.7, 0.3, 0.2], coalesced_events=2)  # fmt: skip
    counters = CounterAcceptance(rate=0.51, mean_accepted_length=3.06, per_position=[0.8, 0.7, 0.35, 0.21])
    both = combine(stream, counters)
    assert both is not None
    assert (both.source, both.rate, both.mean_accepted_length) == ("counters", 0.51, 3.06)
    assert both.per_position == [0.8, 0.7, 0.35, 0.21] and both.stream is stream and both.counters is counters
    assert both.coalesced_events == 2
    assert both.agreement == "stream 3.000 vs counters 3.060 tokens per step (-2.0%): agree within 5%"
    only = combine(stream, None)
    assert only is not None
    assert (only.source, only.rate, only.mean_accepted_length, only.per_position) == (
        "stream", 0.5, 3.0, [0.8, 0.7, 0.3, 0.2])  # fmt: skip
    assert only.stream is stream and only.counters is None and only.coalesced_events == 2 and only.agreement is None
    off = combine(stream, CounterAcceptance(mean_accepted_length=2.5))
    assert (
        off is not None
        and off.agreement == "stream 3.000 vs counters 2.500 tokens per step (+20.0%): DISAGREE within 5%"
    )


def test_combine_with_a_stream_without_steps() -> None:
    empty = StreamAcceptance(window=4, semantics="upstream", steps=0, mean_accepted_length=2.0, coalesced_events=3)
    assert combine(empty, None) is None
    counters = CounterAcceptance(rate=0.4, mean_accepted_length=2.2)
    got = combine(empty, counters)
    assert got is not None and got.source == "counters" and got.stream is None and got.coalesced_events == 3
    assert got.agreement is None
    one = StreamAcceptance(window=4, semantics="upstream", steps=1, mean_accepted_length=2.0)
    assert combine(one, None) is not None
    assert combine(None, counters) is not None and combine(None, None) is None


def test_combine_gauge_only() -> None:
    gauge = CounterAcceptance(kind="v0 gauge", rate=0.7)
    got = combine(None, gauge)
    assert got is not None
    assert (got.source, got.rate, got.mean_accepted_length, got.per_position, got.counters) == (
        "counters", 0.7, None, [], gauge)  # fmt: skip
    with_stream = combine(StreamAcceptance(window=4, semantics="upstream", steps=5, mean_accepted_length=2.0,
                                           rate=0.25, per_position=[0.5]), gauge)  # fmt: skip
    assert with_stream is not None and with_stream.source == "stream" and with_stream.counters is gauge


def test_agreement_at_exactly_five_percent_is_unreachable_in_floating_point() -> None:
    """The 5% boundary (``<=`` or ``<``) cannot be hit: stream / counters - 1 is a multiple of 2^-52 near
    0.05, and 0.05 is not; so both comparisons always agree (documented in docs/mutation.md)."""
    assert all((k * 2.0**-52) != 0.05 for k in range(225179981368524, 225179981368527))


# ---- window contradictions at their boundaries ---------------------------------------------------------


def _stream(steps: int, sizes: list[int], window: int, semantics: str = "nxdi", coalesced: int = 0) -> StreamAcceptance:
    c = StreamCounter(window=window, semantics=semantics)  # type: ignore[arg-type]
    c.add([1, *(sizes * steps)[:steps], *([99] * coalesced)], cut_at_max_tokens=False)
    return c.result()


def test_window_contradiction_needs_fifty_steps() -> None:
    assert window_contradiction(_stream(49, [3], 7), 7, "nxdi") is None
    msg = window_contradiction(_stream(50, [3], 7), 7, "nxdi")
    assert msg == ("100% of 50 steps accepted exactly 2 proposals and none more, at the declared window 7 (nxdi, 6 "
                   "proposals): the server's window looks like 3")  # fmt: skip
    assert window_contradiction(None, 7, "nxdi") is None
    assert window_contradiction(_stream(50, [3], 7), None, "nxdi") is None


def test_window_contradiction_upstream_window_and_one_position() -> None:
    msg = window_contradiction(_stream(60, [2, 1], 7, "upstream"), 7, "upstream")
    assert msg is not None and msg.endswith("(upstream, 7 proposals): the server's window looks like 1")
    assert msg.startswith("50% of 60 steps accepted exactly 1 proposals")


def test_window_contradiction_cap_pile_up_boundary() -> None:
    # 100 steps: 15 accept 2 proposals (P_1 = 0.15 exactly), the rest none
    at = _stream(100, [3] * 15 + [1] * 85, 7)
    assert at.per_position[1] == 0.15
    assert window_contradiction(at, 7, "nxdi") is not None
    below = _stream(100, [3] * 14 + [1] * 86, 7)
    assert window_contradiction(below, 7, "nxdi") is None


def test_a_full_window_is_no_contradiction() -> None:
    assert window_contradiction(_stream(60, [7, 7, 1], 7), 7, "nxdi") is None  # every position reached
    assert window_contradiction(_stream(60, [1], 7), 7, "nxdi") is None  # nothing accepted: nothing to say


def test_coalesced_share_boundary() -> None:
    # 60 steps and 15 coalesced events: 15 / 75 = 20%, not more than 20%
    assert window_contradiction(_stream(60, [7, 1, 4], 7, coalesced=15), 7, "nxdi") is None
    msg = window_contradiction(_stream(60, [7, 1, 4], 7, coalesced=16), 7, "nxdi")
    assert msg == ("16 decode events carry more than 7 tokens, the most one step can emit at the declared window 7 "
                   "(nxdi): the window is larger than declared, or the server coalesces steps")  # fmt: skip
    assert window_contradiction(_stream(99, [7, 1, 4], 7, coalesced=1), 7, "nxdi") is None


def test_last_nonzero() -> None:
    from spectrn.analyze.acceptance import _last_nonzero

    assert _last_nonzero([]) == 0 and _last_nonzero([0.0, 0.0]) == 0
    assert _last_nonzero([0.5, 0.0, 0.1, 0.0]) == 3


def test_the_vectorized_bootstrap_equals_the_loop() -> None:
    """Why switching ``vectorized`` is an equivalent mutant: numpy draws the same indices either way."""
    import numpy as np

    from spectrn.analyze.stats import bootstrap

    x = np.random.default_rng(0).normal(size=37)
    assert bootstrap(lambda i: x[i].mean(axis=-1), 37, vectorized=True, seed=3) == bootstrap(
        lambda i: x[i].mean(axis=-1), 37, vectorized=False, seed=3
    )


def test_merging_a_narrower_counter_into_a_wider_one() -> None:
    wide, narrow = _counter(None, "upstream", [1, 9]), _counter(None, "upstream", [1, 3])
    wide.merge(narrow)
    assert wide.hits == [2, 2, 1, 1, 1, 1, 1, 1] and dict(wide.requests) == {(1, 8): 1, (1, 2): 1}


def test_the_distinct_unit_bootstrap_matches_the_index_bootstrap() -> None:
    """Resampling n requests = drawing each distinct (steps, accepted) pair a multinomial number of times: the
    interval from the counts of distinct pairs agrees with the plain index bootstrap over every request."""
    import numpy as np

    from spectrn.analyze.stats import bootstrap, bootstrap_units

    gen = np.random.default_rng(5)
    steps = gen.integers(5, 12, 3000).astype(float)
    acc = np.minimum(steps * 4, gen.binomial((steps * 4).astype(int), 0.55)).astype(float)
    per_request = bootstrap(lambda i: acc[i].sum(-1) / steps[i].sum(-1), steps.size, resamples=4000, vectorized=True)
    pairs = sorted({(s, a) for s, a in zip(steps, acc, strict=True)})
    counts = np.array([np.sum((steps == s) & (acc == a)) for s, a in pairs], dtype=float)
    st = np.array([s for s, _ in pairs])
    ac = np.array([a for _, a in pairs])
    distinct = bootstrap_units(lambda d: (d @ ac) / (d @ st), counts, resamples=4000)
    assert per_request is not None and distinct is not None
    width = per_request[1] - per_request[0]
    assert width > 0.01  # a real interval, not a degenerate one
    assert abs(distinct[0] - per_request[0]) < 0.08 * width and abs(distinct[1] - per_request[1]) < 0.08 * width
    assert bootstrap_units(lambda d: d @ st, [1]) is None  # one request: no interval
