"""The speculation methods (``speculation_mode``): per method what it needs from the config and when it is
refused on every server; which server runs which method is each dialect's ``modes``."""

from __future__ import annotations

from dataclasses import dataclass

from spectrn.configuration.origins import FieldError
from spectrn.dialects.base import LEGACY_CONSEQUENCE, Dialect, Setup


@dataclass(frozen=True, slots=True)
class SpeculationMethod:
    name: str  # the speculation_mode value
    description: str
    uses_draft_model: bool = True  # a separate draft checkpoint (draft), which must share the target's tokenizer
    needs_eagle_draft: bool = False  # the draft must be EAGLE-trained (custom_models: eagle_draft: true)
    eagle: bool = False  # rendered as the dialect's eagle method (eagle, eagle3)
    # refused on every server: (message with the fact and its source, fix); {label}: the config's server
    refused: tuple[str, str] | None = None

    def check(self, setup: Setup, dialect: Dialect) -> None:
        """This method's own requirements (the dialect's rules run after them)."""
        if self.refused is not None:
            message, fix = self.refused
            raise FieldError(message.format(label=dialect.label), fields=("speculation_mode", "vllm_dialect"), fix=fix)
        dialect.check_mode(
            self.name,
            "use speculation_mode: eagle with an EAGLE draft (supported), or vllm_dialect: legacy-neuron for "
            f"draft-model speculation{LEGACY_CONSEQUENCE}",
        )
        if self.needs_eagle_draft and not setup.draft_spec.eagle_draft:
            raise FieldError(
                f"speculation_mode: {self.name!r} needs an EAGLE draft: draft {setup.draft!r} is a plain model "
                "('you must use a draft model that is specifically fine-tuned for EAGLE speculation' "
                "[aws-neuron/aws-neuron-sdk libraries/nxd-inference/developer_guides/feature-guide.rst])",
                fields=("speculation_mode", "draft"),
                fix="declare the EAGLE checkpoint under custom_models with eagle_draft: true and use it as "
                f"draft, or use speculation_mode: fused with a plain draft{LEGACY_CONSEQUENCE}",
            )
        if self.eagle:
            dialect.check_eagle(setup)

    def method_flag(self, dialect: Dialect) -> str | None:
        """The ``method`` of ``--speculative-config`` (None: draft-model speculation, no method key)."""
        return dialect.eagle_method if self.eagle else None


METHODS: dict[str, SpeculationMethod] = {
    m.name: m
    for m in (
        SpeculationMethod("fused", "a draft model compiled together with the target (NxDI fused speculation)"),
        SpeculationMethod("vanilla", "a draft model run separately from the target"),
        SpeculationMethod(
            "eagle",
            "an EAGLE draft (EAGLE v1 on NxDI, eagle3 on the current plugin)",
            needs_eagle_draft=True,
            eagle=True,
        ),  # fmt: skip
        SpeculationMethod(
            "medusa",
            "Medusa heads in the target checkpoint",
            uses_draft_model=False,
            refused=(
                "speculation_mode: 'medusa' runs on no vLLM Neuron server ({label}): the "
                "vllm-neuron plugin runs EAGLE only, and the legacy fork's Neuron path has no Medusa handling: "
                "without a draft model it serves through its plain runner, one token per step, while NxDI, given "
                "medusa_speculation_length, builds its Medusa model instead of the token-generation model that "
                "step calls [aws-neuron/upstreaming-to-vllm vllm/worker/neuron_worker.py, vllm/model_executor/"
                "model_loader/neuronx_distributed.py; aws-neuron/neuronx-distributed-inference src/"
                "neuronx_distributed_inference/models/model_base.py]",
                "use speculation_mode: eagle with an EAGLE3 draft on vllm_dialect: vllm-neuron (supported), "
                f"or speculation_mode: fused with a draft model on vllm_dialect: legacy-neuron{LEGACY_CONSEQUENCE}",
            ),
        ),
    )
}


def register_method(method: SpeculationMethod) -> None:
    """Add (or replace) a speculation method; the config, its reference and the rules pick it up."""
    METHODS[method.name] = method


def method_named(name: str) -> SpeculationMethod:
    return METHODS[name]
