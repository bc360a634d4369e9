"""One request's record -> its metrics (pure).

Definitions (per successful, non-warm-up request with n output tokens):
- TTFT: send -> first token-bearing event.
- TPOT = (e2e - TTFT) / (n - 1)   (as inference-perf and vLLM's bench define it).
- per-token ITL: for each event after the first, a gap g carrying k tokens counts as k gaps of g / k,
  so a speculative step that emits 5 tokens after 50 ms contributes five 10 ms samples.
- chunk latency: the raw gap between consecutive events (what one engine step looks like to a client).
- llmperf-compatible ITL: (TTFT + sum of event gaps) / number of events, i.e. last event time / events:
  llmperf's definition, wrong under speculation (it divides by events, not tokens, and includes TTFT).
  Reported only for reconciliation with published numbers, always labelled as such.
- output throughput per request: n / e2e.

Each request uses its own n, so the figures hold when output lengths differ (natural ends, ``ignore_eos`` off):
percentiles of TPOT, e2e and per-request throughput count each request once whatever its length, while the
per-token ITL and the aggregate throughput (total tokens / wall time, ``spectrn.analyze.variant``) count each
token once (docs/benchmarks.md, "Natural output lengths").

``time_scale``: a simulated run at time scale s ran s times real time; every duration is divided by s so that
the figures are the real-time ones (throughput multiplied by s).
"""

from __future__ import annotations

from dataclasses import dataclass

from spectrn.run.records import RequestRecord


@dataclass(frozen=True)
class RequestMetrics:
    index: int
    variant: str
    prompt_class: str
    level: str
    ttft: float
    e2e: float
    tpot: float | None
    gaps: tuple[float, ...]  # event gaps after the first event
    gap_tokens: tuple[int, ...]  # tokens carried by the event closing each gap
    output_tokens: int
    throughput_tok_s: float
    llmperf_itl: float | None
    decode_tokens: int
    decode_chunks: int

    @property
    def itls(self) -> list[float]:
        """Per-token ITL samples (a gap g carrying k tokens gives k samples of g / k)."""
        out: list[float] = []
        for g, k in zip(self.gaps, self.gap_tokens, strict=True):
            if k > 0:
                out.extend([g / k] * k)
        return out

    @property
    def itl_values(self) -> tuple[list[float], list[int]]:
        """Per-token ITL as (value, weight) pairs: one per event, weighted by its tokens."""
        pairs = [(g / k, k) for g, k in zip(self.gaps, self.gap_tokens, strict=True) if k > 0]
        return [p[0] for p in pairs], [p[1] for p in pairs]

    @property
    def chunk_latencies(self) -> list[float]:
        return list(self.gaps)

    @property
    def tokens_per_decode_chunk(self) -> float | None:
        return self.decode_tokens / self.decode_chunks if self.decode_chunks else None


def request_metrics(rec: RequestRecord, time_scale: float = 1.0) -> RequestMetrics | None:
    """Per-request metrics in real time, or None for a failed request or one without tokens."""
    if not rec.ok or rec.ttft is None or rec.e2e is None:
        return None
    n = rec.output_tokens
    if n <= 0:
        return None
    scale = 1.0 / time_scale if time_scale > 0 else 1.0
    times, toks = rec.chunk_times, rec.chunk_tokens
    if not times and rec.llmperf_itl is None:
        return None
    gaps = tuple((times[i] - times[i - 1]) * scale for i in range(1, len(times)))
    gap_tokens = tuple(toks[i] if i < len(toks) else 1 for i in range(1, len(times)))
    ttft, e2e = rec.ttft * scale, rec.e2e * scale
    if times:
        llmperf_itl: float | None = times[-1] * scale / len(times)
    else:  # an ingested llmperf response: its own ITL figure, no event times
        llmperf_itl = rec.llmperf_itl * scale if rec.llmperf_itl is not None else None
    return RequestMetrics(
        index=rec.index,
        variant=rec.variant,
        prompt_class=rec.prompt_class,
        level=rec.level,
        ttft=ttft,
        e2e=e2e,
        tpot=(e2e - ttft) / (n - 1) if n > 1 else None,
        gaps=gaps,
        gap_tokens=gap_tokens,
        output_tokens=n,
        throughput_tok_s=n / e2e if e2e > 0 else 0.0,
        llmperf_itl=llmperf_itl,
        decode_tokens=sum(gap_tokens),
        decode_chunks=len(gap_tokens),
    )
