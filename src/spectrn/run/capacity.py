"""``capacity.json``: the typed result of ``spectrn capacity`` (capacity and cost at an SLO, per variant).

Every figure is in real time and per load level as the load generator applied it; "per instance" divides a
service's figure by ``pricing.instances_per_service`` (the share of one instance a service uses), so it is what
one whole instance carries. Each probe is a normal run folder under ``probes/`` (``spectrn report`` reads it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from spectrn.run.summary import Contract, Interval, SloCheck

CAPACITY_SCHEMA_VERSION: Literal[1] = 1


class Estimate(Contract):
    value: float | None = None
    ci95: Interval | None = Field(default=None, description="95% bootstrap interval (None: too few requests).")


class ProbeVerdict(Contract):
    """One variant at one probed load."""

    passed: bool = Field(description="Every percentile SLO met and the error rate within bench.max_error_rate.")
    reasons: list[str] = Field(default_factory=list, description="Why it failed (empty when it passed).")
    checks: list[SloCheck] = Field(default_factory=list, description="Each percentile SLO judged on this probe.")
    completed: int = 0
    error_rate: float = 0.0
    output_tokens_per_s: Estimate = Field(
        default_factory=Estimate, description="Aggregate output tokens/s of the service (not per instance)."
    )
    usd_per_million_output_tokens: Estimate = Field(default_factory=Estimate)
    tpot_p50_s: float | None = None
    ttft_p50_s: float | None = None
    goodput_fraction: float | None = Field(
        default=None, description="Share of attempted requests meeting every per-request SLO (None: none set)."
    )


class Probe(Contract):
    load: float
    phase: Literal["doubling", "bisection"]
    run_dir: str = Field(description="The probe's run folder, relative to the capacity folder.")
    verdicts: dict[str, ProbeVerdict] = Field(description="Per variant that ran at this load.")


class VariantCapacity(Contract):
    capacity: float | None = Field(
        description="Highest passing load per service (concurrency or req/s); None: the start load already fails."
    )
    capacity_per_instance: float | None = Field(description="capacity / instances_per_service.")
    first_fail: float | None = Field(description="Lowest failing load (None: none failed up to the maximum).")
    reached_max: bool = Field(description="The maximum passed: the capacity is at least this (the search stopped).")
    monotone: bool = Field(description="Every verdict agrees with one threshold (no pass above a fail).")
    probe: str | None = Field(default=None, description="The capacity probe's run folder (relative).")
    output_tokens_per_s_per_instance: Estimate = Field(default_factory=Estimate)
    usd_per_million_output_tokens: Estimate = Field(default_factory=Estimate)
    tpot_p50_s: float | None = None
    ttft_p50_s: float | None = None
    probes: int = Field(description="Probes this variant ran.")


class Ratio(Contract):
    value: float | None = None
    ci95: Interval | None = None
    method: str = ""


class LoadComparison(Contract):
    """Both variants at one load (a probe that ran both)."""

    load: float
    throughput_ratio: Estimate = Field(description="Speculative / baseline aggregate output tokens/s (= cost ratio).")
    usd_per_million_baseline: float | None = None
    usd_per_million_speculative: float | None = None
    tpot_speedup: Estimate = Field(description="Baseline / speculative TPOT p50 (> 1: speculation faster).")


class StopsPaying(Contract):
    cost_from: float | None = Field(
        description="Lowest probed load at which speculative $/M is no lower than baseline's (None: not within "
        "the searched range)."
    )
    tpot_from: float | None = Field(description="Lowest probed load at which speculative TPOT p50 is no lower.")
    compared: list[LoadComparison] = Field(default_factory=list)
    note: str = ""


class TwinPoint(Contract):
    concurrency: int
    tpot_p50_s: float
    ttft_p50_s: float
    e2e_p50_s: float
    passed: bool


class TwinCapacity(Contract):
    """The calibrated twin's prediction at the same SLOs, judged on its p50 figures (the twin predicts medians)."""

    twin: str
    windows: dict[str, int | None] = Field(description="Capacity per window ('baseline': no speculation).")
    points: dict[str, list[TwinPoint]] = Field(default_factory=dict)
    note: str = ""


class Price(Contract):
    instance_type: str
    instance_hourly_usd: float
    instances_per_service: float
    source: str = Field(description="Where the hourly price came from.")


class Capacity(Contract):
    """``capacity.json``."""

    schema_version: Literal[1] = CAPACITY_SCHEMA_VERSION
    capacity_id: str
    created_at: str
    load_kind: Literal["concurrency", "rate"]
    slos: list[str]
    start: float
    maximum: float
    precision: float
    precision_rule: str
    requests_per_probe: int = Field(description="Measured requests per variant and probe (the minimum; see rule).")
    requests_rule: str
    runtime: str = Field(description="sim (local simulator pair) or endpoints.")
    speculative_window: int | None = Field(
        default=None, description="The speculative server's window as configured (--window); None: not known."
    )
    price: Price
    variants: dict[str, VariantCapacity]
    capacity_ratio: Ratio = Field(description="Speculative / baseline capacity; the interval is the search brackets.")
    throughput_ratio: Ratio = Field(description="Speculative / baseline output tokens/s, each at its own capacity.")
    cost_ratio: Ratio = Field(description="Speculative / baseline $/M output tokens, each at its own capacity.")
    stops_paying: StopsPaying
    probes: list[Probe]
    twin: TwinCapacity | None = None
    notes: list[str] = Field(default_factory=list)
