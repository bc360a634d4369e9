"""Summary parts for the report tests: a distribution and a variant whose figures differ from one another, so a
table or text that shows the wrong figure (the mean for the median, p90 for p99, ITL for TPOT) is caught."""

from __future__ import annotations

from typing import Any

from spectrn.run.summary import Cost, Requests, Stats, Throughput, VariantSummary

PRICE = "spectrn price table (trn2.48xlarge, us-east-1)"
TOKEN_SOURCES = {"usage": 9, "counted": 1}


def stats(p50: float) -> Stats:
    """A distribution whose mean and tail differ from its median."""
    return Stats(n=10, p50=p50, mean=p50 * 2, p90=p50 * 3, p95=p50 * 3.5, p99=p50 * 4)


def variant(
    ttft: float,
    tpot: float,
    itl: float,
    e2e: float,
    tput: float,
    *,
    usd: float | None = None,
    cost: Cost | None = None,
    token_sources: dict[str, int] | None = None,
    **extra: Any,
) -> VariantSummary:
    """One variant: 12 requests planned, 10 completed, 2 errors; 128 output tokens; aggregate 4x per request.
    ``usd``: a cost of that $/M output tokens at half a $4.50/h instance (else ``cost``); ``token_sources`` defaults
    to ``TOKEN_SOURCES``."""
    if usd is not None:
        cost = Cost(
            instance_hourly_usd=4.5, instances_per_service=0.5, usd_per_million_output_tokens=usd, price_source=PRICE
        )  # fmt: skip
    return VariantSummary(
        ttft_s=stats(ttft), tpot_s=stats(tpot), itl_s=stats(itl), e2e_s=stats(e2e),
        chunk_latency_s=stats(itl), llmperf_itl_s=stats(itl),
        output_tokens_per_s=Throughput(per_request=stats(tput), aggregate=tput * 4),
        output_tokens=stats(128), requests=Requests(planned=12, completed=10, errors=2),
        token_sources=dict(TOKEN_SOURCES if token_sources is None else token_sources), cost=cost, **extra,
    )  # fmt: skip
