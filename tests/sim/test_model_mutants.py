"""The simulator model's errors, measured-probability cap and crossover scan, pinned by hand (mutation survivors).

Each expected value is worked out in the test from the formulas in ``spectrn.sim.model``'s docstring; the
crossover presets use round costs (powers of two where an exact tie decides) so that the scan's answer can be
computed on paper. NxDI window 7: 6 proposals, 7 verified positions, 7 draft passes.
"""

from __future__ import annotations

import math

import pytest

from spectrn.errors import SimError
from spectrn.sim.model import (
    PRESETS,
    AcceptanceClass,
    AcceptanceModel,
    CostModel,
    DraftParams,
    Preset,
    draft_params,
    get_preset,
    resolve,
)

PRESET = PRESETS["qwen3-32b-trn2"]

# every proposal accepted: 1 + 6 = 7 tokens per step at window 7 (NxDI)
ALWAYS = AcceptanceClass(name="always", contains=["ALL"], position_probs=[1.0] * 6, alpha=1.0)


def _preset(cost: CostModel, draft: DraftParams) -> Preset:
    return PRESET.model_copy(
        update={"cost": cost, "drafts": {"qwen3-1.7b": draft}, "acceptance": AcceptanceModel(classes=[ALWAYS])}
    )


def _spec(preset: Preset, *, window: int | None = None):
    return resolve(preset, speculative=True, draft=None, window=window, time_scale=1.0, semantics="nxdi")


def _free_draft() -> DraftParams:
    return DraftParams(quality=1.0, run_s=0.0, kv_read_per_token_s=0.0, compute_per_token_s=0.0)


def _compute_tie(weights_read_s: float, compute_per_token_s: float) -> Preset:
    # target(b, C, t) = max(W, c * b * t); a free draft; 7 tokens per step: spec TPOT max(W, 7cb) / 7, baseline
    # max(W, cb). Below b = W / c the spec TPOT is under W; at b = W / c both are exactly W (a tie: no longer pays).
    cost = CostModel(
        weights_read_s=weights_read_s,
        kv_read_per_seq_s=0.0,
        kv_read_per_token_s=0.0,
        compute_per_token_s=compute_per_token_s,
    )
    return _preset(cost, _free_draft())


def test_unknown_draft_error_names_it_and_lists_the_catalog() -> None:
    with pytest.raises(SimError) as info:
        draft_params(PRESET, "qwen3-99b")
    assert info.value.message == "unknown draft model 'qwen3-99b'"
    assert info.value.hint == "choose one of qwen3-0.6b, qwen3-1.7b, qwen3-14b, qwen3-32b, qwen3-4b, qwen3-8b"
    assert str(info.value) == (
        "unknown draft model 'qwen3-99b' "
        "(fix: choose one of qwen3-0.6b, qwen3-1.7b, qwen3-14b, qwen3-32b, qwen3-4b, qwen3-8b)"
    )


def test_draft_as_large_as_the_target_error_suggests_a_smaller_draft() -> None:
    with pytest.raises(SimError) as info:
        draft_params(PRESET, "qwen3-32b")
    assert str(info.value) == (
        "draft 'qwen3-32b' (32.8B) is not smaller than the preset's target 'qwen3-32b' "
        "(fix: pick a smaller draft such as qwen3-1.7b)"
    )
    assert info.value.hint == "pick a smaller draft such as qwen3-1.7b"


def test_unknown_preset_error_lists_the_presets_and_the_preset_file_option() -> None:
    with pytest.raises(SimError) as info:
        get_preset("qwen3-8b-trn1")
    assert info.value.message == "unknown simulator preset 'qwen3-8b-trn1'"
    assert info.value.hint == "choose one of qwen3-32b-trn2, or give a whole preset with --preset-file"
    assert str(info.value) == (
        "unknown simulator preset 'qwen3-8b-trn1' "
        "(fix: choose one of qwen3-32b-trn2, or give a whole preset with --preset-file)"
    )


def test_measured_probabilities_times_a_strong_draft_are_capped_at_one() -> None:
    cls = AcceptanceClass(name="cls", contains=["XYZ"], position_probs=[0.9, 0.3], alpha=0.4)
    strong = DraftParams(quality=2.0, run_s=0.0035, kv_read_per_token_s=0.9e-8, compute_per_token_s=8.8e-6)
    preset = PRESET.model_copy(update={"drafts": {"qwen3-1.7b": strong}, "acceptance": AcceptanceModel(classes=[cls])})
    # measured: min(1, 0.9 * 2) = 1.0, min(1, 0.3 * 2) = 0.6; then the class curve min(0.98, 0.4 * 2 * exp(-(i/7)^4))
    expected = [1.0, 0.6] + [0.8 * math.exp(-((i / 7) ** 4)) for i in range(2, 6)]
    assert _spec(preset).position_probs("say XYZ") == pytest.approx(expected, rel=1e-12)


def test_nxdi_window_one_proposes_nothing_so_the_acceptance_rate_is_zero() -> None:
    r = _spec(PRESET, window=1)
    assert (r.proposals, r.max_tokens_per_step) == (0, 1)
    assert r.expected_acceptance_rate("count to ten") == 0.0


def test_crossover_scan_includes_max_batch_and_stops_there() -> None:
    # W = 1, c = 1/8: the tie is at b = 8 (spec 7 * 8 / 8 / 7 = 1 = baseline max(1, 8 / 8))
    r = _spec(_compute_tie(1.0, 0.125))
    assert r.crossover_batch("ALL") == 8
    assert r.crossover_batch("ALL", max_batch=8) == 8
    assert r.crossover_batch("ALL", max_batch=7) is None


def test_crossover_scan_goes_to_4096_by_default() -> None:
    # W = 4097 / 4096, c = 1 / 4096: the tie is at b = 4097, one past the default scan
    r = _spec(_compute_tie(4097 / 4096, 1 / 4096))
    assert r.crossover_batch("ALL") is None
    assert r.crossover_batch("ALL", max_batch=4097) == 4097


def test_crossover_uses_the_given_prompt_and_output_lengths_on_both_sides() -> None:
    # target(b, C, t) = 0.06 + 1e-6 * C (no compute term), draft pass 1e-6 * C, 7 tokens per step, C = b * L with
    # L = prompt + output / 2 = 1000 + 50 = 1050.
    #   spec TPOT     = (7 * 1e-6 * C + 0.06 + 1e-6 * C) / 7
    #   baseline TPOT = 0.06 + 1e-6 * C
    #   spec >= baseline  <=>  7e-6 C + 0.06 + 1e-6 C >= 0.42 + 7e-6 C  <=>  1e-6 C >= 0.36  <=>  C >= 360000
    # b = 342: C = 359100 (pays); b = 343: C = 360150 (no longer pays)
    cost = CostModel(weights_read_s=0.06, kv_read_per_seq_s=0.0, kv_read_per_token_s=1e-6, compute_per_token_s=0.0)
    draft = DraftParams(quality=1.0, run_s=0.0, kv_read_per_token_s=1e-6, compute_per_token_s=0.0)
    r = _spec(_preset(cost, draft))
    assert r.crossover_batch("ALL", prompt_tokens=1000, output_tokens=100) == 343
    # with the defaults (64 + 600 / 2 = 364 tokens): C = 364 b >= 360000 from b = 989.01.. -> 990
    assert r.crossover_batch("ALL") == 990
