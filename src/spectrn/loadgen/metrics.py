"""Scrape and parse vLLM's ``/metrics``; acceptance from counter deltas.

vLLM's exposition has quirks a parser must survive: counter families whose ``# TYPE`` line already ends
in ``_total``, separate ``*_created`` gauge families, labels ``model_name`` and ``engine``, and (v0) plain
acceptance gauges. We parse with prometheus_client's parser and then index every SAMPLE by its name
with ``_total`` stripped, summing over label sets we don't ask for. Anything missing or garbled yields
"not reported", never a crash or a zero.

Acceptance for one run (REFERENCE section 3): with d = delta drafts, t = delta draft tokens,
a = delta accepted tokens, rate = a / t; mean acceptance length = 1 + a / d (the bonus token counted);
per-position rate i = delta accepted_per_pos{position=i} / d.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from spectrn.sanitize import decode, server_label

SPEC_DRAFTS = "vllm:spec_decode_num_drafts"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
SPEC_ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"
V0_ACCEPTANCE_GAUGE = "vllm:spec_decode_draft_acceptance_rate"
V0_EFFICIENCY_GAUGE = "vllm:spec_decode_efficiency"
# vLLM's exposition is tens of kilobytes and a few thousand lines; the parser takes about 0.1 ms a line, so
# these bounds keep one parse under about a second whatever a server sends
MAX_METRICS_BYTES = 2 << 20
MAX_METRICS_LINES = 10_000
# num_speculative_tokens spectrn accepts in its own config (1..32): a server listing more per-position series
# than that declares no real window, and its per-position figures are not used
MAX_DECLARED_WINDOW = 32


@dataclass
class MetricsSnapshot:
    """Samples by normalised name -> {frozenset(labels.items()): value}."""

    samples: dict[str, dict[frozenset[tuple[str, str]], float]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def total(self, name: str) -> float | None:
        series = self.samples.get(name)
        if not series:
            return None
        return sum(series.values())

    def by_label(self, name: str, label: str) -> dict[str, float]:
        out: dict[str, float] = defaultdict(float)
        for labels, value in (self.samples.get(name) or {}).items():
            d = dict(labels)
            if label in d:
                out[d[label]] += value
        return dict(out)

    def has(self, name: str) -> bool:
        return bool(self.samples.get(name))


def _normalise(name: str) -> str:
    return name[: -len("_total")] if name.endswith("_total") else name


def parse_metrics(text: str) -> MetricsSnapshot:
    """Parse Prometheus text; a garbled body gives an empty snapshot with the problem recorded."""
    from prometheus_client.parser import text_string_to_metric_families

    snap = MetricsSnapshot()
    lines = text.count("\n")
    if lines > MAX_METRICS_LINES:
        snap.problems.append(f"/metrics has {lines} lines, more than the {MAX_METRICS_LINES} spectrn parses")
        return snap
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.name.endswith("_created"):
                    continue
                key = frozenset(s.labels.items())
                snap.samples.setdefault(_normalise(s.name), {})[key] = float(s.value)
    except Exception as e:  # the parser raises ValueError/TypeError/IndexError on garbage
        snap.samples.clear()
        snap.problems.append(f"unparseable /metrics: {type(e).__name__}: {server_label(str(e))}")
    return snap


def _unusable(why: str) -> dict[str, Any]:
    return {
        "source": f"counters unusable: {why}",
        "problem": why,
        "rate": None,
        "mean_accepted_length": None,
        "per_position": None,
    }


def _bad(x: float | None) -> bool:
    return x is not None and not math.isfinite(x)


def acceptance_delta(before: MetricsSnapshot | None, after: MetricsSnapshot | None) -> dict[str, Any] | None:
    """Acceptance over a run from two snapshots, or None when the server does not report it.

    Counters that cannot describe a real run (not finite, going down, more accepted than drafted tokens,
    accepted tokens without drafts, a per-position rate outside 0..1) give ``source: "counters unusable:
    <why>"`` with every rate None, never an impossible rate or a NaN in JSON."""
    if before is None or after is None:
        return None
    d_after, t_after, a_after = (after.total(n) for n in (SPEC_DRAFTS, SPEC_DRAFT_TOKENS, SPEC_ACCEPTED))
    if d_after is None or t_after is None or a_after is None:
        gauge = after.total(V0_ACCEPTANCE_GAUGE)
        if gauge is None:
            return None
        efficiency = after.total(V0_EFFICIENCY_GAUGE)
        if not math.isfinite(gauge) or not 0.0 <= gauge <= 1.0:
            return _unusable(f"{V0_ACCEPTANCE_GAUGE} is {gauge!r}, not a rate in 0..1")
        return {
            "source": "v0 gauge (cumulative since server start, not this run)",
            "rate": gauge,
            "mean_accepted_length": None,
            "per_position": None,
            "efficiency": efficiency if efficiency is not None and math.isfinite(efficiency) else None,
        }
    names = (SPEC_DRAFTS, SPEC_DRAFT_TOKENS, SPEC_ACCEPTED)
    befores = [before.total(n) for n in names]
    for name, x in zip(names * 2, [d_after, t_after, a_after, *befores], strict=True):
        if _bad(x):
            return _unusable(f"{name} is {x!r}")
    drafts = d_after - (befores[0] or 0.0)
    draft_tokens = t_after - (befores[1] or 0.0)
    accepted = a_after - (befores[2] or 0.0)
    if drafts < 0 or draft_tokens < 0 or accepted < 0:
        return _unusable("a counter went down during the run (counters reset: server restarted?)")
    if accepted > draft_tokens:
        return _unusable(f"{accepted:g} accepted tokens but only {draft_tokens:g} draft tokens")
    if accepted > 0 and drafts == 0:
        return _unusable(f"{accepted:g} accepted tokens but no drafts")
    if draft_tokens > 0 and drafts == 0:
        return _unusable(f"{draft_tokens:g} draft tokens but no drafts")
    per_pos_after = after.by_label(SPEC_ACCEPTED_PER_POS, "position")
    per_pos_before = before.by_label(SPEC_ACCEPTED_PER_POS, "position")
    per_position = None
    if len(per_pos_after) > MAX_DECLARED_WINDOW:
        return _unusable(
            f"{len(per_pos_after)} {SPEC_ACCEPTED_PER_POS} positions, more than the {MAX_DECLARED_WINDOW} "
            "speculative tokens spectrn accepts"
        )
    if per_pos_after and drafts > 0:
        # vLLM labels its per-position series "0" .. "k-1", one per speculative token (docs/reliability.md cites
        # vllm/v1/spec_decode/metrics.py); anything else is not a position series whose order could be known
        positions = [str(i) for i in range(len(per_pos_after))]
        if set(per_pos_after) != set(positions):
            return _unusable(f"{SPEC_ACCEPTED_PER_POS} position labels are not the numbers 0..{len(positions) - 1}")
        per_position = [(per_pos_after[p] - per_pos_before.get(p, 0.0)) / drafts for p in positions]
        if any(not math.isfinite(r) or not 0.0 <= r <= 1.0 for r in per_position):
            return _unusable(f"a per-position acceptance rate outside 0..1: {per_position}")
    out = {
        "source": "counter deltas",
        "drafts": drafts,
        "draft_tokens": draft_tokens,
        "accepted_tokens": accepted,
        "rate": accepted / draft_tokens if draft_tokens > 0 else None,
        "mean_accepted_length": 1.0 + accepted / drafts if drafts > 0 else None,
        "per_position": per_position,
    }
    # finite counters can still give an infinite difference or ratio (1e308 - -1e308, 1e300 / 1e-300)
    overflowed = [k for k, v in out.items() if isinstance(v, float) and not math.isfinite(v)]
    if overflowed:
        return _unusable(f"{', '.join(overflowed)} overflow (the counters are not counts of one run)")
    return out


async def scrape(session: Any, base_url: str, timeout_s: float = 10.0) -> tuple[str | None, str | None]:
    """GET <root>/metrics; returns (text, problem)."""
    import aiohttp

    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        async with session.get(
            f"{root}/metrics", timeout=aiohttp.ClientTimeout(total=timeout_s), allow_redirects=False
        ) as resp:
            if resp.status != 200:
                return None, f"/metrics answered HTTP {resp.status}"
            raw = bytearray()
            while len(raw) <= MAX_METRICS_BYTES:
                data = await resp.content.read(MAX_METRICS_BYTES + 1 - len(raw))
                if not data:
                    break
                raw += data
            if len(raw) > MAX_METRICS_BYTES:
                return None, f"/metrics sent over {MAX_METRICS_BYTES} bytes"
            return decode(bytes(raw)), None  # UTF-8, whatever charset the server declares
    except (aiohttp.ClientError, TimeoutError, OSError, LookupError) as e:
        return None, f"/metrics unreachable: {type(e).__name__}: {e}"
