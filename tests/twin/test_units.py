"""The twin's parts on synthetic data with known answers (no servers): steps from events, the cost fit, the
acceptance fit, per-class acceptance in a preset, the offline engine against the analytic model."""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest

from spectrn.errors import ConfigError, SimError
from spectrn.run.records import RequestRecord
from spectrn.sim.model import PRESETS, AcceptanceClass, Preset, resolve
from spectrn.sim.settings import load_preset_file
from spectrn.twin.acceptance import ClassCounts, fallback_alphas, fit_decay
from spectrn.twin.costs import PARAMS, StepSet, fit_costs
from spectrn.twin.engine import ClassLoad, run_level, schedule
from spectrn.twin.model import load_twin
from spectrn.twin.predict import Analytic
from spectrn.twin.steps import Step, timeline

PRIOR = {"weights_read_s": 0.044, "kv_read_per_seq_s": 1e-4, "kv_read_per_token_s": 1.7e-7,
         "compute_per_token_s": 1.7e-4, "draft_run_s": 0.0035, "draft_kv_read_per_token_s": 9e-9,
         "prefill_base_s": 0.03, "prefill_per_token_s": 0.00025}  # fmt: skip
TRUE = {"weights_read_s": 0.03, "kv_read_per_seq_s": 0.0006, "kv_read_per_token_s": 6e-6,
        "compute_per_token_s": 8e-4, "draft_run_s": 0.005, "draft_kv_read_per_token_s": 4e-7,
        "prefill_base_s": 0.04, "prefill_per_token_s": 0.001}  # fmt: skip


def record(i: int, sent: float, times: list[float], tokens: list[int], prompt: int = 40) -> RequestRecord:
    return RequestRecord(variant="baseline", index=i, prompt_id=f"p{i}", prompt_class="structured", level="c2",
                         sent_at=sent, ttft=times[0] - sent, e2e=times[-1] - sent,
                         chunk_times=[t - sent for t in times], chunk_tokens=tokens, prompt_tokens=prompt)  # fmt: skip


def test_steps_from_two_overlapping_requests_with_read_delays() -> None:
    # Server schedule (absolute): A prefilled at 1.00, decodes alone at 1.05; B prefilled at 1.09 (A paused);
    # then both decode at 1.16, 1.23, 1.30; A ends at 1.30, B decodes alone at 1.35 and ends.
    a = [1.00, 1.05, 1.16, 1.23, 1.30]
    b = [1.09, 1.16, 1.23, 1.30, 1.35]
    a_seen = [t + 0.003 * (k % 2) for k, t in enumerate(a)]  # the client reads some events late
    b_seen = [t + 0.008 * ((k + 1) % 2) for k, t in enumerate(b)]
    recs = [record(0, 0.99, a_seen, [1, 1, 1, 1, 1], prompt=40), record(1, 1.08, b_seen, [1, 1, 1, 1, 1], prompt=60)]
    tl = timeline(recs, "baseline")
    got = [(s.decode, s.context, s.prefills, s.prefill_tokens) for s in tl.steps]
    # every step after the first: A's decode (context 41), B's prefill, three joint decodes, B alone
    assert got == [(1, 41, 0, 0), (0, 0, 1, 60), (2, 42 + 61, 0, 0), (2, 43 + 62, 0, 0), (2, 44 + 63, 0, 0),
                   (1, 64, 0, 0)]  # fmt: skip
    # a step ends at its earliest event (the least delayed read): seen ends 1.053, 1.098, 1.16, 1.233, 1.30, 1.358
    assert [round(s.duration, 3) for s in tl.steps] == [0.053, 0.045, 0.062, 0.073, 0.067, 0.058]


def test_an_idle_engine_and_a_missed_request_are_dropped() -> None:
    a = [1.00, 1.05, 1.10]  # A alone, done at 1.10
    b = [2.00, 2.05, 2.10]  # B arrives long after: the gap before its prefill is idle time, not a step
    recs = [record(0, 0.99, a, [1, 1, 1]), record(1, 1.99, b, [1, 1, 1])]
    tl = timeline(recs, "baseline")
    assert all(s.duration < 0.06 for s in tl.steps)
    assert tl.dropped.get("engine idle before the step") == 1


def synthetic_steps(rng: random.Random, *, windows: tuple[int, ...] = (0, 7), noise: float = 0.0005) -> list[StepSet]:
    """Steps drawn from the model itself with TRUE parameters (NxDI: k draft runs, k verified positions), each
    with its own noise: no two consecutive (indices 2j), so each is its own segment."""
    sets = []
    for k in windows:
        steps = []
        for j in range(400):
            b = rng.choice([1, 2, 4, 8, 16])
            ctx = b * rng.randint(40, 300)
            if j % 10 == 0:
                p = rng.randint(20, 300)
                d = TRUE["prefill_base_s"] + TRUE["prefill_per_token_s"] * p
                steps.append(Step("x", "c", 0, 0, 1, p, d + rng.gauss(0, noise), 0.0, 2 * j))
                continue
            t = k if k else 1
            mem = TRUE["weights_read_s"] + TRUE["kv_read_per_seq_s"] * b + TRUE["kv_read_per_token_s"] * ctx
            target = max(mem, TRUE["compute_per_token_s"] * b * t)
            draft = k * (TRUE["draft_run_s"] + TRUE["draft_kv_read_per_token_s"] * ctx)
            steps.append(Step("x", "c", b, ctx, 0, 0, draft + target + rng.gauss(0, noise), 0.0, 2 * j))
        sets.append(StepSet("run", "speculative" if k else "baseline", k, k if k else 1, steps))
    return sets


def test_cost_fit_recovers_every_parameter_from_steps_of_the_model() -> None:
    fit = fit_costs(synthetic_steps(random.Random(1)), PRIOR)
    assert fit.compute_bound_steps > 0
    for name in PARAMS:
        p = fit.params[name]
        assert p.status == "fitted", name
        assert p.value == pytest.approx(TRUE[name], rel=0.05), name
        assert p.se is not None and abs(p.value - TRUE[name]) < 4 * p.se + 1e-12, name


def test_cost_fit_keeps_priors_for_what_the_runs_cannot_show() -> None:
    sets = synthetic_steps(random.Random(2), windows=(0,))  # no speculative step: no draft cost to see
    fit = fit_costs(sets, {**PRIOR, "compute_per_token_s": 1e-2})
    for name in ("draft_run_s", "draft_kv_read_per_token_s"):
        assert fit.params[name].status == "prior" and fit.params[name].value == PRIOR[name]
        assert "not separable" in (fit.params[name].note or "")
    # every baseline step here is memory bound (16 x 8e-4 s < 30 ms): the steps only bound the compute slope
    # (memory / batch at the largest batch, about 3 ms); a prior above that bound gives way to it ...
    c = fit.params["compute_per_token_s"]
    assert c.status == "bound" and 2e-3 < c.value < 4e-3 and "no compute-bound step" in (c.note or "")
    assert fit.params["weights_read_s"].value == pytest.approx(TRUE["weights_read_s"], rel=0.02)
    # ... and a prior within it is kept
    kept = fit_costs(sets, PRIOR).params["compute_per_token_s"]
    assert kept.status == "prior" and kept.value == PRIOR["compute_per_token_s"]


def test_decay_fit_recovers_alphas_tau_and_gamma_from_binomial_counts() -> None:
    rng = np.random.default_rng(3)
    classes = []
    for name, alpha in (("structured", 0.85), ("open", 0.4)):
        c = ClassCounts(name)
        probs = np.minimum(0.98, alpha * np.exp(-((np.arange(8) / 6.0) ** 3.0)))
        steps = 20000
        draws = rng.random((steps, 8)) < probs
        accepted = np.cumprod(draws, axis=1).sum(axis=1)
        c.add([float((accepted > i).mean()) for i in range(8)], steps, "synthetic")
        classes.append(c)
    fit = fit_decay(classes, cap=0.98, prior_tau=7.0, prior_gamma=4.0)
    assert fit.identified
    assert fit.alphas["structured"] == pytest.approx(0.85, rel=0.02)
    assert fit.alphas["open"] == pytest.approx(0.40, rel=0.03)
    assert fit.tau == pytest.approx(6.0, rel=0.05) and fit.gamma == pytest.approx(3.0, rel=0.1)
    sd = np.sqrt(np.diag(fit.covariance))
    assert np.all(np.isfinite(sd)) and np.all(sd > 0)
    got = fallback_alphas(fit.alphas, {"structured": 0.9, "open": 0.0}, {"structured": 1, "open": 1})
    assert (
        got is not None
        and got[0] == pytest.approx(0.4, rel=0.03)
        and got[1] == pytest.approx(0.4 + 0.45 / 0.9, rel=0.03)
    )


def test_flat_acceptance_leaves_the_decay_to_the_prior() -> None:
    c = ClassCounts("flat")
    c.add([0.7, 0.49, 0.343], 5000, "synthetic")  # constant 0.7 per position: no decay visible
    fit = fit_decay([c], cap=0.98, prior_tau=7.0, prior_gamma=4.0)
    assert not fit.identified and (fit.tau, fit.gamma) == (7.0, 4.0) and "prior decay" in (fit.note or "")


def test_a_preset_class_replays_its_table_then_its_decay_curve() -> None:
    base = PRESETS["qwen3-32b-trn2"]
    cls = AcceptanceClass(name="structured", contains=["count to"], position_probs=[0.9, 0.8], alpha=0.5)
    acc = base.acceptance.model_copy(update={"classes": [cls]})
    preset = base.model_copy(update={"acceptance": acc})
    m = resolve(preset, speculative=True, draft=None, window=5, time_scale=1.0, semantics="nxdi")
    probs = m.position_probs("please count to 100")
    tau, gamma = acc.decay_tau, acc.decay_gamma
    assert probs[:2] == [0.9, 0.8]
    assert probs[2:] == pytest.approx([0.5 * math.exp(-((i / tau) ** gamma)) for i in (2, 3)])
    # a prompt no class matches keeps the predictability rule, as in every existing preset
    plain = resolve(base, speculative=True, draft=None, window=5, time_scale=1.0, semantics="nxdi")
    assert m.position_probs("Tell me a story") == plain.position_probs("Tell me a story")
    # sampling divides by the temperature penalty, the table too
    assert m.position_probs("count to 3", temperature=1.0)[0] == pytest.approx(0.9 / (1 + acc.temperature_penalty))


def test_preset_classes_are_validated(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="selects no prompt"):
        AcceptanceClass(name="x", position_probs=[0.5], alpha=0.5)
    with pytest.raises(ValueError, match="not a regular expression"):
        AcceptanceClass(name="x", pattern="(", alpha=0.5)
    with pytest.raises(ValueError, match="not a probability"):
        AcceptanceClass(name="x", pattern="a", position_probs=[1.5], alpha=0.5)
    bad = tmp_path / "bad.yaml"
    data = PRESETS["qwen3-32b-trn2"].model_dump(mode="json")
    data["acceptance"]["classes"] = [{"name": "s", "contains": ["a"], "alpha": 0.5, "typo": 1}]
    import yaml

    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(SimError, match=r"acceptance\.classes\.0\.typo"):
        load_preset_file(bad)
    # a preset without a sidecar is not a twin
    data["acceptance"]["classes"] = []
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="without a calibration sidecar"):
        load_twin(bad)


def test_engine_matches_the_analytic_steady_state_for_a_long_run() -> None:
    preset: Preset = PRESETS["qwen3-32b-trn2"].model_copy(update={"max_num_seqs": 8})
    text = "counting numbers from 1 " * 6
    base = resolve(preset, speculative=False, draft=None, window=7, time_scale=1.0, semantics="nxdi")
    spec = resolve(preset, speculative=True, draft=None, window=7, time_scale=1.0, semantics="nxdi")
    loads = [ClassLoad("structured", 1.0, 64, spec.position_probs(text))]
    # Without speculation every request takes the same steps: the streams fall into step (the ramp's arrivals
    # queue behind back-to-back prefills), finish together and share each prefill, so a request's decode is
    # never interrupted and its TPOT is the mean step over its life: context 8 x (64 + 150) tokens.
    res = run_level(base, loads, concurrency=8, requests=400, max_tokens=300, batch_limit=8, seed=1, ramp_s=0.4)
    assert res.p50("tpot") == pytest.approx(base.step_s(8, 8 * (64 + 150)), rel=1e-6)
    # With speculation the draws desynchronise the streams: every prefill pauses the batch once, as the analytic
    # steady state assumes.
    res = run_level(spec, loads, concurrency=8, requests=400, max_tokens=300, batch_limit=8, seed=1, ramp_s=0.4)
    a = Analytic(spec, {"structured": loads[0].position_probs}, {"structured": 1.0}, {"structured": 64.0},
                 max_tokens=300)  # fmt: skip
    assert res.p50("tpot") == pytest.approx(a.tpot(8)["structured"], rel=0.03)


def test_schedule_interleaves_classes_by_weight() -> None:
    loads = [ClassLoad("a", 0.75, 10, []), ClassLoad("b", 0.25, 10, [])]
    order = schedule(loads, 8)
    assert order.count(0) == 6 and order.count(1) == 2 and order[:4].count(1) == 1
