"""``repeats.json``: the typed aggregate of one configuration run N times (``spectrn bench --repeats N``).

It lies in the parent folder of the N run folders (``<out-dir>/<run-id>/repeats.json`` next to
``<run-id>-r1`` .. ``<run-id>-rN``, each an ordinary run folder). Every figure is in real time, like
``summary.json``; its JSON Schema is published in ``docs/schemas/repeats.schema.json``.

    Repeats
      runs[]                     each run's id, folder and verdict, in run order
      levels[]                   per load level:
        scopes{class: RepeatedScope}           "all" (classes pooled) first, then each prompt class
          variants{name: RepeatedVariant}      TPOT p50, TTFT p50, aggregate tok/s, $/M output tokens
          speedup: RepeatedSpeedups            TPOT p50, TTFT p50, aggregate throughput (= the cost ratio)
    RepeatedFigure: point (mean of the runs' own figures), ci95 (two-stage bootstrap), runs[], cv
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from spectrn.run.summary import Contract, Interval

REPEATS_SCHEMA_VERSION: Literal[1] = 1
REPEATS_FILE = "repeats.json"


class RepeatedFigure(Contract):
    """One figure measured once per run."""

    point: float | None = Field(default=None, description="Mean over runs of each run's own figure (summary.json).")
    ci95: Interval | None = Field(
        default=None,
        description="95% interval including the between-run variance: runs resampled with replacement, then the "
        "requests of each drawn run (docs/benchmarks.md, Repeated runs). None: fewer than 2 runs with a value.",
    )
    runs: list[float | None] = Field(
        default_factory=list, description="Each run's own figure, in run order (None: the run has none)."
    )
    cv: float | None = Field(
        default=None,
        description="Between-run coefficient of variation: sample standard deviation of the runs' figures / |mean| "
        "(None: fewer than 2 runs with a value, or a zero mean).",
    )


class RepeatedVariant(Contract):
    tpot_p50_s: RepeatedFigure = Field(description="Median time per output token, seconds.")
    ttft_p50_s: RepeatedFigure = Field(description="Median time to first token, seconds.")
    output_tokens_per_s: RepeatedFigure = Field(description="Aggregate output tokens/s (all tokens / wall time).")
    usd_per_million_output_tokens: RepeatedFigure = Field(description="Cost per million output tokens, USD.")


class RepeatedSpeedups(Contract):
    """baseline / speculative for latencies (> 1: speculation faster); speculative / baseline for throughput."""

    tpot_p50: RepeatedFigure
    ttft_p50: RepeatedFigure
    aggregate_throughput: RepeatedFigure = Field(
        description="Aggregate output tokens/s, speculative / baseline; also the cost ratio (baseline $/M / "
        "speculative $/M, one price)."
    )


class RepeatedScope(Contract):
    variants: dict[str, RepeatedVariant] = Field(default_factory=dict)
    speedup: RepeatedSpeedups | None = None


class RepeatedLevel(Contract):
    label: str = Field(description="The load level, as in summary.json (c4, r2, ...).")
    scopes: dict[str, RepeatedScope] = Field(
        default_factory=dict, description="'all' (prompt classes pooled), then each prompt class."
    )


class RepeatRun(Contract):
    run_id: str
    folder: str = Field(description="The run folder, relative to the folder holding repeats.json.")
    clean: bool
    performance: bool


class Repeats(Contract):
    schema_version: Literal[1] = REPEATS_SCHEMA_VERSION
    run_id: str = Field(description="The repeated run's id; run i is <run_id>-r<i>.")
    repeats: int = Field(description="How many runs the aggregate covers.")
    method: str = Field(description="How the intervals were computed.")
    resamples: int = Field(description="Bootstrap resamples behind each interval.")
    runs: list[RepeatRun] = Field(default_factory=list)
    levels: list[RepeatedLevel] = Field(default_factory=list)
    warnings: list[str] = Field(
        default_factory=list, description="What limits the aggregate (an unclean run, a figure some runs lack)."
    )
