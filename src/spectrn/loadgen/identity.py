"""What each endpoint is, from what the server itself exposes, so a run against endpoints spectrn did not start
is labelled with the truth rather than with config defaults.

Asked of every server before the run (each answer optional, none trusted blindly):
- ``/v1/models``: the served model name (already checked by the runner);
- ``/version``: vLLM's version (``{"version": ...}``), recorded, never used to tell servers apart (a vLLM version
  does not say which plugin runs under it);
- ``/metrics``: which spec-decode families the server registers (``metrics_style``: V0's, which the Neuron fork
  never fills, or V1's), and vLLM V1's per-position acceptance counter
  ``vllm:spec_decode_num_accepted_tokens_per_pos`` with one ``position`` label for each of its configured
  ``num_speculative_tokens``, which is the window (docs/neuron.md). Whether the counters then move is read after
  the run (``spectrn.analyze.semantics``): with the families, it decides the window semantics;
- ``/sim/identity``: spectrn's simulator only, a path no real server serves, so it names the draft (a label) and
  nothing the figures depend on: window and semantics come only from the signals above, as for a real server.

Draft and window of a server spectrn did not start stay ``unknown`` unless the server tells, or the user
declares them (``--draft``/``--window``: source ``declared``). A declared window that the server's own labels
contradict is kept as declared, and the contradiction becomes a note (and, from the stream, a finding).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from spectrn.loadgen.metrics import (
    MAX_DECLARED_WINDOW,
    SPEC_ACCEPTED_PER_POS,
    MetricsSnapshot,
    parse_metrics,
    scrape,
)
from spectrn.run.summary import Provenance, ServerIdentity
from spectrn.sanitize import decode, server_label

# /version and /sim/identity answer a few dozen bytes; a longer answer is not one, and is not read further
MAX_IDENTITY_BYTES = 64 << 10


async def _get_json(session: Any, url: str) -> Any:
    """The JSON at ``url``, read as UTF-8 (JSON's encoding, RFC 8259, whatever charset the server declares)
    and at most ``MAX_IDENTITY_BYTES``; None for anything else."""
    import aiohttp

    try:
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=10), allow_redirects=False) as resp:
            if resp.status != 200:
                return None
            raw = await resp.content.read(MAX_IDENTITY_BYTES + 1)
            while raw and len(raw) <= MAX_IDENTITY_BYTES:
                more = await resp.content.read(MAX_IDENTITY_BYTES + 1 - len(raw))
                if not more:
                    break
                raw += more
            if len(raw) > MAX_IDENTITY_BYTES:
                return None
            return json.loads(decode(raw))
    except (aiohttp.ClientError, TimeoutError, OSError, ValueError, RecursionError):
        return None


# Spec-decode families only vLLM V0 registers (vllm/engine/metrics.py); V1 registers the counters instead.
V0_SPEC_FAMILIES = ("vllm:spec_decode_draft_acceptance_rate", "vllm:spec_decode_efficiency")
# Only V1's: V0 also declares ``vllm:spec_decode_num_draft_tokens_total``, which reads as
# ``vllm:spec_decode_num_draft_tokens`` once ``_total`` is removed, so that family would call the fork V1.
V1_SPEC_FAMILIES = ("vllm:spec_decode_num_drafts", SPEC_ACCEPTED_PER_POS)


def _families(metrics_text: str) -> set[str]:
    """Family names declared in the exposition (``# TYPE`` lines), ``_total`` removed: a family with no sample
    yet (the Neuron fork's spec-decode gauges) has no sample line, only its declaration."""
    out = set()
    for line in metrics_text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[0] == "#" and parts[1] == "TYPE":
            out.add(parts[2].removesuffix("_total"))
    return out


def metrics_style(metrics_text: str | None) -> str | None:
    """``v1`` or ``v0`` by the spec-decode families a server registers, None when it registers neither."""
    if not metrics_text:
        return None
    names = _families(metrics_text) | set(parse_metrics(metrics_text).samples)
    if any(n in names for n in V1_SPEC_FAMILIES):
        return "v1"
    if any(n in names for n in V0_SPEC_FAMILIES):
        return "v0"
    return None


def _positions(metrics_text: str | None) -> int | None:
    if not metrics_text:
        return None
    snap: MetricsSnapshot = parse_metrics(metrics_text)
    labels = snap.by_label(SPEC_ACCEPTED_PER_POS, "position")
    # a window spectrn would not accept in its own config (num_speculative_tokens 1..32) is no window: ignored
    return len(labels) if 1 <= len(labels) <= MAX_DECLARED_WINDOW else None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _str(value: Any) -> str | None:
    # a label only (it names a dimension, a terminal line, report text): printable ASCII, the rest escaped
    return server_label(value) if isinstance(value, str) and value else None


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
        if isinstance(sim, dict) and ident.source == "unknown" and name != "baseline":
            update["draft"] = _str(sim.get("draft"))  # a label only: nothing the figures use comes from here
        if name != "baseline":
            metrics_text, _problem = await scrape(session, root)  # size-capped, UTF-8; the problem is the runner's
            update["metrics_style"] = await asyncio.to_thread(metrics_style, metrics_text)
            positions = await asyncio.to_thread(_positions, metrics_text) if ident.source == "unknown" else None
            if positions:
                update.update(window=positions, source="server")
        servers[name] = ident.model_copy(update=update)
    return prov.model_copy(update={"servers": servers})
