"""Server profiles: which real vLLM server the simulator imitates, on the wire and in ``/metrics``.

``neuron-fork``
    AWS's V0 fork of vLLM (aws-neuron/upstreaming-to-vllm) in the 0.9.1 Neuron DLC, the server of the
    published experiment: ``return_token_ids`` is ignored (no ``token_ids`` in any event), but
    ``stream_options.continuous_usage_stats`` is honoured (cumulative ``usage`` in every event); the V0
    metric families, whose spec-decode members never move on Neuron; NxDI window semantics; V0 error bodies;
    text released by V0's incremental detokenizer, so a chunk's text length is not proportional to its tokens.
``vllm-neuron``
    The vllm-neuron plugin 0.2.x on vLLM V1 (DLC 0.11.0 and later): V1's protocol, V1 spec-decode counters
    registered but left at 0, NxDI window semantics.
``vllm-neuron-0.24``
    The current vllm-neuron plugin (0.24.x on vLLM 0.24, DLC ``0.24.0.1.1.0``, SDK 2.32): V1's protocol, eagle3
    speculation through vLLM's own scheduler, so the V1 spec-decode counters move, and upstream window semantics
    (k proposals, up to k + 1 tokens per step).
``upstream``
    Upstream vLLM V1, what the recorded transcripts in ``tests/fixtures/vllm-real`` come from: ``token_ids``
    per event, moving spec-decode counters with ``position`` labels, ``k + 1`` tokens per step at most.

The facts behind each field, with sources, are in docs/simulator.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from spectrn.windows import WindowSemantics

ProfileName = Literal["neuron-fork", "vllm-neuron", "vllm-neuron-0.24", "upstream"]
PROFILE_NAMES: tuple[ProfileName, ...] = get_args(ProfileName)

MetricsStyle = Literal["v0", "v1"]
ErrorStyle = Literal["v0", "v1"]


@dataclass(frozen=True, slots=True)
class ServerProfile:
    name: ProfileName
    description: str
    window: WindowSemantics  # what num_speculative_tokens = k means
    vllm_version: str  # GET /version and system_fingerprint
    token_ids: bool  # honours return_token_ids (token_ids / prompt_token_ids in responses)
    continuous_usage: bool  # honours stream_options.continuous_usage_stats
    metrics: MetricsStyle  # which metric families /metrics exposes
    spec_counters_move: bool  # whether the spec-decode metrics count anything
    errors: ErrorStyle  # error body layout
    text_holdback_rate: float  # share of tokens whose text the detokenizer holds back (ends mid-character)


PROFILES: dict[ProfileName, ServerProfile] = {
    "neuron-fork": ServerProfile(
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
    "vllm-neuron": ServerProfile(
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
    "vllm-neuron-0.24": ServerProfile(
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
    "upstream": ServerProfile(
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
}


def get_profile(name: str) -> ServerProfile:
    from spectrn.errors import SimError

    try:
        return PROFILES[name]  # type: ignore[index]
    except KeyError:
        raise SimError(f"unknown server profile {name!r}", hint=f"choose one of {', '.join(PROFILE_NAMES)}") from None
