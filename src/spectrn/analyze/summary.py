"""Request records -> ``Summary`` in one pass with bounded memory (pure, apart from reading the records given).

Each record lands in the accumulator of its (load level, variant, prompt class): one number per request in
compact arrays (TTFT, TPOT, e2e, throughput, output tokens, schedule index), per-token ITL and chunk
latency in sketches (``spectrn.analyze.stats``), a fixed-size sample of requests' ITL for the bootstrap,
decode-event sizes for stream acceptance. Nothing else of a record is kept, so memory grows by about a
hundred bytes per request and a million requests fit on a laptop.

Speedups (baseline / speculative) pair the two variants by schedule index (both got the same prompt at the
same index) and resample indices; the ITL speedup resamples the sampled requests present in both variants.
An llmperf run cannot be paired (its files do not say which prompt each response answered): its speedups
resample each variant on its own and say so.

The headline is one TPOT speedup per load level and prompt class; a figure pooled over classes is only a
headline for a declared traffic mix, weighted by it (a median of a two-peaked mix means nothing).
"""

from __future__ import annotations

import hashlib
import heapq
import math
import sys
import warnings
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spectrn.analyze import metric_table
from spectrn.analyze.acceptance import StreamCounter, combine, counters_from_json, window_contradiction
from spectrn.analyze.metrics import request_metrics
from spectrn.analyze.semantics import choose as choose_semantics
from spectrn.analyze.shares import LevelShare, decode_spans, level_share
from spectrn.analyze.slo import RequestValues, Slo, evaluate, slos_of
from spectrn.analyze.stats import (
    BOOT_MAX_REQUESTS,
    BOOT_RESAMPLES,
    TokenDistribution,
    bootstrap,
    clustered_ci,
    describe,
    paired_median_ratio_ci,
    stats_with_ci,
    subsample,
)
from spectrn.analyze.throughput import aggregate_ci, in_flight, ratio_ci
from spectrn.errors import AnalysisError
from spectrn.labels import ALL_CLASSES, setup_label
from spectrn.run.measured import measured, scheduling_differs
from spectrn.run.records import RequestRecord, RunMeta
from spectrn.run.summary import (
    ClassSummary,
    Cost,
    Divergence,
    Equivalence,
    Finding,
    Goodput,
    HeadlineItem,
    LevelSummary,
    Load,
    Provenance,
    Requests,
    SloCheck,
    Speedup,
    Speedups,
    Summary,
    Throughput,
    VariantSummary,
    Verdict,
)
from spectrn.spec.pricing import price_of

ALL = ALL_CLASSES
MIN_DECODE_EVENTS = 100  # fewer decode events per variant than this: timing is not a performance result
COALESCED_SHARE = 0.05  # more baseline events than this carrying several tokens: the server coalesces steps
MAX_PENDING_OUTPUTS = 20_000  # outputs held while waiting for the other variant's same request
MAX_DIVERGENCES = 100


def pair_key(rec: RequestRecord) -> int:
    """What pairs a baseline record with its speculative twin: the schedule index, and for a later turn of a
    conversation (which shares its index) a key of its own, negative so it never meets a schedule index."""
    return rec.index if not rec.turn or rec.turn == 1 else -(rec.index * MAX_TURNS + rec.turn)


MAX_TURNS = 1024  # above the prompt model's limit on turns per conversation


def _sample_key(index: int, seed: int) -> int:
    """A fixed pseudo-random rank per schedule index: the same requests are sampled in every variant."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=8).digest(), "big")


@dataclass
class Accumulator:
    """Everything kept of the records of one (level, variant, prompt class)."""

    window: int | None
    semantics: Any
    seed: int
    records: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    index: array[int] = field(default_factory=lambda: array("q"))
    ttft: array[float] = field(default_factory=lambda: array("d"))
    tpot: array[float] = field(default_factory=lambda: array("d"))  # NaN when the request had one token
    e2e: array[float] = field(default_factory=lambda: array("d"))
    thr: array[float] = field(default_factory=lambda: array("d"))
    out_tokens: array[float] = field(default_factory=lambda: array("d"))
    llmperf_itl: array[float] = field(default_factory=lambda: array("d"))
    itl_max: array[float] = field(default_factory=lambda: array("d"))  # a request's largest per-token ITL (SLOs)
    classes: list[str] = field(default_factory=list)  # each request's prompt class (interned: one string each)
    itl: TokenDistribution = field(default_factory=TokenDistribution)
    chunk: TokenDistribution = field(default_factory=TokenDistribution)
    itl_sample: list[tuple[int, int, list[float], list[int]]] = field(default_factory=list)  # heap of (-key, ...)
    decode_tokens: int = 0
    decode_chunks: int = 0
    first_send: float = math.inf
    last_end: float = -math.inf
    token_sources: Counter[str] = field(default_factory=Counter)
    token_warnings: int = 0
    token_warning_example: str | None = None
    stream: StreamCounter | None = None

    def __post_init__(self) -> None:
        self.stream = StreamCounter(self.window, self.semantics)

    def add(self, rec: RequestRecord, time_scale: float, max_tokens: int | None) -> None:
        self.records += 1
        if rec.token_warning:
            self.token_warnings += 1
            self.token_warning_example = self.token_warning_example or rec.token_warning
        if not rec.ok:
            cls = rec.error or "error"
            self.errors[cls] += 1
            self.examples.setdefault(cls, (rec.error_msg or "")[:300])
            return
        m = request_metrics(rec, time_scale)
        if m is None:
            return
        self.index.append(pair_key(rec))
        self.ttft.append(m.ttft)
        self.tpot.append(m.tpot if m.tpot is not None else math.nan)
        self.e2e.append(m.e2e)
        self.thr.append(m.throughput_tok_s)
        self.out_tokens.append(float(m.output_tokens))
        self.llmperf_itl.append(m.llmperf_itl if m.llmperf_itl is not None else math.nan)
        values, weights = m.itl_values
        self.itl_max.append(max(values) if values else math.nan)
        self.classes.append(sys.intern(rec.prompt_class))
        self.itl.add(values, weights)
        self.chunk.add(list(m.gaps))
        if values:
            item = (-_sample_key(pair_key(rec), self.seed), pair_key(rec), values, weights)
            if len(self.itl_sample) < BOOT_MAX_REQUESTS:
                heapq.heappush(self.itl_sample, item)
            elif item > self.itl_sample[0]:
                heapq.heapreplace(self.itl_sample, item)
        self.decode_tokens += m.decode_tokens
        self.decode_chunks += m.decode_chunks
        self.first_send = min(self.first_send, rec.sent_at)
        self.last_end = max(self.last_end, rec.sent_at + m.e2e * time_scale)  # wall clock, as sent
        self.token_sources[rec.token_source] += 1
        if self.stream is not None and rec.chunk_tokens:
            # the last step is cut short at max_tokens, and at EOS too (the window's tokens after it are dropped)
            cut = rec.finish_reason in ("length", "stop") or (max_tokens is not None and m.output_tokens >= max_tokens)
            self.stream.add(rec.chunk_tokens, cut_at_max_tokens=cut)

    def merge(self, other: Accumulator) -> None:
        self.records += other.records
        self.errors.update(other.errors)
        for k, v in other.examples.items():
            self.examples.setdefault(k, v)
        for name in ("index", "ttft", "tpot", "e2e", "thr", "out_tokens", "llmperf_itl", "itl_max", "classes"):
            getattr(self, name).extend(getattr(other, name))
        self.itl.merge(other.itl)
        self.chunk.merge(other.chunk)
        for item in other.itl_sample:
            if len(self.itl_sample) < BOOT_MAX_REQUESTS:
                heapq.heappush(self.itl_sample, item)
            elif item > self.itl_sample[0]:
                heapq.heapreplace(self.itl_sample, item)
        self.decode_tokens += other.decode_tokens
        self.decode_chunks += other.decode_chunks
        self.first_send = min(self.first_send, other.first_send)
        self.last_end = max(self.last_end, other.last_end)
        self.token_sources.update(other.token_sources)
        self.token_warnings += other.token_warnings
        self.token_warning_example = self.token_warning_example or other.token_warning_example
        if self.stream is not None and other.stream is not None:
            self.stream.merge(other.stream)

    @property
    def completed(self) -> int:
        return len(self.index)

    @property
    def wall_s(self) -> float:
        return max(self.last_end - self.first_send, 0.0) if self.completed else 0.0


@dataclass
class Settings:
    """What analysis needs from the run's configuration (typed, with the config's own defaults)."""

    hourly_usd: float
    share: float
    max_error_rate: float
    slo_ttft_s: float | None
    slo_tpot_s: float | None
    window: int | None
    semantics: Any
    time_scale: float
    max_tokens: int | None
    paired: bool
    seed: int = 0
    slos: tuple[Slo, ...] = ()
    price_source: str | None = None  # the price and where it came from (spectrn.spec.pricing)

    @classmethod
    def of(cls, meta: RunMeta, seed: int = 0, acceptance: Mapping[str, Any] | None = None) -> Settings:
        from spectrn.spec.catalog import INSTANCES

        cfg = meta.config
        inst = INSTANCES.get(cfg.instance_type)
        catalog = inst.hourly_usd if inst else INSTANCES["trn2.48xlarge"].hourly_usd
        # a recorded config is read leniently: a region without a built-in price falls back to the built-in one
        price = price_of(cfg.instance_type, cfg.pricing.instance_hourly_usd, cfg.pricing.region, catalog) or price_of(
            cfg.instance_type, None, None, catalog
        )
        assert price is not None  # the built-in region always has a built-in price
        hourly = price.hourly_usd
        prov = meta.provenance
        spec_server = prov.servers.get("speculative")
        if spec_server is not None and spec_server.window:
            window: int | None = spec_server.window
        elif spec_server is not None and spec_server.source == "unknown":
            window = None  # a server spectrn did not start, whose window nobody knows: read the stream as observed
        else:
            window = cfg.num_speculative_tokens
        # the server's own signals (metric families, whether they moved) first, then the profile or the config
        semantics = choose_semantics(meta, acceptance).semantics
        return cls(
            hourly_usd=float(hourly),
            price_source=price.text(),
            share=float(cfg.pricing.instances_per_service),
            max_error_rate=float(cfg.bench.max_error_rate),
            slo_ttft_s=cfg.bench.slo_ttft_s,
            slo_tpot_s=cfg.bench.slo_tpot_s,
            window=window,
            semantics=semantics,
            time_scale=prov.time_scale if prov.time_scale > 0 else 1.0,
            max_tokens=meta.max_tokens or cfg.bench.max_tokens,
            paired=meta.engine != "llmperf",
            seed=seed,
            slos=slos_of(cfg.bench.slo, cfg.bench.slo_ttft_s, cfg.bench.slo_tpot_s),
        )


# ---- one variant ---------------------------------------------------------------------------------------


def _arr(a: array[float]) -> Any:
    import numpy as np

    return np.frombuffer(a, dtype=float) if len(a) else np.zeros(0)


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


# ---- A/B -------------------------------------------------------------------------------------------------


def speedups(
    base: Accumulator,
    spec: Accumulator,
    *,
    paired: bool = True,
    seed: int = 0,
    walls: tuple[float, float] | None = None,
    bills: tuple[float, float] | None = None,
) -> Speedups:
    """baseline / speculative for latencies (> 1 = speculation faster), speculative / baseline for throughput.

    ``walls``: each variant's wall time in real seconds (``VariantSummary.duration_s``), for the aggregate
    throughput ratio; without them that ratio is left out. ``bills``: each variant's billed seconds
    (``Cost.billed_s``) when they differ from the walls (a class of a mixed level), for the cost ratio; without
    them the cost ratio is the aggregate throughput ratio (one price, one wall)."""
    import numpy as np

    bi, si = np.frombuffer(base.index, dtype=np.int64), np.frombuffer(spec.index, dtype=np.int64)
    if paired:
        _, pb, ps = np.intersect1d(bi, si, assume_unique=False, return_indices=True)
    else:
        pb, ps = np.arange(bi.size), np.arange(si.size)
    out = Speedups(paired_requests=int(pb.size) if paired else 0, paired=paired)
    if pb.size == 0 or ps.size == 0:
        return out

    def col(acc: Accumulator, name: str, pick: Any) -> Any:
        return _arr(getattr(acc, name))[pick]

    # the paired speedups the metric table declares: each pairs one accumulator column, each with its own seed
    declared = [(m, sd) for m, sd in metric_table.speedups() if sd.column is not None]
    pairs = {str(sd.column): (col(base, str(sd.column), pb), col(spec, str(sd.column), ps)) for _, sd in declared}
    if paired:
        sel = subsample(pb.size, seed)
        pairs = {k: (x[sel], y[sel]) for k, (x, y) in pairs.items()}

    def paired_stat(f: Callable[..., Any], num: Any, den: Any) -> Callable[[Any], Any]:
        return lambda i: f(num[i], axis=-1) / f(den[i], axis=-1)

    def unpaired_stat(f: Callable[..., Any], num: Any, den: Any) -> Callable[[Any], Any]:
        gen = np.random.default_rng(seed + 99)

        def stat(rows: Any) -> Any:  # rows: the (resamples x n) index matrix of a vectorized bootstrap
            a = num[gen.integers(0, num.size, (rows.shape[0], num.size))]
            b = den[gen.integers(0, den.size, (rows.shape[0], den.size))]
            return f(a, axis=-1) / f(b, axis=-1)

        return stat

    specs: dict[str, tuple[int, Callable[..., Any], Any, Any]] = {}
    for m, sd in declared:
        b_col, s_col = pairs[str(sd.column)]
        # latencies: baseline / speculative; higher-is-better metrics: speculative / baseline (> 1: speculation helps)
        num_col, den_col = (s_col, b_col) if m.better == "higher" else (b_col, s_col)
        specs[sd.field] = (sd.seed, np.nanmedian if sd.center == "median" else np.nanmean, num_col, den_col)
    with warnings.catch_warnings():
        # numpy's divide / invalid / all-NaN warnings: all-NaN resamples (no TPOT) give NaN, dropped
        warnings.simplefilter("ignore", RuntimeWarning)
        for name, (k, f, num, den) in specs.items():
            value = float(f(num) / f(den))
            fn = paired_stat(f, num, den) if paired else unpaired_stat(f, num, den)
            n = max(num.size, den.size)  # paired: the same size
            ci = bootstrap(fn, n, seed=seed + 100 + k, resamples=BOOT_RESAMPLES, vectorized=True)
            setattr(out, name, Speedup(value=value if math.isfinite(value) else None, ci95=ci))
        out.itl_p50 = _itl_speedup(base, spec, paired=paired, seed=seed + 110)
    if walls is not None:
        out.aggregate_throughput = _aggregate_speedup(base, spec, walls, (pb, ps) if paired else None, seed + 120)
        out.cost = out.aggregate_throughput
    if bills is not None:
        out.cost = _aggregate_speedup(base, spec, bills, (pb, ps) if paired else None, seed + 130, spans=True)
    return out


def _aggregate_speedup(
    base: Accumulator,
    spec: Accumulator,
    walls: tuple[float, float],
    pairs: Any,
    seed: int,
    spans: bool = False,
) -> Speedup | None:
    """Aggregate throughput speculative / baseline: the point from all requests (each variant's tokens / wall);
    the interval resamples the paired requests with their e2e (``spectrn.analyze.throughput``). ``spans``: the
    requests' time is their decode slot time and ``walls`` the billed seconds (a class's cost ratio)."""
    wb, ws = walls
    tb, ts = _arr(base.out_tokens), _arr(spec.out_tokens)
    if spans:
        eb, es = decode_spans(_arr(base.ttft), _arr(base.e2e)), decode_spans(_arr(spec.ttft), _arr(spec.e2e))
    else:
        eb, es = _arr(base.e2e), _arr(spec.e2e)
    if wb <= 0 or ws <= 0 or tb.sum() <= 0:
        return None
    value = (float(ts.sum()) / ws) / (float(tb.sum()) / wb)
    # L (the load in flight) comes from all of a variant's requests; the resampled units are the pairs
    lb, ls = in_flight(eb, wb), in_flight(es, ws)
    if pairs is not None:
        pb, ps = pairs
        num, den = (ts[ps], es[ps], ls), (tb[pb], eb[pb], lb)
    else:
        num, den = (ts, es, ls), (tb, eb, lb)
    return Speedup(value=value, ci95=ratio_ci(num, den, paired=pairs is not None, seed=seed))


def _bills(cs: ClassSummary) -> tuple[float, float] | None:
    """The billed seconds of a class's baseline and speculative (None: either has no cost)."""
    b, s = cs.variants["baseline"].cost, cs.variants["speculative"].cost
    if b is None or s is None or b.billed_s is None or s.billed_s is None:
        return None
    return b.billed_s, s.billed_s


def _itl_speedup(base: Accumulator, spec: Accumulator, *, paired: bool, seed: int) -> Speedup | None:
    pb, ps = base.itl.stats().p50, spec.itl.stats().p50
    if not pb or not ps:
        return None
    value = pb / ps
    if not paired:
        return Speedup(value=value)
    sb = {idx: (v, w) for _, idx, v, w in base.itl_sample}
    ss = {idx: (v, w) for _, idx, v, w in spec.itl_sample}
    common = sorted(set(sb) & set(ss))
    if len(common) < 2:
        return Speedup(value=value)
    ci = paired_median_ratio_ci([sb[i] for i in common], [ss[i] for i in common], seed=seed)
    return Speedup(value=value, ci95=ci)


class OutputComparer:
    """Greedy outputs of baseline and speculative at the same (level, index), compared token by token.

    Holds an output only until the other variant's one arrives (a run's variants finish the same request
    close together), so memory stays bounded by the requests in flight."""

    def __init__(self) -> None:
        self.pending: dict[tuple[str, int], tuple[str, str, Any]] = {}
        self.compared = 0
        self.matched = 0
        self.basis = "token_ids"
        self.divergences: list[Divergence] = []

    def add(self, rec: RequestRecord) -> None:
        if not rec.ok or rec.variant not in ("baseline", "speculative"):
            return
        out: Any = rec.output_token_ids if rec.output_token_ids is not None else rec.output_text
        if out is None:
            return
        kind = "token_ids" if rec.output_token_ids is not None else "text"
        key = (rec.level, pair_key(rec))
        other = self.pending.get(key)
        if other is None or other[0] == rec.variant:
            if len(self.pending) < MAX_PENDING_OUTPUTS:
                self.pending[key] = (rec.variant, kind, out)
            return
        del self.pending[key]
        if other[1] != kind:  # one side has no token ids: compare texts only when both have them
            return
        if kind == "text":
            self.basis = "text"
        self.compared += 1
        a, b = list(other[2]), list(out)
        if a == b:
            self.matched += 1
            return
        if len(self.divergences) < MAX_DIVERGENCES:
            first = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
            self.divergences.append(
                Divergence(level=rec.level, index=rec.index, prompt_id=rec.prompt_id, first_divergence=first)
            )

    def result(self, level: str) -> Equivalence | None:
        divs = [d for d in self.divergences if d.level == level]
        return Equivalence(
            compared=self.compared,
            matched=self.matched,
            match_rate=self.matched / self.compared if self.compared else None,
            basis="text" if self.basis == "text" else "token_ids",
            divergences=divs,
        )


# ---- whole run -------------------------------------------------------------------------------------------


def mix_speedup(parts: Iterable[tuple[float, float, Speedup]]) -> Speedup | None:
    """TPOT speedup of a traffic mix: the mix's time per token is sum_c w_c B_c, so its speedup is
    sum_c w_c B_c / sum_c w_c B_c / S_c (B_c baseline TPOT, S_c speedup, w_c normalised). The interval
    comes from the per-class intervals by the delta method on log scale (classes are disjoint request sets)."""
    rows = [(w, b, s) for w, b, s in parts if w > 0 and b > 0 and s.value]
    if not rows:
        return None
    wsum = sum(w for w, _, _ in rows)
    num = sum(w / wsum * b for w, b, _ in rows)
    den = sum(w / wsum * b / (s.value or 1.0) for w, b, s in rows)
    value = num / den
    var = 0.0
    for w, b, s in rows:
        if s.ci95 is None or s.ci95[0] <= 0 or not s.value:
            return Speedup(value=value)
        se = (math.log(s.ci95[1]) - math.log(s.ci95[0])) / (2 * 1.96)
        share = (w / wsum * b / s.value) / den  # d log(mix) / d log(S_c)
        var += (share * se) ** 2
    half = 1.96 * math.sqrt(var)
    return Speedup(value=value, ci95=(value * math.exp(-half), value * math.exp(half)))


def accumulate(
    records: Iterable[RequestRecord], st: Settings, comparer: OutputComparer | None = None
) -> dict[tuple[str, str, str], Accumulator]:
    """One pass over the measured records: an ``Accumulator`` per (level, variant, prompt class)."""
    accs: dict[tuple[str, str, str], Accumulator] = {}
    for rec in records:
        if rec.warmup:
            continue
        key = (rec.level, rec.variant, rec.prompt_class)
        acc = accs.get(key)
        if acc is None:
            window = st.window if rec.variant != "baseline" else 1
            semantics = st.semantics if window != 1 else "nxdi"
            acc = accs[key] = Accumulator(window=window, semantics=semantics, seed=st.seed)
        acc.add(rec, st.time_scale, st.max_tokens)
        if comparer is not None:
            comparer.add(rec)
    return accs


def summarize(
    records: Iterable[RequestRecord],
    meta: RunMeta,
    *,
    acceptance: Mapping[str, Any] | None = None,
    mix: Mapping[str, float] | None = None,
    seed: int = 0,
) -> Summary:
    """The run's ``Summary`` from its records (one pass) and its counter deltas (``acceptance.json``)."""
    st = Settings.of(meta, seed, acceptance)
    comparer = OutputComparer()
    accs = accumulate(records, st, comparer)
    if not accs:
        raise AnalysisError(
            f"run {meta.run_id} has no measured requests", hint="the run was interrupted before any request finished"
        )
    counters = acceptance or {}
    levels = sorted({k[0] for k in accs}, key=lambda lv: Load.parse(lv).sort_key())
    findings: list[Finding] = []
    level_summaries = [_level(lv, accs, st, meta, counters, comparer, findings, seed) for lv in levels]
    if meta.interrupted:
        findings.append(
            Finding(code="interrupted", severity="error", message="the run was interrupted; statistics cover "
                    "the requests that finished")
        )  # fmt: skip
    elif meta.finished_at is None:
        findings.append(
            Finding(
                code="unfinished",
                severity="error",
                message="the run never finished (run.json has no end time: the load generator was killed or is "
                "still running); statistics cover the requests that finished",
            )
        )
    for note in meta.notes:
        if note.startswith("wall clock stepped"):  # written by the load generator (loadgen/clock.py)
            findings.append(Finding(code="wall_clock_step", severity="warning", message=note))
    changed = [n for n in meta.read_notes if n.startswith("run.json ") and ": " in n]
    if changed:
        findings.append(
            Finding(
                code="recorded_config",
                severity="warning",
                message="this run was recorded by another spectrn version; read as history: " + "; ".join(changed),
            )
        )
    provenance = meta.provenance.model_copy(
        update={"rescaled": st.time_scale != 1.0, "engine": meta.engine, "load_shape": load_shape_text(meta)}
    )
    provenance = _with_semantics(provenance, meta, acceptance, findings)
    contradiction = measured(meta.config, provenance).finding()
    if contradiction:  # what the run measured is not what its config says: first, before any figure is read
        findings.insert(0, Finding(code="config_contradiction", severity="warning", message=contradiction))
    stack = _stack_notice(meta, provenance)
    if stack:
        findings.append(Finding(code="unsupported_stack", severity="warning", message=stack))
    scheduling = scheduling_differs(provenance)
    if scheduling:
        findings.append(Finding(code="scheduling_differs", severity="warning", message=scheduling))
    if st.time_scale != 1.0:
        findings.append(
            Finding(
                code="time_scale",
                severity="note",
                message=f"simulated at time scale {st.time_scale:g}: every figure is rescaled to real time "
                f"(durations divided by {st.time_scale:g})",
            )
        )
    verdict = _verdict(provenance, level_summaries, findings)
    sends = [a.first_send for a in accs.values() if a.completed]
    ends = [a.last_end for a in accs.values() if a.completed]
    headline = _headline(level_summaries, mix)
    return Summary(
        run_id=meta.run_id,
        model=meta.model,
        config_label=config_label(meta),
        provenance=provenance,
        verdict=verdict,
        findings=findings,
        headline=headline,
        mix=dict(mix) if mix else None,
        levels=level_summaries,
        time_range=(min(sends), max(ends)) if sends else None,
        notes=[*meta.notes, *meta.read_notes],
    )


def _with_semantics(
    prov: Provenance, meta: RunMeta, acceptance: Mapping[str, Any] | None, findings: list[Finding]
) -> Provenance:
    """The speculative server's identity with the semantics the figures use and why; a finding when the server's
    signals contradict the config or profile (docs/neuron.md)."""
    spec = prov.servers.get("speculative")
    if spec is None:
        return prov
    choice = choose_semantics(meta, acceptance)
    if choice.conflict:
        findings.append(Finding(code="window_semantics", severity="warning", message=choice.conflict))
    update = {"window_semantics": choice.semantics, "semantics_source": choice.source}
    if choice.evidence:
        update["semantics_evidence"] = choice.evidence
    return prov.model_copy(update={"servers": {**prov.servers, "speculative": spec.model_copy(update=update)}})


def _stack_notice(meta: RunMeta, prov: Provenance) -> str | None:
    """UNSUPPORTED STACK when the servers ran the Neuron fork of vLLM V0 (docs/neuron.md): their metric
    families say so when recorded, else the recorded config's dialect."""
    from spectrn.spec.stacks import run_stack_notice

    if prov.runtime == "vllm-cpu":
        return None  # spectrn started upstream vLLM on CPU itself: whatever the dialect says, no fork ran
    server = prov.servers.get("speculative") or prov.servers.get("baseline")
    style = server.metrics_style if server else None
    return run_stack_notice(meta.config.vllm_dialect, meta.config.speculation_mode, style)


def load_shape_text(meta: RunMeta) -> str | None:
    """How load was applied, per level, in one line (run.json's ``load_shape``)."""
    parts = [shape.text(lv) for lv, shape in meta.load_shape.items()]
    return "; ".join(parts) or meta.provenance.load_shape


def config_label(meta: RunMeta) -> str:
    """``<draft>/k<window>`` (``medusa/k<window>`` for Medusa): one value naming the speculative setup, as
    measured (``spectrn.run.measured``: the server's own values where spectrn learnt them)."""
    m = measured(meta.config, meta.provenance)
    draft = "medusa" if meta.config.speculation_mode == "medusa" else m.draft
    return setup_label(draft or "unknown", m.window, sep="/")


def _level(
    lv: str,
    accs: dict[tuple[str, str, str], Accumulator],
    st: Settings,
    meta: RunMeta,
    counters: Mapping[str, Any],
    comparer: OutputComparer,
    findings: list[Finding],
    seed: int,
) -> LevelSummary:
    keys = [k for k in accs if k[0] == lv]
    order = {"baseline": 0, "speculative": 1}
    variants = sorted({k[1] for k in keys}, key=lambda v: (order.get(v, 2), v))
    classes = sorted({k[2] for k in keys})
    pooled: dict[str, Accumulator] = {}
    for v in variants:
        like = accs[next((lv, v, c) for c in classes if (lv, v, c) in accs)]  # a class may lack this variant
        acc = Accumulator(window=like.window, semantics=like.semantics, seed=seed)
        for c in classes:
            if (lv, v, c) in accs:
                acc.merge(accs[(lv, v, c)])
        pooled[v] = acc

    def acceptance_of(acc: Accumulator, v: str, with_counters: bool) -> Any:
        if v == "baseline" or acc.stream is None:
            return None
        stream = acc.stream.result(seed=seed + 50)
        raw = counters.get(f"{v}@{lv}", counters.get(v)) if with_counters else None
        return combine(stream, counters_from_json(raw))

    out = LevelSummary(load=Load.parse(lv))
    for v in variants:
        planned = meta.planned.get(v, {}).get(lv)
        by_class = {c: accs[(lv, v, c)].itl for c in classes if (lv, v, c) in accs}
        out.variants[v] = variant_summary(
            pooled[v], st, planned=planned, acceptance=acceptance_of(pooled[v], v, True), itl_by_class=by_class
        )
    # a class of a mixed level has no wall of its own: its figures are shares of the level's (analyze/shares.py)
    shares = {
        v: level_share(_arr(pooled[v].ttft), _arr(pooled[v].e2e), out.variants[v].duration_s) for v in variants
    } if len(classes) > 1 else {}  # fmt: skip
    for c in classes:
        cs = ClassSummary()
        for v in variants:
            if (lv, v, c) in accs:
                a = accs[(lv, v, c)]
                cs.variants[v] = variant_summary(
                    a, st, planned=None, acceptance=acceptance_of(a, v, False), share=shares.get(v), scope_class=c,
                )  # fmt: skip
        if (lv, "baseline", c) in accs and (lv, "speculative", c) in accs:
            cs.speedup = speedups(
                accs[(lv, "baseline", c)], accs[(lv, "speculative", c)], paired=st.paired, seed=seed,
                walls=(cs.variants["baseline"].duration_s, cs.variants["speculative"].duration_s),
                bills=_bills(cs) if shares else None,
            )  # fmt: skip
        out.by_prompt_class[c] = cs
    if "baseline" in pooled and "speculative" in pooled:
        out.speedup = speedups(
            pooled["baseline"], pooled["speculative"], paired=st.paired, seed=seed,
            walls=(out.variants["baseline"].duration_s, out.variants["speculative"].duration_s),
        )  # fmt: skip
        out.equivalence = comparer.result(lv)
        eq = out.equivalence
        if eq is not None and eq.compared and eq.matched < eq.compared:
            first = eq.divergences[0].index if eq.divergences else "?"
            findings.append(
                Finding(
                    code="divergence",
                    severity="warning",
                    level=lv,
                    message=f"OUTPUT DIVERGENCE: {eq.compared - eq.matched} of {eq.compared} greedy outputs differ "
                    f"between baseline and speculative (first at index {first})",
                )
            )
    _level_findings(lv, out, st, findings)
    for v in variants:
        if pooled[v].token_warnings:
            findings.append(
                Finding(
                    code="token_mismatch",
                    severity="warning",
                    level=lv,
                    message=f"{v}: {pooled[v].token_warnings} request(s) where the server's token_ids and usage "
                    f"disagree (token_ids counted), e.g. {pooled[v].token_warning_example}",
                )
            )
    return out


def _level_findings(lv: str, out: LevelSummary, st: Settings, findings: list[Finding]) -> None:
    for v, vs in out.variants.items():
        rq = vs.requests
        if rq.error_rate > st.max_error_rate:
            findings.append(
                Finding(
                    code="error_rate",
                    severity="error",
                    level=lv,
                    message=f"{v} error rate {rq.error_rate:.1%} exceeds {st.max_error_rate:.0%} "
                    f"({rq.errors} failed: {rq.error_classes})",
                )
            )
        if rq.completed == 0:
            findings.append(
                Finding(code="no_success", severity="error", level=lv, message=f"{v} has no successful request")
            )
        if rq.planned is not None and rq.completed + rq.errors < rq.planned:
            findings.append(
                Finding(
                    code="incomplete",
                    severity="error",
                    level=lv,
                    message=f"{v} finished {rq.completed + rq.errors} of {rq.planned} planned requests (the run "
                    "stopped part-way)",
                )
            )
        if rq.planned is not None and rq.completed + rq.errors > rq.planned:
            findings.append(
                Finding(
                    code="duplicates",
                    severity="error",
                    level=lv,
                    message=f"{v} has {rq.completed + rq.errors} records for {rq.planned} planned requests (two runs "
                    "wrote into one folder?)",
                )
            )
        if vs.token_sources.get("text"):
            findings.append(
                Finding(
                    code="tokens_estimated",
                    severity="warning",
                    level=lv,
                    message=f"{v}: the server gave neither token ids nor cumulative usage for "
                    f"{vs.token_sources['text']} request(s): tokens per event were apportioned from text, so event "
                    "sizes (and stream acceptance) are estimates",
                )
            )
        acc = vs.acceptance
        if st.window is None and acc is not None and acc.stream is not None and acc.stream.steps:
            seen = len(acc.stream.per_position) + 1
            findings.append(
                Finding(
                    code="window_unknown",
                    severity="warning",
                    level=lv,
                    message=f"WINDOW UNKNOWN: {v}'s server did not say its speculation window and none was declared; "
                    f"its largest step carried {seen} tokens, so acceptance is read as observed (pass --draft and "
                    "--window to read it against the server's real window)",
                )
            )
        if acc is not None and acc.agreement and "DISAGREE" in acc.agreement:
            findings.append(
                Finding(code="acceptance_disagree", severity="warning", level=lv, message=f"{v}: {acc.agreement}")
            )
        if acc is not None and acc.stream is not None:
            problem = window_contradiction(acc.stream, st.window, st.semantics)
            if problem:
                findings.append(
                    Finding(code="window_mismatch", severity="warning", level=lv, message=f"WINDOW: {v}: {problem}")
                )


def _verdict(provenance: Provenance, levels: list[LevelSummary], findings: list[Finding]) -> Verdict:
    reasons: list[str] = []
    if provenance.runtime == "vllm-cpu":
        reasons.append("real vLLM on CPU with tiny models: a correctness check, not a Trainium performance result")
    for lv in levels:
        base = lv.variants.get("baseline")
        if base is not None:
            events = base.tokens_per_chunk_mean
            if events is not None and events > 1.0 + COALESCED_SHARE:
                reasons.append(
                    f"[{lv.label}] the baseline server delivers {events:.2f} tokens per event without speculation: "
                    "it coalesces steps, so event timing does not show engine steps"
                )
        for v, vs in lv.variants.items():
            decode_events = vs.chunk_latency_s.n
            if vs.requests.completed and decode_events < MIN_DECODE_EVENTS:
                reasons.append(f"[{lv.label}] {v}: only {decode_events} decode events (fewer than {MIN_DECODE_EVENTS})")
    if reasons:
        findings.append(
            Finding(
                code="not_performance", severity="warning", message="NOT A PERFORMANCE RESULT: " + "; ".join(reasons)
            )
        )
    clean = not any(f.severity == "error" for f in findings)
    return Verdict(clean=clean, performance=not reasons, reasons=reasons)


def _headline(levels: list[LevelSummary], mix: Mapping[str, float] | None) -> list[HeadlineItem]:
    out: list[HeadlineItem] = []
    for lv in levels:
        for cls, cs in sorted(lv.by_prompt_class.items()):
            if cs.speedup is not None and cs.speedup.tpot_p50 is not None:
                out.append(HeadlineItem(level=lv.label, scope=cls, speedup=cs.speedup.tpot_p50))
        if mix:
            parts = []
            for cls, w in mix.items():
                part = lv.by_prompt_class.get(cls)
                base = part.variants.get("baseline") if part else None
                if part is None or base is None or part.speedup is None or part.speedup.tpot_p50 is None:
                    continue
                parts.append((float(w), base.tpot_s.p50 or 0.0, part.speedup.tpot_p50))
            sp = mix_speedup(parts)
            if sp is not None:
                out.append(HeadlineItem(level=lv.label, scope="mix", speedup=sp))
    return out
