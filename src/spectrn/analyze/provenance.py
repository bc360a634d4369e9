"""What the summary says about the run's setup: semantics used, stack notice, load shape and config label."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spectrn.analyze.semantics import choose as choose_semantics
from spectrn.labels import setup_label
from spectrn.run.measured import measured
from spectrn.run.records import RunMeta
from spectrn.run.summary import Finding, Provenance


def _with_semantics(
    prov: Provenance, meta: RunMeta, acceptance: Mapping[str, Any] | None, findings: list[Finding]
) -> Provenance:
    """The speculative server's identity with the semantics the figures use and why; a finding when the server's
    signals contradict the config or profile (docs/neuron.md)."""
    spec = prov.servers.get("speculative")
    if spec is None:
        return prov
    choice = choose_semantics(meta, acceptance)
    if choice.conflict:
        findings.append(Finding(code="window_semantics", severity="warning", message=choice.conflict))
    update = {"window_semantics": choice.semantics, "semantics_source": choice.source}
    if choice.evidence:
        update["semantics_evidence"] = choice.evidence
    return prov.model_copy(update={"servers": {**prov.servers, "speculative": spec.model_copy(update=update)}})


def _stack_notice(meta: RunMeta, prov: Provenance) -> str | None:
    """UNSUPPORTED STACK when the servers ran the Neuron fork of vLLM V0 (docs/neuron.md): their metric
    families say so when recorded, else the recorded config's dialect."""
    from spectrn.configuration.stacks import run_stack_notice

    if prov.runtime == "vllm-cpu":
        return None  # spectrn started upstream vLLM on CPU itself: whatever the dialect says, no fork ran
    server = prov.servers.get("speculative") or prov.servers.get("baseline")
    style = server.metrics_style if server else None
    return run_stack_notice(meta.config.vllm_dialect, meta.config.speculation_mode, style)


def load_shape_text(meta: RunMeta) -> str | None:
    """How load was applied, per level, in one line (run.json's ``load_shape``)."""
    parts = [shape.text(lv) for lv, shape in meta.load_shape.items()]
    return "; ".join(parts) or meta.provenance.load_shape


def config_label(meta: RunMeta) -> str:
    """``<draft>/k<window>`` (``medusa/k<window>`` for Medusa): one value naming the speculative setup, as
    measured (``spectrn.run.measured``: the server's own values where spectrn learnt them)."""
    m = measured(meta.config, meta.provenance)
    draft = m.draft if meta.config.uses_draft_model else meta.config.speculation_mode
    return setup_label(draft or "unknown", m.window, sep="/")
