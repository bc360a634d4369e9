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
``vllm-neuron-0.5``
    The vllm-neuron plugin 0.5.x on vLLM 0.16.0 (DLC 0.16.0), the last NxDI line: as ``vllm-neuron``, with
    ``/version`` 0.16.0.
``upstream``
    Upstream vLLM V1, what the recorded transcripts in ``tests/fixtures/vllm-real`` come from: ``token_ids``
    per event, moving spec-decode counters with ``position`` labels, ``k + 1`` tokens per step at most.

Each profile is declared by the server dialect it plays (``spectrn.dialects``: one module per dialect); the
facts behind each field, with sources, are in docs/simulator.md.
"""

from __future__ import annotations

from spectrn.dialects import profiles
from spectrn.dialects.base import ErrorStyle, MetricsStyle, ServerProfile

# A profile's name: one a registered dialect declares (``profiles()``); checked where a name comes in
# (``get_profile``, the simulator's settings and presets).
ProfileName = str

__all__ = [
    "ErrorStyle",
    "MetricsStyle",
    "ProfileName",
    "ServerProfile",
    "check_profile_name",
    "get_profile",
    "profiles",
]


def get_profile(name: str) -> ServerProfile:
    from spectrn.errors import SimError

    found = profiles().get(name)
    if found is None:
        raise SimError(f"unknown server profile {name!r}", hint=f"choose one of {', '.join(profiles())}")
    return found


def check_profile_name(name: str | None) -> str | None:
    """A pydantic field check: ``name`` is a registered dialect's profile (or None)."""
    if name is not None and name not in profiles():
        raise ValueError(f"{name!r} is not a server profile; choose one of {', '.join(profiles())}")
    return name
