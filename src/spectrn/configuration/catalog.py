"""Model and instance catalogs: the facts spectrn validates a configuration against.

Models: the Qwen3 dense family, with the numbers that matter for speculation (tokenizer family and
vocabulary size must match between draft and target; the parameter count orders draft < target; layer
count and hidden size feed the simulator's cost model). Users add models under ``custom_models``.

Instances: Neuron instance types with chip count, physical NeuronCores per chip, supported logical
NeuronCore (LNC) settings and an on-demand hourly price used for cost per token. Prices are
on-demand list prices for one region and date (``spectrn.configuration.pricing``); override them with
``pricing.instance_hourly_usd``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ModelSpec(BaseModel):
    """One model spectrn can serve as a target or draft."""

    # custom_models come from the config: no infinity or NaN, and bounds far above any model (10 trillion
    # parameters, 2**24 vocabulary entries, 10000 layers, a hidden size of 2**20), so a typo is not a model
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    hf_id: str = Field(description="Hugging Face model id, e.g. Qwen/Qwen3-32B.")
    params_b: float = Field(
        gt=0, le=10_000, description="Parameter count in billions (orders draft < target; at most 10000)."
    )
    tokenizer: str = Field(description="Tokenizer family; draft and target must share it.")
    vocab_size: int = Field(gt=0, le=1 << 24, description="Vocabulary size; draft and target must match.")
    num_layers: int = Field(default=0, ge=0, le=10_000, description="Transformer layers (cost model hint).")
    hidden_size: int = Field(default=0, ge=0, le=1 << 20, description="Hidden size (cost model hint).")
    architecture: str = Field(
        default="",
        description="Architecture family, e.g. qwen3 or llama; speculation modes check it (see docs/neuron.md).",
    )
    eagle_draft: bool = Field(
        default=False,
        description="The checkpoint is an EAGLE draft trained for its target (with the target's LM head); "
        "speculation_mode eagle needs one as the draft.",
    )
    medusa_heads: int = Field(
        default=0,
        ge=0,
        le=64,
        description="Medusa heads fine-tuned into this checkpoint (0: none). Read but unused: speculation_mode medusa "
        "runs on no vLLM Neuron server (docs/neuron.md).",
    )


class InstanceSpec(BaseModel):
    """One Neuron instance type."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chips: int = Field(gt=0, description="Neuron devices (chips) on the instance.")
    cores_per_chip: int = Field(gt=0, description="Physical NeuronCores per chip.")
    lnc_options: tuple[int, ...] = Field(description="Supported logical NeuronCore settings.")
    default_lnc: int = Field(description="Default logical NeuronCore setting.")
    device_memory_gib_per_chip: int = Field(gt=0, description="Device memory per chip (GiB).")
    hourly_usd: float = Field(gt=0, description="Approximate on-demand price per hour (USD).")
    chip_name: str = Field(description="Accelerator generation, e.g. Trainium2.")

    def logical_cores(self, chips: int, lnc: int) -> int:
        return chips * self.cores_per_chip // lnc


QWEN3_VOCAB = 151936

MODELS: dict[str, ModelSpec] = {
    "qwen3-0.6b": ModelSpec(
        hf_id="Qwen/Qwen3-0.6B",
        params_b=0.6,
        tokenizer="qwen3",
        vocab_size=QWEN3_VOCAB,
        num_layers=28,
        hidden_size=1024,
        architecture="qwen3",
    ),
    "qwen3-1.7b": ModelSpec(
        hf_id="Qwen/Qwen3-1.7B",
        params_b=1.7,
        tokenizer="qwen3",
        vocab_size=QWEN3_VOCAB,
        num_layers=28,
        hidden_size=2048,
        architecture="qwen3",
    ),
    "qwen3-4b": ModelSpec(
        hf_id="Qwen/Qwen3-4B",
        params_b=4.0,
        tokenizer="qwen3",
        vocab_size=QWEN3_VOCAB,
        num_layers=36,
        hidden_size=2560,
        architecture="qwen3",
    ),
    "qwen3-8b": ModelSpec(
        hf_id="Qwen/Qwen3-8B",
        params_b=8.2,
        tokenizer="qwen3",
        vocab_size=QWEN3_VOCAB,
        num_layers=36,
        hidden_size=4096,
        architecture="qwen3",
    ),
    "qwen3-14b": ModelSpec(
        hf_id="Qwen/Qwen3-14B",
        params_b=14.8,
        tokenizer="qwen3",
        vocab_size=QWEN3_VOCAB,
        num_layers=40,
        hidden_size=5120,
        architecture="qwen3",
    ),
    "qwen3-32b": ModelSpec(
        hf_id="Qwen/Qwen3-32B",
        params_b=32.8,
        tokenizer="qwen3",
        vocab_size=QWEN3_VOCAB,
        num_layers=64,
        hidden_size=5120,
        architecture="qwen3",
    ),
}

INSTANCES: dict[str, InstanceSpec] = {
    "trn2.48xlarge": InstanceSpec(
        chips=16,
        cores_per_chip=8,
        lnc_options=(1, 2),
        default_lnc=2,
        device_memory_gib_per_chip=96,
        hourly_usd=44.70,
        chip_name="Trainium2",
    ),
    "trn2.3xlarge": InstanceSpec(
        chips=1,
        cores_per_chip=8,
        lnc_options=(1, 2),
        default_lnc=2,
        device_memory_gib_per_chip=96,
        hourly_usd=2.24,
        chip_name="Trainium2",
    ),
    "trn1.32xlarge": InstanceSpec(
        chips=16,
        cores_per_chip=2,
        lnc_options=(1,),
        default_lnc=1,
        device_memory_gib_per_chip=32,
        hourly_usd=21.50,
        chip_name="Trainium",
    ),
    "inf2.48xlarge": InstanceSpec(
        chips=12,
        cores_per_chip=2,
        lnc_options=(1,),
        default_lnc=1,
        device_memory_gib_per_chip=32,
        hourly_usd=12.98,
        chip_name="Inferentia2",
    ),
}
