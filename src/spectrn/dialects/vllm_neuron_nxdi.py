"""The vllm-neuron plugin's NxDI line on vLLM V1: 0.2.x (DLC 0.11.0, SDK 2.27): NxDI fused speculation with
EAGLE v1, the Neuron config in ``--additional-config '{"override_neuron_config": {...}}'`` (docs/neuron.md)."""

from __future__ import annotations

from spectrn.dialects.base import DLC, LEGACY_CONSEQUENCE, Dialect, ServerProfile, Setup, flag_json

V1_COUNTERS = (
    "vllm:spec_decode_num_drafts",
    "vllm:spec_decode_num_draft_tokens",
    "vllm:spec_decode_num_accepted_tokens",
    "vllm:spec_decode_num_accepted_tokens_per_pos",
)
PLUGIN_MODES_SOURCE = (
    "the vllm-neuron plugin runs only EAGLE speculation (0.2.x: EAGLE v1; current: eagle3), no draft-model or "
    "Medusa speculation [vllm-project/vllm-neuron README.md 0.2.0; aws-neuron/aws-neuron-sdk vllm-neuron/docs/"
    "getting-started/migration-nxdi-to-vllm-neuron.md]"
)


class PluginNxdi(Dialect):
    def config_flags(self, setup: Setup, speculative: bool) -> list[str]:
        # The plugin sets block_size = max_model_len itself when prefix caching is off, and asserts that a
        # block size is given when it is on (vllm-neuron platform.py): off, as on the legacy fork.
        extra = {"override_neuron_config": self.neuron_overrides(setup, speculative)}
        return ["--additional-config", flag_json(extra), "--no-enable-prefix-caching", *self.scheduling_flags(setup)]


DIALECT = PluginNxdi(
    key="vllm-neuron-0.2",
    vllm_dialect="vllm-neuron",
    releases=("0.2",),
    label="vllm_dialect 'vllm-neuron' (plugin_release 0.2)",
    image=f"{DLC}:0.11.0-neuronx-py312-sdk2.27.1-ubuntu24.04",  # vLLM 0.11.0, plugin 0.2.1-lts
    window="nxdi",
    modes=("eagle",),
    modes_source=PLUGIN_MODES_SOURCE,
    profile=ServerProfile(
        name="vllm-neuron",
        description="vllm-neuron plugin 0.2.x on vLLM V1 (NxDI fused speculation)",
        window="nxdi",
        vllm_version="0.11.0",
        token_ids=True,
        continuous_usage=True,
        metrics="v1",
        spec_counters_move=False,
        errors="v1",
        text_holdback_rate=0.0,
    ),
    sim_profile="vllm-neuron",
    eagle_architectures=("llama",),
    eagle_rule="NxDI EAGLE v1, whose draft layer (fc) exists only in NxDI's Llama model class",
    eagle_rule_note=" (Qwen3 cannot be an EAGLE draft)",
    eagle_rule_source="aws-neuron/neuronx-distributed-inference src/neuronx_distributed_inference/models/"
    "llama/modeling_llama.py, models/qwen3/modeling_qwen3.py",
    eagle_fix="use a Llama target with a Llama EAGLE draft (custom_models, architecture: llama), "
    f"or speculation_mode: fused on vllm_dialect: legacy-neuron{LEGACY_CONSEQUENCE}",
    counter_families=V1_COUNTERS,
    # vLLM 0.11.0 schedules synchronously unless --async-scheduling is given (async became the default in vLLM
    # 0.14.0), and the 0.2 plugin has no async-scheduling handling: both services already run the same mode
    default_scheduling=("sync", "sync"),
    scheduling_source="vLLM 0.11.0: async scheduling is opt-in",
)
