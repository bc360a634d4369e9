"""``summary.json``: the typed contract between analysis and every reader (report, publish, sweep, compare).

One ``Summary`` per run. Every figure in it is in REAL time: a simulated run made at time scale s is rescaled
by 1/s at analysis, and ``provenance.time_scale`` says so. The JSON Schema generated from these models is
published in ``docs/schemas/summary.schema.json`` (a test keeps it current); ``schema_version`` changes
whenever a reader would have to change.

    Summary
      provenance                 where the numbers come from (runtime, profile, time scale, servers, load shape)
      verdict                    clean? a performance result? with the reasons
      findings[]                 typed warnings: code, severity, message (``error`` = NOT A CLEAN RUN)
      headline[]                 one TPOT speedup per (load level, prompt class), plus the declared mix
      levels[]                   one per load level, in load order
        variants{name: VariantSummary}          all prompt classes pooled
        speedup: Speedups                        baseline / speculative, paired by schedule index
        by_prompt_class{class: ClassSummary}     the same per prompt class
        equivalence                              greedy outputs compared token by token
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from spectrn.intervals import interval_text

SCHEMA_VERSION: Literal[2] = 2

Interval = tuple[float, float]

# An interval whose bounds print alike says nothing about precision: shown as this reason instead of "[x, x]"
Severity = Literal["error", "warning", "note"]


class Contract(BaseModel):
    """Strict: a field this version does not know is an error when read back (``schema_version`` guards)."""

    model_config = ConfigDict(extra="forbid")


class CI95(Contract):
    mean: Interval | None = None
    p50: Interval | None = None


class Stats(Contract):
    """One distribution (seconds for latencies). Quantiles are exact unless ``relative_error`` is set (sketch)."""

    n: int = 0
    mean: float | None = None
    p50: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None
    min: float | None = None
    max: float | None = None
    stddev: float | None = None
    ci95: CI95 | None = Field(default=None, description="Bootstrap 95% intervals of the mean and the median.")
    relative_error: float | None = Field(
        default=None, description="Quantiles come from a sketch with this relative accuracy (None: exact)."
    )


class Throughput(Contract):
    per_request: Stats = Field(description="Output tokens / e2e of each request.")
    aggregate: float | None = Field(default=None, description="All output tokens / (last end - first send).")
    aggregate_ci95: Interval | None = None


class Requests(Contract):
    planned: int | None = Field(default=None, description="Measured requests the plan asked for (None: unknown).")
    completed: int = 0
    errors: int = 0
    error_rate: float = 0.0
    error_classes: dict[str, int] = Field(default_factory=dict)
    error_examples: dict[str, str] = Field(default_factory=dict)


class SloCheck(Contract):
    """One percentile SLO judged on a scope's requests (``spectrn.analyze.slo``)."""

    slo: str = Field(description="The SLO as spectrn spells it, e.g. p90:tpot<=50ms or structured/p99:ttft<=2s.")
    metric: Literal["ttft", "tpot", "itl", "e2e"]
    percentile: float
    threshold_s: float
    prompt_class: str | None = Field(default=None, description="The prompt class it binds (None: every class).")
    observed_s: float | None = Field(default=None, description="The observed percentile (None: no value).")
    met: bool | None = Field(default=None, description="observed <= threshold (None: nothing to judge).")
    n: int = Field(default=0, description="Requests the percentile was taken over.")


class Goodput(Contract):
    """The scope's SLOs: percentile SLOs judged (``checks``) and goodput, the completed requests that meet every
    per-request SLO applying to their prompt class, per second of the scope's wall time (the same wall time as
    the aggregate throughput), and their output tokens per second."""

    slo_ttft_s: float | None = Field(default=None, description="The per-request TTFT limit (bench.slo_ttft_s).")
    slo_tpot_s: float | None = Field(default=None, description="The per-request TPOT limit (bench.slo_tpot_s).")
    slos: list[str] = Field(default_factory=list, description="The per-request SLOs that define goodput.")
    requests_within: int | None = Field(default=None, description="Completed requests meeting every one of them.")
    fraction: float | None = Field(
        default=None, description="requests_within / requests attempted (a failed request misses the target)."
    )
    requests_per_s: float | None = Field(default=None, description="Goodput: requests_within / wall time.")
    output_tokens_per_s: float | None = Field(
        default=None, description="Goodput in tokens: output tokens of those requests / wall time."
    )
    checks: list[SloCheck] = Field(default_factory=list, description="Every percentile SLO binding this scope.")
    all_met: bool | None = Field(
        default=None, description="Every percentile SLO met (None: none given, or one could not be judged)."
    )


class Cost(Contract):
    instance_hourly_usd: float
    instances_per_service: float
    usd_per_million_output_tokens: float | None = None
    usd_per_million_output_tokens_ci95: Interval | None = None
    price_source: str | None = Field(
        default=None,
        description="The hourly price and where it came from: the run's pricing.instance_hourly_usd, or the built-in "
        "on-demand list price with its region, date and source page (docs/neuron.md, Price).",
    )
    billed_s: float | None = Field(
        default=None,
        description="Real seconds of the instance this cost is for: the scope's wall time; for one prompt class of "
        "a mixed level, its share of the level's wall by decode slot-seconds (docs/benchmarks.md).",
    )


class CounterAcceptance(Contract):
    """From the server's spec-decode counters (differences of /metrics snapshots before and after)."""

    kind: Literal["v1 counters", "v0 gauge"] = "v1 counters"
    drafts: float | None = None
    draft_tokens: float | None = None
    accepted_tokens: float | None = None
    rate: float | None = None
    mean_accepted_length: float | None = None
    per_position: list[float] | None = None


class StreamAcceptance(Contract):
    """From the sizes of decode events: one event per engine step carries the accepted prefix plus one token."""

    window: int | None = Field(default=None, description="The speculation window k the figures are read against.")
    semantics: Literal["nxdi", "upstream"] | None = Field(
        default=None, description="nxdi: at most k tokens per step (k-1 proposals); upstream: up to k+1."
    )
    steps: int = Field(default=0, description="Decode events counted (prefill, cut last and coalesced excluded).")
    rate: float | None = Field(default=None, description="Accepted proposals / proposals.")
    rate_ci95: Interval | None = None
    mean_accepted_length: float | None = Field(default=None, description="Tokens per counted step (incl. bonus).")
    mean_accepted_length_ci95: Interval | None = None
    per_position: list[float] = Field(
        default_factory=list, description="P(first i+1 proposals all accepted), i = 0.. proposals-1."
    )
    coalesced_events: int = Field(default=0, description="Events excluded: more tokens than one step can emit.")


class Acceptance(Contract):
    """The headline acceptance: counters where the server fills them, else the stream (Neuron servers)."""

    source: Literal["counters", "stream"] | None = None
    rate: float | None = None
    mean_accepted_length: float | None = None
    per_position: list[float] = Field(default_factory=list)
    stream: StreamAcceptance | None = None
    counters: CounterAcceptance | None = None
    coalesced_events: int = 0
    agreement: str | None = Field(default=None, description="How stream and counters agree, where both exist.")


class VariantSummary(Contract):
    ttft_s: Stats
    tpot_s: Stats
    itl_s: Stats = Field(description="Per-token inter-token latency: a gap g carrying k tokens counts k times g/k.")
    e2e_s: Stats
    chunk_latency_s: Stats = Field(description="Raw gaps between events (one engine step as a client sees it).")
    llmperf_itl_s: Stats = Field(description="llmperf's definition, for reconciliation only.")
    output_tokens_per_s: Throughput
    output_tokens: Stats
    tokens_per_chunk_mean: float | None = None
    token_sources: dict[str, int] = Field(
        default_factory=dict, description="How tokens per event were counted: token_ids, usage, text (requests)."
    )
    requests: Requests
    duration_s: float = 0.0
    acceptance: Acceptance | None = None
    goodput: Goodput | None = None
    cost: Cost | None = None


class Speedup(Contract):
    value: float | None = None
    ci95: Interval | None = None

    def text(self, digits: int = 2) -> str:
        """``2.99x [2.96, 3.11]`` (``n/a`` without a value)."""
        if self.value is None:
            return "n/a"
        return f"{self.value:.{digits}f}x" + interval_text(self.ci95, digits)

    @property
    def verdict(self) -> Literal["faster", "slower", "not significant"] | None:
        """Significant when the interval excludes 1."""
        if self.value is None or self.ci95 is None:
            return None
        lo, hi = self.ci95
        return "faster" if lo > 1.0 else "slower" if hi < 1.0 else "not significant"


class Speedups(Contract):
    """baseline / speculative for latencies (> 1: speculation faster); speculative / baseline for throughput."""

    paired_requests: int = 0
    paired: bool = Field(default=True, description="False: unpaired resampling (llmperf runs name no prompt).")
    tpot_p50: Speedup | None = None
    tpot_mean: Speedup | None = None
    itl_p50: Speedup | None = None
    e2e_p50: Speedup | None = None
    ttft_p50: Speedup | None = None
    throughput: Speedup | None = Field(default=None, description="Mean per-request output tokens/s, spec / base.")
    aggregate_throughput: Speedup | None = Field(
        default=None,
        description="Aggregate output tokens/s, speculative / baseline (for one prompt class of a mixed level: its "
        "tokens over the level's wall). Interval: paired requests resampled with their e2e (docs/benchmarks.md).",
    )
    cost: Speedup | None = Field(
        default=None,
        description="Cost ratio baseline $/M / speculative $/M (> 1: speculation cheaper). For all classes the "
        "aggregate throughput ratio (one price, one wall); for one class of a mixed level, from its billed share "
        "of the wall (docs/benchmarks.md, per-class throughput and cost).",
    )


class ClassSummary(Contract):
    variants: dict[str, VariantSummary] = Field(default_factory=dict)
    speedup: Speedups | None = None


class Divergence(Contract):
    level: str
    index: int
    prompt_id: str
    first_divergence: int


class Equivalence(Contract):
    compared: int = 0
    matched: int = 0
    match_rate: float | None = None
    basis: Literal["token_ids", "text"] = "token_ids"
    divergences: list[Divergence] = Field(default_factory=list)


class Load(Contract):
    """One load level: closed-loop concurrency or open-loop arrival rate."""

    label: str = Field(description="c4 = 4 closed-loop streams; r2 = 2 requests/s Poisson.")
    kind: Literal["closed", "open", "other"] = "other"
    concurrency: int | None = None
    rate: float | None = None

    @classmethod
    def parse(cls, label: str) -> Load:
        if label[:1] == "c" and label[1:].isdigit():
            return cls(label=label, kind="closed", concurrency=int(label[1:]))
        if label[:1] == "r":
            try:
                return cls(label=label, kind="open", rate=float(label[1:]))
            except ValueError:
                pass
        return cls(label=label)

    def sort_key(self) -> tuple[int, float, str]:
        order = {"closed": 0, "open": 1, "other": 2}[self.kind]
        return order, float(self.concurrency or self.rate or 0.0), self.label


class LevelSummary(Contract):
    load: Load
    variants: dict[str, VariantSummary] = Field(default_factory=dict)
    speedup: Speedups | None = Field(default=None, description="All prompt classes pooled (not a headline).")
    by_prompt_class: dict[str, ClassSummary] = Field(default_factory=dict)
    equivalence: Equivalence | None = None

    @property
    def label(self) -> str:
        return self.load.label

    def scopes(self) -> list[tuple[str, ClassSummary]]:
        """``("all", pooled)`` then each prompt class, sorted."""
        pooled = ClassSummary(variants=self.variants, speedup=self.speedup)
        return [("all", pooled), *sorted(self.by_prompt_class.items())]

    def variant_names(self) -> list[str]:
        order = {"baseline": 0, "speculative": 1}
        return sorted(self.variants, key=lambda v: (order.get(v, 2), v))


class Finding(Contract):
    code: str = Field(description="Stable identifier, e.g. error_rate, interrupted, divergence, window_mismatch.")
    severity: Severity
    message: str
    level: str | None = None

    def text(self, *, with_level: bool = False) -> str:
        prefix = "NOT A CLEAN RUN: " if self.severity == "error" else ""
        where = f"[{self.level}] " if self.level and with_level else ""
        return f"{where}{prefix}{self.message}"


class HeadlineItem(Contract):
    level: str
    scope: str = Field(description="A prompt class, or 'mix' for the declared traffic mix.")
    metric: str = "tpot_p50"
    speedup: Speedup
    weight: float | None = Field(default=None, description="The class's weight in the declared mix.")


class ServerIdentity(Contract):
    """What one endpoint is, as far as spectrn could tell (and how it knows)."""

    url: str | None = None
    model: str | None = None
    version: str | None = None
    profile: str | None = Field(default=None, description="Server profile: neuron-fork, vllm-neuron, upstream.")
    draft: str | None = None
    window: int | None = None
    window_semantics: Literal["nxdi", "upstream"] | None = None
    source: str = Field(default="config", description="Where draft and window come from: config, server, unknown.")
    metrics_style: Literal["v0", "v1"] | None = Field(
        default=None,
        description="Which spec-decode metric families the server's /metrics registered before the run: v0 (vLLM "
        "V0, the Neuron fork), v1 (vLLM V1: upstream, vllm-neuron); None: none, or not asked.",
    )
    semantics_source: str | None = Field(
        default=None,
        description="Where window_semantics come from: server (its metric families and whether its spec-decode "
        "counters moved), profile (the simulator spectrn started), config (vllm_dialect, plugin_release).",
    )
    semantics_evidence: str | None = Field(
        default=None, description="The server's signals behind window_semantics, in words."
    )
    scheduling: str | None = Field(
        default=None,
        description="vLLM scheduling mode the service was started with, from the config spectrn rendered (sync "
        "(--no-async-scheduling), async/sync (server default)); None: not a Neuron server spectrn configured.",
    )


class Provenance(Contract):
    runtime: str = Field(
        default="endpoints", description="sim, vllm-cpu, endpoints (servers spectrn did not start), cluster, llmperf."
    )
    started_by_spectrn: bool = False
    profile: str | None = None
    time_scale: float = Field(default=1.0, description="Simulated time scale; figures are rescaled to real time.")
    rescaled: bool = Field(default=False, description="True when figures were divided by time_scale.")
    servers: dict[str, ServerIdentity] = Field(default_factory=dict)
    engine: str = "spectrn"
    load_shape: str | None = Field(default=None, description="How load was applied (schedule, ramp, first wave).")
    instance_type: str | None = None


class Verdict(Contract):
    clean: bool
    performance: bool = Field(description="False: timing means nothing here (CPU vLLM, coalesced streams, ...).")
    reasons: list[str] = Field(default_factory=list, description="Why performance is False.")


class Summary(Contract):
    schema_version: Literal[2] = SCHEMA_VERSION
    run_id: str
    model: str | None = None
    config_label: str = "default"
    provenance: Provenance = Field(default_factory=Provenance)
    verdict: Verdict
    findings: list[Finding] = Field(default_factory=list)
    headline: list[HeadlineItem] = Field(default_factory=list)
    mix: dict[str, float] | None = Field(default=None, description="Declared traffic mix (prompt class -> weight).")
    levels: list[LevelSummary]
    time_range: Interval | None = Field(
        default=None, description="Unix time of the first measured send and the last completion (wall clock)."
    )
    notes: list[str] = Field(default_factory=list)

    @property
    def clean(self) -> bool:
        return self.verdict.clean

    def level(self, label: str | None = None) -> LevelSummary:
        """One load level (the first when ``label`` is None)."""
        if label is None:
            return self.levels[0]
        for lv in self.levels:
            if lv.label == label:
                return lv
        raise KeyError(label)

    def warnings(self) -> list[str]:
        """Every finding but notes, as text (with its load level when the run has several)."""
        multi = len(self.levels) > 1
        return [f.text(with_level=multi) for f in self.findings if f.severity != "note"]

    @property
    def level_labels(self) -> list[str]:
        return [lv.label for lv in self.levels]

    @property
    def variant_names(self) -> list[str]:
        order = {"baseline": 0, "speculative": 1}
        names = {v for lv in self.levels for v in lv.variants}
        return sorted(names, key=lambda v: (order.get(v, 2), v))

    @property
    def prompt_classes(self) -> list[str]:
        return sorted({c for lv in self.levels for c in lv.by_prompt_class})

    @property
    def has_acceptance(self) -> bool:
        return any(vs.acceptance is not None for lv in self.levels for vs in lv.variants.values())
