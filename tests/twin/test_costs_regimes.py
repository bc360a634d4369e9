"""The compute-regime profile of the step-cost fit (``spectrn.twin.costs.fit_costs``): exact roofline steps from
random costs come back exactly wherever the data decide them; a regime iteration is followed until its mask
repeats (it used to stop after 4 rounds), and one cut short takes the best state it saw; a memory term that a compute
regime leaves without data, or cannot separate from the others, is reported not separable, not fitted; a mask
fitting a weights term of 0 is refused; a compute regime must cut the residual by 5%; at equal residuals the mask
with fewer compute-bound steps is kept; a term fitted at exactly 0 stays fitted; the fit does not depend on the
unit of time. The expected values are the generating costs (``random_roofline``, ``wide_design``) or, for the 5%
rule, the residuals of the IRLS written out in the tests."""

from __future__ import annotations

import inspect
import random
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from tests.twin.test_costs_mutants import (
    NOT_SEPARABLE,
    PRIOR,
    TRUE,
    compute_regime_sets,
    decode,
    huber,
    prefill,
    random_roofline,
    roofline,
    stalled_server,
)

from spectrn.twin import costs as costs_module
from spectrn.twin.costs import PARAMS, StepSet, fit_costs


def regimes(sets: list[StepSet], costs: dict[str, float]) -> tuple[int, int]:
    """(compute-bound decode steps, rank of the memory-bound steps' columns 1, b, C) under the true costs."""
    bound, memory_rows = 0, []
    for s in sets:
        for st in s.steps:
            if not st.decode:
                continue
            mem = costs["weights_read_s"] + costs["kv_read_per_seq_s"] * st.decode
            mem += costs["kv_read_per_token_s"] * st.context
            if costs["compute_per_token_s"] * st.decode * s.verified > mem:
                bound += 1
            else:
                memory_rows.append((1.0, st.decode, st.context))
    rank = int(np.linalg.matrix_rank(np.asarray(memory_rows))) if memory_rows else 0
    return bound, rank


def assert_roofline_comes_back(seed: int, bound: int) -> None:
    """``random_roofline(seed)`` has ``bound`` compute-bound steps and memory-bound steps of rank 3; the fit finds
    exactly those steps and every true cost."""
    sets, costs = random_roofline(seed)
    assert regimes(sets, costs) == (bound, 3)
    fit = fit_costs(sets, PRIOR)
    assert fit.compute_bound_steps == bound
    for name in PARAMS:
        assert fit.params[name].value == pytest.approx(costs[name], rel=1e-7), name


@pytest.mark.parametrize("seeds", [range(20), range(20, 40)])
def test_seeded_exact_rooflines_come_back_exactly(seeds: range) -> None:
    checked = 0
    for seed in seeds:
        sets, costs = random_roofline(seed)
        bound, rank = regimes(sets, costs)
        fit = fit_costs(sets, PRIOR)
        if bound < 10:  # MIN_COMPUTE_STEPS: too few to identify the compute slope, none is taken
            assert fit.compute_bound_steps == 0, seed
        elif rank == 3:  # the memory-bound steps determine the three memory terms
            checked += 1
            assert fit.compute_bound_steps == bound, seed
            for name in PARAMS:
                p = fit.params[name]
                assert (p.status, p.note) == ("fitted", None), (seed, name)
                assert p.value == pytest.approx(costs[name], rel=1e-7), (seed, name)
    assert checked >= 8


def test_a_regime_iteration_that_needs_more_than_four_rounds_reaches_its_fixed_point() -> None:
    # seed 99: the winning candidate's regimes still changed after 4 rounds; the mask and residual it was
    # scored by then belonged to different rounds, and the costs came back wrong
    assert_roofline_comes_back(99, 13)


def test_every_decode_step_compute_bound_leaves_the_memory_terms_not_separable() -> None:
    costs = {"weights_read_s": 0.001, "kv_read_per_seq_s": 1e-5, "kv_read_per_token_s": 1e-7,
             "compute_per_token_s": 0.004, "draft_run_s": 0.004, "draft_kv_read_per_token_s": 2e-6,
             "prefill_base_s": 0.03, "prefill_per_token_s": 2e-4}  # fmt: skip
    shape = [(b, b * c) for b in (1, 2, 4, 8) for c in (100, 200, 300)]
    sets = []
    for k, t in ((0, 1), (3, 3)):
        steps = [decode(2 * i, b, c, roofline(b, c, k, t, costs)) for i, (b, c) in enumerate(shape)]
        steps += [prefill(1000 + 2 * i, p, 0.03 + 2e-4 * p) for i, p in enumerate((50, 100, 150, 200))]
        sets.append(StepSet("r", "speculative" if k else "baseline", k, t, steps))
    assert regimes(sets, costs) == (24, 0)
    fit = fit_costs(sets, PRIOR)
    assert fit.compute_bound_steps == 24
    for name in ("weights_read_s", "kv_read_per_seq_s", "kv_read_per_token_s"):
        p = fit.params[name]
        assert (p.value, p.se, p.status, p.note, p.points) == (PRIOR[name], None, "prior", NOT_SEPARABLE, 0), name
    for name in ("compute_per_token_s", "draft_run_s", "draft_kv_read_per_token_s", "prefill_base_s",
                 "prefill_per_token_s"):  # fmt: skip
        p = fit.params[name]
        assert (p.status, p.note) == ("fitted", None), name
        assert p.value == pytest.approx(costs[name], rel=1e-9), name
    assert fit.free == ["compute_per_token_s", "draft_run_s", "draft_kv_read_per_token_s", "prefill_base_s",
                        "prefill_per_token_s"]  # fmt: skip


def wide_design(seed: int) -> tuple[list[StepSet], dict[str, float]]:
    """One of ``hack/twin_resolution.py``'s cost designs (its ``cost_designs``) and the costs it was drawn from:
    some true costs exactly 0, noise and stalls drawn (0 for the exact seeds used here), a prefill every 8th step."""
    rng = random.Random(seed)
    zero = rng.random() < 0.3
    costs = {"weights_read_s": 0.0 if zero and rng.random() < 0.5 else rng.uniform(0.001, 0.04)}
    costs["kv_read_per_seq_s"] = 0.0 if zero and rng.random() < 0.5 else rng.uniform(1e-5, 1e-3)
    costs["kv_read_per_token_s"] = 0.0 if zero and rng.random() < 0.5 else rng.uniform(1e-7, 1e-5)
    costs["compute_per_token_s"] = rng.uniform(1e-4, 3e-3)
    costs |= {"draft_run_s": 0.005, "draft_kv_read_per_token_s": 1e-7, "prefill_base_s": 0.04,
              "prefill_per_token_s": 0.001}  # fmt: skip
    noise = rng.choice([0.0, 0.0, 0.001, 0.05, 0.3])
    stall = rng.choice([0.0, 0.05])
    prefills = rng.random() < 0.75
    sets = []
    for k in rng.choice([(0,), (0, 5), (0, 3), (0, 2), (5,)]):
        steps, index = [], 0
        for j in range(rng.randint(25, 120)):
            index += rng.choice([1, 1, 1, 2])
            b = rng.choice([1, 2, 4, 8, 16, 32])
            ctx = b * rng.randint(40, 300)
            if prefills and j % 8 == 0:
                p = rng.randint(20, 300)
                steps.append(prefill(index, p, (0.04 + 0.001 * p) * (1 + rng.gauss(0, noise))))
                continue
            d = roofline(b, ctx, k, k or 1, costs)
            if rng.random() < stall:
                d *= rng.uniform(1, 5)
            steps.append(decode(index, b, ctx, d * (1 + rng.gauss(0, noise))))
        sets.append(StepSet("r", "v", k, k or 1, steps))
    assert noise == 0.0 and stall == 0.0, seed  # exact steps
    return sets, costs


def fit_with_candidates(margin: str) -> Callable[..., Any]:
    """``fit_costs`` with its candidate slopes taken at ``margin`` of the ridge's quantiles (the source's own
    ``* 1.0001``: just above them) instead."""
    src = inspect.getsource(costs_module.fit_costs)
    assert src.count(") * 1.0001)") == 1
    ns: dict[str, Any] = dict(vars(costs_module))
    exec(compile(src.replace(") * 1.0001)", f") {margin})"), "<fit_costs>", "exec"), ns)  # noqa: S102
    return ns["fit_costs"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("margin", ["* 1.0001", "/ 1.0001", "* 1.01", "/ 1.01"])
@pytest.mark.parametrize("seed", [15, 79, 164, 274])
def test_exact_step_sets_come_back_exactly_whatever_the_candidate_slopes(seed: int, margin: str) -> None:
    # every decode step is compute bound in these four. The candidate slopes just below the ridge's quantiles
    # used to take no compute regime here: none of them starts from the mask with every decode step compute
    # bound, and every other exact mask (a few steps in the memory regime, its line drawn through them at the
    # ridge) fits a weights term of 0 within rounding, which the weights-term condition refuses
    sets, costs = wide_design(seed)
    bound, rank = regimes(sets, costs)
    fit = fit_with_candidates(margin)(sets, PRIOR)
    assert fit.compute_bound_steps == bound, (seed, margin)
    assert fit.residual_scale_s < 1e-12
    for name in PARAMS:
        p = fit.params[name]
        if p.status == "fitted":
            assert p.value == pytest.approx(costs[name], rel=1e-7, abs=1e-12), (seed, name)
        else:  # a term without data: no prefill step, or a memory term where every decode step is compute bound
            assert (p.value, p.status, p.note, p.points) == (PRIOR[name], "prior", NOT_SEPARABLE, 0), (seed, name)
            assert rank == 0 or name not in ("weights_read_s", "kv_read_per_seq_s", "kv_read_per_token_s"), seed


def test_exact_memory_bound_steps_with_a_zero_term_take_no_compute_regime_and_keep_the_term_fitted() -> None:
    # seed 359: exact steps, every one memory bound, whose true per-token term is 0. Some masks put steps at the
    # ridge and fit them exactly too: at an equal residual (to rounding) the mask with fewer compute-bound steps,
    # none, is kept. The per-token term lands on 0.0 exactly, which is not negative: it stays fitted (with its
    # standard error), not "fixed at 0" with the negative note
    sets, costs = wide_design(359)
    assert costs["kv_read_per_token_s"] == 0.0
    fit = fit_costs(sets, PRIOR)
    assert fit.compute_bound_steps == 0
    assert fit.free == ["weights_read_s", "kv_read_per_seq_s", "kv_read_per_token_s"]
    token = fit.params["kv_read_per_token_s"]
    assert (token.value, token.status, token.note, token.points) == (0.0, "fitted", None, 106)
    assert token.se is not None
    for name in ("weights_read_s", "kv_read_per_seq_s"):
        p = fit.params[name]
        assert (p.status, p.note) == ("fitted", None), name
        assert p.value == pytest.approx(costs[name], rel=1e-9), name


def one_memory_batch_size(costs: dict[str, float]) -> list[StepSet]:
    """Exact baseline steps where only the batch-1 steps are memory bound (the batch-4 and batch-8 ones are
    compute bound under ``costs``), with four prompt lengths."""
    shape = [(1, c) for c in range(600, 1501, 100)]
    shape += [(b, b * c) for b in (4, 8) for c in (100, 150, 200, 250, 300)]
    steps = [decode(2 * i, b, c, roofline(b, c, 0, 1, costs)) for i, (b, c) in enumerate(shape)]
    steps += [prefill(1000 + 2 * i, p, 0.03 + 2e-4 * p) for i, p in enumerate((50, 100, 150, 200))]
    return [StepSet("r", "baseline", 0, 1, steps)]


def test_memory_bound_steps_of_one_batch_size_leave_the_per_sequence_term_at_its_prior() -> None:
    # under the compute regime, the weights and per-sequence columns are equal (b = 1 at every memory-bound
    # step): the per-sequence term keeps its prior and the weights term takes the rest of the batch-1 memory time
    costs = {"weights_read_s": 0.02, "kv_read_per_seq_s": 0.001, "kv_read_per_token_s": 1e-5,
             "compute_per_token_s": 0.01, "draft_run_s": 0.004, "draft_kv_read_per_token_s": 2e-6,
             "prefill_base_s": 0.03, "prefill_per_token_s": 2e-4}  # fmt: skip
    sets = one_memory_batch_size(costs)
    assert regimes(sets, costs) == (10, 2)
    fit = fit_costs(sets, PRIOR)
    assert fit.compute_bound_steps == 10
    assert fit.free == ["weights_read_s", "kv_read_per_token_s", "compute_per_token_s", "prefill_base_s",
                        "prefill_per_token_s"]  # fmt: skip
    seq = fit.params["kv_read_per_seq_s"]
    assert (seq.value, seq.se, seq.status, seq.note, seq.points) == (2e-4, None, "prior", NOT_SEPARABLE, 10)
    # 20 ms + 1 ms x 1 - 0.2 ms x 1 (the prior's share)
    assert fit.params["weights_read_s"].value == pytest.approx(0.0208, rel=1e-9)
    for name in ("kv_read_per_token_s", "compute_per_token_s", "prefill_base_s", "prefill_per_token_s"):
        p = fit.params[name]
        assert (p.status, p.note) == ("fitted", None), name
        assert p.value == pytest.approx(costs[name], rel=1e-9), name


def test_a_mask_whose_weights_term_comes_out_zero_is_refused_with_the_per_sequence_term_undetermined() -> None:
    # no weights or per-sequence time at all: the true mask (the ten batch-4 and batch-8 steps) fits a weights
    # term of 0, which the weights-term condition refuses there too; the mask with every decode step compute
    # bound (whose memory terms are undetermined) is taken instead
    costs = {"weights_read_s": 0.0, "kv_read_per_seq_s": 0.0, "kv_read_per_token_s": 1e-5,
             "compute_per_token_s": 0.005, "draft_run_s": 0.004, "draft_kv_read_per_token_s": 2e-6,
             "prefill_base_s": 0.03, "prefill_per_token_s": 2e-4}  # fmt: skip
    sets = one_memory_batch_size(costs)
    assert regimes(sets, costs) == (10, 2)
    fit = fit_costs(sets, PRIOR)
    assert fit.compute_bound_steps == 20
    assert fit.free == ["compute_per_token_s", "prefill_base_s", "prefill_per_token_s"]
    for name in ("weights_read_s", "kv_read_per_seq_s", "kv_read_per_token_s"):
        p = fit.params[name]
        assert (p.value, p.se, p.status, p.note, p.points) == (PRIOR[name], None, "prior", NOT_SEPARABLE, 0), name


@pytest.mark.parametrize("unit", [1e-9, 1e-6, 1e-3, 1e3])
def test_the_fit_does_not_depend_on_the_unit_of_time(unit: float) -> None:
    # the same exact steps with every duration (and the prior) in another unit: the same compute regime and every
    # cost in that unit. The rounding margins (equal residuals, a weights term above rounding) scale with the
    # durations
    for sets, costs in ((compute_regime_sets(), TRUE), random_roofline(85)):
        bound, rank = regimes(sets, costs)
        assert rank == 3
        scaled = [replace(s, steps=[replace(st, duration=st.duration * unit) for st in s.steps]) for s in sets]
        fit = fit_costs(scaled, {name: v * unit for name, v in PRIOR.items()})
        assert fit.compute_bound_steps == bound
        for name in PARAMS:
            p = fit.params[name]
            assert (p.status, p.note) == ("fitted", None), name
            assert p.value == pytest.approx(costs[name] * unit, rel=1e-7), name


def test_a_regime_iteration_cut_short_takes_the_best_state_it_saw(monkeypatch: pytest.MonkeyPatch) -> None:
    # with two rounds at most, the iterations from most candidates stop before their mask repeats and take the
    # best state seen (the smallest residual); the exact costs still come back
    monkeypatch.setattr(costs_module, "MAX_ROUNDS", 2)
    assert_roofline_comes_back(99, 13)


def paired_steps(spread: float) -> tuple[list[StepSet], float]:
    """Roofline steps (``TRUE``'s memory terms, a compute slope of 3 ms) in pairs, one ``spread`` above and one
    below its duration; the ten batch-32 steps are compute bound. Also the share by which the true compute regime
    cuts the weighted residual of the memory-only fit, both by the IRLS written out in ``huber``."""
    costs = {**TRUE, "compute_per_token_s": 0.003}
    shape = [(b, b * c) for b in (1, 2, 4, 8) for c in (100, 200, 300)] + [(32, 32 * c) for c in (20, 30, 40, 50, 60)]
    rows = [(b, c, roofline(b, c, 0, 1, costs) * (1 + sign * spread)) for b, c in shape for sign in (1, -1)]
    y = np.asarray([d for _, _, d in rows])
    memory_only = np.asarray([[1.0, b, c] for b, c, _ in rows])
    regime = np.asarray([[0.0, 0.0, 0.0, b] if b == 32 else [1.0, b, c, 0.0] for b, c, _ in rows])
    ssr = []
    for x in (memory_only, regime):
        theta, w = huber(x, y)
        ssr.append(float(np.sum(w * (y - x @ theta) ** 2)))
    steps = [decode(2 * i, b, c, d) for i, (b, c, d) in enumerate(rows)]
    return [StepSet("r", "baseline", 0, 1, steps)], 1 - ssr[1] / ssr[0]


def test_a_compute_regime_is_taken_only_when_it_cuts_the_residual_by_five_percent() -> None:
    sets, gain = paired_steps(0.15)
    assert 0.05 < gain < 0.07
    fit = fit_costs(sets, PRIOR)
    assert fit.compute_bound_steps == 10
    for name in ("weights_read_s", "kv_read_per_seq_s", "kv_read_per_token_s", "compute_per_token_s"):
        assert fit.params[name].value == pytest.approx({**TRUE, "compute_per_token_s": 0.003}[name], rel=1e-9)
    # wider pairs: the same regime now cuts the residual by 2% only, and the steps are taken as memory bound
    sets, gain = paired_steps(0.18)
    assert 0.01 < gain < 0.03
    fit = fit_costs(sets, PRIOR)
    assert fit.compute_bound_steps == 0
    c = fit.params["compute_per_token_s"]
    assert (c.status, c.se, c.points) == ("prior", None, 0)
    assert c.note is not None and c.note.startswith("no compute-bound step observed: the steps bound it at <= ")


@pytest.mark.parametrize("seed", [70, 134])
def test_exact_wide_designs_come_back_exactly(seed: int) -> None:
    # exact steps summed in segments of up to 32: 134 needs the candidate slopes just above the ridge's quantiles
    # (twice them find no compute regime), 70 the refinement around the best mask in its own fit's ridge order
    # (the memory-only fit's order stops at 60 of the 92 compute-bound steps)
    sets, costs = wide_design(seed)
    bound, rank = regimes(sets, costs)
    assert rank == 3
    fit = fit_costs(sets, PRIOR)
    assert fit.compute_bound_steps == bound
    assert fit.residual_scale_s < 1e-12
    for name in PARAMS:
        p = fit.params[name]
        if p.status == "fitted":
            assert p.value == pytest.approx(costs[name], rel=1e-7, abs=1e-12), name
        else:  # no prefill step or no speculative step
            assert (p.value, p.status, p.note, p.points) == (PRIOR[name], "prior", NOT_SEPARABLE, 0), name


def test_the_regime_iteration_moves_steps_into_the_compute_regime_as_well_as_out() -> None:
    # seed 55: from the candidates' masks the iteration has to put steps into the compute regime too; one that only
    # took them out would stop short of the 43 compute-bound steps, with the memory terms left at their priors
    assert_roofline_comes_back(55, 43)


def test_a_regime_iteration_that_cycles_takes_the_best_state_of_its_cycle() -> None:
    # seed 39 (each step's relative noise 0.1%, 5% or 30%, 5% of the steps stalled up to 5x): iterations from
    # several candidates run into cycles of two and three masks. Their best states lead to a compute slope within
    # 10% of the true one and a residual scale of 0.19 ms; the states the cycles end on (the last seen) would
    # leave 11 ms
    sets = stalled_server(39)
    rng = random.Random(39)
    true_slope = [rng.uniform(0, 0.04), rng.uniform(0, 1e-3), rng.uniform(0, 1e-5), rng.uniform(1e-4, 3e-3)][-1]
    fit = fit_costs(sets, PRIOR)
    assert fit.compute_bound_steps == 14
    assert fit.params["compute_per_token_s"].value == pytest.approx(true_slope, rel=0.1)
    assert fit.residual_scale_s < 1e-3
