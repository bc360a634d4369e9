"""Aggregate throughput and $/M intervals resample requests with their time spans: never zero-width when every
output has one length, and they cover a known closed-loop throughput at about the nominal rate."""

from __future__ import annotations

import heapq
from typing import Any

import numpy as np
import pytest

from spectrn.analyze.summary import summarize
from spectrn.analyze.throughput import aggregate_ci
from spectrn.configuration.config import SpectrnConfig
from spectrn.run.records import RequestRecord, RunMeta

HOURLY = 44.70 * 0.5  # trn2.48xlarge, half an instance per service (the config's defaults)


def closed_loop(seed: int, *, streams: int, n: int, tokens: int, mean_s: float) -> tuple[list[float], list[float]]:
    """(send times, e2e) of ``n`` requests served by a closed loop of ``streams``: each stream sends its next
    request when its last one ends; durations are Gamma(shape 4) with mean ``mean_s`` (CV 0.5), whatever the
    output length. Steady-state throughput: streams x tokens / mean_s (renewal theory)."""
    gen = np.random.default_rng(seed)
    free = [0.0] * streams
    sends, e2e = [], []
    for _ in range(n):
        t = heapq.heappop(free)
        d = float(gen.gamma(4.0, mean_s / 4.0))
        sends.append(t)
        e2e.append(d)
        heapq.heappush(free, t + d)
    return sends, e2e


def test_equal_lengths_give_an_interval_that_covers_the_known_throughput_at_about_95_percent() -> None:
    streams, n, tokens, mean_s = 4, 200, 64, 2.0
    truth = streams * tokens / mean_s  # 128 tok/s
    covered, widths = 0, []
    for seed in range(100):
        sends, e2e = closed_loop(seed, streams=streams, n=n, tokens=tokens, mean_s=mean_s)
        wall = max(s + d for s, d in zip(sends, e2e, strict=True)) - min(sends)
        point = n * tokens / wall
        ci = aggregate_ci(np.full(n, float(tokens)), e2e, wall, seed=seed)
        assert ci is not None
        lo, hi = ci
        assert lo < point < hi  # the point sits inside its own interval
        widths.append((hi - lo) / point)
        covered += lo <= truth <= hi
    assert covered >= 90, covered
    # never zero-width; about 2 x 1.96 x CV / sqrt(n) = 14% of the point for CV 0.5 and 200 requests
    assert min(widths) > 0.08 and max(widths) < 0.25


def test_equal_durations_and_lengths_are_exact() -> None:
    """Nothing varies between requests: the interval is the point (a real zero width, not an artefact)."""
    ci = aggregate_ci(np.full(10, 16.0), np.full(10, 2.0), 5.0, seed=0)
    assert ci == pytest.approx((10 * 16 / 5.0, 10 * 16 / 5.0))
    assert aggregate_ci([16.0], [2.0], 5.0, seed=0) is None  # one request: no interval


def record(variant: str, index: int, tokens: int, e2e: float, sent_at: float) -> RequestRecord:
    ttft = 0.1 * e2e
    gap = (e2e - ttft) / (tokens - 1)
    return RequestRecord(
        variant=variant,
        index=index,
        prompt_id=f"p{index}",
        prompt_class="chat",
        level="c2",
        sent_at=sent_at,
        ttft=ttft,
        e2e=e2e,
        chunk_times=[ttft + j * gap for j in range(tokens)],
        chunk_tokens=[1] * tokens,
        completion_tokens=tokens,
        status=200,
    )


def equal_length_run(n: int = 60, tokens: int = 32) -> tuple[list[RequestRecord], dict[str, tuple[float, float]]]:
    """Two variants, every output ``tokens`` long, durations varying; returns the records and per variant
    (total tokens, wall) computed here from the schedule."""
    gen = np.random.default_rng(11)
    recs, walls = [], {}
    for variant, speed in (("baseline", 1.0), ("speculative", 0.4)):
        free = [1000.0, 1000.0]  # two streams
        first, last = float("inf"), 0.0
        for i in range(n):
            t = heapq.heappop(free)
            d = speed * float(gen.uniform(0.5, 1.5))
            recs.append(record(variant, i, tokens, d, t))
            heapq.heappush(free, t + d)
            first, last = min(first, t), max(last, t + d)
        walls[variant] = (float(n * tokens), last - first)
    return recs, walls


def test_summary_throughput_cost_and_their_ratio_have_intervals_with_equal_lengths() -> None:
    recs, walls = equal_length_run()
    meta = RunMeta(run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=SpectrnConfig())
    s = summarize(recs, meta)
    level = s.levels[0]
    points = {}
    for variant, (tokens, wall) in walls.items():
        vs = level.variants[variant]
        point = tokens / wall
        points[variant] = point
        thr = vs.output_tokens_per_s
        assert thr.aggregate == pytest.approx(point)  # the point estimate is unchanged: tokens / wall
        assert thr.aggregate_ci95 is not None
        lo, hi = thr.aggregate_ci95
        assert lo < point < hi
        assert vs.cost is not None and vs.cost.usd_per_million_output_tokens_ci95 is not None
        usd = HOURLY / (point * 3600) * 1e6
        assert vs.cost.usd_per_million_output_tokens == pytest.approx(usd)
        clo, chi = vs.cost.usd_per_million_output_tokens_ci95
        assert clo < usd < chi
        assert (clo, chi) == pytest.approx((HOURLY / (hi * 3600) * 1e6, HOURLY / (lo * 3600) * 1e6))
    # one price and one wall for the whole level: the cost ratio is the throughput ratio, interval included
    assert level.speedup is not None and level.speedup.cost == level.speedup.aggregate_throughput
    for sp in (level.speedup, level.by_prompt_class["chat"].speedup):
        assert sp is not None and sp.aggregate_throughput is not None
        ratio = points["speculative"] / points["baseline"]
        assert sp.aggregate_throughput.value == pytest.approx(ratio)
        assert sp.aggregate_throughput.ci95 is not None
        lo, hi = sp.aggregate_throughput.ci95
        assert lo < ratio < hi and hi - lo > 0.01 * ratio


def test_paired_ratio_interval_is_narrower_than_an_unpaired_one_when_requests_share_their_cost() -> None:
    """Paired resampling keeps each prompt's two durations together: when the speculative request takes a
    fixed share of its baseline twin's time, every paired resample has exactly that ratio."""
    recs, _ = equal_length_run()
    base = {r.index: r for r in recs if r.variant == "baseline"}
    twins = []
    for i, r in base.items():  # the speculative twin takes 0.4 x the baseline's time, sent on the same clock
        twins.append(record("speculative", i, 32, 0.4 * (r.e2e or 0.0), 1000.0 + 0.4 * (r.sent_at - 1000.0)))
    meta = RunMeta(run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=SpectrnConfig())
    sp = summarize([*base.values(), *twins], meta).levels[0].speedup
    assert sp is not None and sp.aggregate_throughput is not None and sp.aggregate_throughput.ci95 is not None
    assert sp.aggregate_throughput.value == pytest.approx(2.5)
    assert sp.aggregate_throughput.ci95 == pytest.approx((2.5, 2.5))
    llmperf = RunMeta(run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=SpectrnConfig(),
                      engine="llmperf")  # fmt: skip
    un = summarize([*base.values(), *twins], llmperf).levels[0].speedup
    assert un is not None and un.aggregate_throughput is not None and un.aggregate_throughput.ci95 is not None
    lo, hi = un.aggregate_throughput.ci95
    assert lo < 2.5 < hi and hi - lo > 0.1  # resampled on their own, the two sides' noise does not cancel


def class_record(
    variant: str, index: int, cls: str, ttft: float, span: float, sent_at: float, tokens: int = 32
) -> RequestRecord:
    gap = span / (tokens - 1) if tokens > 1 else 0.0
    return RequestRecord(
        variant=variant, index=index, prompt_id=f"p{index}", prompt_class=cls, level="c1", sent_at=sent_at,
        ttft=ttft, e2e=ttft + span, chunk_times=[ttft + j * gap for j in range(tokens)], chunk_tokens=[1] * tokens,
        completion_tokens=tokens, status=200,
    )  # fmt: skip


def mixed_level_run() -> list[RequestRecord]:
    """Two classes in one level, one stream per variant. Every speculative request decodes in exactly 0.4 x its
    baseline twin's decode time (first to last token); the two TTFTs are drawn independently."""
    gen = np.random.default_rng(5)
    recs = []
    clock = {"baseline": 1000.0, "speculative": 1000.0}
    for i in range(80):
        cls = "structured" if i % 2 else "open"
        span = float(gen.uniform(1.0, 3.0))
        for variant, s in (("baseline", span), ("speculative", 0.4 * span)):
            ttft = float(gen.uniform(0.05, 0.8))
            recs.append(class_record(variant, i, cls, ttft, s, clock[variant]))
            clock[variant] += ttft + s
    return recs


def test_a_class_cost_ratio_resamples_its_pairs_decode_times() -> None:
    """A class's cost ratio is billed by its decode time (first to last token) and its interval resamples the
    pairs with those times: each speculative request decodes in 0.4 x its twin's time, so every paired
    resample gives the same ratio (a zero-width interval). Resampling e2e (TTFT included, drawn independently
    here) or each variant on its own would give a real width."""
    meta = RunMeta(run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=SpectrnConfig())
    level = summarize(mixed_level_run(), meta).levels[0]
    for cls in ("structured", "open"):
        cs = level.by_prompt_class[cls]
        b, s = cs.variants["baseline"].cost, cs.variants["speculative"].cost
        assert cs.speedup is not None and cs.speedup.cost is not None and b is not None and s is not None
        assert b.usd_per_million_output_tokens is not None and s.usd_per_million_output_tokens is not None
        assert cs.speedup.cost.value == pytest.approx(b.usd_per_million_output_tokens / s.usd_per_million_output_tokens)
        assert cs.speedup.cost.ci95 is not None
        lo, hi = cs.speedup.cost.ci95
        assert hi - lo == pytest.approx(0.0, abs=1e-9 * hi), (cls, lo, hi)
        # the class's throughput ratio is over the level's wall, with e2e spans: a real interval
        assert cs.speedup.aggregate_throughput is not None and cs.speedup.aggregate_throughput.ci95 is not None
        tlo, thi = cs.speedup.aggregate_throughput.ci95
        assert thi - tlo > 0.01 * thi
    llmperf = RunMeta(run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=SpectrnConfig(),
                      engine="llmperf")  # fmt: skip
    un = summarize(mixed_level_run(), llmperf).levels[0].by_prompt_class["structured"].speedup
    assert un is not None and un.cost is not None and un.cost.ci95 is not None
    lo, hi = un.cost.ci95
    assert hi - lo > 0.01 * hi  # unpaired: each side's spread counts


def test_speedup_intervals_are_reproducible() -> None:
    """Every interval comes from a seeded draw: the same records give the same intervals, run after run."""
    meta = RunMeta(run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=SpectrnConfig())
    first, second = (summarize(mixed_level_run(), meta).levels[0] for _ in range(2))
    assert first.speedup == second.speedup
    assert all(first.by_prompt_class[c].speedup == second.by_prompt_class[c].speedup for c in ("structured", "open"))


def sequential(pairs: list[tuple[float, float, int]], variant: str, *, ttft: float = 0.001) -> list[RequestRecord]:
    """One stream: each request (span, tokens) sent when the last one ended, so the wall is the sum of e2e."""
    recs, clock = [], 1000.0
    for i, (span, _, tokens) in enumerate(pairs):
        recs.append(class_record(variant, i, "chat", ttft, span, clock, tokens))
        clock += recs[-1].e2e or 0.0
    return recs


def level_of(recs: list[RequestRecord], engine: str = "spectrn") -> Any:
    meta = RunMeta(run_id="r", spectrn_version="0", started_at=0, finished_at=1, config=SpectrnConfig(),
                   engine=engine)  # fmt: skip
    return summarize(recs, meta).levels[0]


def test_the_throughput_ratio_of_walls_under_a_second_and_of_one_token() -> None:
    """Nothing about a second or a token is special: walls of 0.1 s and a run of one 1-token request per variant
    have their ratio, (spec tokens / spec wall) / (baseline tokens / baseline wall)."""
    base = sequential([(0.009, 0, 32)] * 10, "baseline")  # e2e 0.010 s each: a 0.1 s wall
    spec = sequential([(0.0036, 0, 32)] * 10, "speculative")  # e2e 0.0046 s: a 0.046 s wall
    sp = level_of(base + spec).speedup
    assert sp.aggregate_throughput is not None and sp.aggregate_throughput.value == pytest.approx(0.1 / 0.046)
    one = level_of([class_record("baseline", 0, "chat", 0.05, 0.0, 1000.0, 1),
                    class_record("speculative", 0, "chat", 0.04, 0.0, 1000.0, 1)]).speedup  # fmt: skip
    assert one.aggregate_throughput is not None and one.aggregate_throughput.value == pytest.approx(0.05 / 0.04)
    assert one.aggregate_throughput.ci95 is None  # one pair: no interval


@pytest.mark.parametrize("instant", ["baseline", "speculative"])
def test_a_variant_without_measurable_wall_time_has_no_throughput_ratio(instant: str) -> None:
    """A variant whose requests took no measurable time (e2e 0: the record format allows it) has no throughput,
    so no throughput or cost ratio, whichever side it is."""
    timed = "speculative" if instant == "baseline" else "baseline"
    recs = [class_record(instant, i, "chat", 0.0, 0.0, 1000.0, 1) for i in range(3)]
    recs += sequential([(0.2, 0, 8)] * 3, timed)
    sp = level_of(recs).speedup
    assert sp is not None and sp.aggregate_throughput is None and sp.cost is None


def test_the_itl_speedup_with_one_two_and_unpaired_requests() -> None:
    """The per-token ITL speedup is baseline p50 / speculative p50: a value from one pair (no interval), an
    interval from two pairs on, a value without interval for an unpaired (llmperf) run, and none when one side
    has no token gap at all."""
    one = level_of(sequential([(0.31, 0, 32)], "baseline") + sequential([(0.124, 0, 32)], "speculative")).speedup
    assert one.itl_p50 is not None and one.itl_p50.value == pytest.approx(0.31 / 0.124) and one.itl_p50.ci95 is None
    two = level_of(sequential([(0.31, 0, 32), (0.62, 0, 32)], "baseline")
                   + sequential([(0.124, 0, 32), (0.31, 0, 32)], "speculative")).speedup  # fmt: skip
    assert two.itl_p50 is not None and two.itl_p50.ci95 is not None
    lo, hi = two.itl_p50.ci95
    assert lo <= two.itl_p50.value <= hi
    un = level_of(sequential([(0.31, 0, 32)] * 4, "baseline") + sequential([(0.124, 0, 32)] * 4, "speculative"),
                  engine="llmperf").speedup  # fmt: skip
    assert un.itl_p50 is not None and un.itl_p50.value == pytest.approx(0.31 / 0.124) and un.itl_p50.ci95 is None
    no_gap = level_of(sequential([(0.0, 0, 1)] * 3, "baseline", ttft=0.05) + sequential([(0.124, 0, 32)] * 3,
                      "speculative")).speedup  # fmt: skip
    assert no_gap.itl_p50 is None
