"""``request_metrics`` on records whose every figure is worked out by hand here, edge cases included: the
records a load generator, an ingested llmperf run or another tool can write."""

from __future__ import annotations

import pytest

from spectrn.analyze.metrics import request_metrics
from spectrn.run.records import RequestRecord


def rec(**kw: object) -> RequestRecord:
    base: dict[str, object] = dict(
        variant="speculative",
        index=7,
        prompt_id="p7",
        prompt_class="open",
        level="r2.0",
        sent_at=100.0,
        ttft=0.2,
        e2e=1.0,
        chunk_times=[0.2, 0.4, 0.5, 0.9],
        chunk_tokens=[1, 4, 2, 5],
        completion_tokens=12,
    )
    base.update(kw)
    return RequestRecord.model_validate(base)


def test_every_field_by_hand() -> None:
    m = request_metrics(rec())
    assert m is not None
    assert (m.index, m.variant, m.prompt_class, m.level) == (7, "speculative", "open", "r2.0")
    assert m.ttft == 0.2 and m.e2e == 1.0 and m.output_tokens == 12
    assert m.tpot == pytest.approx(0.8 / 11)  # (1.0 - 0.2) / (12 - 1)
    assert m.gaps == pytest.approx((0.2, 0.1, 0.4))
    assert m.gap_tokens == (4, 2, 5)
    assert m.itls == pytest.approx([0.05] * 4 + [0.05] * 2 + [0.08] * 5)
    values, weights = m.itl_values
    assert values == pytest.approx([0.05, 0.05, 0.08]) and weights == [4, 2, 5]
    assert m.chunk_latencies == pytest.approx([0.2, 0.1, 0.4])
    assert (m.decode_tokens, m.decode_chunks) == (11, 3)
    assert m.tokens_per_decode_chunk == pytest.approx(11 / 3)
    assert m.throughput_tok_s == pytest.approx(12.0)
    assert m.llmperf_itl == pytest.approx(0.9 / 4)


def test_tpot_divides_by_n_minus_1_at_every_length() -> None:
    """A schedule of one token per event every 30 ms after a 100 ms TTFT: TPOT is the gap, exactly, for any n
    (dividing by n instead would be (n - 1) / n of it)."""
    for n in (2, 3, 5, 20, 101):
        times = [0.1 + 0.03 * i for i in range(n)]
        m = request_metrics(rec(chunk_times=times, chunk_tokens=[1] * n, completion_tokens=n, ttft=0.1, e2e=times[-1]))
        assert m is not None and m.tpot == pytest.approx(0.03, rel=1e-9), n


def test_two_tokens_have_a_tpot_one_token_has_none() -> None:
    two = request_metrics(rec(chunk_times=[0.2, 0.5], chunk_tokens=[1, 1], completion_tokens=2, e2e=0.5))
    assert two is not None and two.tpot == pytest.approx(0.3)
    one = request_metrics(rec(chunk_times=[0.2], chunk_tokens=[1], completion_tokens=1, e2e=0.2))
    assert one is not None and one.tpot is None and one.itls == [] and one.tokens_per_decode_chunk is None


def test_missing_counts_are_one_token_per_event() -> None:
    """A record from another tool with fewer counts than event times: each event without a count carries one."""
    m = request_metrics(rec(chunk_tokens=[1, 4], completion_tokens=None))
    assert m is not None
    assert m.gap_tokens == (4, 1, 1)
    assert m.output_tokens == 5  # sum of the counts there are
    assert m.itls == pytest.approx([0.05] * 4 + [0.1, 0.4])


def test_an_event_without_tokens_gives_no_itl_sample() -> None:
    """A zero-token event (a usage difference of 0) is a chunk latency but no per-token sample."""
    m = request_metrics(rec(chunk_tokens=[1, 4, 0, 5], completion_tokens=10))
    assert m is not None
    assert m.chunk_latencies == pytest.approx([0.2, 0.1, 0.4])
    assert m.itls == pytest.approx([0.05] * 4 + [0.08] * 5)
    values, weights = m.itl_values
    assert values == pytest.approx([0.05, 0.08]) and weights == [4, 5]
    assert (m.decode_tokens, m.decode_chunks) == (9, 3)


@pytest.mark.parametrize(
    "kw",
    [
        {"error": "http_500", "status": 500},  # failed, even with times recorded
        {"e2e": None},  # never finished
        {"ttft": None},  # no first token
        {"completion_tokens": 0},  # no tokens
        {"chunk_times": [], "chunk_tokens": [], "completion_tokens": 3},  # no events and no llmperf figure
    ],
    ids=["error", "no-e2e", "no-ttft", "zero-tokens", "no-events"],
)
def test_records_without_metrics(kw: dict[str, object]) -> None:
    assert request_metrics(rec(**kw)) is None


def test_an_ingested_llmperf_response_keeps_its_own_itl() -> None:
    r = rec(chunk_times=[], chunk_tokens=[], completion_tokens=10, llmperf_itl=0.09)
    m = request_metrics(r)
    assert m is not None and m.llmperf_itl == pytest.approx(0.09) and m.gaps == () and m.itls == []
    scaled = request_metrics(r, time_scale=0.5)
    assert scaled is not None and scaled.llmperf_itl == pytest.approx(0.18)
    assert request_metrics(rec(chunk_times=[], chunk_tokens=[], completion_tokens=10)) is None


def test_time_scale_divides_every_duration() -> None:
    """A run simulated at time scale 4 (4x faster than real): every duration x 4, throughput / 4."""
    m = request_metrics(rec(), time_scale=4.0)
    assert m is not None
    assert m.ttft == pytest.approx(0.05) and m.e2e == pytest.approx(0.25)
    assert m.tpot == pytest.approx(0.2 / 11)
    assert m.gaps == pytest.approx((0.05, 0.025, 0.1))
    assert m.llmperf_itl == pytest.approx(0.9 / 4 / 4)
    assert m.throughput_tok_s == pytest.approx(48.0)


@pytest.mark.parametrize("scale", [0.0, -2.0])
def test_a_time_scale_that_is_not_positive_is_read_as_real_time(scale: float) -> None:
    m, real = request_metrics(rec(), time_scale=scale), request_metrics(rec())
    assert m == real


def test_zero_duration_has_zero_throughput() -> None:
    m = request_metrics(rec(ttft=0.0, e2e=0.0, chunk_times=[0.0], chunk_tokens=[1], completion_tokens=1))
    assert m is not None and m.throughput_tok_s == 0.0
