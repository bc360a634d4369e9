"""Upstream vLLM V1 (what ``tests/fixtures/vllm-real`` was recorded from, and vLLM on CPU): draft-model
speculation with k proposals plus a bonus token. Not a Neuron server: only the simulator and local runs use it."""

from __future__ import annotations

from spectrn.dialects.base import Dialect, ServerProfile, Setup
from spectrn.dialects.vllm_neuron_nxdi import V1_COUNTERS


class Upstream(Dialect):
    def config_flags(self, setup: Setup, speculative: bool) -> list[str]:
        return []


DIALECT = Upstream(
    key="upstream",
    vllm_dialect="upstream",
    releases=(),
    label="upstream vLLM V1",
    image="vllm/vllm-openai",
    window="upstream",
    modes=(),
    selectable=False,  # spectrn deploys Neuron servers only
    modes_source="upstream vLLM does not run on Neuron",
    profile=ServerProfile(
        name="upstream",
        description="upstream vLLM V1 (draft-model speculation, k proposals plus a bonus token)",
        window="upstream",
        vllm_version="0.32.0",
        token_ids=True,
        continuous_usage=True,
        metrics="v1",
        spec_counters_move=True,
        errors="v1",
        text_holdback_rate=0.0,
    ),
    sim_profile="upstream",
    counter_families=V1_COUNTERS,
)
