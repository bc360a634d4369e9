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
