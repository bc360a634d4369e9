"""Sweep results -> matrix, recommendations, load crossovers and explanations (pure; no I/O).

Input: one ``CellInput`` per measured (draft, window, load level) configuration: the run's ``summary.json``
(same-run A/B against the shared baseline, paired bootstrap CIs) plus the per-class acceptance the sweep read
from chunk sizes. ``build_matrix`` flattens them into ``Row``s, one per (cell, prompt class) with class
``all`` for the whole run.

Rules, stated in every output that uses them:
- Best = the largest TPOT p50 speedup (baseline / speculative).
- Tie = confidence intervals overlap with the best's. Among ties the cheapest configuration is recommended:
  smallest window, then smallest draft (fewer draft passes per step, less device memory, faster compile).
- A gain is meaningful when the speedup's CI lies above 1 and its value is at least ``1 + min_gain``;
  otherwise the recommendation is to serve without speculation.
- Mix: with weights w_c (normalised) over prompt classes, the mix's time per token is sum_c w_c TPOT_c, so
  its speedup is sum_c w_c B_c / sum_c w_c B_c / S_c (B_c baseline TPOT, S_c speedup). Its CI comes from the
  per-class CIs by the delta method on log scale (classes are disjoint request sets, hence independent).
- Load crossover (per draft, window and prompt class or mix): the lowest load level where speculation stops
  paying: the speedup CI reaches down to 1 (lower bound <= 1), or the throughput ratio is significantly < 1
  (CI upper bound < 1). A configuration that does not pay even at the lowest level is reported as such.
- Explanation: the observed mean accepted length L vs the textbook (1 - a^(p+1)) / (1 - a) (p proposals per
  step at window k: k - 1 on NxDI, k upstream; ``spectrn.windows``) with a the
  first-position acceptance (and with a the accepted/drafted rate), the per-position conditional acceptance,
  and the cost of one more window token (a draft pass plus the verify pass's growth) relative to one target
  step, fitted from the measured steps (``spectrn.sweep.predict.fit_costs``).
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from spectrn import labels
from spectrn.errors import AnalysisError, ConfigError
from spectrn.intervals import interval_text
from spectrn.labels import setup_label, window_label
from spectrn.run.summary import ClassSummary, Interval, LevelSummary, Load, Summary
from spectrn.sweep.predict import CostFit, StepPoint, conditional_acceptance, fit_costs, iid_expected_length
from spectrn.windows import WindowSemantics, proposals

ALL = labels.ALL_CLASSES
MIX = "mix"
DEFAULT_MIN_GAIN = 0.05
DISAGREE_REL = 0.10


@dataclass
class CellInput:
    """One measured configuration as the sweep stored it: its run's summary, at the cell's load level."""

    draft: str
    window: int
    level: str
    summary: Summary

    @property
    def view(self) -> LevelSummary:
        return self.summary.level(self.level)

    @property
    def semantics(self) -> WindowSemantics:
        """Window semantics the cell's acceptance was read with (the speculative server's)."""
        for _, cs in self.view.scopes():
            spec = cs.variants.get("speculative")
            if spec and spec.acceptance and spec.acceptance.stream and spec.acceptance.stream.semantics:
                return spec.acceptance.stream.semantics
        server = self.summary.provenance.servers.get("speculative")
        return server.window_semantics if server and server.window_semantics else "upstream"


@dataclass
class Row:
    draft: str
    window: int
    level: str
    prompt_class: str
    speedup: float | None
    ci95: list[float] | None
    throughput: float | None = None
    throughput_ci95: list[float] | None = None
    tpot_base_s: float | None = None
    tpot_spec_s: float | None = None
    tpot_spec_ci95: list[float] | None = None
    length: float | None = None  # observed tokens per step (mean accepted length incl. the bonus token)
    acceptance_rate: float | None = None  # accepted / drafted
    per_position: list[float] | None = None
    acceptance_source: str | None = None  # counters or stream
    semantics: WindowSemantics = "upstream"
    requests: int = 0
    # for the objectives (spectrn.sweep.objective): cost, SLO verdicts, TTFT and e2e of each variant
    usd_spec: float | None = None
    usd_spec_ci95: list[float] | None = None
    usd_base: float | None = None
    slo_spec: bool | None = None  # every percentile SLO met (None: no SLO set, or nothing to judge)
    slo_base: bool | None = None
    slo_missed: list[str] | None = None  # the speculative variant's missed SLOs, as "slo (observed ms)"
    ttft_speedup: float | None = None  # baseline / speculative TTFT p50 (< 1: speculation slower to first token)
    ttft_speedup_ci95: list[float] | None = None
    ttft_base_s: float | None = None
    ttft_spec_s: float | None = None
    e2e_spec_s: dict[str, float | None] | None = None  # p50, p90, p95, p99
    e2e_base_s: dict[str, float | None] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _ci(x: Interval | None) -> list[float] | None:
    return [float(x[0]), float(x[1])] if x is not None else None


def _row(cell: CellInput, cls: str, cs: ClassSummary) -> Row:
    sp = cs.speedup
    base, spec = cs.variants.get("baseline"), cs.variants.get("speculative")
    tpot = sp.tpot_p50 if sp else None
    thr = sp.throughput if sp else None
    row = Row(
        draft=cell.draft,
        window=cell.window,
        level=cell.level,
        prompt_class=cls,
        speedup=tpot.value if tpot else None,
        ci95=_ci(tpot.ci95) if tpot else None,
        throughput=thr.value if thr else None,
        throughput_ci95=_ci(thr.ci95) if thr else None,
        tpot_base_s=base.tpot_s.p50 if base else None,
        tpot_spec_s=spec.tpot_s.p50 if spec else None,
        tpot_spec_ci95=_ci(spec.tpot_s.ci95.p50) if spec and spec.tpot_s.ci95 else None,
        requests=sp.paired_requests if sp else 0,
        semantics=cell.semantics,
    )
    _objective_fields(row, base, spec, sp)
    acc = spec.acceptance if spec else None
    if acc is not None:
        row.length = acc.mean_accepted_length
        row.per_position = list(acc.per_position) or None
        row.acceptance_rate = acc.rate
        row.acceptance_source = acc.source
    return row


def _objective_fields(row: Row, base: Any, spec: Any, sp: Any) -> None:
    """What the objectives rank by: $/M, SLO verdicts, TTFT and e2e percentiles (``spectrn.sweep.objective``)."""

    def e2e(vs: Any) -> dict[str, float | None] | None:
        return {q: getattr(vs.e2e_s, q) for q in ("p50", "p90", "p95", "p99")} if vs else None

    if spec is not None and spec.cost is not None:
        row.usd_spec = spec.cost.usd_per_million_output_tokens
        row.usd_spec_ci95 = _ci(spec.cost.usd_per_million_output_tokens_ci95)
    if base is not None and base.cost is not None:
        row.usd_base = base.cost.usd_per_million_output_tokens
    if spec is not None and spec.goodput is not None and spec.goodput.checks:
        row.slo_spec = spec.goodput.all_met
        row.slo_missed = [f"{c.slo} ({'no value' if c.observed_s is None else f'{c.observed_s * 1e3:.4g} ms'})"
                          for c in spec.goodput.checks if not c.met]  # fmt: skip
    if base is not None and base.goodput is not None and base.goodput.checks:
        row.slo_base = base.goodput.all_met
    ttft = sp.ttft_p50 if sp else None
    row.ttft_speedup, row.ttft_speedup_ci95 = (ttft.value, _ci(ttft.ci95)) if ttft else (None, None)
    row.ttft_base_s, row.ttft_spec_s = (base.ttft_s.p50 if base else None), (spec.ttft_s.p50 if spec else None)
    row.e2e_spec_s, row.e2e_base_s = e2e(spec), e2e(base)


def build_matrix(cells: Iterable[CellInput]) -> list[Row]:
    """One row per (cell, prompt class), plus class ``all`` per cell (every class pooled)."""
    return [_row(cell, cls, cs) for cell in cells for cls, cs in cell.view.scopes()]


def prompt_classes(rows: Iterable[Row]) -> list[str]:
    return sorted({r.prompt_class for r in rows if r.prompt_class not in (ALL, MIX)})


def level_key(level: str) -> tuple[int, float, str]:
    """Order load levels by kind then size: c1 < c4 < c16; r0.5 < r2."""
    return Load.parse(level).sort_key()


# ---- ranking --------------------------------------------------------------------------------------------


def draft_size(draft: str) -> float:
    from spectrn.configuration.catalog import MODELS

    spec = MODELS.get(draft)
    if spec is not None:
        return spec.params_b
    m = re.search(r"(\d+(?:\.\d+)?)b\b", draft.lower())
    return float(m.group(1)) if m else math.inf


def cost_key(row: Row) -> tuple[int, float, str]:
    """Cheaper first: smaller window, then smaller draft."""
    return (row.window, draft_size(row.draft), row.draft)


def _interval(row: Row) -> tuple[float, float]:
    """The speedup's CI, else its point (every caller has checked that the row has a speedup)."""
    if row.ci95 is not None:
        return (row.ci95[0], row.ci95[1])
    assert row.speedup is not None
    return (row.speedup, row.speedup)


def overlaps(a: Row, b: Row) -> bool:
    (alo, ahi), (blo, bhi) = _interval(a), _interval(b)
    return alo <= bhi and blo <= ahi


def pays(row: Row, min_gain: float = DEFAULT_MIN_GAIN) -> bool:
    if row.speedup is None or row.speedup < 1.0 + min_gain:
        return False
    lo, _ = _interval(row)
    return lo > 1.0


def _label(row: Row) -> str:
    ci = interval_text(row.ci95) if row.ci95 else " (no CI)"
    sp = f"{row.speedup:.2f}x" if row.speedup is not None else "n/a"
    return f"{setup_label(row.draft, row.window)}: {sp}{ci}"


@dataclass
class Recommendation:
    scope: str  # a prompt class or "mix"
    level: str
    chosen: Row | None  # None: serve without speculation
    best: Row | None
    ties: list[Row]
    meaningful: bool
    text: str
    weights: dict[str, float] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "level": self.level,
            "chosen": self.chosen.to_dict() if self.chosen else None,
            "best": self.best.to_dict() if self.best else None,
            "ties": [r.to_dict() for r in self.ties],
            "meaningful": self.meaningful,
            "text": self.text,
            "weights": self.weights,
        }


def recommend(rows: Sequence[Row], scope: str, level: str, *, min_gain: float = DEFAULT_MIN_GAIN) -> Recommendation:
    """The recommended (draft, window) for one prompt class (or the mix rows) at one load level."""
    cand = [r for r in rows if r.prompt_class == scope and r.level == level and r.speedup is not None]
    if not cand:
        return Recommendation(scope, level, None, None, [], False, f"{scope} @ {level}: no measured configuration")
    best = max(cand, key=lambda r: (r.speedup or 0.0, [-x for x in cost_key(r)[:2]]))
    ties = sorted([r for r in cand if overlaps(r, best)], key=cost_key)
    chosen = ties[0]
    meaningful = pays(chosen, min_gain)
    head = f"{scope} @ {level}: "
    if not pays(best, min_gain):
        text = (
            f"{head}no meaningful gain: the best configuration, {_label(best)}, does not clear "
            f"{1 + min_gain:.2f}x with its CI above 1; serve without speculation"
        )
        return Recommendation(scope, level, None, best, ties, False, text)
    if chosen is best:
        others = [r for r in ties if r is not best]
        text = f"{head}{_label(best)} is best"
        if others:
            text += "; within its CI: " + "; ".join(_label(r) for r in others)
    else:
        text = (
            f"{head}{_label(chosen)} recommended: its CI overlaps the best, {_label(best)}, so the cheaper "
            f"configuration (smaller window, then smaller draft) wins the tie"
        )
        if not meaningful:
            text += " (but the cheaper configuration's own gain is not meaningful: consider the best one)"
    return Recommendation(scope, level, chosen, best, ties, meaningful, text)


# ---- the user's mix ----------------------------------------------------------------------------------


def parse_mix(text: str | None) -> dict[str, float] | None:
    """``structured=0.7,open=0.3`` -> weights (any positive scale; normalised where used)."""
    if text is None or not text.strip():
        return None
    out: dict[str, float] = {}
    for part in text.split(","):
        name, sep, raw = part.partition("=")
        name = name.strip()
        if not sep or not name:
            raise ConfigError(
                f"--mix {text!r}: {part!r} is not CLASS=WEIGHT", hint="e.g. --mix structured=0.7,open=0.3"
            )
        try:
            w = float(raw)
        except ValueError:
            raise ConfigError(f"--mix {text!r}: weight {raw!r} is not a number", hint="e.g. structured=0.7") from None
        if not math.isfinite(w) or w < 0:
            raise ConfigError(f"--mix {text!r}: weight of {name} must be >= 0", hint="use non-negative weights")
        out[name] = w
    if sum(out.values()) <= 0:
        raise ConfigError(f"--mix {text!r}: weights sum to 0", hint="give at least one class a positive weight")
    return out


def _log_se(row: Row) -> float | None:
    if row.ci95 is None or row.ci95[0] <= 0 or row.ci95[1] <= 0:
        return None
    return (math.log(row.ci95[1]) - math.log(row.ci95[0])) / (2 * 1.959964)


def mix_rows(rows: Sequence[Row], weights: Mapping[str, float]) -> list[Row]:
    """One ``mix`` row per (draft, window, level) that has every weighted class measured."""
    wanted = {c: w for c, w in weights.items() if w > 0}
    total = sum(wanted.values())  # > 0 whenever a class is wanted; no class wanted: no group, no row
    groups: dict[tuple[str, int, str], dict[str, Row]] = defaultdict(dict)
    for r in rows:
        if r.prompt_class in wanted:
            groups[(r.draft, r.window, r.level)][r.prompt_class] = r
    out = []
    for (draft, window, level), by_cls in sorted(groups.items()):
        if set(by_cls) != set(wanted):
            continue
        parts = [(wanted[c] / total, by_cls[c]) for c in sorted(wanted)]
        # per class: its weighted baseline TPOT, its weighted speculative TPOT and its log standard error
        times = [(w * r.tpot_base_s, w * r.tpot_base_s / r.speedup, _log_se(r))
                 for w, r in parts if r.tpot_base_s is not None and r.speedup]  # fmt: skip
        if len(times) < len(parts):
            continue
        base = sum(b for b, _, _ in times)
        spec = sum(t for _, t, _ in times)
        s_mix = base / spec
        ci = None
        if len(parts) == 1:
            ci = list(parts[0][1].ci95) if parts[0][1].ci95 else None  # one class: its own bootstrap CI
        elif all(se is not None for _, _, se in times):
            var = sum((t / spec) ** 2 * (se or 0.0) ** 2 for _, t, se in times)
            half = 1.959964 * math.sqrt(var)
            ci = [s_mix * math.exp(-half), s_mix * math.exp(half)]
        out.append(
            Row(draft, window, level, MIX, s_mix, ci, tpot_base_s=base, tpot_spec_s=spec,
                requests=sum(r.requests for _, r in parts))
        )  # fmt: skip
    return out


def default_mix(rows: Sequence[Row]) -> dict[str, float]:
    classes = prompt_classes(rows)
    return dict.fromkeys(classes, 1.0)


# ---- load crossover ------------------------------------------------------------------------------------


def stops_paying(row: Row) -> bool:
    """Not (or no longer) a significant gain: the speedup CI reaches down to 1, or throughput is significantly
    below the baseline's (CI upper bound < 1)."""
    if row.speedup is None or _interval(row)[0] <= 1.0:
        return True
    if row.throughput is not None:
        thi = row.throughput_ci95[1] if row.throughput_ci95 else row.throughput
        return thi < 1.0
    return False


def crossovers(rows: Sequence[Row], scope: str = ALL) -> list[dict[str, Any]]:
    """Per (draft, window): the lowest load level where speculation stops paying (None: pays at every level)."""
    groups: dict[tuple[str, int], list[Row]] = defaultdict(list)
    for r in rows:
        if r.prompt_class == scope:
            groups[(r.draft, r.window)].append(r)
    out = []
    for (draft, window), rs in sorted(groups.items(), key=lambda kv: (draft_size(kv[0][0]), kv[0][1])):
        rs = sorted(rs, key=lambda r: level_key(r.level))
        cross = next((r.level for r in rs if stops_paying(r)), None)
        measured = ", ".join(r.level for r in rs)
        out.append(
            {
                "draft": draft,
                "window": window,
                "scope": scope,
                "crossover": cross,
                "levels": [
                    {
                        "level": r.level,
                        "speedup": r.speedup,
                        "ci95": r.ci95,
                        "throughput": r.throughput,
                        "throughput_ci95": r.throughput_ci95,
                    }
                    for r in rs
                ],  # fmt: skip
                "pays_at_lowest": not stops_paying(rs[0]),
                "text": f"{setup_label(draft, window)} ({scope}): " + _crossover_text(rs, cross, measured),
            }
        )
    return out


def _crossover_text(rs: Sequence[Row], cross: str | None, measured: str) -> str:
    if cross is None:
        return f"pays at every measured load ({measured})"
    if cross == rs[0].level:
        return f"does not pay even at the lowest measured load ({cross})"
    return f"stops paying at {cross}"


# ---- explanation ----------------------------------------------------------------------------------------


def fit_draft_costs(rows: Sequence[Row], draft: str, level: str) -> CostFit | None:
    """Cost line for one draft at one level from every class's (k, TPOT x L) plus the baseline's (0, TPOT)."""
    pts: list[StepPoint] = []
    for r in rows:
        if r.draft != draft or r.level != level or r.prompt_class in (ALL, MIX):
            continue
        if r.tpot_base_s:
            pts.append(StepPoint(0, r.tpot_base_s, 1.0, f"baseline/{r.prompt_class}"))
        if r.tpot_spec_s and r.length:
            pts.append(StepPoint(r.window, r.tpot_spec_s, r.length, f"{window_label(r.window)}/{r.prompt_class}"))
    try:
        return fit_costs(pts)
    except AnalysisError:
        return None


def explain_row(row: Row, fit: CostFit | None) -> dict[str, Any]:
    """Observed acceptance length vs the textbook expectation, and the cost model's view of this cell."""
    k = row.window
    out: dict[str, Any] = {
        "draft": row.draft,
        "window": k,
        "level": row.level,
        "prompt_class": row.prompt_class,
        "observed_length": row.length,
        "acceptance_rate": row.acceptance_rate,
        "first_position": None,
        "expected_length_first_position": None,
        "expected_length_rate": None,
        "conditional": None,
        "cost_ratio": fit.draft_to_target if fit else None,
        "model_tpot_s": None,
        "measured_tpot_s": row.tpot_spec_s,
        "disagreements": [],
    }
    notes: list[str] = out["disagreements"]
    if row.acceptance_rate is not None:
        out["expected_length_rate"] = iid_expected_length(row.acceptance_rate, k, row.semantics)
    if row.per_position:
        a0 = row.per_position[0]
        out["first_position"] = a0
        out["expected_length_first_position"] = iid_expected_length(a0, k, row.semantics)
        cond = conditional_acceptance(row.per_position[: proposals(row.semantics, k)])
        out["conditional"] = cond
        obs = row.length
        exp = out["expected_length_first_position"]
        if obs and exp and abs(exp - obs) / obs > DISAGREE_REL:
            if exp > obs:
                # exp > obs >= 1 needs a proposal, so position 0 is in ``cond`` and is never None
                last = max(i for i, c in enumerate(cond) if c is not None)
                drop = (
                    f"conditional acceptance falls from {a0:.2f} at position 0 to {cond[last]:.2f} at position {last}"
                )
                notes.append(
                    f"observed L = {obs:.2f} is {exp / obs - 1:.0%} below (1 - a^(p+1))/(1 - a) = {exp:.2f} with "
                    f"a = {a0:.2f} (position 0): the formula assumes every position is accepted as often as the "
                    f"first, but {drop}, so each extra position of window {k} adds less than the formula says"
                )
            else:
                notes.append(
                    f"observed L = {obs:.2f} is above (1 - a^(p+1))/(1 - a) = {exp:.2f} with a = {a0:.2f}: "
                    "later positions are accepted more readily than the first (acceptance is bursty)"
                )
    if fit is not None and row.length:
        model = fit.step_s(k) / row.length
        out["model_tpot_s"] = model
        if row.tpot_spec_s and abs(model - row.tpot_spec_s) / row.tpot_spec_s > DISAGREE_REL:
            notes.append(
                f"the linear step-cost model gives TPOT {model * 1e3:.2f} ms but {row.tpot_spec_s * 1e3:.2f} ms was "
                "measured: step cost is not linear in the window here (queueing, or a compiled graph that "
                "differs per window)"
            )
    parts = []
    if row.length is not None:
        parts.append(f"L = {row.length:.2f} tokens/step")
    if out["expected_length_first_position"] is not None:
        parts.append(f"constant-acceptance expectation {out['expected_length_first_position']:.2f}")
    if fit is not None and fit.draft_to_target is not None:
        parts.append(f"each window token costs {fit.draft_to_target:.3f} target steps")
    where = f"{setup_label(row.draft, k)} {row.prompt_class} @ {row.level}"
    out["text"] = f"{where}: " + (", ".join(parts) or "no acceptance data")
    if notes:
        out["text"] += ". " + " ".join(notes)
    return out


def explain(rows: Sequence[Row]) -> dict[str, Any]:
    """Cost fits per (draft, level) and one explanation per prompt-class row with acceptance data.

    Class ``all`` is left out: pooling prompts of different acceptance makes the constant-acceptance formula
    disagree for reasons that say nothing about any one workload.
    """
    fits: dict[tuple[str, str], CostFit | None] = {}
    for r in rows:
        key = (r.draft, r.level)
        if key not in fits:
            fits[key] = fit_draft_costs(rows, r.draft, r.level)
    ordered = sorted(rows, key=lambda r: (draft_size(r.draft), r.draft, r.window, level_key(r.level), r.prompt_class))
    rows_out = [
        explain_row(r, fits[(r.draft, r.level)])
        for r in ordered
        if r.prompt_class not in (MIX, ALL) and (r.length is not None or r.per_position)
    ]
    return {
        "cost_fits": [
            {"draft": d, "level": lv, **(f.to_dict() if f else {"error": "fewer than two windows measured"})}
            for (d, lv), f in sorted(fits.items(), key=lambda kv: (draft_size(kv[0][0]), kv[0][0], level_key(kv[0][1])))
        ],
        "cells": rows_out,
    }


# ---- everything at once ------------------------------------------------------------------------------------


def analyze_sweep(
    cells: Iterable[CellInput],
    *,
    weights: Mapping[str, float] | None = None,
    min_gain: float = DEFAULT_MIN_GAIN,
    objective: tuple[str, str] | None = None,
) -> dict[str, Any]:
    """Matrix, recommendations per class and for the mix at every level, crossovers, explanations, and the
    decision by ``objective`` (``spectrn.sweep.objective``; None: cost when the runs set SLOs, else tpot)."""
    from spectrn.sweep.objective import decide

    cells = list(cells)
    rows = build_matrix(cells)
    if not rows:
        raise AnalysisError("the sweep has no finished cell to analyze", hint="run `spectrn sweep` first")
    classes = prompt_classes(rows)
    w = dict(weights) if weights else default_mix(rows)
    unknown = sorted(set(w) - set(classes))
    if unknown and weights:
        raise ConfigError(
            f"--mix names prompt class(es) {unknown} that the sweep did not measure",
            hint=f"use classes among {', '.join(classes)}",
        )
    mixed = mix_rows(rows, w)  # no prompt class: no weight, no mix row
    levels = sorted({r.level for r in rows}, key=level_key)
    recs = []
    for lv in levels:
        # Class ``all`` pools prompts of different acceptance: its median speedup describes no real workload,
        # so recommendations are per class and for the weighted mix only.
        for cls in classes or [ALL]:
            recs.append(recommend(rows, cls, lv, min_gain=min_gain))
        if mixed and len(classes) > 1:
            rec = recommend(mixed, MIX, lv, min_gain=min_gain)
            rec.weights = {c: x / sum(w.values()) for c, x in w.items()}
            recs.append(rec)
    scopes = [*classes, *([MIX] if mixed and len(classes) > 1 else [])] or [ALL]
    return {
        "rows": [r.to_dict() for r in rows + mixed],
        "timing": sorted({t for t in (timing_note(c.summary) for c in cells) if t}),
        "classes": classes,
        "levels": levels,
        "mix_weights": {c: x / sum(w.values()) for c, x in w.items()},
        "min_gain": min_gain,
        "recommendations": [r.to_dict() for r in recs],
        "crossovers": [c for scope in scopes for c in crossovers(rows + mixed, scope)] if len(levels) > 1 else [],
        "explanations": explain(rows),
        "objective": decide(
            [r.to_dict() for r in rows], objective, levels, recs=[r.to_dict() for r in recs], cheaper=_cheaper
        ),
    }


def timing_note(s: Summary) -> str | None:
    """Why a cell's figures may not be real time, in words (None: real time, as far as spectrn knows)."""
    p = s.provenance
    if p.time_scale != 1.0:
        return f"simulated at time scale {p.time_scale:g}: figures rescaled to real time" if p.rescaled else (
            f"simulated at time scale {p.time_scale:g}: figures are SCALED, not real time"
        )  # fmt: skip
    if p.runtime == "endpoints":
        return "figures in the servers' own time (simulators run at a time scale: pass it as --time-scale)"
    return None


def _cheaper(row: Mapping[str, Any]) -> tuple[int, float, str]:
    """``cost_key`` of a row given as a dict: smaller window, then smaller draft."""
    return (int(row["window"]), draft_size(str(row["draft"])), str(row["draft"]))
