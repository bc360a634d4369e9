"""The simulator's settings resolved: overrides, window semantics per profile, limits (audit, issue 29)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from spectrn.sim import SimSettings


def test_a_profile_override_brings_its_window_semantics() -> None:
    # window 3: upstream proposes 3 (up to 4 tokens a step); the preset's NxDI profile proposes 2
    assert SimSettings(profile="upstream", speculative=True, window=3).resolved().proposals == 3
    assert SimSettings(speculative=True, window=3).resolved().proposals == 2


def test_nxdi_needs_a_window_of_two() -> None:
    with pytest.raises(ValidationError, match="window: 1 proposes nothing under NxDI"):
        SimSettings(speculative=True, window=1)
    assert SimSettings(speculative=True, window=2).resolved().proposals == 1
    assert SimSettings(profile="upstream", speculative=True, window=1).resolved().proposals == 1


def test_cost_and_acceptance_overrides_replace_only_what_they_name() -> None:
    preset = SimSettings(cost={"weights_read_s": 0.05}, acceptance={"alpha_open": 0.5}).resolved_preset()
    assert (preset.cost.weights_read_s, preset.cost.prefill_base_s) == (0.05, 0.030)
    assert (preset.acceptance.alpha_open, preset.acceptance.alpha_structured) == (0.5, 0.92)


def test_limits_come_from_the_settings_else_the_preset() -> None:
    assert (SimSettings().batch_limit, SimSettings().context_limit) == (4, 1024)
    assert (
        SimSettings(max_num_seqs=8, max_model_len=2048).batch_limit,
        SimSettings(max_model_len=2048).context_limit,
    ) == (8, 2048)
    assert SimSettings().model_name == "Qwen/Qwen3-32B"
