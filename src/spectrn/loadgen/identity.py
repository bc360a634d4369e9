"""What each endpoint is, from what the server itself exposes, so a run against endpoints spectrn did not start
is labelled with the truth rather than with config defaults.

Asked of every server before the run (each answer optional, none trusted blindly):
- ``/v1/models``: the served model name (already checked by the runner);
- ``/version``: vLLM's version (``{"version": ...}``);
- ``/sim/identity``: spectrn's simulator only (profile, draft, window; a path no real server serves);
- ``/metrics``: vLLM V1 registers the per-position acceptance counter
  ``vllm:spec_decode_num_accepted_tokens_per_pos`` with one ``position`` label for each of its configured
  ``num_speculative_tokens``, which is the window (docs/neuron.md; the V0 Neuron fork has no such counter).

Draft and window of a server spectrn did not start stay ``unknown`` unless the server tells, or the user
declares them (``--draft``/``--window``: source ``declared``). A declared window that the server's own labels
contradict is kept as declared, and the contradiction becomes a note (and, from the stream, a finding).
"""

from __future__ import annotations

from typing import Any

from spectrn.loadgen.metrics import SPEC_ACCEPTED_PER_POS, parse_metrics
from spectrn.run.summary import Provenance, ServerIdentity
from spectrn.windows import for_profile


async def _get_json(session: Any, url: str) -> Any:
    import aiohttp

    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as resp:
            if resp.status != 200:
                return None
            return await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None


async def _get_text(session: Any, url: str) -> str | None:
    import aiohttp

    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as resp:
            return await resp.text(errors="replace") if resp.status == 200 else None
    except (aiohttp.ClientError, TimeoutError):
        return None


def _positions(metrics_text: str | None) -> int | None:
    if not metrics_text:
        return None
    snap = parse_metrics(metrics_text)
    labels = snap.by_label(SPEC_ACCEPTED_PER_POS, "position")
    return len(labels) or None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _str(value: Any) -> str | None:
    return value[:200] if isinstance(value, str) and value else None


async def identify(session: Any, endpoints: dict[str, str], models: dict[str, str], prov: Provenance) -> Provenance:
    """``prov`` with each endpoint's identity completed from what its server exposes; notes for conflicts."""
    servers = dict(prov.servers)
    for name, base in endpoints.items():
        root = base.rstrip("/").removesuffix("/v1")
        ident = servers.get(name) or ServerIdentity(source="unknown")
        update: dict[str, Any] = {"model": models.get(name) or ident.model}
        version = await _get_json(session, f"{root}/version")
        if isinstance(version, dict):
            update["version"] = _str(version.get("version"))
        sim = await _get_json(session, f"{root}/sim/identity")
        if isinstance(sim, dict):
            profile = _str(sim.get("profile"))
            update["profile"] = profile or ident.profile
            if profile and name != "baseline":
                update["window_semantics"] = for_profile(profile)
            if ident.source == "unknown" and name != "baseline":
                update.update(draft=_str(sim.get("draft")), window=_int(sim.get("window")), source="server")
        if name != "baseline" and ident.source == "unknown" and "window" not in update:
            positions = _positions(await _get_text(session, f"{root}/metrics"))
            if positions:
                update.update(window=positions, source="server")
        servers[name] = ident.model_copy(update=update)
    return prov.model_copy(update={"servers": servers})
