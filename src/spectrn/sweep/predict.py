"""Predict every shorter window's TPOT from one large-window run (pure; no I/O).

Why: a Neuron compile of one (draft, window) configuration costs hours on trn2, so measuring a grid of windows
is expensive. One run at a large window K already holds what every window k <= K needs:

Acceptance. vLLM's per-position counter ``accepted_tokens_per_pos[i]`` counts steps in which draft position
i was accepted; position i is only reached when positions 0..i-1 were accepted, so ``P_i = count_i / drafts``
is the probability that the first i + 1 proposals are all accepted. The same P_i are read per prompt class
from the stream (``spectrn.analyze.acceptance``: one event per engine step carries accepted + 1 tokens). A
step at window k has p(k) proposals (``spectrn.windows``: k - 1 on NxDI, k upstream) and emits the accepted
prefix plus one token, hence

    L(k) = 1 + sum_{i < p(k)} P_i         (expected tokens per step; L(0) = 1 is plain decoding)

Cost. One speculative step at window k runs the draft k times (on NxDI too: the k-th pass fills the draft's
KV cache) and verifies once:
``step(k) = c_verify + k * c_draft``, and plain decoding is ``step(0) = c_target``. Each measured run gives a
point ``(k, TPOT_k * L_k)`` (the baseline gives ``(0, TPOT_base)``); two points fix the line, more are fitted
by least squares. The slope absorbs the verify pass's growth with k (verifying k + 1 tokens costs a little
more than one); the intercept is the target's step, plus a fixed verify overhead when three or more points
let the fit see it. Then

    TPOT(k) = step(k) / L(k)

and the recommended window is the argmin over the windows asked for.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from spectrn.errors import AnalysisError
from spectrn.windows import WindowSemantics, proposals

# ---- acceptance -------------------------------------------------------------------------------------


def clean_per_position(per_position: Sequence[float | None]) -> tuple[list[float], list[str]]:
    """Clip to [0, 1] and force non-increasing (P_i can only fall with i); returns the values and notes."""
    notes: list[str] = []
    out: list[float] = []
    prev = 1.0
    for i, raw in enumerate(per_position):
        if raw is None or not math.isfinite(raw):
            raise AnalysisError(
                f"per-position acceptance {i} is missing or not a number",
                hint="re-run the large-window configuration; the server's counters were incomplete",
            )
        v = min(max(float(raw), 0.0), 1.0)
        if v > prev + 1e-9:
            notes.append(f"position {i}: {v:.4f} above position {i - 1} ({prev:.4f}); clipped (counter noise)")
            v = prev
        out.append(v)
        prev = v
    return out, notes


def measured_window(per_position: Sequence[float], semantics: WindowSemantics) -> int:
    """The window whose steps gave ``per_position`` (one entry per proposal)."""
    return len(per_position) + (1 if semantics == "nxdi" else 0)


def acceptance_lengths(
    per_position: Sequence[float], max_window: int | None = None, semantics: WindowSemantics = "upstream"
) -> list[float]:
    """``[L(0), L(1), ..., L(K)]``: expected tokens per step for every window up to the measured one."""
    probs, _ = clean_per_position(per_position)
    k_top = measured_window(probs, semantics)
    k_max = k_top if max_window is None else max_window
    if k_max > k_top:
        raise AnalysisError(
            f"window {k_max} is larger than the measured window {k_top}",
            hint="predict only windows up to the one that was measured; run a larger window to go further",
        )
    out = [1.0]
    for k in range(1, k_max + 1):
        out.append(1.0 + sum(probs[: proposals(semantics, k)]))
    return out


def conditional_acceptance(per_position: Sequence[float]) -> list[float | None]:
    """P(position i accepted | positions before it accepted) = P_i / P_{i-1} (None once nothing is reached)."""
    out: list[float | None] = []
    prev = 1.0
    for p in per_position:
        out.append(p / prev if prev > 0 else None)
        prev = p
    return out


def iid_expected_length(a: float, k: int, semantics: WindowSemantics = "upstream") -> float:
    """The textbook expectation (1 - a^(p+1)) / (1 - a) for p = p(k) proposals, each accepted independently
    with rate a (p = k upstream, k - 1 on NxDI)."""
    if k < 0:
        raise ValueError("window must be >= 0")
    p = proposals(semantics, k) if k >= 1 else 0
    if a >= 1.0:
        return float(p + 1)
    return (1.0 - a ** (p + 1)) / (1.0 - a)


# ---- cost model -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepPoint:
    """One measured configuration: window k (0 = baseline), its TPOT and tokens per step."""

    window: int
    tpot_s: float
    length: float  # tokens per step (1 for the baseline)
    label: str = ""

    @property
    def step_s(self) -> float:
        return self.tpot_s * self.length


@dataclass
class CostFit:
    """``step(k) = intercept_s + k * draft_s``; ``target_s`` is the measured baseline step when known."""

    intercept_s: float
    draft_s: float
    target_s: float | None
    points: list[dict[str, float | str]]
    residuals_s: list[float]
    exact: bool  # two points: the line passes through both, no residual to judge it by

    def step_s(self, k: int) -> float:
        return self.intercept_s + k * self.draft_s

    @property
    def draft_to_target(self) -> float | None:
        base = self.target_s if self.target_s else self.intercept_s
        return self.draft_s / base if base > 0 else None

    @property
    def max_rel_residual(self) -> float | None:
        rel = [abs(r) / float(p["step_s"]) for r, p in zip(self.residuals_s, self.points, strict=True) if p["step_s"]]
        return max(rel) if rel and not self.exact else None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["draft_to_target"] = self.draft_to_target
        d["max_rel_residual"] = self.max_rel_residual
        return d


def fit_costs(points: Sequence[StepPoint]) -> CostFit:
    """Least-squares line through ``(k, step)``; needs two distinct windows (the baseline counts as k = 0)."""
    pts = [p for p in points if math.isfinite(p.tpot_s) and p.tpot_s > 0 and p.length >= 1.0]
    windows = {p.window for p in pts}
    if len(windows) < 2:
        raise AnalysisError(
            f"the cost model needs measured steps at two different windows, got {sorted(windows) or 'none'}",
            hint="measure the baseline (window 0) and one speculative window, or two speculative windows",
        )
    n = len(pts)
    xs = [float(p.window) for p in pts]
    ys = [p.step_s for p in pts]
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx
    intercept = my - slope * mx
    base = [p.step_s for p in pts if p.window == 0]
    return CostFit(
        intercept_s=intercept,
        draft_s=slope,
        target_s=sum(base) / len(base) if base else None,
        points=[
            {"window": p.window, "step_s": p.step_s, "tpot_s": p.tpot_s, "length": p.length, "label": p.label}
            for p in pts
        ],  # fmt: skip
        residuals_s=[y - (intercept + slope * x) for x, y in zip(xs, ys, strict=True)],
        exact=len(windows) == 2 and n == 2,
    )


# ---- prediction -------------------------------------------------------------------------------------


@dataclass
class Prediction:
    """Predicted TPOT per window for one draft and one prompt class (or mix)."""

    measured_window: int
    per_position: list[float]
    lengths: dict[int, float]
    tpot_s: dict[int, float]
    speedup: dict[int, float | None]
    best_window: int
    cost: CostFit
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "measured_window": self.measured_window,
            "per_position": self.per_position,
            "lengths": {str(k): v for k, v in self.lengths.items()},
            "tpot_s": {str(k): v for k, v in self.tpot_s.items()},
            "speedup": {str(k): v for k, v in self.speedup.items()},
            "best_window": self.best_window,
            "cost": self.cost.to_dict(),
            "notes": self.notes,
        }


def predict_tpot(
    per_position: Sequence[float],
    cost: CostFit,
    *,
    windows: Iterable[int] | None = None,
    baseline_tpot_s: float | None = None,
    semantics: WindowSemantics = "upstream",
) -> Prediction:
    """TPOT(k) = step(k) / L(k) for each window (default 1..K); the best is the smallest TPOT.

    On equal predictions the smaller window wins (cheaper to compile and to run).
    """
    probs, notes = clean_per_position(per_position)
    if not probs:
        raise AnalysisError("no per-position acceptance to predict from", hint="measure a speculative window first")
    k_max = measured_window(probs, semantics)
    wanted = sorted(set(windows)) if windows is not None else list(range(1, k_max + 1))
    too_big = [k for k in wanted if k > k_max or k < 1]
    if too_big:
        raise AnalysisError(
            f"cannot predict window(s) {too_big}: the measured window is {k_max}",
            hint=f"predict windows 1..{k_max}, or measure a larger window first",
        )
    lengths_all = acceptance_lengths(probs, semantics=semantics)
    lengths = {k: lengths_all[k] for k in wanted}
    tpot = {k: cost.step_s(k) / lengths[k] for k in wanted}
    base = baseline_tpot_s if baseline_tpot_s is not None else cost.target_s
    speedup = {k: (base / t if base and t > 0 else None) for k, t in tpot.items()}
    best = min(wanted, key=lambda k: (round(tpot[k], 12), k))
    if cost.draft_s < 0:
        notes.append(
            f"the fitted draft cost per token is negative ({cost.draft_s * 1e3:.2f} ms): the measured steps "
            "are too noisy to separate draft from verify cost; treat the prediction with caution"
        )
    return Prediction(
        measured_window=k_max,
        per_position=probs,
        lengths=lengths,
        tpot_s=tpot,
        speedup=speedup,
        best_window=best,
        cost=cost,
        notes=notes,
    )


def mix_prediction(
    predictions: Mapping[str, Prediction], weights: Mapping[str, float], baseline_tpot_s: Mapping[str, float]
) -> dict[str, Any]:
    """Weighted mix of per-class predictions: mean time per token = sum_c w_c TPOT_c(k) (w normalised)."""
    classes = [c for c in weights if c in predictions and weights[c] > 0]
    if not classes:
        raise AnalysisError(
            "none of the mix's prompt classes has a prediction",
            hint=f"use classes among {', '.join(sorted(predictions)) or 'none'} in --mix",
        )
    total = sum(weights[c] for c in classes)
    w = {c: weights[c] / total for c in classes}
    common = sorted(set.intersection(*(set(predictions[c].tpot_s) for c in classes)))
    tpot = {k: sum(w[c] * predictions[c].tpot_s[k] for c in classes) for k in common}
    base = sum(w[c] * baseline_tpot_s[c] for c in classes if c in baseline_tpot_s)
    have_base = all(c in baseline_tpot_s for c in classes)
    speedup = {k: (base / t if have_base and t > 0 else None) for k, t in tpot.items()}
    best = min(common, key=lambda k: (round(tpot[k], 12), k))
    return {"weights": w, "tpot_s": tpot, "speedup": speedup, "best_window": best}


def compare_prediction(predicted: Mapping[int, float], measured: Mapping[int, float]) -> list[dict[str, Any]]:
    """Rows ``{window, predicted_s, measured_s, error}`` for windows both predicted and measured."""
    rows = []
    for k in sorted(set(predicted) & set(measured)):
        p, m = predicted[k], measured[k]
        rows.append({"window": k, "predicted_s": p, "measured_s": m, "error": (p - m) / m if m else None})
    return rows
