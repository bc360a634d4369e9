"""Statistics over requests of different output lengths (natural ends, ``ignore_eos`` off), worked out by hand."""

from __future__ import annotations

import pytest

from spectrn.analyze.metrics import request_metrics
from spectrn.analyze.summary import summarize
from spectrn.configuration.config import SpectrnConfig
from spectrn.run.records import RequestRecord, RunMeta


def rec(
    variant: str,
    index: int,
    n: int,
    tpot: float,
    *,
    ttft: float = 0.1,
    toks: list[int] | None = None,
    finish: str | None = "stop",
    ids: list[int] | None = None,
) -> RequestRecord:
    """One token per event ``tpot`` apart after the first (or the events ``toks``, each ``tpot`` per token)."""
    toks = toks or [1] * n
    assert sum(toks) == n
    times, t = [], ttft
    for i, k in enumerate(toks):
        t = ttft if i == 0 else t + k * tpot
        times.append(t)
    return RequestRecord(
        variant=variant,
        index=index,
        prompt_id=f"p{index}",
        prompt_class="open",
        level="c4",
        sent_at=1000.0,
        ttft=ttft,
        e2e=times[-1],
        chunk_times=times,
        chunk_tokens=toks,
        completion_tokens=n,
        finish_reason=finish,
        status=200,
        output_token_ids=ids,
    )


def meta() -> RunMeta:
    return RunMeta(
        run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=SpectrnConfig(), max_tokens=600,
        ignore_eos=False,
    )  # fmt: skip


def test_tpot_divides_by_each_requests_own_length() -> None:
    short, long = rec("baseline", 0, 5, 0.01), rec("baseline", 1, 500, 0.04)
    m_short, m_long = request_metrics(short), request_metrics(long)
    assert m_short is not None and m_long is not None
    assert m_short.output_tokens == 5 and m_short.tpot == pytest.approx(0.04 / 4)
    assert m_long.output_tokens == 500 and m_long.tpot == pytest.approx(499 * 0.04 / 499)
    assert m_long.throughput_tok_s == pytest.approx(500 / (0.1 + 499 * 0.04))


def test_percentiles_count_requests_and_throughput_counts_tokens() -> None:
    # lengths 5, 50 and 500 at TPOT 10, 20 and 40 ms: per request the median TPOT is 20 ms (a token-weighted
    # median would be 40 ms, the long request's); throughput is all 555 tokens over the wall time, which the
    # longest request spans (all three sent together): 0.1 + 499 x 0.04 = 20.06 s
    recs = [rec("baseline", 0, 5, 0.01), rec("baseline", 1, 50, 0.02), rec("baseline", 2, 500, 0.04)]
    v = summarize(recs, meta()).levels[0].variants["baseline"]
    assert v.tpot_s.n == 3 and v.tpot_s.p50 == pytest.approx(0.02)
    assert v.tpot_s.mean == pytest.approx((0.01 + 0.02 + 0.04) / 3)
    assert v.output_tokens.min == 5 and v.output_tokens.max == 500 and v.output_tokens.mean == pytest.approx(185)
    assert v.duration_s == pytest.approx(20.06)
    assert v.output_tokens_per_s.aggregate == pytest.approx(555 / 20.06)
    per_request = [5 / (0.1 + 4 * 0.01), 50 / (0.1 + 49 * 0.02), 500 / (0.1 + 499 * 0.04)]
    assert v.output_tokens_per_s.per_request.p50 == pytest.approx(sorted(per_request)[1])


def test_paired_speedup_and_equivalence_with_unequal_lengths() -> None:
    # the same index has the same length on both variants (greedy output), different indexes differ
    lengths = {0: 8, 1: 30, 2: 120}
    recs = []
    for i, n in lengths.items():
        ids = list(range(i, i + n))
        recs.append(rec("baseline", i, n, 0.04, ids=ids))
        recs.append(rec("speculative", i, n, 0.02, ids=ids))
    lv = summarize(recs, meta()).levels[0]
    assert lv.speedup is not None and lv.speedup.paired_requests == 3
    assert lv.speedup.tpot_p50 is not None and lv.speedup.tpot_p50.value == pytest.approx(2.0)
    assert lv.equivalence is not None and lv.equivalence.compared == 3 and lv.equivalence.match_rate == 1.0
    # a speculative output that ends early is a divergence at its end, not a match
    recs[-1] = rec("speculative", 2, 100, 0.02, ids=list(range(2, 102)))
    eq = summarize(recs, meta()).levels[0].equivalence
    assert eq is not None and eq.matched == 2 and eq.divergences[0].first_divergence == 100


def test_a_step_cut_short_at_eos_is_not_an_acceptance_sample() -> None:
    # window 7 (NxDI: at most 7 tokens per step); steps of 3 and 3, then 2 tokens before EOS ended the request
    toks = [1, 3, 3, 2]
    stopped = rec("speculative", 0, 9, 0.01, toks=toks, finish="stop")
    acc = summarize([stopped], meta()).levels[0].variants["speculative"].acceptance
    assert acc is not None and acc.stream is not None
    assert acc.stream.steps == 2 and acc.stream.mean_accepted_length == pytest.approx(3.0)
    # a server that names no finish reason: below max_tokens the last event counts, as before
    unnamed = rec("speculative", 0, 9, 0.01, toks=toks, finish=None)
    acc = summarize([unnamed], meta()).levels[0].variants["speculative"].acceptance
    assert acc is not None and acc.stream is not None and acc.stream.steps == 3
