"""The vllm-neuron plugin's last NxDI line, 0.5.x on vLLM 0.16.0 (DLC 0.16.0, SDK 2.29-2.31.1): EAGLE through
NxDI, the Neuron config in ``--additional-config '{"override_neuron_config": {...}}'``, as 0.2.x (docs/neuron.md)."""

from __future__ import annotations

import dataclasses

from spectrn.dialects.base import DLC, ServerProfile
from spectrn.dialects.vllm_neuron_nxdi import DIALECT as PLUGIN_0_2

# the 0.2.x dialect in all but its release, image, simulator profile and scheduling default
DIALECT = dataclasses.replace(
    PLUGIN_0_2,
    key="vllm-neuron-0.5",
    releases=("0.5",),
    label="vllm_dialect 'vllm-neuron' (plugin_release 0.5)",
    image=f"{DLC}:0.16.0-neuronx-py312-sdk2.31.1-ubuntu24.04",  # vLLM 0.16.0, plugin release-0.5.3, NxDI 0.10
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
    eagle_rule="NxDI EAGLE, whose draft layer (fc) exists only in NxDI's Llama model class",
    # vLLM >= 0.14 schedules asynchronously by default, also for EAGLE (vLLM PR #31998); the 0.5 plugin's guide
    # never says whether it turns that off with --speculative-config, so both services are pinned
    # (docs/neuron.md, "Scheduling mode")
    sync_scheduling_flag="--no-async-scheduling",
    default_scheduling=("async", "undocumented"),
    scheduling_source="vLLM 0.16.0 schedules asynchronously by default; the 0.5 plugin does not document whether "
    "--speculative-config turns it off",
)
