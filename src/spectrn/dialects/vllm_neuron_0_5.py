"""The vllm-neuron plugin's last NxDI line, 0.5.x on vLLM 0.16.0 (DLC 0.16.0, SDK 2.29-2.31.1): EAGLE through
NxDI, the Neuron config in ``--additional-config '{"override_neuron_config": {...}}'``, as 0.2.x (docs/neuron.md)."""

from __future__ import annotations

from spectrn.dialects.base import DLC, LEGACY_CONSEQUENCE, ServerProfile
from spectrn.dialects.vllm_neuron_nxdi import PLUGIN_MODES_SOURCE, V1_COUNTERS, PluginNxdi

DIALECT = PluginNxdi(
    key="vllm-neuron-0.5",
    vllm_dialect="vllm-neuron",
    releases=("0.5",),
    label="vllm_dialect 'vllm-neuron' (plugin_release 0.5)",
    image=f"{DLC}:0.16.0-neuronx-py312-sdk2.31.1-ubuntu24.04",  # vLLM 0.16.0, plugin release-0.5.3, NxDI 0.10
    window="nxdi",
    modes=("eagle",),
    modes_source=PLUGIN_MODES_SOURCE,
    profile=ServerProfile(
        name="vllm-neuron-0.5",
        description="vllm-neuron plugin 0.5.x on vLLM 0.16.0 (NxDI fused speculation, as 0.2.x)",
        window="nxdi",
        vllm_version="0.16.0",
        token_ids=True,
        continuous_usage=True,
        metrics="v1",
        spec_counters_move=False,
        errors="v1",
        text_holdback_rate=0.0,
    ),
    sim_profile="vllm-neuron-0.5",
    eagle_architectures=("llama",),
    eagle_rule="NxDI EAGLE, whose draft layer (fc) exists only in NxDI's Llama model class",
    eagle_rule_note=" (Qwen3 cannot be an EAGLE draft)",
    eagle_rule_source="aws-neuron/neuronx-distributed-inference src/neuronx_distributed_inference/models/"
    "llama/modeling_llama.py, models/qwen3/modeling_qwen3.py",
    eagle_fix="use a Llama target with a Llama EAGLE draft (custom_models, architecture: llama), "
    f"or speculation_mode: fused on vllm_dialect: legacy-neuron{LEGACY_CONSEQUENCE}",
    counter_families=V1_COUNTERS,
    # vLLM >= 0.14 schedules asynchronously by default, also for EAGLE (vLLM PR #31998); the 0.5 plugin's guide
    # never says whether it turns that off with --speculative-config, so both services are pinned
    # (docs/neuron.md, "Scheduling mode")
    sync_scheduling_flag="--no-async-scheduling",
    default_scheduling=("async", "undocumented"),
    scheduling_source="vLLM 0.16.0 schedules asynchronously by default; the 0.5 plugin does not document whether "
    "--speculative-config turns it off",
)
