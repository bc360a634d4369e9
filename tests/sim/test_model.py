"""The cost and acceptance model (pure): formulas, the published shape, overrides and errors."""

from __future__ import annotations

import math

import pytest

from spectrn.errors import SimError
from spectrn.sim import SimSettings, expected_tokens_per_step, expected_tpot, load_settings, predictability
from spectrn.sim.model import PRESETS, draft_params

# The published experiment's eight test cases (as llmperf sends them: the case text repeated to fill the
# prompt, after llmperf's header) and an open-ended sonnet-like text.
HEADER = "Randomly stream lines from the following text with 600 output tokens. Don't generate eos tokens:\n"
STRUCTURED_CASES = [
    "counting numbers from 1 ",
    "a ",
    "hello world ",
    "the cat sat on the mat. ",
    "Output valid JSON with fixed keys ",
    "Write a simple Python function skeleton ",
    "List numbers from one to twenty ",
]
SONNET = (
    "Shall I compare thee to a summer's day? Thou art more lovely and more temperate: Rough winds do shake "
    "the darling buds of May, And summer's lease hath all too short a date; Sometime too hot the eye of "
    "heaven shines, And often is his gold complexion dimm'd; And every fair from fair sometime declines, By "
    "chance or nature's changing course untrimm'd;"
)
OPEN_CASES = [
    HEADER + SONNET,
    "Tell me a story about a lighthouse keeper who finds a letter, and explain why it matters to her.",
    "Describe your favourite city at dusk, and imagine who lives there.",
]


def structured_prompts() -> list[str]:
    # llmperf repeats the case's text until the prompt reaches its input length (64 tokens in the sample).
    return [HEADER + case * math.ceil(48 / len(case.split())) for case in STRUCTURED_CASES]


def tpot_ms(prompt: str, **kw: object) -> float:
    return 1000 * expected_tpot(SimSettings(**kw), prompt, batch=4, prompt_tokens=64, output_tokens=600)  # type: ignore[arg-type]


def test_predictability_separates_structured_from_open() -> None:
    for p in structured_prompts():
        assert predictability(p) >= 0.75, p
    for p in OPEN_CASES:
        assert predictability(p) <= 0.25, p


@pytest.mark.parametrize(("profile", "proposals"), [("neuron-fork", 6), ("vllm-neuron", 6), ("upstream", 7)])
def test_expected_length_matches_closed_form_for_constant_acceptance(profile: str, proposals: int) -> None:
    # A huge decay scale makes acceptance constant per position: E[L] = (1 - a^(P+1)) / (1 - a) for P proposals,
    # P = k - 1 under NxDI fused speculation and k upstream.
    s = SimSettings(speculative=True, window=7, acceptance={"decay_tau": 1e9}, profile=profile)  # type: ignore[arg-type]
    m = s.resolved()
    probs = m.position_probs(OPEN_CASES[1])
    assert len(probs) == proposals == m.max_tokens_per_step - 1
    a = probs[0]
    assert all(p == pytest.approx(a) for p in probs)
    assert m.expected_tokens_per_step(OPEN_CASES[1]) == pytest.approx((1 - a ** (proposals + 1)) / (1 - a))


def test_acceptance_decays_with_position() -> None:
    probs = SimSettings(speculative=True, window=15).resolved().position_probs(structured_prompts()[0])
    assert all(b <= a for a, b in zip(probs, probs[1:], strict=False))
    assert probs[-1] < 0.5 * probs[0]


def test_baseline_has_one_token_per_step_and_no_acceptance() -> None:
    s = SimSettings()
    assert expected_tokens_per_step(s, structured_prompts()[0]) == 1.0
    assert s.resolved().position_probs(structured_prompts()[0]) == []


def test_published_shape() -> None:
    """Qwen3-32B/trn2: ~45 ms baseline; 1.7B w7 ~15 ms structured, ~baseline open; 0.6B no gain; 7 beats 5, 15."""
    structured, open_ = structured_prompts(), OPEN_CASES
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    base = mean([tpot_ms(p) for p in structured + open_])
    assert 40 <= base <= 50
    sd_struct = mean([tpot_ms(p, speculative=True) for p in structured])
    sd_open = mean([tpot_ms(p, speculative=True) for p in open_])
    assert 10 <= sd_struct <= 18, sd_struct
    assert 2.5 <= base / sd_struct <= 4.0  # "up to 3x faster"
    assert 0.85 <= base / sd_open <= 1.15, sd_open  # about the baseline on open-ended prompts
    # 0.6B: acceptance ~60% lower, and the gain is gone.
    s17 = SimSettings(speculative=True, draft="qwen3-1.7b")
    s06 = SimSettings(speculative=True, draft="qwen3-0.6b")
    for p in structured:
        a17, a06 = s17.resolved().position_probs(p)[0], s06.resolved().position_probs(p)[0]
        assert a06 == pytest.approx(0.4 * a17)
    sd06 = mean([tpot_ms(p, speculative=True, draft="qwen3-0.6b") for p in structured])
    assert base / sd06 <= 1.15, sd06
    # Window sweep on the structured mix: 7 best of {5, 7, 15}.
    w = {k: mean([tpot_ms(p, speculative=True, window=k) for p in structured]) for k in (5, 7, 15)}
    assert w[7] < w[5] and w[7] < w[15], w
    assert w[15] / w[7] >= 1.15, w
    # TTFT is unchanged by speculation.
    assert SimSettings().resolved().prefill_s(64) == SimSettings(speculative=True).resolved().prefill_s(64)


def test_costs_grow_with_prompt_batch_and_context() -> None:
    m = SimSettings().resolved()
    assert m.prefill_s(512) > m.prefill_s(64)
    assert m.decode_step_s(8, 1000) > m.decode_step_s(4, 1000)
    assert m.decode_step_s(4, 4000) > m.decode_step_s(4, 1000)
    spec = SimSettings(speculative=True).resolved()
    # Memory bound at the published load: a speculative step is the plain step plus k draft passes.
    assert spec.step_s(4, 1000) == pytest.approx(m.step_s(4, 1000) + 7 * spec.draft_pass_s(4, 1000))


def test_step_cost_is_a_roofline_with_a_compute_bound_regime() -> None:
    c = PRESETS["qwen3-32b-trn2"].cost
    m = SimSettings(speculative=True).resolved()
    # Memory bound: positions per sequence do not matter; compute bound: cost grows with batch x positions.
    assert m.target_step_s(4, 1000, 1) == m.target_step_s(4, 1000, 7)
    ridge = c.weights_read_s / c.compute_per_token_s
    b = int(2 * ridge / 7)
    assert m.target_step_s(b, 0, 7) == pytest.approx(c.compute_per_token_s * b * 7)
    assert m.target_step_s(2 * b, 0, 7) == pytest.approx(2 * m.target_step_s(b, 0, 7))
    memory = c.weights_read_s + c.kv_read_per_seq_s * b + c.kv_read_per_token_s * 1000
    assert m.target_step_s(b, 1000, 1) == pytest.approx(memory)
    # The draft pass is its own roofline; NxDI runs it k times and verifies k positions, upstream k and k + 1.
    d = m.draft_cost
    assert m.draft_pass_s(4, 100) == pytest.approx(d.run_s + d.kv_read_per_token_s * 100)
    assert m.draft_pass_s(10**6, 0) == pytest.approx(d.compute_per_token_s * 10**6)
    up = SimSettings(speculative=True, profile="upstream").resolved()
    big = 3 * b
    assert m.spec_step_s(big, 0) == pytest.approx(7 * m.draft_pass_s(big, 0) + c.compute_per_token_s * big * 7)
    assert up.spec_step_s(big, 0) == pytest.approx(7 * up.draft_pass_s(big, 0) + c.compute_per_token_s * big * 8)


def test_speculation_stops_paying_past_the_crossover() -> None:
    structured, open_ = structured_prompts()[0], OPEN_CASES[1]
    m = SimSettings(speculative=True).resolved()
    cross = m.crossover_batch(structured)
    assert cross is not None and 64 < cross < 4096
    base = m.baseline()
    for b, pays in ((4, True), (cross - 1, True), (cross, False), (2 * cross, False)):
        spec_t = m.expected_tpot_s(structured, batch=b)
        base_t = base.expected_tpot_s(structured, batch=b)
        assert (spec_t < base_t) == pays, b
    # Open-ended prompts: the acceptance length never covers k draft passes.
    assert m.crossover_batch(open_) == 1
    # Lower acceptance crosses over earlier.
    worse = SimSettings(speculative=True, acceptance={"alpha_structured": 0.8}).resolved()
    worse_cross = worse.crossover_batch(structured)
    assert worse_cross is not None and worse_cross < cross


def test_time_scale_scales_every_duration() -> None:
    a, b = SimSettings(speculative=True).resolved(), SimSettings(speculative=True, time_scale=0.1).resolved()
    assert b.step_s(4, 500) == pytest.approx(0.1 * a.step_s(4, 500))
    assert b.prefill_s(64) == pytest.approx(0.1 * a.prefill_s(64))


def test_size_rule_for_other_catalog_drafts() -> None:
    preset = PRESETS["qwen3-32b-trn2"]
    d4 = draft_params(preset, "qwen3-4b")
    d17 = draft_params(preset, "qwen3-1.7b")
    assert d4.quality > d17.quality and d4.run_s > d17.run_s
    d8 = draft_params(preset, "qwen3-8b")
    assert math.isclose(d8.run_s, preset.cost.ref_draft_run_s * math.sqrt(8.2 / 1.7))
    assert math.isclose(d8.compute_per_token_s, preset.cost.compute_per_token_s * 8.2 / 32.8)
    with pytest.raises(SimError, match="not smaller than the preset's target"):
        draft_params(preset, "qwen3-32b")


def test_overrides_apply_and_bad_ones_name_the_field() -> None:
    s = SimSettings(cost={"weights_read_s": 0.1})
    assert s.resolved().decode_step_s(1, 0) == pytest.approx(0.1 + 0.0001)
    with pytest.raises(SimError, match=r"cost: unknown parameter\(s\) weights_red_s"):
        load_settings(cost={"weights_red_s": 0.1})
    with pytest.raises(SimError, match="alpha_open"):
        load_settings(acceptance={"alpha_open": 1.5})
    with pytest.raises(SimError, match="unknown simulator preset 'nope'"):
        SimSettings(preset="nope")
    with pytest.raises(SimError, match="window"):
        load_settings(window=0)
    with pytest.raises(SimError, match="draft: unknown model 'qwen9'"):
        load_settings(draft="qwen9")


def test_yaml_config_file(tmp_path: object) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "sim.yaml"
    path.write_text("speculative: true\nwindow: 5\ncost:\n  weights_read_s: 0.05\nfaults:\n  error_rate: 0.1\n")
    s = load_settings(path, window=9)
    assert s.speculative and s.window == 9 and s.cost == {"weights_read_s": 0.05} and s.faults.error_rate == 0.1
    path.write_text("speculativ: true\n")
    with pytest.raises(SimError, match=r"sim.yaml: speculativ: unknown key"):
        load_settings(path)


def test_window_semantics_definitions() -> None:
    from spectrn import windows

    assert [windows.proposals("nxdi", k) for k in (1, 2, 7)] == [0, 1, 6]
    assert [windows.proposals("upstream", k) for k in (1, 2, 7)] == [1, 2, 7]
    assert windows.max_tokens_per_step("nxdi", 7) == windows.verified_tokens("nxdi", 7) == 7
    assert windows.max_tokens_per_step("upstream", 7) == windows.verified_tokens("upstream", 7) == 8
    assert windows.draft_runs("nxdi", 7) == windows.draft_runs("upstream", 7) == 7
    assert windows.expected_tokens_per_step([]) == 1.0
    assert windows.expected_tokens_per_step([0.5, 0.5]) == pytest.approx(1 + 0.5 + 0.25)
    with pytest.raises(ValueError, match="window 0"):
        windows.proposals("nxdi", 0)
    with pytest.raises(ValueError, match="not one of nxdi, upstream"):
        windows.proposals("eagle", 3)  # type: ignore[arg-type]
