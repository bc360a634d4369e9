"""The current vllm-neuron plugin (0.24.x on vLLM 0.24, DLC 0.24.0.1.1.0, SDK 2.32): eagle3 through vLLM's own
scheduler (upstream window semantics), the Neuron config in ``--additional-config '{"neuron_config": {...}}'``
(docs/neuron.md)."""

from __future__ import annotations

from typing import Any

from spectrn.dialects.base import DLC, Dialect, ServerProfile, Setup, flag_json
from spectrn.dialects.vllm_neuron_nxdi import PLUGIN_MODES_SOURCE, V1_COUNTERS


class PluginCurrent(Dialect):
    def neuron_overrides(self, setup: Setup, speculative: bool) -> dict[str, Any]:
        # aws-neuron-sdk vllm-neuron/docs/design/vllm/additional-config.md: the plugin's own keys, none by default
        return dict(setup.neuron_config)

    def config_flags(self, setup: Setup, speculative: bool) -> list[str]:
        extra = {"neuron_config": self.neuron_overrides(setup, speculative)}
        return ["--additional-config", flag_json(extra), "--no-enable-prefix-caching", *self.scheduling_flags(setup)]

    def speculative_config(self, setup: Setup, draft_path: str, method: str | None) -> dict[str, Any]:
        """The plugin's eagle3 takes method, model and num_speculative_tokens only."""
        spec: dict[str, Any] = {} if method is None else {"method": method}
        spec.update(model=draft_path, num_speculative_tokens=setup.num_speculative_tokens)
        return spec


DIALECT = PluginCurrent(
    key="vllm-neuron-0.24",
    vllm_dialect="vllm-neuron",
    releases=("current",),
    label="vllm_dialect 'vllm-neuron' (plugin_release current)",
    image=f"{DLC}:0.24.0.1.1.0-neuronx-py313-sdk2.32.0-ubuntu24.04",  # plugin v0.24.0.1.1.0 (SDK 2.32)
    window="upstream",
    modes=("eagle",),
    modes_source=PLUGIN_MODES_SOURCE,
    profile=ServerProfile(
        name="vllm-neuron-0.24",
        description="vllm-neuron plugin 0.24.x on vLLM 0.24 (eagle3, k proposals plus a bonus token)",
        window="upstream",
        vllm_version="0.24.0",
        token_ids=True,
        continuous_usage=True,
        metrics="v1",
        spec_counters_move=True,
        errors="v1",
        text_holdback_rate=0.0,
    ),
    sim_profile="vllm-neuron-0.24",
    eagle_method="eagle3",
    eagle_architectures=("llama",),
    eagle_draft_only=True,
    eagle_rule_source="aws-neuron/aws-neuron-sdk vllm-neuron/docs/design/speculation/speculative_decoding_design.md",
    eagle_fix="use an EAGLE3 draft with a Llama-style config (custom_models: architecture: llama, eagle_draft: true)",
    # Target families the current plugin's model recipes list with "Speculative decoding (EAGLE3)": Llama 3 and
    # GPT-OSS (the recipes index also has Qwen3-VL and Qwen3-Embedding, without EAGLE3).
    eagle_recipe_architectures=("llama", "gpt-oss"),
    counter_families=V1_COUNTERS,
    # aws-neuron-sdk vllm-neuron/docs/getting-started/quickstart-online-serving.md (docs/neuron.md)
    timeout_env=("VLLM_NEURON_COMPILATION_TIMEOUT", "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS"),
    # aws-neuron-sdk vllm-neuron/docs/guides/features-guide.md: async scheduling on by default, "Setting
    # `--speculative-config` disables async scheduling automatically" (docs/neuron.md, "Scheduling mode")
    sync_scheduling_flag="--no-async-scheduling",
    default_scheduling=("async", "sync"),
    scheduling_source="vllm-neuron features-guide.md: async scheduling is on by default, and --speculative-config "
    "turns it off",
)
