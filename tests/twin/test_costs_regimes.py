"""The compute-regime profile of the step-cost fit (``spectrn.twin.costs.fit_costs``): exact roofline steps from
random costs come back exactly wherever the data decide them; a regime iteration is followed until its mask
repeats (it used to stop after 4 rounds); a memory term that a compute regime leaves without data is reported
not separable, not fitted. The expected values are the generating costs (``random_roofline``)."""

from __future__ import annotations

import numpy as np
import pytest
from tests.twin.test_costs_mutants import NOT_SEPARABLE, PRIOR, decode, prefill, random_roofline, roofline

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
    sets, costs = random_roofline(99)
    assert regimes(sets, costs) == (13, 3)
    fit = fit_costs(sets, PRIOR)
    assert fit.compute_bound_steps == 13
    for name in PARAMS:
        assert fit.params[name].value == pytest.approx(costs[name], rel=1e-7), name


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
