"""One variant's statistics from its accumulator: latencies with intervals, throughput, cost, SLOs and goodput."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spectrn.analyze.accumulator import Accumulator, _arr
from spectrn.analyze.settings import Settings
from spectrn.analyze.shares import LevelShare, decode_spans
from spectrn.analyze.slo import RequestValues, evaluate
from spectrn.analyze.stats import TokenDistribution, clustered_ci, describe, stats_with_ci
from spectrn.analyze.throughput import aggregate_ci
from spectrn.run.summary import Cost, Goodput, Requests, SloCheck, Throughput, VariantSummary


def variant_summary(
    acc: Accumulator,
    st: Settings,
    *,
    planned: int | None,
    acceptance: Any,
    share: LevelShare | None = None,
    scope_class: str | None = None,
    itl_by_class: Mapping[str, TokenDistribution] | None = None,
) -> VariantSummary:
    """One variant's statistics. ``share``: given when ``acc`` holds one prompt class of a mixed level, whose
    throughput is then its tokens over the level's wall and whose cost is its billed share of that wall
    (``spectrn.analyze.shares``, docs/benchmarks.md); without it the scope's own wall time is used.
    ``scope_class``: the prompt class ``acc`` holds (only the SLOs binding it apply); ``itl_by_class``: each
    class's per-token ITL, for class-scoped ITL percentile SLOs of a pooled scope."""
    seed = st.seed
    ttft, tpot, e2e, thr, out = (_arr(a) for a in (acc.ttft, acc.tpot, acc.e2e, acc.thr, acc.out_tokens))
    itl = acc.itl.stats()
    if itl.n:
        itl.ci95 = clustered_ci([(v, w) for _, _, v, w in acc.itl_sample], seed=seed + 20)
    total_tokens = float(out.sum())
    wall = share.wall_s if share is not None else acc.wall_s / st.time_scale
    aggregate = total_tokens / wall if wall > 0 and total_tokens > 0 else None
    # requests resampled with the time they occupied, not token counts over a fixed wall (spectrn.analyze.throughput)
    agg_ci = aggregate_ci(out, e2e, wall, seed=seed + 40) if aggregate is not None else None
    # what the instance's time bought: the whole wall for a scope of its own, a class's slot share of a mixed one
    spans = decode_spans(ttft, e2e)
    billed = share.billed_s(float(spans.sum())) if share is not None else wall
    bought = total_tokens / billed if billed > 0 and total_tokens > 0 else None
    if share is None:
        bought_ci = agg_ci
    else:
        bought_ci = aggregate_ci(out, spans, billed, seed=seed + 45) if bought is not None else None
    requests = Requests(
        planned=planned,
        completed=acc.completed,
        errors=sum(acc.errors.values()),
        error_rate=sum(acc.errors.values()) / acc.records if acc.records else 0.0,
        error_classes=dict(acc.errors),
        error_examples=dict(acc.examples),
    )
    cost = None
    if bought:
        usd = usd_per_million(st, bought)
        cost_ci = None
        if bought_ci is not None and bought_ci[0] > 0:  # cost falls as throughput rises: the bounds swap
            cost_ci = (usd_per_million(st, bought_ci[1]), usd_per_million(st, bought_ci[0]))
        cost = Cost(
            instance_hourly_usd=st.hourly_usd,
            instances_per_service=st.share,
            usd_per_million_output_tokens=usd,
            usd_per_million_output_tokens_ci95=cost_ci,
            billed_s=billed,
            price_source=st.price_source,
        )
    goodput = slo_summary(acc, st, wall, scope_class=scope_class, itl_by_class=itl_by_class)
    return VariantSummary(
        ttft_s=stats_with_ci(ttft, seed=seed),
        tpot_s=stats_with_ci(tpot, seed=seed + 10),
        itl_s=itl,
        e2e_s=stats_with_ci(e2e, seed=seed + 30),
        chunk_latency_s=acc.chunk.stats(),
        llmperf_itl_s=describe(_arr(acc.llmperf_itl)),
        output_tokens_per_s=Throughput(per_request=describe(thr), aggregate=aggregate, aggregate_ci95=agg_ci),
        output_tokens=describe(out),
        tokens_per_chunk_mean=acc.decode_tokens / acc.decode_chunks if acc.decode_chunks else None,
        token_sources=dict(acc.token_sources),
        requests=requests,
        duration_s=wall,
        acceptance=acceptance,
        goodput=goodput,
        cost=cost,
    )


def slo_summary(
    acc: Accumulator,
    st: Settings,
    wall: float,
    *,
    scope_class: str | None = None,
    itl_by_class: Mapping[str, TokenDistribution] | None = None,
) -> Goodput | None:
    """The scope's SLOs judged and its goodput over ``wall`` (None when the run sets no SLO)."""
    slos = [s for s in st.slos if scope_class is None or s.applies_to(scope_class)]
    if not slos:
        return None

    def itl_quantile(q: float, cls: str | None) -> float | None:
        dist = acc.itl if cls is None or itl_by_class is None else itl_by_class.get(cls)
        return dist.quantile(q) if dist is not None else None

    values = RequestValues(
        ttft_s=_arr(acc.ttft),
        tpot_s=_arr(acc.tpot),
        e2e_s=_arr(acc.e2e),
        itl_max_s=_arr(acc.itl_max),
        output_tokens=_arr(acc.out_tokens),
        prompt_class=acc.classes,
    )
    res = evaluate(slos, values, wall_s=wall, attempted=acc.records, itl_quantile=itl_quantile)
    unscoped = [s for s in res.per_request if s.prompt_class is None]
    return Goodput(
        slo_ttft_s=min((s.threshold_s for s in unscoped if s.metric == "ttft"), default=None),
        slo_tpot_s=min((s.threshold_s for s in unscoped if s.metric == "tpot"), default=None),
        slos=[s.text for s in res.per_request],
        requests_within=res.requests_within,
        fraction=res.share_within,
        requests_per_s=res.goodput_requests_per_s,
        output_tokens_per_s=res.goodput_tokens_per_s,
        checks=[
            SloCheck(
                slo=p.slo.text,
                metric=p.slo.metric,
                percentile=p.slo.percentile or 0.0,
                threshold_s=p.slo.threshold_s,
                prompt_class=p.slo.prompt_class,
                observed_s=p.observed_s,
                met=p.met,
                n=p.n,
            )
            for p in res.percentiles
        ],
        all_met=res.met,
    )


def usd_per_million(st: Settings, tokens_per_s: float) -> float:
    """Instance price x the service's share of it, per million output tokens at ``tokens_per_s``."""
    return st.hourly_usd * st.share / (tokens_per_s * 3600.0) * 1e6
