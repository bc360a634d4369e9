"""Which window semantics a run's figures use: the server's own signals first, then the simulator's profile or the
config, with the disagreement stated.

The signals are the ones every real vLLM server exposes (docs/neuron.md, "What spectrn sees on each server"), never
a simulator-only path:

- V1 spec-decode counters (``vllm:spec_decode_num_drafts`` ...) that MOVE during the run: upstream vLLM V1, or the
  vllm-neuron plugin's eagle3 line (0.24.x), both ``k`` proposals and up to ``k + 1`` tokens per step;
- V1 counters registered but still at 0 after a run with speculative traffic: the vllm-neuron plugin 0.2.x, whose
  drafts never reach vLLM's scheduler because NxDI runs fused speculation (at most ``k`` tokens per step);
- V0 spec-decode families (``vllm:spec_decode_draft_acceptance_rate`` ...) without a sample: the Neuron fork of
  vLLM V0, NxDI fused speculation; a V0 gauge with a sample is upstream V0's SpecDecodeWorker (``k + 1``).

Which families a server registered is read before the run (``spectrn.loadgen.identity``: ``metrics_style``);
whether they moved is in ``acceptance.json``. ``/version`` does not decide it: a vLLM version does not say
which plugin (if any) runs under it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spectrn.dialects import resolve, semantics_of, semantics_of_profile
from spectrn.run.records import RunMeta
from spectrn.windows import WindowSemantics, max_tokens_per_step

_MOVED = (
    "its spec-decode counters moved during the run (vLLM V1 upstream, or vllm-neuron 0.24's eagle3): "
    "k proposals, up to k + 1 tokens per step"
)
_V0_MOVED = "its vLLM V0 acceptance gauge has a sample (upstream V0's SpecDecodeWorker): k proposals, up to k + 1"
_V1_STILL = (
    "its vLLM V1 spec-decode counters are registered but stayed at 0 through the run (the vllm-neuron plugin "
    "0.2.x: NxDI fused speculation): at most k tokens per step"
)
_V0_STILL = (
    "it registers vLLM V0 spec-decode families that never get a sample (the Neuron fork of vLLM V0: NxDI fused "
    "speculation): at most k tokens per step"
)


@dataclass(frozen=True, slots=True)
class SemanticsChoice:
    """The semantics the figures use, where they come from, and what the run's own claim was."""

    semantics: WindowSemantics
    source: str  # server | profile | config
    evidence: str | None
    conflict: str | None  # a finding's message when the server and the claim disagree


def _number(raw: Mapping[str, Any], key: str) -> float:
    v = raw.get(key)
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else 0.0


def from_server(metrics_style: str | None, counters: list[Mapping[str, Any]]) -> tuple[WindowSemantics, str] | None:
    """The semantics the server's signals show, with the evidence in words; None when they show nothing.

    ``counters``: the speculative service's entries of ``acceptance.json`` (one per load level)."""
    for raw in counters:
        source = str(raw.get("source") or "")
        if source == "counter deltas" and _number(raw, "drafts") > 0:
            return "upstream", _MOVED
        if "gauge" in source and raw.get("rate") is not None:
            return "upstream", _V0_MOVED
    if any(str(raw.get("source") or "") == "counter deltas" for raw in counters):
        return "nxdi", _V1_STILL  # measured over the run, and no level moved them
    if metrics_style == "v0":
        return "nxdi", _V0_STILL
    return None


def _claimed(meta: RunMeta) -> tuple[WindowSemantics, str, str]:
    """What the run claimed before any server signal: (semantics, source, the claim in words)."""
    cfg, prov = meta.config, meta.provenance
    spec = prov.servers.get("speculative")
    if prov.profile:
        return semantics_of_profile(prov.profile), "profile", f"the simulator's profile {prov.profile!r}"
    dialect = resolve(cfg.vllm_dialect, cfg.plugin_release)
    release = f", plugin_release {cfg.plugin_release!r}" if dialect is not None and dialect.releases else ""
    words = f"the config (vllm_dialect {cfg.vllm_dialect!r}{release})"
    if spec is not None and spec.window_semantics:
        return spec.window_semantics, "config", words
    return semantics_of(cfg.vllm_dialect, cfg.plugin_release), "config", words


def choose(meta: RunMeta, acceptance: Mapping[str, Any] | None, variant: str = "speculative") -> SemanticsChoice:
    """The run's window semantics: the server's signals when they show any (a conflict with the claim becomes a
    finding's message), else the claim (the simulator profile spectrn started, else the config)."""
    claimed, source, words = _claimed(meta)
    spec = meta.provenance.servers.get(variant)
    entries = [
        raw for key, raw in (acceptance or {}).items() if isinstance(raw, Mapping) and key.split("@", 1)[0] == variant
    ]
    shown = from_server(spec.metrics_style if spec else None, entries)
    if shown is None:
        return SemanticsChoice(claimed, source, None, None)
    semantics, evidence = shown
    if semantics == claimed:
        return SemanticsChoice(semantics, "server", evidence, None)
    k = (spec.window if spec else None) or meta.config.num_speculative_tokens
    conflict = (
        f"WINDOW SEMANTICS: {words} says {claimed} ({max_tokens_per_step(claimed, k)} tokens per step at most at "
        f"window {k}), but the server says {semantics}: {evidence}. The figures use the server's: {semantics} "
        f"({max_tokens_per_step(semantics, k)} at most); set vllm_dialect/plugin_release to the server's stack"
    )
    return SemanticsChoice(semantics, "server", evidence, conflict)
