"""The legacy Neuron fork of vLLM V0 (DLC 0.9.1, SDK 2.26.1): NxDI fused speculation through
``--override-neuron-config``; out of support since Neuron SDK 2.28 (docs/neuron.md)."""

from __future__ import annotations

from typing import Any

from spectrn.dialects.base import DLC, LEGACY_CONSEQUENCE, Dialect, Refusal, ServerProfile, Setup, flag_json


class LegacyNeuron(Dialect):
    def neuron_overrides(self, setup: Setup, speculative: bool) -> dict[str, Any]:
        """The fork reads the speculation keys from ``--override-neuron-config``: fused, plus EAGLE for eagle."""
        out = Dialect.neuron_overrides(self, setup, speculative)
        if speculative and setup.speculation_mode == "fused":
            out["enable_fused_speculation"] = True
        elif speculative and setup.speculation_mode == "eagle":
            out.update(enable_fused_speculation=True, enable_eagle_speculation=True)
        return out

    def config_flags(self, setup: Setup, speculative: bool) -> list[str]:
        return ["--override-neuron-config", flag_json(self.neuron_overrides(setup, speculative))]

    def env(self) -> list[tuple[str, str]]:
        return [("VLLM_NEURON_FRAMEWORK", "neuronx-distributed-inference")]


DIALECT = LegacyNeuron(
    key="legacy-neuron",
    vllm_dialect="legacy-neuron",
    releases=(),
    label="vllm_dialect 'legacy-neuron'",
    image=f"{DLC}:0.9.1-neuronx-py311-sdk2.26.1-ubuntu22.04",
    window="nxdi",
    modes=("fused", "eagle"),
    modes_source="the fork runs fused draft-model and EAGLE speculation [aws-neuron/upstreaming-to-vllm "
    "vllm/worker/neuron_worker.py]",
    profile=ServerProfile(
        name="neuron-fork",
        description="AWS's V0 fork of vLLM in the 0.9.1 Neuron DLC (NxDI fused speculation)",
        window="nxdi",
        vllm_version="0.9.1",
        token_ids=False,
        continuous_usage=True,
        metrics="v0",
        spec_counters_move=False,
        errors="v0",
        text_holdback_rate=0.1,
    ),
    sim_profile=None,  # the sim preset's own (neuron-fork for the Neuron presets)
    eagle_architectures=("llama",),
    eagle_rule="NxDI EAGLE v1, whose draft layer (fc) exists only in NxDI's Llama model class",
    eagle_rule_note=" (Qwen3 cannot be an EAGLE draft)",
    eagle_rule_source="aws-neuron/neuronx-distributed-inference src/neuronx_distributed_inference/models/"
    "llama/modeling_llama.py, models/qwen3/modeling_qwen3.py",
    eagle_fix="use a Llama target with a Llama EAGLE draft (custom_models, architecture: llama), "
    f"or speculation_mode: fused on vllm_dialect: legacy-neuron{LEGACY_CONSEQUENCE}",
    out_of_support=True,
    refusals={
        "vanilla": Refusal(
            message="speculation_mode: 'vanilla' is not supported by vllm_dialect 'legacy-neuron': any speculative "
            "config selects the fork's multi-step runner, whose forward reads only fused outputs "
            "(output.fused_outputs), so non-fused draft speculation cannot run [aws-neuron/upstreaming-to-vllm "
            "vllm/worker/neuron_worker.py, vllm/model_executor/model_loader/neuronx_distributed.py]",
            fix="use speculation_mode: fused (the same draft, compiled together with the target)",
        )
    },
    counter_families=("vllm:spec_decode_draft_acceptance_rate", "vllm:spec_decode_efficiency"),
)
