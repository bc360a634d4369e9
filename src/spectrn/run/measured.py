"""What a run measured: its configuration as run, with the servers' own draft and window and the run's own runtime
and time scale in place of what the configuration says, and where the two contradict each other.

Every output (summary.md, the HTML configuration table, the terminal, ``compare``) reads the run's setup from here,
so a run against servers that serve another draft or window than the config names shows the servers' values
everywhere, and the contradiction is a finding shown first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from spectrn.configuration.config import SpectrnConfig
from spectrn.run.records import RunMeta
from spectrn.run.summary import Provenance

# Runtimes whose servers spectrn did not start as simulators: the config's sim.* keys describe nothing there
_NOT_SIMULATED = ("endpoints", "vllm-cpu", "llmperf")


@dataclass(frozen=True)
class Measured:
    """The speculative setup a run measured, and where each value comes from."""

    draft: str | None
    window: int | None
    draft_from: str  # config, declared (--draft/--window), server, unknown
    window_from: str
    config_draft: str
    config_window: int

    @property
    def contradictions(self) -> list[str]:
        """``draft`` / ``window`` where the server's own value differs from the config's."""
        out = []
        if self.draft_from == "server" and self.draft and self.draft != self.config_draft:
            out.append("draft")
        if self.window_from == "server" and self.window and self.window != self.config_window:
            out.append("window")
        return out

    def finding(self) -> str | None:
        """The CONFIG CONTRADICTS SERVER message (None: they agree, or the server did not say)."""
        bad = self.contradictions
        if not bad:
            return None
        says = ", ".join(f"{k} {self.config_draft if k == 'draft' else self.config_window}" for k in bad)
        serves = ", ".join(f"{k} {self.draft if k == 'draft' else self.window}" for k in bad)
        return (
            f"CONFIG CONTRADICTS SERVER: the config says {says}, but the speculative server serves {serves} (read "
            "from the server): every figure and label of this run uses the server's values; set draft and "
            "num_speculative_tokens to what the server runs (or pass --draft and --window)"
        )


def measured(cfg: SpectrnConfig, prov: Provenance) -> Measured:
    """The run's speculative setup: the speculative server's identity where spectrn learnt it, else the config."""
    server = prov.servers.get("speculative")
    from_server = server is not None and server.source != "config"
    source = server.source if server is not None and from_server else "config"
    draft = server.draft if server is not None and from_server and server.draft else None
    window = server.window if server is not None and from_server and server.window else None
    return Measured(
        draft=draft or (cfg.draft if not from_server else None),
        window=window or (cfg.num_speculative_tokens if not from_server else None),
        draft_from=_origin(source) if draft else ("config" if not from_server else "unknown"),
        window_from=_origin(source) if window else ("config" if not from_server else "unknown"),
        config_draft=cfg.draft,
        config_window=cfg.num_speculative_tokens,
    )


def scheduling_text(prov: Provenance) -> str | None:
    """Each service's vLLM scheduling mode, as its provenance records it (None: none recorded)."""
    modes = [(name, ident.scheduling) for name, ident in sorted(prov.servers.items()) if ident.scheduling]
    return ", ".join(f"{name} {mode}" for name, mode in modes) or None


def scheduling_differs(prov: Provenance) -> str | None:
    """The finding when the services ran different scheduling modes (the A/B is then not like for like)."""
    base, spec = prov.servers.get("baseline"), prov.servers.get("speculative")
    if base is None or spec is None or not base.scheduling or not spec.scheduling:
        return None
    if base.scheduling.split(" ")[0] == spec.scheduling.split(" ")[0]:
        return None
    return (
        f"SCHEDULING DIFFERS: the baseline ran {base.scheduling} scheduling and the speculative service "
        f"{spec.scheduling} (scheduling: server-default), so the speedup includes the difference in scheduling "
        "mode, not speculation alone; set scheduling: same to pin both services to synchronous scheduling"
    )


def _origin(source: str) -> str:
    """Where a value the identity holds came from: declared (--draft/--window) or the server itself."""
    return "declared" if source == "declared" else "server"


def config_as_run(meta: RunMeta, prov: Provenance | None = None) -> dict[str, Any]:
    """The run's configuration, flattened to dotted keys, as it was run: runtime, simulator time scale and
    profile from the run's provenance, draft and window from its servers (``measured``)."""
    p = prov or meta.provenance
    flat = _flatten(meta.config.model_dump(mode="json"))
    if p.runtime != "cluster":  # in a cluster the config's runtime is what ran; elsewhere the run says
        flat["runtime"] = p.runtime
    if p.runtime == "sim":
        flat["sim.time_scale"] = p.time_scale
        if p.profile:
            flat["sim.profile"] = p.profile
    elif p.runtime in _NOT_SIMULATED:
        flat = {k: v for k, v in flat.items() if not k.startswith("sim.")}
    m = measured(meta.config, p)
    flat["draft"] = m.draft
    flat["num_speculative_tokens"] = m.window
    for name, ident in p.servers.items():
        if ident.scheduling:
            flat[f"scheduling.{name}"] = ident.scheduling
    return flat


def _flatten(d: Any, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_flatten(v, f"{prefix}{k}."))
    else:
        out[prefix.rstrip(".")] = d
    return out
