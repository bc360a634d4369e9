"""What a speculation window k means on each server (one definition for the simulator, analysis and sweeps).

- ``nxdi``: NxDI fused speculation, used by the Neuron fork of vLLM (the 0.9.1 DLC). ``num_speculative_tokens
  = k`` becomes NxDI's ``speculation_length = k``: the draft runs k times but only its first k - 1 tokens are
  proposed ("k iterations of the draft model. We use only first k-1 tokens", neuronx-distributed-inference
  ``models/model_base.py``), the target verifies them, and a step emits at most k tokens.
- ``upstream``: vLLM's own speculative decoding (and the vllm-neuron plugin's EAGLE): k proposals, the accepted
  prefix plus one bonus token, up to k + 1 tokens per step.

Sources: docs/neuron.md.
"""

from __future__ import annotations

from typing import Literal

Semantics = Literal["nxdi", "upstream"]
SEMANTICS: tuple[Semantics, Semantics] = ("nxdi", "upstream")


def proposals(semantics: Semantics, window: int) -> int:
    """Draft tokens proposed per step at window ``window``."""
    if window < 1:
        raise ValueError("window must be >= 1")
    return window - 1 if semantics == "nxdi" else window


def max_tokens_per_step(semantics: Semantics, window: int) -> int:
    """The most tokens one speculative step can emit: the accepted proposals plus one."""
    return proposals(semantics, window) + 1


def for_profile(profile: str | None) -> Semantics:
    """Window semantics of a server profile (the simulator's or a declared one)."""
    return "upstream" if profile == "upstream" else "nxdi"


def for_dialect(dialect: str | None) -> Semantics:
    """Window semantics of a config's vLLM dialect: the legacy Neuron fork runs NxDI fused speculation."""
    return "upstream" if dialect == "vllm-neuron" else "nxdi"
