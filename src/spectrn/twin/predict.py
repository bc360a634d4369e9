"""What a twin predicts per window and load level, with intervals; the best window; where speculation stops paying.

Two ways to run the simulator's model, and which one gives which figure:

- **engine** (``spectrn.twin.engine``): the simulator's scheduling offline for one closed-loop level: prefills
  pausing decoding, the batch limit and queueing beyond it, acceptance draws, the start ramp. It gives every
  point estimate (TPOT and e2e medians per class, throughput), with the same request count and class order as
  the bench it stands for.
- **analytic** steady state: with ``b = min(c, max_num_seqs)`` sequences of the mix's mean context decoding
  together, each class's time per token is ``(step(b, C) + b / n * prefill) / E_c`` (``E_c`` its mean tokens
  per step, ``n`` the mean decode steps per request: every request's prefill pauses the batch once). Exact in
  steady state for the mean; fast. It carries the fit's uncertainty: the cost parameters are drawn from their
  covariance, each class's measured acceptance per position from its standard errors, the decay beyond the
  measured positions from its covariance; each figure's 95% interval is the engine's point times the spread of
  the analytic ratio (draw / point) over the draws. It also scans concurrency for the crossover.

The mix's time per token is ``sum_c w_c TPOT_c`` (the sweep's definition, ``spectrn.sweep.recommend``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from spectrn.errors import ConfigError
from spectrn.sim.model import Preset, Resolved, resolve
from spectrn.twin.engine import ClassLoad, LevelResult, run_level
from spectrn.twin.model import Twin
from spectrn.windows import expected_tokens_per_step, proposals

METHOD = (
    "point: the simulator's engine run offline (closed loop, prefills, batch limit, queueing, acceptance draws); "
    "interval: the fit's uncertainty (cost covariance, acceptance standard errors, decay covariance) propagated "
    "by the analytic steady-state model as a ratio to its own point"
)
MAX_SCAN = 4096


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Estimate(_Strict):
    value: float
    ci95: tuple[float, float] | None = None


class Cell(_Strict):
    concurrency: int
    window: int | None = Field(description="None: the baseline (no speculation).")
    tpot_s: dict[str, Estimate] = Field(description="TPOT p50 per prompt class, and 'mix'.")
    e2e_s: Estimate = Field(description="e2e p50 over all requests.")
    ttft_s: Estimate
    throughput_tok_s: Estimate
    usd_per_million_tokens: Estimate
    speedup_tpot: dict[str, Estimate] = Field(default_factory=dict, description="Baseline / speculative TPOT.")
    mean_accepted_length: dict[str, float] = Field(default_factory=dict)
    extrapolated: list[str] = Field(
        default_factory=list, description="Classes whose acceptance beyond the measured positions is extrapolated."
    )
    method: Literal["engine"] = "engine"


class Best(_Strict):
    concurrency: int
    window: int | None = Field(description="None: speculation does not pay at this level.")
    speedup: Estimate | None = None
    probability_best: float | None = Field(default=None, description="Share of draws in which it is the fastest.")


class Crossover(_Strict):
    window: int
    concurrency: int | None = Field(
        description="Smallest concurrency where speculation stops paying (mix TPOT); 0: it never pays; None: it "
        "still pays at the end of the scan."
    )
    ci95: tuple[float, float] | None = None
    no_crossover_share: float = Field(description="Share of draws in which it still pays at the scan's end.")
    scanned_to: int
    note: str


class Prediction(_Strict):
    twin: str
    performance: bool
    reasons: list[str] = Field(default_factory=list)
    draft: str
    semantics: str
    max_num_seqs: int
    max_tokens: int
    requests: dict[int, int] = Field(description="Requests per load level (closed-loop streams: the level).")
    mix: dict[str, float]
    samples: int
    method: str = METHOD
    cells: list[Cell]
    best: list[Best]
    crossover: list[Crossover]
    crossover_unlimited: list[Crossover] = Field(
        default_factory=list, description="The same ignoring the batch limit (a service compiled to batch further)."
    )
    no_window_pays_from: int | None = Field(
        default=None,
        description="Concurrency from which none of the windows pays (batch limit applied); None: one still pays.",
    )
    no_window_pays_from_unlimited: int | None = Field(default=None, description="The same ignoring the batch limit.")
    notes: list[str] = Field(default_factory=list)


# ---- the analytic model ----------------------------------------------------------------------------------


class Analytic:
    """The steady-state model of one configuration for a workload: ``tpot(batch)`` per class and for the mix."""

    def __init__(
        self,
        model: Resolved,
        probs: Mapping[str, Sequence[float]],
        weights: Mapping[str, float],
        prompt_tokens: Mapping[str, float],
        *,
        max_tokens: int,
    ) -> None:
        total_w = sum(weights.values())
        self.model = model
        self.weights = {c: w / total_w for c, w in weights.items()}
        self.e = {c: expected_tokens_per_step(probs[c]) if model.speculative else 1.0 for c in weights}
        n = {c: max(1.0, (max_tokens - 1) / self.e[c]) for c in weights}
        share = {c: weights[c] * (n[c] + 1) for c in weights}  # time-weighted presence in the batch
        s_total = sum(share.values())
        self.ctx = sum(share[c] / s_total * (prompt_tokens[c] + max_tokens / 2) for c in weights)
        self.mean_n = sum(self.weights[c] * n[c] for c in weights)
        mean_prompt = sum(self.weights[c] * prompt_tokens[c] for c in weights)
        self.prefill = model.prefill_s(int(mean_prompt)) / model.time_scale

    def per_step(self, batch: int) -> float:
        step = self.model.step_s(batch, int(batch * self.ctx)) / self.model.time_scale
        return step + batch / self.mean_n * self.prefill

    def tpot(self, batch: int) -> dict[str, float]:
        per_step = self.per_step(batch)
        out = {c: per_step / self.e[c] for c in self.weights}
        out["mix"] = sum(self.weights[c] * out[c] for c in self.weights)
        return out

    def tpot_mix(self, batch: int) -> float:
        return self.per_step(batch) * sum(w / self.e[c] for c, w in self.weights.items())


# ---- parameter draws -------------------------------------------------------------------------------------


def _draws(twin: Twin, n: int, seed: int) -> list[Preset]:
    """``n`` presets with the fitted values drawn from their uncertainty."""
    import numpy as np

    rng = np.random.default_rng(seed)
    cal = twin.calibration
    preset = twin.preset
    out = []
    names = cal.cost_covariance.names
    cov = np.asarray(cal.cost_covariance.matrix, dtype=float)
    mean = np.asarray([cal.costs[k].value for k in names], dtype=float)
    dnames = cal.decay.covariance.names
    dcov = np.asarray(cal.decay.covariance.matrix, dtype=float) if cal.decay.covariance.matrix else None
    dmean = None
    if dcov is not None:
        dmean = np.asarray(
            [next(c.alpha for c in cal.acceptance if f"alpha_{c.name}" == k) for k in dnames[:-2]]
            + [math.log(cal.decay.tau), math.log(cal.decay.gamma)]
        )
    fits = {c.name: c for c in cal.acceptance}
    for _ in range(n):
        costs = dict(zip(names, rng.multivariate_normal(mean, cov, method="svd") if names else [], strict=True))
        costs = {k: max(0.0, float(v)) for k, v in costs.items()}
        cost_update = {k: v for k, v in costs.items() if k in type(preset.cost).model_fields}
        cost = preset.cost.model_copy(update=cost_update)
        if "weights_read_s" in cost_update:
            cost = cost.model_copy(update={"weights_read_s": max(cost.weights_read_s, 1e-9)})
        drafts = dict(preset.drafts)
        d = drafts[cal.draft]
        drafts[cal.draft] = d.model_copy(
            update={
                "run_s": costs.get("draft_run_s", d.run_s),
                "kv_read_per_token_s": costs.get("draft_kv_read_per_token_s", d.kv_read_per_token_s),
            }
        )
        acc = preset.acceptance
        alphas = {c.name: c.alpha for c in acc.classes}
        tau, gamma = acc.decay_tau, acc.decay_gamma
        if dcov is not None and dmean is not None:
            x = rng.multivariate_normal(dmean, dcov, method="svd")
            alphas.update(
                {k[len("alpha_") :]: float(min(1.0, max(0.0, v))) for k, v in zip(dnames[:-2], x[:-2], strict=True)}
            )
            tau, gamma = float(math.exp(x[-2])), float(math.exp(x[-1]))
        classes = []
        for c in acc.classes:
            f = fits.get(c.name)
            probs = list(c.position_probs)
            if f is not None:
                probs = [
                    float(min(1.0, max(0.0, rng.normal(p, se))))
                    for p, se in zip(probs, f.position_se[: len(probs)], strict=False)
                ]
            classes.append(c.model_copy(update={"position_probs": probs, "alpha": alphas[c.name]}))
        acceptance = acc.model_copy(update={"classes": classes, "decay_tau": tau, "decay_gamma": gamma})
        out.append(preset.model_copy(update={"cost": cost, "drafts": drafts, "acceptance": acceptance}))
    return out


# ---- the prediction --------------------------------------------------------------------------------------


def _resolve(preset: Preset, twin: Twin, window: int | None) -> Resolved:
    return resolve(
        preset,
        speculative=window is not None,
        draft=twin.calibration.draft,
        window=window or preset.default_window,
        time_scale=1.0,
        semantics=twin.calibration.semantics,
    )


def _class_text(preset: Preset, name: str) -> str:
    for c in preset.acceptance.classes:
        if c.name == name and c.contains:
            return c.contains[0]
    raise ConfigError(
        f"--mix: the twin has no measured prompt class {name!r}",
        hint=f"use its classes: {', '.join(c.name for c in preset.acceptance.classes)}",
    )


def _interval(point: float, ratios: Any) -> tuple[float, float]:
    import numpy as np

    lo, hi = np.nanpercentile(ratios, [2.5, 97.5])
    return (float(point * lo), float(point * hi))


def predict(
    twin: Twin,
    *,
    windows: Sequence[int],
    levels: Sequence[int],
    mix: Mapping[str, float] | None = None,
    max_num_seqs: int | None = None,
    requests: int | None = None,
    max_tokens: int | None = None,
    order: Sequence[str] | None = None,
    ramp_s: Mapping[int, float] | None = None,
    samples: int = 200,
    seed: int = 0,
    replicates: int = 4,
) -> Prediction:
    """Predict every (window, level) and the baseline per level (see the module docstring).

    ``order``: the class of each request in sending order (as a bench would send them; default: the mix,
    evenly interleaved); ``ramp_s``: per level, the seconds over which the closed-loop streams start;
    ``replicates``: engine runs per speculative configuration with different acceptance draws (a point is the
    mean of their medians: a bench of a few requests is one draw, the prediction is its expectation)."""
    import numpy as np

    cal = twin.calibration
    preset = twin.preset
    sem = cal.semantics
    for k in windows:
        if proposals(sem, k) < 1:
            raise ConfigError(
                f"--windows: window {k} proposes nothing under {sem} semantics", hint="use windows of at least 2"
            )
    weights = dict(mix) if mix else dict(cal.workload.mix)
    total = sum(weights.values())
    if total <= 0:
        raise ConfigError("--mix: the weights add up to 0", hint="e.g. --mix structured=0.7,open=0.3")
    weights = {c: w / total for c, w in weights.items() if w > 0}
    texts = {c: _class_text(preset, c) for c in weights}
    prompt_tokens = {c: cal.workload.prompt_tokens.get(c, 64.0) for c in weights}
    limit = max_num_seqs or preset.max_num_seqs
    out_tokens = max_tokens or cal.workload.max_tokens
    names = list(weights)
    order_idx = [names.index(c) for c in order] if order is not None else None

    def n_requests(level: int) -> int:
        """The requests of a level: as asked; else the runs' count, at least two per stream (so that every
        stream of a high level runs, and runs twice)."""
        return requests or max(len(order_idx) if order_idx else cal.workload.requests, 2 * level)

    def level_order(level: int) -> list[int] | None:
        if order_idx is None:
            return None
        n = n_requests(level)
        return [order_idx[i % len(order_idx)] for i in range(n)]

    def loads(model: Resolved) -> list[ClassLoad]:
        return [
            ClassLoad(c, weights[c], max(1, int(round(prompt_tokens[c]))), model.position_probs(texts[c]))
            for c in names
        ]

    def engine(model: Resolved, level: int) -> list[LevelResult]:
        return [
            run_level(
                model,
                loads(model),
                concurrency=level,
                requests=n_requests(level),
                max_tokens=out_tokens,
                batch_limit=limit,
                ramp_s=(ramp_s or {}).get(level, 0.0),
                seed=seed + r,
                order=level_order(level),
            )
            for r in range(replicates if model.speculative else 1)  # without speculation nothing is drawn
        ]

    draws = _draws(twin, samples, seed)
    hourly = cal.pricing.hourly_usd * cal.pricing.instances_per_service
    configs: list[int | None] = [None, *windows]

    def analytic(p: Preset, window: int | None, level: int) -> dict[str, float]:
        m = _resolve(p, twin, window)
        probs = {c: m.position_probs(texts[c]) for c in names}
        return Analytic(m, probs, weights, prompt_tokens, max_tokens=out_tokens).tpot(min(level, limit))

    cells: list[Cell] = []
    best: list[Best] = []
    table = {c: len(x.position_probs) for x in preset.acceptance.classes for c in [x.name]}
    for level in levels:
        point_a = {w: analytic(preset, w, level) for w in configs}
        draw_a = {w: [analytic(p, w, level) for p in draws] for w in configs}
        results = {w: engine(_resolve(preset, twin, w), level) for w in configs}
        base_tpot: dict[str, float] = {}
        level_cells: dict[int | None, Cell] = {}
        for w in configs:
            runs = results[w]
            tpot: dict[str, Estimate] = {}
            per_class = {c: _mean([r.p50("tpot", c) for r in runs]) for c in names}
            for c in [*names, "mix"]:
                value = sum(weights[x] * per_class[x] for x in names) if c == "mix" else per_class[c]
                ratios = np.asarray([d[c] for d in draw_a[w]]) / point_a[w][c]
                tpot[c] = Estimate(value=value, ci95=_interval(value, ratios))
            mix_ratio = np.asarray([d["mix"] for d in draw_a[w]]) / point_a[w]["mix"]
            e2e = _mean([r.p50("e2e") for r in runs])
            ttft = _mean([r.p50("ttft") for r in runs])
            thr = _mean([r.throughput for r in runs])
            cost = hourly / (thr * 3600) * 1e6 if thr > 0 else float("nan")
            cell = Cell(
                concurrency=level,
                window=w,
                tpot_s=tpot,
                e2e_s=Estimate(value=e2e, ci95=_interval(e2e, mix_ratio)),
                ttft_s=Estimate(value=ttft),
                throughput_tok_s=Estimate(value=thr, ci95=_interval(thr, 1.0 / mix_ratio)),
                usd_per_million_tokens=Estimate(value=cost, ci95=_interval(cost, mix_ratio)),
            )
            if w is None:
                base_tpot = {c: e.value for c, e in tpot.items()}
            else:
                m = _resolve(preset, twin, w)
                cell.mean_accepted_length = {c: round(m.expected_tokens_per_step(texts[c]), 4) for c in names}
                cell.extrapolated = [c for c in names if proposals(sem, w) > table[c]]
                for c in [*names, "mix"]:
                    ratios = np.asarray([db[c] / ds[c] for db, ds in zip(draw_a[None], draw_a[w], strict=True)]) / (
                        point_a[None][c] / point_a[w][c]
                    )
                    value = base_tpot[c] / tpot[c].value
                    cell.speedup_tpot[c] = Estimate(value=value, ci95=_interval(value, ratios))
            level_cells[w] = cell
            cells.append(cell)
        spec = list(windows)
        if spec:
            fastest = min(spec, key=lambda w: (level_cells[w].tpot_s["mix"].value, w))
            wins = [_fastest(spec, [draw_a[w][i]["mix"] for w in spec]) for i in range(len(draws))]
            pays = level_cells[fastest].speedup_tpot["mix"].value > 1.0
            best.append(
                Best(
                    concurrency=level,
                    window=fastest if pays else None,
                    speedup=level_cells[fastest].speedup_tpot["mix"],
                    probability_best=wins.count(fastest) / len(wins),
                )
            )
    cross = [_crossover(twin, preset, draws, w, weights, texts, prompt_tokens, out_tokens, limit) for w in windows]
    unlimited = [
        _crossover(twin, preset, draws, w, weights, texts, prompt_tokens, out_tokens, MAX_SCAN) for w in windows
    ]
    notes = list(cal.notes)
    if any(c.extrapolated for c in cells):
        notes.append(
            "acceptance beyond the measured positions is extrapolated with the fitted decay curve "
            f"(tau {preset.acceptance.decay_tau:.3g}, gamma {preset.acceptance.decay_gamma:.3g}"
            + ("" if cal.decay.identified else ", the prior's: not identified by the runs")
            + ")"
        )
    if cal.costs["compute_per_token_s"].status != "fitted":
        notes.append(
            "the compute slope was not identified (no compute-bound step in the runs): crossovers are at or "
            "beyond the figures shown"
        )
    return Prediction(
        twin=preset.name,
        performance=cal.performance,
        reasons=cal.reasons,
        draft=cal.draft,
        semantics=sem,
        max_num_seqs=limit,
        max_tokens=out_tokens,
        requests={level: n_requests(level) for level in levels},
        mix=weights,
        samples=samples,
        cells=cells,
        best=best,
        crossover=cross,
        crossover_unlimited=unlimited,
        no_window_pays_from=_none_pays(cross),
        no_window_pays_from_unlimited=_none_pays(unlimited),
        notes=notes,
    )


def _none_pays(crossovers: Sequence[Crossover]) -> int | None:
    """The concurrency from which no window pays: the latest crossover (None when a window never stops paying)."""
    if not crossovers or any(c.concurrency is None for c in crossovers):
        return None
    return max(c.concurrency or 1 for c in crossovers)


def _mean(values: Sequence[float | None]) -> float:
    present = [v for v in values if v is not None and v == v]
    return sum(present) / len(present) if present else float("nan")


def _fastest(windows: Sequence[int], tpots: Sequence[float]) -> int:
    return min(zip(tpots, windows, strict=True))[1]


def _scan_points(limit: int) -> list[int]:
    points = list(range(1, min(limit, 32) + 1))
    b = 32.0
    while b < limit:
        b = min(float(limit), b * 1.25)
        points.append(int(b))
    return sorted(set(points))


def _crossover(
    twin: Twin,
    preset: Preset,
    draws: Sequence[Preset],
    window: int,
    weights: Mapping[str, float],
    texts: Mapping[str, str],
    prompt_tokens: Mapping[str, float],
    max_tokens: int,
    limit: int,
) -> Crossover:
    """The smallest concurrency (batch up to ``limit``) past the first that pays at which the mix's speculative
    TPOT reaches the baseline's again: scanned on a grid (every batch to 32, then 25% steps), then bisected."""
    import numpy as np

    points = _scan_points(limit)

    def first(p: Preset) -> int | None:
        spec = _resolve(p, twin, window)
        base = _resolve(p, twin, None)
        a_spec = Analytic(spec, {c: spec.position_probs(texts[c]) for c in weights}, weights, prompt_tokens,
                          max_tokens=max_tokens)  # fmt: skip
        a_base = Analytic(base, {c: [] for c in weights}, weights, prompt_tokens, max_tokens=max_tokens)

        def pays(b: int) -> bool:
            return a_spec.tpot_mix(b) < a_base.tpot_mix(b)

        paid: int | None = None
        for b in points:
            if pays(b):
                paid = b
            elif paid is not None:
                lo, hi = paid, b
                while hi - lo > 1:
                    mid = (lo + hi) // 2
                    lo, hi = (mid, hi) if pays(mid) else (lo, mid)
                return hi
        return None if paid is not None else 0

    point = first(preset)
    values = [first(p) for p in draws]
    found = np.asarray([v for v in values if v], dtype=float)
    none_share = values.count(None) / len(values)  # samples >= 10 (--samples)
    ci = None
    if found.size and none_share < 0.025 and 0 not in values:
        lo, hi = np.percentile(found, [2.5, 97.5])
        ci = (float(lo), float(hi))
    if point is None:
        note = f"still pays at a batch of {limit}" + (" (the batch limit)" if limit < MAX_SCAN else "")
    elif point == 0:
        note = f"does not pay at any batch up to {limit}"
    else:
        note = f"stops paying from concurrency {point}"
    return Crossover(
        window=window, concurrency=point, ci95=ci, no_crossover_share=none_share, scanned_to=limit, note=note
    )


def speedup_curve(
    twin: Twin, window: int, batches: Sequence[int], mix: Mapping[str, float] | None = None
) -> list[float]:
    """The analytic mix TPOT speedup (baseline / speculative) at each batch size, at the fitted values."""
    cal = twin.calibration
    weights = dict(mix) if mix else dict(cal.workload.mix)
    texts = {c: _class_text(twin.preset, c) for c in weights}
    prompt_tokens = {c: cal.workload.prompt_tokens.get(c, 64.0) for c in weights}
    spec = _resolve(twin.preset, twin, window)
    base = _resolve(twin.preset, twin, None)
    a_spec = Analytic(spec, {c: spec.position_probs(texts[c]) for c in weights}, weights, prompt_tokens,
                      max_tokens=cal.workload.max_tokens)  # fmt: skip
    a_base = Analytic(base, {c: [] for c in weights}, weights, prompt_tokens, max_tokens=cal.workload.max_tokens)
    return [a_base.tpot_mix(b) / a_spec.tpot_mix(b) for b in batches]
