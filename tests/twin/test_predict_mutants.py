"""``spectrn twin predict`` on a hand-made twin whose every figure can be worked out by hand (no servers).

The twin: a 20 ms memory-bound target step (compute 0.4 ms per position), a 2.2 ms draft pass, prefills of
100 ms + 1 ms per prompt token, no KV terms; two prompt classes whose measured acceptance is exact, ``s`` (every
proposal accepted) and ``o`` (none accepted), so that the offline engine draws nothing it could vary. One stream
decodes alone: a request's TPOT is its steps' time over its tokens. Checked whole: the cells, the best window,
the crossovers (found by the module's grid and bisection, here against a linear scan of the analytic model
written out from its definition in docs/twin.md), the notes; the parameter draws against the twin's standard
errors; the helpers (scan grid, fastest window, the latest crossover, intervals, means) on hand-made values.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from spectrn.errors import ConfigError
from spectrn.sim.model import PRESETS, AcceptanceClass
from spectrn.twin.model import (
    Calibration,
    ClassFit,
    Covariance,
    Decay,
    ParamFit,
    Pricing,
    Regime,
    Residuals,
    Twin,
    Workload,
)
from spectrn.twin.predict import (
    MAX_SCAN,
    METHOD,
    Crossover,
    _draws,
    _fastest,
    _interval,
    _mean,
    _none_pays,
    _scan_points,
    predict,
    speedup_curve,
)

W = 0.02  # weights read: the target step at small batches
C = 0.0004  # compute per position
R = 0.0022  # one draft pass
P0, P1 = 0.1, 0.001  # prefill base, per prompt token
COSTS = {"weights_read_s": W, "kv_read_per_seq_s": 0.0, "kv_read_per_token_s": 0.0, "compute_per_token_s": C,
         "prefill_base_s": P0, "prefill_per_token_s": P1, "draft_run_s": R,
         "draft_kv_read_per_token_s": 0.0}  # fmt: skip
PROMPTS = {"s": 10.0, "o": 30.0}


def make_twin(
    *,
    cost_se: dict[str, float] | None = None,
    position_se: float = 0.0,
    decay_cov: list[list[float]] | None = None,
    compute_status: str = "fitted",
    identified: bool = True,
    max_num_seqs: int = 8,
    notes: list[str] | None = None,
    costs_at: dict[str, float] | None = None,
    o_probs: float = 0.0,
    draft: str = "qwen3-1.7b",
    semantics: str = "nxdi",
    prompts: dict[str, float] | None = None,
    dnames: list[str] | None = None,
) -> Twin:
    base = PRESETS["qwen3-32b-trn2"]
    values = {**COSTS, **(costs_at or {})}
    cost = base.cost.model_copy(update={k: v for k, v in values.items() if not k.startswith("draft_")})
    drafts = {draft: base.drafts["qwen3-1.7b"].model_copy(
        update={"run_s": values["draft_run_s"], "kv_read_per_token_s": 0.0, "compute_per_token_s": 0.0})}  # fmt: skip
    classes = [
        AcceptanceClass(name="s", contains=["count to ten"], position_probs=[1.0] * 4, alpha=1.0),
        AcceptanceClass(name="o", contains=["tell a story", "other"], position_probs=[o_probs] * 4, alpha=0.0),
    ]
    acc = base.acceptance.model_copy(update={"classes": classes, "decay_tau": 6.0, "decay_gamma": 2.0})
    preset = base.model_copy(update={"name": "handmade", "cost": cost, "drafts": drafts, "acceptance": acc,
                                     "max_num_seqs": max_num_seqs})  # fmt: skip
    names = list(COSTS)
    se = cost_se or {}
    matrix = [[(se.get(a, 0.0) ** 2 if a == b else 0.0) for b in names] for a in names]
    costs = {k: ParamFit(value=v, se=se.get(k, 0.0), status="fitted") for k, v in values.items()}
    costs["compute_per_token_s"] = ParamFit(value=values["compute_per_token_s"], status=compute_status)  # type: ignore[arg-type]
    fits = [ClassFit(name=c.name, position_probs=list(c.position_probs), position_se=[position_se] * 4,
                     reached=[100] * 4, alpha=c.alpha, share=0.5, prompt_tokens=PROMPTS[c.name])
            for c in classes]  # fmt: skip
    dnames = dnames or ["alpha_s", "alpha_o", "log_tau", "log_gamma"]
    decay = Decay(tau=6.0, gamma=2.0, identified=identified,
                  covariance=Covariance(names=dnames, matrix=decay_cov) if decay_cov else Covariance())  # fmt: skip
    cal = Calibration(
        created_at=0.0, spectrn_version="0", performance=True, reasons=["r1"], draft=draft, semantics=semantics,  # type: ignore[arg-type]
        runs=[], costs=costs, cost_covariance=Covariance(names=names, matrix=matrix),
        regime=Regime(steps=1, segments=1, compute_bound_steps=0, residual_scale_s=0.0), acceptance=fits,
        decay=decay, residuals=Residuals(step_p90_abs_rel=0, step_median_abs_rel=0, segment_p90_abs_rel=0,
                                         segment_median_abs_rel=0),
        workload=Workload(max_tokens=7, requests=4, prompts="p", mix={"s": 3.0, "o": 1.0},
                          prompt_tokens=PROMPTS if prompts is None else prompts),
        pricing=Pricing(hourly_usd=36.0, instances_per_service=0.5), notes=["fit note"] if notes is None else notes,
    )  # fmt: skip
    return Twin(preset=preset, calibration=cal)


def rounded(x: Any) -> Any:
    """Every float to 10 significant digits (nested), so that whole outputs compare exactly."""
    if isinstance(x, float):
        return float(f"{x:.10g}")
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [rounded(v) for v in x]
    return x


def est(value: float, lo: float | None = None, hi: float | None = None, *, ci: bool = True) -> dict[str, Any]:
    return {"value": value, "ci95": ((value if lo is None else lo), (value if hi is None else hi)) if ci else None}


# ---- the analytic model by hand (docs/twin.md) ----


def step(b: int, k: int | None) -> float:
    """A target step (memory-bound 20 ms or 0.4 ms per position), plus k draft passes when speculating."""
    if k is None:
        return max(W, C * b)
    return k * R + max(W, C * b * k)


def tpot_mix(b: int, k: int | None, mix: dict[str, float]) -> float:
    """(step + b / n x prefill) x sum_c w_c / E_c: E_c = k (nxdi: k - 1 proposals all accepted) for s, 1 for o;
    n_c = max(1, 6 / E_c) decode steps for 7 tokens; prefill at the mean prompt (int)."""
    total = sum(mix.values())
    w = {c: v / total for c, v in mix.items()}
    e = {"s": float(k) if k else 1.0, "o": 1.0}
    n = sum(w[c] * max(1.0, 6 / e[c]) for c in w)
    prefill = P0 + P1 * int(sum(w[c] * PROMPTS[c] for c in w))
    return (step(b, k) + b / n * prefill) * sum(w[c] / e[c] for c in w)


def crossing(k: int, mix: dict[str, float], limit: int) -> int | None:
    """A linear scan: the first batch past a paying one where speculation no longer pays (0: never pays)."""
    paid = False
    for b in range(1, limit + 1):
        if tpot_mix(b, k, mix) < tpot_mix(b, None, mix):
            paid = True
        elif paid:
            return b
    return None if paid else 0


def test_the_hand_model_crosses_where_worked_out() -> None:
    # s alone: (3 R + max(W, 3 C b)) / 3 + b/2 x 0.11 / 3 against max(W, C b) + b/6 x 0.11: the prefill terms are
    # equal, so it stops paying where R + C b >= W: b >= 44.5
    assert crossing(3, {"s": 1.0}, 100) == 45
    assert crossing(3, {"o": 1.0}, 100) == 0


# ---- predict, whole ----


def engine_cell(k: int | None) -> dict[str, Any]:
    """One stream, 4 requests in the order s, s, o, s (the weights 3 : 1 interleaved); 7 tokens each: the
    prefill's and 6 more. A step of s emits k tokens (2 steps for 6 at k = 3 or 5), of o one (6 steps)."""
    st = step(1, k)
    steps = {"s": 6 if k is None else math.ceil(6 / k), "o": 6}
    tpot = {c: steps[c] * st / 6 for c in steps}
    e2e = {c: P0 + P1 * PROMPTS[c] + steps[c] * st for c in steps}
    span = 3 * e2e["s"] + e2e["o"] + 3e-6  # each successor arrives 1 us after its predecessor's last step
    thr = 28 / span
    return {"tpot": tpot, "e2e": e2e["s"], "ttft": P0 + P1 * 10, "thr": thr}


def test_predict_one_stream_every_figure() -> None:
    twin = make_twin()
    pred = predict(twin, windows=[3, 5], levels=[1], samples=6, seed=3)
    cells = []
    base = engine_cell(None)
    base_mix = 0.75 * base["tpot"]["s"] + 0.25 * base["tpot"]["o"]
    for k in (None, 3, 5):
        e = engine_cell(k)
        mix = 0.75 * e["tpot"]["s"] + 0.25 * e["tpot"]["o"]
        cell: dict[str, Any] = {
            "concurrency": 1, "window": k,
            "tpot_s": {"s": est(e["tpot"]["s"]), "o": est(e["tpot"]["o"]), "mix": est(mix)},
            "e2e_s": est(e["e2e"]), "ttft_s": est(e["ttft"], ci=False), "throughput_tok_s": est(e["thr"]),
            "usd_per_million_tokens": est(18 / (e["thr"] * 3600) * 1e6),
            "speedup_tpot": {}, "mean_accepted_length": {}, "extrapolated": [], "method": "engine",
        }  # fmt: skip
        if k is not None:
            cell["speedup_tpot"] = {"s": est(base["tpot"]["s"] / e["tpot"]["s"]),
                                    "o": est(base["tpot"]["o"] / e["tpot"]["o"]),
                                    "mix": est(base_mix / mix)}  # fmt: skip
            cell["mean_accepted_length"] = {"s": float(k), "o": 1.0}
        cells.append(cell)
    got = pred.model_dump(mode="python")
    assert rounded(got["cells"]) == rounded(cells)
    # the engine's fastest is 3 (s 8.87 ms, o 26.6 ms: mix 13.3 ms against 15.5 ms), but the analytic model, with
    # every prefill pausing the batch, has 5 faster: no draw has 3 fastest
    mix3 = 0.75 * engine_cell(3)["tpot"]["s"] + 0.25 * engine_cell(3)["tpot"]["o"]
    assert tpot_mix(1, 5, {"s": 3, "o": 1}) < tpot_mix(1, 3, {"s": 3, "o": 1})
    assert rounded(got["best"]) == rounded(
        [{"concurrency": 1, "window": 3, "speedup": est(base_mix / mix3), "probability_best": 0.0}]
    )
    mix = {"s": 0.75, "o": 0.25}
    c3, c5 = crossing(3, mix, MAX_SCAN), crossing(5, mix, MAX_SCAN)
    assert (crossing(3, mix, 8), crossing(5, mix, 8)) == (None, None)
    assert (c3, c5) == (28, 20)
    assert got["crossover"] == [
        {"window": k, "concurrency": None, "ci95": None, "no_crossover_share": 1.0, "scanned_to": 8,
         "note": "still pays at a batch of 8 (the batch limit)"} for k in (3, 5)
    ]  # fmt: skip
    assert got["crossover_unlimited"] == [
        {"window": k, "concurrency": c, "ci95": (float(c), float(c)), "no_crossover_share": 0.0,
         "scanned_to": MAX_SCAN, "note": f"stops paying from concurrency {c}"} for k, c in ((3, c3), (5, c5))
    ]  # fmt: skip
    assert (got["no_window_pays_from"], got["no_window_pays_from_unlimited"]) == (None, 28)
    rest = {k: v for k, v in got.items() if k not in ("cells", "best", "crossover", "crossover_unlimited")}
    assert rest == {
        "twin": "handmade", "performance": True, "reasons": ["r1"], "draft": "qwen3-1.7b", "semantics": "nxdi",
        "max_num_seqs": 8, "max_tokens": 7, "requests": {1: 4}, "mix": mix, "samples": 6, "method": METHOD,
        "no_window_pays_from": None, "no_window_pays_from_unlimited": 28, "notes": ["fit note"],
    }  # fmt: skip


def test_a_window_that_never_pays_extrapolates_and_says_so() -> None:
    # o alone: nothing accepted; at 7 the 6 proposals pass the 4 measured positions (the curve gives alpha 0);
    # 12 steps of 7 draft passes + a 20 ms target step against 6 of 20 ms
    twin = make_twin(identified=False, compute_status="bound", notes=[])
    pred = predict(twin, windows=[7], levels=[1, 2], mix={"o": 2.0, "s": 0.0}, max_num_seqs=16, requests=2,
                   max_tokens=7, samples=4)  # fmt: skip
    assert pred.mix == {"o": 1.0} and pred.requests == {1: 2, 2: 2} and pred.max_num_seqs == 16
    spec = [c for c in pred.cells if c.window == 7]
    assert [c.extrapolated for c in spec] == [["o"], ["o"]]
    assert [c.mean_accepted_length for c in spec] == [{"o": 1.0}, {"o": 1.0}]
    assert spec[0].tpot_s["o"].value == pytest.approx(7 * R + W)
    # two streams start together and decode together: a step of 2 at batch 2 (memory bound, no KV terms)
    assert spec[1].tpot_s["o"].value == pytest.approx(7 * R + W)
    assert rounded([b.model_dump() for b in pred.best]) == rounded(
        [{"concurrency": c, "window": None, "speedup": est(W / (7 * R + W)), "probability_best": 1.0}
         for c in (1, 2)]
    )  # fmt: skip
    assert [c.model_dump() for c in pred.crossover] == [
        {"window": 7, "concurrency": 0, "ci95": None, "no_crossover_share": 0.0, "scanned_to": 16,
         "note": "does not pay at any batch up to 16"}
    ]  # fmt: skip
    assert pred.crossover_unlimited[0].note == f"does not pay at any batch up to {MAX_SCAN}"
    assert (pred.no_window_pays_from, pred.no_window_pays_from_unlimited) == (1, 1)
    assert pred.notes == [
        "acceptance beyond the measured positions is extrapolated with the fitted decay curve (tau 6, gamma 2, "
        "the prior's: not identified by the runs)",
        "the compute slope was not identified (no compute-bound step in the runs): crossovers are at or beyond "
        "the figures shown",
    ]
    pred = predict(make_twin(notes=[]), windows=[7], levels=[1], mix={"o": 1.0}, samples=2)
    assert pred.notes == [
        "acceptance beyond the measured positions is extrapolated with the fitted decay curve (tau 6, gamma 2)"
    ]
    assert predict(make_twin(notes=[]), windows=[3], levels=[1], samples=2).notes == []


def test_still_paying_at_the_scan_end_has_no_batch_limit_remark() -> None:
    pred = predict(make_twin(max_num_seqs=MAX_SCAN), windows=[3], levels=[], mix={"s": 1.0}, samples=2)
    # s alone: stops paying at 45 (see test_the_hand_model_crosses_where_worked_out): past 32, found by bisection
    # between the grid's 40 and 50
    assert pred.crossover[0].concurrency == 45 == crossing(3, {"s": 1.0}, MAX_SCAN)
    assert (pred.cells, pred.best, pred.requests) == ([], [], {})
    pred = predict(make_twin(max_num_seqs=40), windows=[3], levels=[], mix={"s": 1.0}, samples=2)
    assert pred.crossover[0].note == "still pays at a batch of 40 (the batch limit)"
    assert pred.no_window_pays_from is None


def test_the_request_count_per_level() -> None:
    twin = make_twin()
    # the runs' count (4), at least two per stream; an order's length instead of the runs' count
    assert predict(twin, windows=[], levels=[1, 3], samples=1).requests == {1: 4, 3: 6}
    pred = predict(twin, windows=[], levels=[1], samples=1, order=["o", "o", "o", "s", "s"], mix={"s": 1, "o": 1})
    assert pred.requests == {1: 5}
    # o, o, o, s, s: the e2e median is an o request's (prompt 30: 130 ms + 6 x 20 ms)
    assert pred.cells[0].e2e_s.value == pytest.approx(P0 + 30 * P1 + 6 * W)
    assert predict(twin, windows=[], levels=[2], samples=1, requests=3).requests == {2: 3}


def test_a_ramp_delays_the_second_stream() -> None:
    # two streams of o, the second sent 0.5 s after the first (ramp 1 s over 2 workers): it finds the first
    # done (0.25 s), so neither waits: TTFT 130 ms each
    pred = predict(make_twin(), windows=[], levels=[2], mix={"o": 1.0}, requests=2, ramp_s={2: 1.0}, samples=1)
    assert pred.cells[0].ttft_s.value == pytest.approx(P0 + 30 * P1)
    pred = predict(make_twin(), windows=[], levels=[2], mix={"o": 1.0}, requests=2, samples=1)
    # without a ramp both are prefilled together: 100 ms + 60 tokens
    assert pred.cells[0].ttft_s.value == pytest.approx(P0 + 60 * P1)


def test_bad_windows_mixes_and_classes_are_refused_whole() -> None:
    twin = make_twin()
    with pytest.raises(ConfigError) as e:
        predict(twin, windows=[3, 1], levels=[1], samples=1)
    assert (e.value.message, e.value.hint) == (
        "--windows: window 1 proposes nothing under nxdi semantics",
        "use windows of at least 2",
    )
    with pytest.raises(ConfigError) as e:
        predict(twin, windows=[3], levels=[1], mix={"s": 0.0, "o": 0.0}, samples=1)
    assert (e.value.message, e.value.hint) == ("--mix: the weights add up to 0", "e.g. --mix structured=0.7,open=0.3")
    with pytest.raises(ConfigError) as e:
        predict(twin, windows=[3], levels=[1], mix={"x": 1.0}, samples=1)
    assert (e.value.message, e.value.hint) == (
        "--mix: the twin has no measured prompt class 'x'",
        "use its classes: s, o",
    )
    with pytest.raises(ConfigError) as e:
        speedup_curve(twin, 3, [1], mix={"x": 1.0})
    assert e.value.message == "--mix: the twin has no measured prompt class 'x'"


def test_a_class_without_texts_is_not_measured() -> None:
    twin = make_twin()
    classes = [twin.preset.acceptance.classes[0],
               AcceptanceClass(name="o", pattern="story", position_probs=[0.0], alpha=0.0)]  # fmt: skip
    preset = twin.preset.model_copy(
        update={"acceptance": twin.preset.acceptance.model_copy(update={"classes": classes})})  # fmt: skip
    with pytest.raises(ConfigError) as e:
        predict(twin.model_copy(update={"preset": preset}), windows=[3], levels=[1], samples=1)
    assert (e.value.message, e.value.hint) == (
        "--mix: the twin has no measured prompt class 'o'",
        "use its classes: s, o",
    )


def test_a_class_is_sent_as_its_first_text() -> None:
    # o's first text "tell a story" matches o; its second ("other") too: a prompt of neither would get the
    # predictability rule, not o's zero acceptance
    twin = make_twin()
    assert speedup_curve(twin, 3, [1], mix={"o": 1.0}) == pytest.approx(
        [tpot_mix(1, None, {"o": 1}) / tpot_mix(1, 3, {"o": 1})]
    )


# ---- the speedup curve ----


def test_the_speedup_curve_is_the_analytic_ratio_per_batch() -> None:
    twin = make_twin()
    mix = {"s": 3.0, "o": 1.0}
    want = [tpot_mix(b, None, mix) / tpot_mix(b, 5, mix) for b in (1, 16, 64)]
    assert speedup_curve(twin, 5, [1, 16, 64]) == pytest.approx(want, rel=1e-12)
    assert speedup_curve(twin, 3, [1, 100], mix={"s": 1.0}) == pytest.approx(
        [tpot_mix(b, None, {"s": 1}) / tpot_mix(b, 3, {"s": 1}) for b in (1, 100)], rel=1e-12
    )
    # the prompt lengths: a class the runs did not measure is taken as 64 tokens
    cal = twin.calibration.model_copy(
        update={"workload": twin.calibration.workload.model_copy(update={"prompt_tokens": {"s": 10.0}})})  # fmt: skip
    got = speedup_curve(twin.model_copy(update={"calibration": cal}), 3, [1], mix={"o": 1.0})
    prefill = P0 + 64 * P1
    assert got == pytest.approx([(W + prefill / 6) / (3 * R + W + prefill / 6)], rel=1e-12)


# ---- the draws ----


def test_draws_without_uncertainty_are_the_fitted_preset() -> None:
    twin = make_twin(decay_cov=[[0.0] * 4 for _ in range(4)])
    draws = _draws(twin, 3, seed=0)
    assert len(draws) == 3
    for d in draws:
        assert d.cost.model_dump() == pytest.approx(twin.preset.cost.model_dump())
        assert d.drafts["qwen3-1.7b"].model_dump() == pytest.approx(twin.preset.drafts["qwen3-1.7b"].model_dump())
        assert [(c.name, c.position_probs, c.alpha) for c in d.acceptance.classes] == [
            ("s", [1.0] * 4, 1.0), ("o", [0.0] * 4, 0.0)]  # fmt: skip
        assert (d.acceptance.decay_tau, d.acceptance.decay_gamma) == pytest.approx((6.0, 2.0))
    assert _draws(twin, 0, seed=0) == []


def test_draws_spread_as_the_standard_errors_say() -> None:
    n = 4000
    cov = [[0.01, 0, 0, 0], [0, 0.0004, 0, 0], [0, 0, 0.04, 0], [0, 0, 0, 0.01]]  # sd 0.1, 0.02, 0.2, 0.1
    twin = make_twin(cost_se={"weights_read_s": 0.002, "draft_run_s": 0.0005, "prefill_base_s": 0.15},
                     position_se=0.2, decay_cov=cov)  # fmt: skip
    draws = _draws(twin, n, seed=7)
    assert [d.model_dump() for d in _draws(twin, 5, seed=7)] == [d.model_dump() for d in draws[:5]]
    assert [d.model_dump() for d in _draws(twin, 5, seed=8)] != [d.model_dump() for d in draws[:5]]
    tol = 5 / math.sqrt(n)  # five standard errors of a mean, in standard deviations

    def check(values: list[float], mean: float, sd: float) -> None:
        v = np.asarray(values)
        assert abs(v.mean() - mean) < tol * sd
        assert abs(v.std() - sd) < 2 * tol * sd  # the sd's standard error is sd / sqrt(2 n)

    check([d.cost.weights_read_s for d in draws], W, 0.002)
    check([d.drafts["qwen3-1.7b"].run_s for d in draws], R, 0.0005)
    # untouched costs stay (zero variance); the prefill base (sd 0.15 around 0.1) is cut at zero: a quarter of
    # the draws (P(z < -2/3) = 0.2525)
    assert {d.cost.compute_per_token_s for d in draws} == {C}
    assert {d.drafts["qwen3-1.7b"].kv_read_per_token_s for d in draws} == {0.0}
    zero = np.mean([d.cost.prefill_base_s == 0.0 for d in draws])
    assert abs(zero - 0.2525) < 0.03 and min(d.cost.prefill_base_s for d in draws) == 0.0
    # acceptance: s at 1 drawn with sd 0.2 and clipped to at most 1: half stay at 1; o at 0: half at 0
    s = np.asarray([d.acceptance.classes[0].position_probs for d in draws])
    o = np.asarray([d.acceptance.classes[1].position_probs for d in draws])
    assert s.max() == 1.0 and o.min() == 0.0 and s.shape == o.shape == (n, 4)
    assert abs((s == 1.0).mean() - 0.5) < 0.03 and abs((o == 0.0).mean() - 0.5) < 0.03
    # the clipped half-normal's mean: 0.2 x sqrt(2 / pi) / 2 = 0.0798 below 1, above 0
    assert abs(1 - s.mean() - 0.0798) < 0.005 and abs(o.mean() - 0.0798) < 0.005
    # alphas (s 1.0, o 0.0) clipped the same way; tau, gamma log-normal around 6 and 2
    alpha_s = np.asarray([d.acceptance.classes[0].alpha for d in draws])
    alpha_o = np.asarray([d.acceptance.classes[1].alpha for d in draws])
    assert alpha_s.max() == 1.0 and alpha_o.min() == 0.0
    assert abs((alpha_s == 1.0).mean() - 0.5) < 0.03 and abs((alpha_o == 0.0).mean() - 0.5) < 0.03
    assert abs(1 - alpha_s.mean() - 0.1 * math.sqrt(2 / math.pi) / 2) < 0.005
    check([math.log(d.acceptance.decay_tau) for d in draws], math.log(6.0), 0.2)
    check([math.log(d.acceptance.decay_gamma) for d in draws], math.log(2.0), 0.1)


def test_draws_keep_the_weights_read_positive() -> None:
    twin = make_twin(cost_se={"weights_read_s": 0.2})
    draws = _draws(twin, 200, seed=1)
    floor = [d.cost.weights_read_s for d in draws if d.cost.weights_read_s < 1e-6]
    assert floor and set(floor) == {1e-9}


def test_a_twin_without_fitted_costs_draws_only_acceptance() -> None:
    twin = make_twin(position_se=0.1)
    cal = twin.calibration.model_copy(update={"cost_covariance": Covariance()})
    draws = _draws(twin.model_copy(update={"calibration": cal}), 50, seed=2)
    assert {d.cost for d in draws} == {twin.preset.cost}
    assert {d.drafts["qwen3-1.7b"] for d in draws} == {twin.preset.drafts["qwen3-1.7b"]}
    assert len({tuple(d.acceptance.classes[0].position_probs) for d in draws}) > 1


# ---- the helpers ----


def test_scan_points_every_batch_to_32_then_quarter_steps() -> None:
    # beyond 32: int(32 x 1.25^i), then the limit itself
    assert _scan_points(1) == [1]
    assert _scan_points(5) == [1, 2, 3, 4, 5]
    assert _scan_points(32) == list(range(1, 33))
    assert _scan_points(33) == [*range(1, 33), 33]
    assert _scan_points(100) == [*range(1, 33), 40, 50, 62, 78, 97, 100]
    assert _scan_points(MAX_SCAN)[32:] == [40, 50, 62, 78, 97, 122, 152, 190, 238, 298, 372, 465, 582, 727, 909,
                                            1136, 1421, 1776, 2220, 2775, 3469, 4096]  # fmt: skip


def test_the_fastest_window_is_the_least_tpot_then_the_smaller_window() -> None:
    assert _fastest([3, 5, 7], [0.02, 0.01, 0.03]) == 5
    assert _fastest([7, 3], [0.01, 0.01]) == 3
    with pytest.raises(ValueError):
        _fastest([3, 5], [0.01])


def crossover(c: int | None) -> Crossover:
    return Crossover(window=3, concurrency=c, no_crossover_share=0.0, scanned_to=8, note="")


def test_no_window_pays_from_the_latest_crossover() -> None:
    assert _none_pays([]) is None
    assert _none_pays([crossover(5), crossover(12)]) == 12
    assert _none_pays([crossover(5), crossover(None)]) is None
    assert _none_pays([crossover(0), crossover(0)]) == 1  # never pays: from the first level
    assert _none_pays([crossover(0), crossover(3)]) == 3


def test_interval_scales_the_point_by_the_ratios_percentiles() -> None:
    ratios = np.arange(1, 202) / 100  # 0.01 .. 2.01: 2.5% at 0.06, 97.5% at 1.96
    assert _interval(10.0, ratios) == pytest.approx((0.6, 19.6))
    assert _interval(2.0, np.asarray([1.0, float("nan"), 1.0])) == (2.0, 2.0)


def test_mean_skips_missing_values() -> None:
    assert _mean([1.0, None, 2.0, float("nan"), 6.0]) == 3.0
    assert math.isnan(_mean([None, float("nan")]))
    assert math.isnan(_mean([]))


# ---- edge cases of the prediction ----


def test_a_draft_that_costs_nothing_ties_a_class_that_accepts_nothing() -> None:
    # o with a free draft: the speculative step is the baseline's (20 ms, one token): a speedup of exactly 1 is
    # no gain, and equal TPOTs never pay
    twin = make_twin(costs_at={"draft_run_s": 0.0})
    pred = predict(twin, windows=[3], levels=[1], mix={"o": 1.0}, samples=2)
    assert [(b.window, b.speedup and b.speedup.value) for b in pred.best] == [(None, 1.0)]
    assert [(c.concurrency, c.note) for c in pred.crossover_unlimited] == [
        (0, f"does not pay at any batch up to {MAX_SCAN}")
    ]


def test_without_a_compute_term_speculation_pays_to_the_scan_end() -> None:
    twin = make_twin(costs_at={"compute_per_token_s": 0.0})
    pred = predict(twin, windows=[3], levels=[], mix={"s": 1.0}, samples=2)
    assert [c.model_dump() for c in pred.crossover_unlimited] == [
        {"window": 3, "concurrency": None, "ci95": None, "no_crossover_share": 1.0, "scanned_to": MAX_SCAN,
         "note": f"still pays at a batch of {MAX_SCAN}"}
    ]  # fmt: skip
    assert pred.no_window_pays_from_unlimited is None


@pytest.mark.parametrize("x", range(41, 50))
def test_the_bisection_finds_each_batch_between_grid_points(x: int) -> None:
    # s alone stops paying where R + C b >= W: a draft pass of W - C (x - 0.5) puts the crossing at x
    r = W - C * (x - 0.5)
    pred = predict(make_twin(costs_at={"draft_run_s": r}), windows=[3], levels=[], mix={"s": 1.0}, samples=1)
    assert pred.crossover_unlimited[0].concurrency == x


def test_window_two_proposes_one_token() -> None:
    pred = predict(make_twin(), windows=[2], levels=[1], mix={"s": 1.0}, samples=1)
    # 3 steps of 2 draft passes + 20 ms for 6 tokens
    assert pred.cells[1].tpot_s["s"].value == pytest.approx(3 * (2 * R + W) / 6)


def test_prompt_lengths_default_to_64_and_at_least_one_token() -> None:
    twin = make_twin(prompts={"s": 0.3})
    pred = predict(twin, windows=[], levels=[1], mix={"s": 1.0}, samples=1)
    assert pred.cells[0].ttft_s.value == pytest.approx(P0 + P1)
    pred = predict(twin, windows=[], levels=[1], mix={"o": 1.0}, samples=1)
    assert pred.cells[0].ttft_s.value == pytest.approx(P0 + 64 * P1)


def test_the_default_sample_count() -> None:
    assert predict(make_twin(), windows=[], levels=[], samples=200).samples == 200
    assert predict(make_twin(), windows=[], levels=[]).samples == 200


def test_cost_per_token_of_a_slow_and_of_an_instant_service() -> None:
    # one token per request, all in its prefill: 2 s each (0.5 tok/s): 18 $/h / 1800 tok/h = 10000 $ per 1e6
    pred = predict(make_twin(costs_at={"prefill_base_s": 2.0, "prefill_per_token_s": 0.0}), windows=[], levels=[1],
                   max_tokens=1, samples=1)  # fmt: skip
    assert pred.cells[0].throughput_tok_s.value == pytest.approx(0.5)
    assert pred.cells[0].usd_per_million_tokens.value == pytest.approx(10000.0)
    # one request and a free prefill: no time passes, no throughput, no cost figure
    pred = predict(make_twin(costs_at={"prefill_base_s": 0.0, "prefill_per_token_s": 0.0}), windows=[], levels=[1],
                   max_tokens=1, requests=1, samples=1)  # fmt: skip
    assert pred.cells[0].throughput_tok_s.value == 0.0
    assert math.isnan(pred.cells[0].usd_per_million_tokens.value)


def test_the_fastest_window_need_not_be_the_smallest() -> None:
    # 8 tokens after the prefill: k = 3 takes 3 steps of 26.6 ms, k = 4 two of 28.8 ms
    pred = predict(make_twin(), windows=[3, 4], levels=[1], mix={"s": 1.0}, max_tokens=9, samples=1)
    assert pred.best[0].window == 4
    assert pred.best[0].speedup is not None and pred.best[0].speedup.value == pytest.approx(0.02 / (2 * 0.0288 / 8))


def test_a_point_is_the_mean_of_replicate_engine_runs() -> None:
    # o accepts a third of the proposals: the engine draws; the point is the mean over 4 replicates of seed + r
    from spectrn.sim.model import resolve
    from spectrn.twin.engine import ClassLoad, run_level

    twin = make_twin(o_probs=1 / 3)
    pred = predict(twin, windows=[3], levels=[2], mix={"o": 1.0}, samples=3, seed=5)
    m = resolve(twin.preset, speculative=True, draft="qwen3-1.7b", window=3, time_scale=1.0, semantics="nxdi")
    loads = [ClassLoad("o", 1.0, 30, [1 / 3, 1 / 3])]
    p50 = [run_level(m, loads, concurrency=2, requests=4, max_tokens=7, batch_limit=8, seed=5 + r).p50("tpot", "o")
           for r in range(4)]  # fmt: skip
    assert pred.cells[1].tpot_s["o"].value == pytest.approx(sum(p50) / 4)  # type: ignore[arg-type]
    assert pred.cells[1].mean_accepted_length == {"o": 1.4444}  # 1 + 1/3 + 1/9
    assert predict(twin, windows=[3], levels=[2], mix={"o": 1.0}, samples=3, seed=5) == pred


def test_intervals_are_reproducible_and_throughputs_the_reciprocal() -> None:
    twin = make_twin(cost_se={"weights_read_s": 0.006})
    pred = predict(twin, windows=[3], levels=[1], mix={"s": 1.0}, samples=400, seed=2)
    assert predict(twin, windows=[3], levels=[1], mix={"s": 1.0}, samples=400, seed=2) == pred
    cell = pred.cells[0]
    assert cell.e2e_s.ci95 is not None and cell.throughput_tok_s.ci95 is not None
    lo, hi = (v / cell.e2e_s.value for v in cell.e2e_s.ci95)
    assert hi - lo > 0.3  # a wide spread, so that r and 1 / r differ
    tlo, thi = (v / cell.throughput_tok_s.value for v in cell.throughput_tok_s.ci95)
    assert (tlo, thi) == pytest.approx((1 / hi, 1 / lo), rel=0.01)


def test_the_twins_draft_and_semantics_are_used() -> None:
    # the twin's draft (0.6b, not the preset's default) with the 1.7b's costs; upstream: window 3 proposes 3,
    # verifies 4, emits 4 tokens a step (3 draft passes)
    twin = make_twin(draft="qwen3-0.6b", semantics="upstream")
    prefill = P0 + P1 * 10

    def per_token(k: int | None) -> float:
        e = (k + 1) if k else 1
        step = 3 * R + max(W, C * 4) if k else W
        return (step + 1 / max(1.0, 6 / e) * prefill) / e

    assert speedup_curve(twin, 3, [1], mix={"s": 1.0}) == pytest.approx([per_token(None) / per_token(3)], rel=1e-12)


def test_decay_covariance_of_one_class_draws_its_alpha_tau_and_gamma() -> None:
    # names: alpha_s, log tau, log gamma (o's alpha is not in the fit: it stays)
    cov = [[0.01, 0, 0], [0, 0.04, 0], [0, 0, 0.0001]]
    twin = make_twin(decay_cov=cov, dnames=["alpha_s", "log_tau", "log_gamma"],
                     cost_se={"draft_kv_read_per_token_s": 1e-6})  # fmt: skip
    draws = _draws(twin, 2000, seed=4)
    assert {d.acceptance.classes[1].alpha for d in draws} == {0.0}
    tau = np.log([d.acceptance.decay_tau for d in draws])
    gamma = np.log([d.acceptance.decay_gamma for d in draws])
    assert abs(tau.std() - 0.2) < 0.02 and abs(gamma.std() - 0.01) < 0.001
    assert abs(tau.mean() - math.log(6.0)) < 0.02 and abs(gamma.mean() - math.log(2.0)) < 0.001
    # the draft's KV term (0 with sd 1e-6, cut at 0): half at 0, mean 1e-6 / sqrt(2 pi)
    kv = np.asarray([d.drafts["qwen3-1.7b"].kv_read_per_token_s for d in draws])
    assert abs((kv == 0).mean() - 0.5) < 0.05 and abs(kv.mean() - 1e-6 / math.sqrt(2 * math.pi)) < 2e-8


def drawn_run_s(n: int, seed: int, mean: float, sd: float) -> list[float]:
    """The draft pass of each draw, drawn as _draws draws it: the eight costs from their (diagonal) covariance,
    then one normal per measured position of each class (8), cut at zero."""
    rng = np.random.default_rng(seed)
    names = list(COSTS)
    mu = [mean if k == "draft_run_s" else v for k, v in COSTS.items()]
    cov = np.diag([sd**2 if k == "draft_run_s" else 0.0 for k in names])
    out = []
    for _ in range(n):
        x = rng.multivariate_normal(mu, cov, method="svd")
        rng.normal(0.0, 1.0, size=8)
        out.append(max(0.0, float(x[names.index("draft_run_s")])))
    return out


def crossing_at(r: float, limit: int) -> int | None:
    """Window 5, s alone: (5 r + max(W, 5 C b)) / 5 against max(W, C b) (the prefill terms are equal)."""
    paid = False
    for b in range(1, limit + 1):
        if r + max(W, 5 * C * b) / 5 < max(W, C * b):
            paid = True
        elif paid:
            return b
    return None if paid else 0


@pytest.mark.parametrize(("mean", "sd", "limit", "seed", "ci"), [
    (0.01, 0.001, MAX_SCAN, 11, True), (0.01, 0.0015, 32, 11, False), (0.01, 0.0015, 32, 18, False),
    (0.014, 0.002, MAX_SCAN, 11, False)])  # fmt: skip
def test_the_crossovers_interval_over_the_draws(mean: float, sd: float, limit: int, seed: int, ci: bool) -> None:
    # every draw crosses: the 2.5 and 97.5 percentiles of its crossings; some draws still paying at the limit
    # (seed 11: 3%; seed 18: 5 of 200, exactly 2.5%, already too many) or never paying (a draft pass over 16 ms):
    # no interval
    n = 200
    twin = make_twin(costs_at={"draft_run_s": mean}, cost_se={"draft_run_s": sd}, max_num_seqs=limit)
    pred = predict(twin, windows=[5], levels=[], mix={"s": 1.0}, samples=n, seed=seed)
    values = [crossing_at(r, limit) for r in drawn_run_s(n, seed, mean, sd)]
    found = [v for v in values if v]
    assert (values.count(None) >= 0.025 * n, 0 in values) == (not ci and limit == 32, not ci and limit == MAX_SCAN)
    want = tuple(float(x) for x in np.percentile(found, [2.5, 97.5])) if ci else None
    got = pred.crossover[0]
    assert (got.concurrency, got.ci95, got.no_crossover_share) == (
        crossing_at(mean, limit),
        want,
        values.count(None) / n,
    )
