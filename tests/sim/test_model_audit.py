"""The simulator's cost and acceptance model pinned to hand-computed values (audit, issue 29).

Every expected number is worked out here from the preset's definitions (docs in ``spectrn.sim.model``) with the
arithmetic in a comment; none is computed by calling the model or a sibling of it. The preset is
``qwen3-32b-trn2``: weights_read 0.044 s, kv per sequence 1e-4 s, kv per context token 1.7e-7 s, compute
per position 1.7e-4 s, prefill 0.030 s + 2.5e-4 s per prompt token; the 1.7B draft: run 0.0035 s, kv per
token 0.9e-8 s, compute per sequence 8.8e-6 s; NxDI window semantics (window 7: 6 proposals, 7 verified
positions, 7 draft passes).
"""

from __future__ import annotations

import math
import zlib

import pytest

from spectrn.sim.model import PRESETS, AcceptanceClass, AcceptanceModel, Preset, draft_params, predictability, resolve

PRESET = PRESETS["qwen3-32b-trn2"]


def _spec(*, window: int | None = None, time_scale: float = 1.0, semantics: str | None = None, preset: Preset = PRESET):
    return resolve(
        preset,
        speculative=True,
        draft=None,
        window=window,
        time_scale=time_scale,
        semantics=semantics,  # type: ignore[arg-type]
    )


def _with_classes(*classes: AcceptanceClass) -> Preset:
    return PRESET.model_copy(update={"acceptance": AcceptanceModel(classes=list(classes))})


def test_target_step_memory_term_sums_weights_sequences_and_context() -> None:
    # 0.044 + 1e-4 * 4 + 1.7e-7 * 1000 = 0.044 + 0.0004 + 0.00017 = 0.04457 (compute 1.7e-4 * 4 * 7 = 0.00476 below)
    assert _spec().target_step_s(4, 1000, 7) == pytest.approx(0.04457, rel=1e-12)


def test_target_step_compute_term_counts_every_verified_position() -> None:
    # memory 0.044 + 1e-4 * 100 = 0.054; compute 1.7e-4 * 100 sequences * 7 positions = 0.119 -> 0.119
    assert _spec().target_step_s(100, 0, 7) == pytest.approx(0.119, rel=1e-12)
    # one position: compute 1.7e-4 * 100 = 0.017 < memory 0.054 -> 0.054
    assert _spec().target_step_s(100, 0, 1) == pytest.approx(0.054, rel=1e-12)


def test_draft_pass_is_a_roofline_of_context_and_batch() -> None:
    # memory 0.0035 + 0.9e-8 * 1000 = 0.003509; compute 8.8e-6 * 4 = 3.52e-5 -> 0.003509
    assert _spec().draft_pass_s(4, 1000) == pytest.approx(0.003509, rel=1e-12)
    # memory 0.0035; compute 8.8e-6 * 1000 sequences = 0.0088 -> 0.0088
    assert _spec().draft_pass_s(1000, 0) == pytest.approx(0.0088, rel=1e-12)


def test_nxdi_spec_step_is_k_draft_passes_plus_k_verified_positions() -> None:
    # window 7, NxDI: 7 draft passes of 0.003509 = 0.024563, plus target(4, 1000, 7) = 0.04457 -> 0.069133
    assert _spec().spec_step_s(4, 1000) == pytest.approx(0.069133, rel=1e-12)
    # compute-bound batch 100, no context: 7 * max(0.0035, 8.8e-4) = 0.0245; target max(0.054, 1.7e-4*100*7=0.119)
    assert _spec().spec_step_s(100, 0) == pytest.approx(0.0245 + 0.119, rel=1e-12)


def test_upstream_spec_step_verifies_k_plus_one_positions_with_k_draft_passes() -> None:
    # upstream window 7: 7 proposals, 8 verified, 7 draft passes; batch 100: 7 * 0.0035 + 1.7e-4 * 100 * 8 = 0.1605
    r = _spec(semantics="upstream")
    assert (r.proposals, r.max_tokens_per_step) == (7, 8)
    assert r.spec_step_s(100, 0) == pytest.approx(0.0245 + 0.136, rel=1e-12)


def test_nxdi_window_proposes_one_fewer_than_the_window() -> None:
    r = _spec(window=5)
    assert (r.proposals, r.max_tokens_per_step) == (4, 5)
    assert r.baseline().proposals == 0 and r.baseline().max_tokens_per_step == 1


def test_baseline_step_is_one_target_position() -> None:
    # 0.044 + 1e-4 * 4 + 1.7e-7 * 2000 = 0.04474
    assert _spec().baseline().step_s(4, 2000) == pytest.approx(0.04474, rel=1e-12)


def test_prefill_and_every_duration_scale_with_time_scale() -> None:
    # 0.030 + 2.5e-4 * 100 = 0.055; at time scale 0.5: 0.0275
    assert _spec().prefill_s(100) == pytest.approx(0.055, rel=1e-12)
    half = _spec(time_scale=0.5)
    assert half.prefill_s(100) == pytest.approx(0.0275, rel=1e-12)
    assert half.target_step_s(4, 1000, 1) == pytest.approx(0.04457 / 2, rel=1e-12)
    assert half.draft_pass_s(4, 1000) == pytest.approx(0.003509 / 2, rel=1e-12)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("hello there", 0.0, id="plain"),  # under 6 words, under 64 bytes, no cue
        pytest.param("count", 0.9, id="structured-cue"),  # a structured cue
        pytest.param(
            "write a json story", 0.36, id="damped-cue"
        ),  # structured cue 0.9 times the open-ended damping 0.4
        # 8 words, 7 bigrams, 6 distinct: repetition 1/7; (1/7 - 0.1) / 0.6 = 0.0714285... -> 0.071429
        pytest.param("a b c d e f a b", 0.071429, id="some-repetition"),
        # exactly 6 words (the threshold), 5 bigrams, 2 distinct: repetition 0.6; (0.6 - 0.1) / 0.6 = 0.833333
        pytest.param("a b a b a b", 0.833333, id="six-words"),
        pytest.param("a b a b a", 0.0, id="five-words"),  # 5 words: too short to judge repetition
    ],
)
def test_predictability_of_hand_made_prompts(text: str, expected: float) -> None:
    assert predictability(text) == expected


def test_predictability_from_compressibility() -> None:
    # one 80-byte word (no bigrams, no cue): only the zlib rule applies, clamp((comp - 0.45) / 0.35)
    text = "abcdefgh" * 10
    raw = text.encode()
    comp = 1 - len(zlib.compress(raw, 9)) / len(raw)
    assert 0.45 < comp < 0.8  # in the rule's linear range
    assert predictability(text) == round((comp - 0.45) / 0.35, 6)


def test_position_probs_follow_the_decay_curve_from_alpha_open() -> None:
    # "hello there": predictability 0 -> alpha = alpha_open 0.32; a_i = 0.32 * exp(-(i / 7) ** 4), i = 0..5
    probs = _spec().position_probs("hello there")
    assert probs == pytest.approx([0.32 * math.exp(-((i / 7) ** 4)) for i in range(6)], rel=1e-12)
    assert probs[0] == pytest.approx(0.32, rel=1e-12)


def test_position_probs_mix_alphas_by_predictability_and_respect_the_cap() -> None:
    # "write a json story": p = 0.36 -> alpha = 0.32 + (0.92 - 0.32) * 0.36 = 0.536
    assert _spec().alpha("write a json story") == pytest.approx(0.536, rel=1e-12)
    # "count": p = 0.9 -> alpha 0.32 + 0.6 * 0.9 = 0.86; at T = 0 under the 0.98 cap
    assert _spec().position_probs("count")[0] == pytest.approx(0.86, rel=1e-12)
    # a quality-2 draft doubles it: 1.72, capped at accept_cap 0.98 (not at 1.0)
    strong = _spec().model_copy(update={"draft_cost": PRESET.drafts["qwen3-1.7b"].model_copy(update={"quality": 2.0})})
    assert strong.position_probs("count")[0] == pytest.approx(0.98, rel=1e-12)


def test_temperature_divides_acceptance_by_one_plus_penalty_times_t() -> None:
    # T = 2: divide by 1 + 0.3 * 2 = 1.6; first position 0.32 / 1.6 = 0.2
    assert _spec().position_probs("hello there", temperature=2.0)[0] == pytest.approx(0.2, rel=1e-12)


def test_weaker_draft_scales_acceptance_by_its_quality() -> None:
    r = resolve(PRESET, speculative=True, draft="qwen3-0.6b", window=None, time_scale=1.0)
    # calibrated quality 0.4: 0.32 * 0.4 = 0.128
    assert r.position_probs("hello there")[0] == pytest.approx(0.128, rel=1e-12)


def test_measured_class_probabilities_then_the_class_decay_curve() -> None:
    cls = AcceptanceClass(name="cls", contains=["XYZ"], position_probs=[0.9, 0.5], alpha=0.8)
    r = _spec(preset=_with_classes(cls))
    # positions 0, 1 measured; 2..5 from the class curve 0.8 * exp(-(i / 7) ** 4)
    expected = [0.9, 0.5] + [0.8 * math.exp(-((i / 7) ** 4)) for i in range(2, 6)]
    assert r.position_probs("say XYZ") == pytest.approx(expected, rel=1e-12)
    # at T = 1 every position is divided by 1.3, the measured ones too
    assert r.position_probs("say XYZ", temperature=1.0) == pytest.approx([p / 1.3 for p in expected], rel=1e-12)
    assert r.alpha("say XYZ") == 0.8
    assert r.alpha("hello there") == pytest.approx(0.32, rel=1e-12)  # no class: the predictability rule


def test_first_matching_class_wins() -> None:
    first = AcceptanceClass(name="first", contains=["XYZ"], position_probs=[0.7], alpha=0.6)
    second = AcceptanceClass(name="second", pattern="X.Z", position_probs=[0.2], alpha=0.1)
    r = _spec(preset=_with_classes(first, second))
    assert r.position_probs("XYZ")[0] == pytest.approx(0.7, rel=1e-12)
    assert r.position_probs("XAZ")[0] == pytest.approx(0.2, rel=1e-12)  # only the pattern matches


def test_expected_tokens_and_acceptance_rate_for_constant_probabilities() -> None:
    cls = AcceptanceClass(name="half", contains=["HALF"], position_probs=[0.5] * 6, alpha=0.5)
    r = _spec(preset=_with_classes(cls))
    # 1 + 0.5 + 0.25 + 0.125 + 0.0625 + 0.03125 + 0.015625 = 1.984375; rate = 0.984375 / 6 proposals = 0.1640625
    assert r.expected_tokens_per_step("HALF") == pytest.approx(1.984375, rel=1e-12)
    assert r.expected_acceptance_rate("HALF") == pytest.approx(0.1640625, rel=1e-12)
    assert r.baseline().expected_acceptance_rate("HALF") == 0.0


def test_expected_tpot_uses_the_mean_context_over_the_request() -> None:
    cls = AcceptanceClass(name="half", contains=["HALF"], position_probs=[0.5] * 6, alpha=0.5)
    r = _spec(preset=_with_classes(cls))
    # mean context 4 * (64 + 600 / 2) = 1456 tokens
    draft = 7 * (0.0035 + 0.9e-8 * 1456)
    target = 0.044 + 1e-4 * 4 + 1.7e-7 * 1456
    assert r.expected_tpot_s("HALF", batch=4) == pytest.approx((draft + target) / 1.984375, rel=1e-12)
    assert r.baseline().expected_tpot_s("HALF", batch=4) == pytest.approx(target, rel=1e-12)


def test_size_rule_for_uncalibrated_drafts() -> None:
    # 4B draft: ratio 4 / 1.7; quality 1 + 0.08 * log2(ratio); run 0.0035 * sqrt(ratio); kv and compute * 4 / 32.8
    d = draft_params(PRESET, "qwen3-4b")
    ratio = 4.0 / 1.7
    assert d.quality == pytest.approx(1 + 0.08 * math.log2(ratio), rel=1e-12)
    assert d.run_s == pytest.approx(0.0035 * math.sqrt(ratio), rel=1e-12)
    assert d.kv_read_per_token_s == pytest.approx(1.7e-7 * 4.0 / 32.8, rel=1e-12)
    assert d.compute_per_token_s == pytest.approx(1.7e-4 * 4.0 / 32.8, rel=1e-12)
    # 0.6B with no calibration: quality (0.6 / 1.7) ** 0.88 = 0.39992...
    bare = PRESET.model_copy(update={"drafts": {}})
    assert draft_params(bare, "qwen3-0.6b").quality == pytest.approx((0.6 / 1.7) ** 0.88, rel=1e-12)


def test_a_draft_as_large_as_the_target_is_refused() -> None:
    from spectrn.errors import SimError

    with pytest.raises(SimError, match="is not smaller than the preset's target"):
        draft_params(PRESET, "qwen3-32b")


def test_crossover_is_one_when_speculation_never_beats_the_baseline() -> None:
    # a free draft (no cost) whose proposals are never accepted: the speculative step costs target(b, C, 7) for one
    # token, the baseline target(b, C, 1); both memory bound at b = 1, so equal: speculation does not pay -> 1
    free = PRESET.drafts["qwen3-1.7b"].model_copy(
        update={"run_s": 0.0, "kv_read_per_token_s": 0.0, "compute_per_token_s": 0.0}
    )
    never = AcceptanceClass(name="never", contains=["NEVER"], position_probs=[0.0] * 6, alpha=0.0)
    preset = _with_classes(never).model_copy(update={"drafts": {"qwen3-1.7b": free}})
    assert _spec(preset=preset).crossover_batch("NEVER") == 1
