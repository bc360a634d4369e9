"""``analysis.json``: the typed contract of a sweep's analysis (``SweepAnalysis``), what every sweep view reads.

Written by ``spectrn.sweep.orchestrate.Sweep.analyze`` (the matrix and recommendations of
``spectrn.sweep.recommend``, the objective's decision of ``spectrn.sweep.objective``, the predictions of
``spectrn.sweep.predict``); read by the terminal view, sweep.md and the sweep's HTML report. Its JSON Schema is
published in ``docs/schemas/analysis.schema.json``.

    SweepAnalysis
      rows[]               one per (cell, prompt class), class ``all`` per cell, ``mix`` rows for the weighted mix
      recommendations[]    by TPOT p50 speedup, per prompt class (and the mix) and load level
      crossovers[]         per (draft, window, scope): the lowest load level where speculation stops paying
      explanations         cost fits per (draft, level) and per-row acceptance vs the textbook expectation
      objective            the decision by the sweep's objective (cost, capacity, tpot, e2e)
      equivalence          greedy outputs compared over every cell
      cells[]              the finished cells and their run folders
      prediction           every window predicted from the largest measured one, next to the measurements

Versions: 1 had no ``schema_version`` (spectrn 0.1.0 before this model), same layout; 2 records it. The
analysis is derived data: ``spectrn sweep --resume --sweep-id ID`` with nothing left to run writes it again.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, ValidationError

from spectrn.errors import AnalysisError, one_line
from spectrn.run.summary import Contract
from spectrn.run.sweep_manifest import SweepSettings
from spectrn.run.versions import versioned_document

ANALYSIS_SCHEMA_VERSION = 2


def _pair(v: Any) -> Any:
    """An interval whose bound is missing or not finite (NaN/Inf written as null) is no interval."""
    if isinstance(v, list | tuple) and len(v) == 2:
        if any(x is None or (isinstance(x, float) and not math.isfinite(x)) for x in v):
            return None
    return v


CI = Annotated[tuple[float, float] | None, BeforeValidator(_pair)]


class E2E(Contract):
    """End-to-end latency percentiles in seconds."""

    p50: float | None = Field(default=None, description="Median e2e latency (s).")
    p90: float | None = Field(default=None, description="90th percentile (s).")
    p95: float | None = Field(default=None, description="95th percentile (s).")
    p99: float | None = Field(default=None, description="99th percentile (s).")


class MatrixRow(Contract):
    """One (draft, window, load level, prompt class) of the sweep's matrix (``spectrn.sweep.recommend.Row``)."""

    draft: str = Field(description="Draft model.")
    window: int = Field(description="Speculation window.")
    level: str = Field(description="Load level label.")
    prompt_class: str = Field(description="Prompt class, 'all' (every class pooled) or 'mix' (the weighted mix).")
    speedup: float | None = Field(default=None, description="TPOT p50 speedup, baseline / speculative.")
    ci95: CI = Field(default=None, description="Paired bootstrap 95% CI of the speedup.")
    throughput: float | None = Field(default=None, description="Output throughput ratio, speculative / baseline.")
    throughput_ci95: CI = Field(default=None, description="95% CI of the throughput ratio.")
    tpot_base_s: float | None = Field(default=None, description="Baseline TPOT p50 (s).")
    tpot_spec_s: float | None = Field(default=None, description="Speculative TPOT p50 (s).")
    tpot_spec_ci95: CI = Field(default=None, description="95% CI of the speculative TPOT p50 (s).")
    length: float | None = Field(default=None, description="Mean accepted length: tokens per step, bonus included.")
    acceptance_rate: float | None = Field(default=None, description="Accepted / drafted tokens.")
    per_position: list[float] | None = Field(default=None, description="Acceptance rate per draft position.")
    acceptance_source: str | None = Field(default=None, description="Where acceptance came from: counters or stream.")
    semantics: Literal["upstream", "nxdi"] = Field(
        default="upstream", description="What a window means on the speculative server (spectrn.windows)."
    )
    requests: int = Field(default=0, description="Request pairs the speedup was computed from.")
    usd_spec: float | None = Field(default=None, description="Speculative $ per million output tokens.")
    usd_spec_ci95: CI = Field(default=None, description="95% CI of the speculative $/M.")
    usd_base: float | None = Field(default=None, description="Baseline $ per million output tokens.")
    slo_spec: bool | None = Field(default=None, description="The speculative variant met every percentile SLO.")
    slo_base: bool | None = Field(default=None, description="The baseline met every percentile SLO.")
    slo_missed: list[str] | None = Field(
        default=None, description="The speculative variant's missed SLOs, as 'slo (observed ms)'."
    )
    ttft_speedup: float | None = Field(default=None, description="TTFT p50 ratio, baseline / speculative.")
    ttft_speedup_ci95: CI = Field(default=None, description="95% CI of the TTFT ratio.")
    ttft_base_s: float | None = Field(default=None, description="Baseline TTFT p50 (s).")
    ttft_spec_s: float | None = Field(default=None, description="Speculative TTFT p50 (s).")
    e2e_spec_s: E2E | None = Field(default=None, description="Speculative e2e percentiles.")
    e2e_base_s: E2E | None = Field(default=None, description="Baseline e2e percentiles.")


class Recommendation(Contract):
    """The recommended (draft, window) by TPOT p50 speedup for one scope at one load level."""

    scope: str = Field(description="A prompt class, 'mix', or 'all' when there is one class.")
    level: str = Field(description="Load level label.")
    chosen: MatrixRow | None = Field(default=None, description="The recommendation (None: serve without it).")
    best: MatrixRow | None = Field(default=None, description="The largest speedup measured.")
    ties: list[MatrixRow] = Field(default_factory=list, description="Rows whose CI overlaps the best's.")
    meaningful: bool = Field(default=False, description="The chosen gain clears 1 + min_gain with its CI above 1.")
    text: str = Field(description="The recommendation in one sentence.")
    weights: dict[str, float] | None = Field(default=None, description="The mix's normalised weights (mix only).")


class CrossoverLevel(Contract):
    """One load level of a crossover series."""

    level: str = Field(description="Load level label.")
    speedup: float | None = Field(default=None, description="TPOT p50 speedup at this level.")
    ci95: CI = Field(default=None, description="Its 95% CI.")
    throughput: float | None = Field(default=None, description="Throughput ratio at this level.")
    throughput_ci95: CI = Field(default=None, description="Its 95% CI.")


class Crossover(Contract):
    """Where one (draft, window) stops paying as load grows, for one scope."""

    draft: str = Field(description="Draft model.")
    window: int = Field(description="Speculation window.")
    scope: str = Field(description="Prompt class, 'all' or 'mix'.")
    crossover: str | None = Field(default=None, description="The lowest level where it stops paying (None: never).")
    levels: list[CrossoverLevel] = Field(default_factory=list, description="Every measured level, in load order.")
    pays_at_lowest: bool = Field(default=False, description="It pays at the lowest measured level.")
    text: str = Field(description="The crossover in one sentence.")


class FitPoint(Contract):
    """One measured step the cost line was fitted through."""

    window: int = Field(description="Window (0: the baseline).")
    step_s: float = Field(description="Seconds per engine step (TPOT x tokens per step).")
    tpot_s: float = Field(description="TPOT p50 (s).")
    length: float = Field(description="Tokens per step.")
    label: str = Field(default="", description="Which run and class the point comes from.")


class CostFit(Contract):
    """``step(k) = intercept_s + k * draft_s`` (``spectrn.sweep.predict.CostFit``)."""

    intercept_s: float = Field(description="Step cost at window 0 (s).")
    draft_s: float = Field(description="Added step cost per window token (s).")
    target_s: float | None = Field(default=None, description="The measured baseline step (s), when measured.")
    points: list[FitPoint] = Field(default_factory=list, description="The measured steps.")
    residuals_s: list[float] = Field(default_factory=list, description="Each point's residual (s).")
    exact: bool = Field(default=False, description="Two points: the line passes through both.")
    draft_to_target: float | None = Field(default=None, description="One window token's cost in target steps.")
    max_rel_residual: float | None = Field(default=None, description="Largest residual relative to its step.")


class DraftCostFit(Contract):
    """A cost fit for one draft at one level, or why there is none."""

    draft: str = Field(description="Draft model.")
    level: str = Field(description="Load level label.")
    intercept_s: float | None = Field(default=None, description="Step cost at window 0 (s).")
    draft_s: float | None = Field(default=None, description="Added step cost per window token (s).")
    target_s: float | None = Field(default=None, description="The measured baseline step (s).")
    points: list[FitPoint] = Field(default_factory=list, description="The measured steps.")
    residuals_s: list[float] = Field(default_factory=list, description="Each point's residual (s).")
    exact: bool = Field(default=False, description="Two points: the line passes through both.")
    draft_to_target: float | None = Field(default=None, description="One window token's cost in target steps.")
    max_rel_residual: float | None = Field(default=None, description="Largest residual relative to its step.")
    error: str | None = Field(default=None, description="Why no line could be fitted (then no coefficients).")


class Explanation(Contract):
    """Observed acceptance length vs the constant-acceptance expectation, and the cost model, for one row."""

    draft: str = Field(description="Draft model.")
    window: int = Field(description="Speculation window.")
    level: str = Field(description="Load level label.")
    prompt_class: str = Field(description="Prompt class.")
    observed_length: float | None = Field(default=None, description="Observed tokens per step.")
    acceptance_rate: float | None = Field(default=None, description="Accepted / drafted.")
    first_position: float | None = Field(default=None, description="Acceptance at position 0.")
    expected_length_first_position: float | None = Field(
        default=None, description="(1 - a^(p+1)) / (1 - a) with a the position-0 acceptance."
    )
    expected_length_rate: float | None = Field(default=None, description="The same with a = accepted / drafted.")
    conditional: list[float | None] | None = Field(
        default=None, description="P(position i accepted | positions before it accepted)."
    )
    cost_ratio: float | None = Field(default=None, description="One window token's cost in target steps.")
    model_tpot_s: float | None = Field(default=None, description="TPOT the cost model gives (s).")
    measured_tpot_s: float | None = Field(default=None, description="Measured speculative TPOT p50 (s).")
    disagreements: list[str] = Field(default_factory=list, description="Where expectation and measurement differ.")
    text: str = Field(description="The explanation in one sentence.")


class Explanations(Contract):
    """Cost fits per (draft, level) and one explanation per prompt-class row with acceptance data."""

    cost_fits: list[DraftCostFit] = Field(default_factory=list, description="One per (draft, level).")
    cells: list[Explanation] = Field(default_factory=list, description="One per prompt-class row.")


class Config(Contract):
    """A (draft, window) configuration."""

    draft: str = Field(description="Draft model.")
    window: int = Field(description="Speculation window.")


class Ineligible(Contract):
    """A cell left out of an objective's ranking because it misses the SLOs."""

    draft: str = Field(description="Draft model.")
    window: int = Field(description="Speculation window.")
    level: str = Field(description="Load level label.")
    missed: list[str] = Field(default_factory=list, description="The missed SLOs, as 'slo (observed ms)'.")


class ObjectiveRecommendation(Contract):
    """One recommendation of the objective's decision."""

    level: str | None = Field(default=None, description="Load level (capacity: the highest level meeting the SLOs).")
    scope: str | None = Field(default=None, description="Prompt class or mix (objective tpot only).")
    text: str = Field(description="The recommendation in one sentence.")
    chosen: Config | None = Field(default=None, description="The recommendation (None: serve without speculation).")
    value: float | None = Field(default=None, description="The ranked value of the chosen cell ($/M or seconds).")
    ineligible: list[Ineligible] = Field(default_factory=list, description="Cells that miss the SLOs.")
    ttft_regression: str | None = Field(default=None, description="Set when the chosen cell's TTFT regresses.")


class Objective(Contract):
    """The decision by the sweep's objective (``spectrn.sweep.objective``)."""

    name: Literal["cost", "capacity", "tpot", "e2e"] = Field(description="The objective.")
    percentile: str | None = Field(default=None, description="The e2e percentile (objective e2e only).")
    chosen_by: str = Field(description="Whether the objective was given or the default, and why.")
    rule: str = Field(description="The ranking rule in words.")
    slos: bool = Field(default=False, description="The runs judged percentile SLOs.")
    recommendations: list[ObjectiveRecommendation] = Field(default_factory=list, description="The decision.")
    overall: str | None = Field(default=None, description="Objective cost: the cheapest operating point overall.")


class SweepDivergence(Contract):
    """A greedy output that differs between baseline and speculative in one cell."""

    draft: str = Field(description="Draft model.")
    window: int = Field(description="Speculation window.")
    level: str = Field(description="Load level label.")
    index: int = Field(description="Schedule index of the request.")
    prompt_id: str = Field(description="The prompt's id.")
    first_divergence: int = Field(description="Index of the first token that differs.")


class SweepEquivalence(Contract):
    """Greedy output equivalence over every cell."""

    compared: int = Field(default=0, description="Request pairs compared.")
    matched: int = Field(default=0, description="Pairs with identical outputs.")
    match_rate: float | None = Field(default=None, description="matched / compared (None: nothing compared).")
    divergences: list[SweepDivergence] = Field(default_factory=list, description="Every divergent output.")


class CellRef(Contract):
    """A finished cell and its run folder."""

    key: str = Field(description="The cell's key, draft-kWINDOW@level.")
    run_dir: str = Field(description="Its run folder, relative to the sweep folder.")
    duration_s: float | None = Field(default=None, description="Wall-clock seconds the cell took.")
    clean: bool | None = Field(default=None, description="The cell's run was clean.")


class ClassPrediction(Contract):
    """Predicted TPOT per window for one draft and prompt class (``spectrn.sweep.predict.Prediction``)."""

    measured_window: int = Field(description="The window the prediction was made from.")
    per_position: list[float] = Field(default_factory=list, description="Per-position acceptance used.")
    lengths: dict[str, float] = Field(default_factory=dict, description="Window -> predicted tokens per step.")
    tpot_s: dict[str, float] = Field(default_factory=dict, description="Window -> predicted TPOT (s).")
    speedup: dict[str, float | None] = Field(default_factory=dict, description="Window -> predicted speedup.")
    best_window: int = Field(description="The window of the smallest predicted TPOT.")
    cost: CostFit = Field(description="The cost line the prediction used.")
    notes: list[str] = Field(default_factory=list, description="Cleaning and caution notes.")


class MixPrediction(Contract):
    """The weighted mix of per-class predictions."""

    weights: dict[str, float] = Field(default_factory=dict, description="Normalised class weights.")
    tpot_s: dict[str, float] = Field(default_factory=dict, description="Window -> predicted mix TPOT (s).")
    speedup: dict[str, float | None] = Field(default_factory=dict, description="Window -> predicted mix speedup.")
    best_window: int | None = Field(default=None, description="The window of the smallest predicted TPOT.")


class RefinedPrediction(Contract):
    """The prediction again once two windows are measured: the cost line through every measured step."""

    windows_in_fit: list[int] = Field(default_factory=list, description="Measured windows in the fit.")
    best_window: int = Field(description="The refined predicted optimum.")
    mix_tpot_s: dict[str, float] = Field(default_factory=dict, description="Window -> refined mix TPOT (s).")
    cost: dict[str, CostFit] = Field(default_factory=dict, description="Prompt class -> refined cost line.")


class DraftPrediction(Contract):
    """One draft's predictions from its largest measured window."""

    measured_window: int = Field(description="The largest measured window.")
    notes: list[str] = Field(default_factory=list, description="Why a class could not be predicted.")
    by_class: dict[str, ClassPrediction] = Field(default_factory=dict, description="Prompt class -> prediction.")
    mix: MixPrediction | None = Field(default=None, description="The mix's prediction.")
    best_window: int | None = Field(default=None, description="The predicted optimum among the candidates.")
    refined: RefinedPrediction | None = Field(default=None, description="Refit once a second window is measured.")


class PredictedChoice(Contract):
    """The predicted optimum over every draft."""

    draft: str = Field(description="Draft model.")
    window: int = Field(description="Speculation window.")
    tpot_s: float = Field(description="Its predicted mix TPOT (s).")


class PredictionCheck(Contract):
    """A prediction next to the measurement of the same window."""

    draft: str = Field(description="Draft model.")
    prompt_class: str = Field(description="Prompt class.")
    window: int = Field(description="Window.")
    predicted_s: float = Field(description="Predicted TPOT (s).")
    measured_s: float = Field(description="Measured speculative TPOT p50 (s).")
    error: float | None = Field(default=None, description="(predicted - measured) / measured.")
    from_window: int = Field(description="The window the prediction was made from.")
    fitted: bool = Field(default=False, description="This window is the one the cost line was fitted at.")


class SweepPrediction(Contract):
    """Every window predicted from the largest measured one per draft, at the first load level."""

    level: str | None = Field(default=None, description="The level predicted (None: nothing to predict from).")
    weights: dict[str, float] = Field(default_factory=dict, description="Mix weights (as given, not normalised).")
    drafts: dict[str, DraftPrediction] = Field(default_factory=dict, description="Draft -> its predictions.")
    choice: PredictedChoice | None = Field(default=None, description="The predicted optimum.")
    comparison: list[PredictionCheck] = Field(default_factory=list, description="Predictions vs measurements.")


class SweepAnalysis(Contract):
    """``analysis.json``: a sweep's matrix, recommendations, crossovers, explanations, decision and predictions."""

    schema_version: int = Field(
        default=ANALYSIS_SCHEMA_VERSION, description="Version of analysis.json's layout (absent in version 1)."
    )
    sweep_id: str = Field(description="The sweep's id.")
    settings: SweepSettings = Field(default_factory=SweepSettings, description="The sweep's settings (sweep.json).")
    rows: list[MatrixRow] = Field(default_factory=list, description="The matrix, then the mix rows.")
    timing: list[str] = Field(
        default_factory=list, description="Why the cells' figures are not real time (a time scale), in words."
    )
    classes: list[str] = Field(default_factory=list, description="Prompt classes measured.")
    levels: list[str] = Field(default_factory=list, description="Load levels measured, in load order.")
    mix_weights: dict[str, float] = Field(default_factory=dict, description="Normalised mix weights.")
    min_gain: float = Field(default=0.05, description="A gain is meaningful at 1 + min_gain with its CI above 1.")
    recommendations: list[Recommendation] = Field(default_factory=list, description="By TPOT p50 speedup.")
    crossovers: list[Crossover] = Field(default_factory=list, description="Empty with a single load level.")
    explanations: Explanations = Field(default_factory=Explanations, description="Why: acceptance and step costs.")
    objective: Objective | None = Field(default=None, description="The decision by the objective.")
    equivalence: SweepEquivalence = Field(default_factory=SweepEquivalence, description="Over every cell.")
    cells: list[CellRef] = Field(default_factory=list, description="The finished cells.")
    prediction: SweepPrediction = Field(default_factory=SweepPrediction, description="Prediction vs measurement.")


def read_sweep_analysis(raw: Any, where: str) -> SweepAnalysis:
    """An ``analysis.json`` document of any version up to this spectrn's; AnalysisError naming the fix otherwise."""
    hint = "re-analyze it: `spectrn sweep --resume --sweep-id ID` with the sweep's flags (nothing is re-run)"
    data = versioned_document(
        raw, where, newest=ANALYSIS_SCHEMA_VERSION, schema="analysis", error=AnalysisError, hint=hint,
        upgrade="read this sweep",
    )  # fmt: skip
    try:
        return SweepAnalysis.model_validate(data)
    except ValidationError as e:
        raise AnalysisError(f"{where} is not a sweep analysis: {one_line(e)}", hint=hint) from None
