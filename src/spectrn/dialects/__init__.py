"""The server dialects, one module each, and the registry the rest of spectrn asks: which dialect a config names,
what a window means on it, what it renders, which simulator profile plays it.

Adding a dialect is one module here with a ``DIALECT`` and one line in ``_BUILTIN``; adding a speculation method
is one entry in ``spectrn.dialects.methods`` (docs/architecture.md, "Where a change lands").
"""

from __future__ import annotations

from spectrn.dialects import legacy_neuron, upstream, vllm_neuron_0_5, vllm_neuron_current, vllm_neuron_nxdi
from spectrn.dialects.base import Dialect, ServerProfile
from spectrn.windows import WindowSemantics

# The order is the order of the choices in messages and the reference (the default first).
_BUILTIN = (legacy_neuron, vllm_neuron_current, vllm_neuron_nxdi, vllm_neuron_0_5, upstream)

DIALECTS: dict[str, Dialect] = {m.DIALECT.key: m.DIALECT for m in _BUILTIN}


def register(dialect: Dialect) -> None:
    """Add (or replace) a dialect: config validation, rules, render, the simulator and semantics pick it up."""
    DIALECTS[dialect.key] = dialect


def unregister(key: str) -> None:
    DIALECTS.pop(key, None)


def vllm_dialects() -> tuple[str, ...]:
    """The values ``vllm_dialect`` accepts, in registry order."""
    return tuple(dict.fromkeys(d.vllm_dialect for d in DIALECTS.values() if d.selectable))


def plugin_releases() -> tuple[str, ...]:
    """The values ``plugin_release`` accepts, in registry order."""
    return tuple(dict.fromkeys(r for d in DIALECTS.values() if d.selectable for r in d.releases))


def resolve(vllm_dialect: str, plugin_release: str | None) -> Dialect | None:
    """The dialect a config's ``vllm_dialect`` and ``plugin_release`` name (a dialect without releases takes any
    release); None when none matches."""
    for d in DIALECTS.values():
        if d.vllm_dialect == vllm_dialect and (not d.releases or plugin_release in d.releases):
            return d
    return None


def profiles() -> dict[str, ServerProfile]:
    """Every simulator profile, by name (each dialect declares the one that plays it)."""
    return {d.profile.name: d.profile for d in DIALECTS.values()}


def semantics_of_profile(profile: str | None) -> WindowSemantics:
    """Window semantics of a server profile (the simulator's, or an identified one); NxDI when unknown."""
    found = profiles().get(profile or "")
    return found.window if found is not None else "nxdi"


def semantics_of(vllm_dialect: str | None, plugin_release: str | None = None) -> WindowSemantics:
    """Window semantics of a config's vLLM dialect; NxDI when the pair names no dialect (a recorded config from
    an older spectrn)."""
    found = resolve(vllm_dialect or "", plugin_release)
    return found.window if found is not None else "nxdi"
