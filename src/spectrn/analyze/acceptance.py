"""Acceptance of speculative decoding, from the stream and from the server's counters (pure).

From the stream. One engine step of speculative decoding emits the accepted prefix of the draft's proposals
plus one token of the target's own, and a streaming server sends a step's tokens in one event. So the size
n of each decode event is accepted + 1. The first event (the prefill's token) and the last one of a request
that stopped at ``max_tokens`` or at its end-of-sequence token (finish reason ``length`` or ``stop``: the step is
cut short, its tokens after the end are dropped) are not steps of known size and are skipped. The window semantics
decide how many proposals a step has (``spectrn.windows``):

- NxDI (the Neuron fork and fused speculation): ``speculation_length = k`` proposes k - 1 tokens, so a step
  emits at most k tokens;
- upstream vLLM: k proposals, up to k + 1 tokens.

An event with more tokens than one step can emit is a coalesced event (the server merged steps): it is
excluded and counted. Per position i, ``P_i`` is the share of counted steps that accepted more than i
proposals (the probability that the first i + 1 proposals were all accepted); rate = accepted / proposals;
mean accepted length = tokens per counted step (the bonus token included). Confidence intervals resample
requests.

From the counters: ``acceptance.json`` holds the differences of vLLM's spec-decode counters over each load
level (``spectrn.loadgen.metrics``). The Neuron fork registers them but never fills them, and vllm-neuron
0.2.x leaves them at 0 (docs/neuron.md): counters with no drafts are "not reported", and the stream is the
headline. Where both exist, both are kept with a statement of their agreement.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from spectrn.analyze.stats import bootstrap_units
from spectrn.run.summary import Acceptance, CounterAcceptance, StreamAcceptance
from spectrn.windows import WindowSemantics, max_tokens_per_step, proposals

AGREEMENT_REL = 0.05  # stream and counter mean lengths within 5% agree
CAP_PILE_UP = 0.15  # this share of steps stopping at one size below the cap means a smaller real window


class StreamCounter:
    """Accumulates decode-event sizes request by request (bounded memory: per-request totals only)."""

    def __init__(self, window: int | None, semantics: WindowSemantics) -> None:
        self.window = window
        self.semantics = semantics
        self.max_n = max_tokens_per_step(semantics, window) if window else None
        self.props = proposals(semantics, window) if window else 0
        self.hits = [0] * self.props
        # requests by their (decode steps, accepted tokens): the bootstrap needs nothing else, and a million
        # requests share a few thousand such pairs (bounded memory whatever the run's length)
        self.requests: Counter[tuple[int, int]] = Counter()
        self.coalesced = 0

    def add(self, chunk_tokens: Sequence[int], *, cut_at_max_tokens: bool) -> None:
        decode = list(chunk_tokens[1:-1] if cut_at_max_tokens else chunk_tokens[1:])
        steps = acc = 0
        for n in decode:
            if n <= 0:
                continue
            if self.max_n is not None and n > self.max_n:
                self.coalesced += 1
                continue
            a = n - 1
            steps += 1
            acc += a
            if self.window is None and a > len(self.hits):  # unknown window: positions as far as observed
                self.hits.extend([0] * (a - len(self.hits)))
            for i in range(min(a, len(self.hits))):
                self.hits[i] += 1
        if steps:
            self.requests[(steps, acc)] += 1

    def merge(self, other: StreamCounter) -> None:
        width = max(len(self.hits), len(other.hits))
        self.hits = [
            (self.hits[i] if i < len(self.hits) else 0) + (other.hits[i] if i < len(other.hits) else 0)
            for i in range(width)
        ]
        self.requests.update(other.requests)
        self.coalesced += other.coalesced

    def result(self, *, seed: int = 0) -> StreamAcceptance:
        import numpy as np

        pairs = sorted(self.requests)
        st = np.asarray([p[0] for p in pairs], dtype=float)  # per distinct request: decode steps
        ac = np.asarray([p[1] for p in pairs], dtype=float)  # and accepted tokens
        n = np.asarray([self.requests[p] for p in pairs], dtype=float)  # how many requests had them
        total_steps = int(n @ st)
        out = StreamAcceptance(
            window=self.window, semantics=self.semantics, steps=total_steps, coalesced_events=self.coalesced
        )
        if total_steps == 0:
            return out
        out.mean_accepted_length = float((n @ ac + n @ st) / (n @ st))
        out.mean_accepted_length_ci95 = bootstrap_units(lambda d: (d @ ac + d @ st) / (d @ st), n, seed=seed)
        if self.window is None:  # unknown window: per position as observed, no rate (proposals unknown)
            out.per_position = [h / total_steps for h in self.hits]
        elif self.props:
            out.rate = float((n @ ac) / ((n @ st) * self.props))
            out.rate_ci95 = bootstrap_units(lambda d: (d @ ac) / ((d @ st) * self.props), n, seed=seed + 1)
            out.per_position = [h / total_steps for h in self.hits]
        return out


def counters_from_json(raw: Any) -> CounterAcceptance | None:
    """One entry of ``acceptance.json`` (a counter delta) as typed counters; None when nothing was reported."""
    if not isinstance(raw, Mapping):
        return None
    source = str(raw.get("source") or "")
    kind = "v0 gauge" if "gauge" in source else "v1 counters"

    def num(key: str) -> float | None:
        v = raw.get(key)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and v == v else None

    pp = raw.get("per_position")
    per_position = [float(x) for x in pp if isinstance(x, int | float)] if isinstance(pp, list) else None
    out = CounterAcceptance(
        kind=kind,
        drafts=num("drafts"),
        draft_tokens=num("draft_tokens"),
        accepted_tokens=num("accepted_tokens"),
        rate=num("rate"),
        mean_accepted_length=num("mean_accepted_length"),
        per_position=per_position,
    )
    if out.rate is None and out.mean_accepted_length is None:
        return None  # registered but never moved (Neuron fork, vllm-neuron 0.2.x): not reported
    return out


def combine(stream: StreamAcceptance | None, counters: CounterAcceptance | None) -> Acceptance | None:
    """The headline acceptance: counters where they moved, else the stream; both kept, agreement stated."""
    has_stream = stream is not None and stream.steps > 0 and stream.mean_accepted_length is not None
    if counters is None and not has_stream:
        return None
    if counters is not None and counters.mean_accepted_length is not None:
        acc = Acceptance(
            source="counters",
            rate=counters.rate,
            mean_accepted_length=counters.mean_accepted_length,
            per_position=list(counters.per_position or []),
            stream=stream if has_stream else None,
            counters=counters,
        )
    elif has_stream:
        assert stream is not None
        acc = Acceptance(
            source="stream",
            rate=stream.rate,
            mean_accepted_length=stream.mean_accepted_length,
            per_position=list(stream.per_position),
            stream=stream,
            counters=counters,
        )
    else:  # v0 gauge only: a rate without a length
        assert counters is not None
        acc = Acceptance(source="counters", rate=counters.rate, counters=counters)
    if stream is not None:
        acc.coalesced_events = stream.coalesced_events
    if has_stream and counters is not None and counters.mean_accepted_length is not None:
        assert stream is not None and stream.mean_accepted_length is not None
        diff = stream.mean_accepted_length / counters.mean_accepted_length - 1.0
        verdict = "agree" if abs(diff) <= AGREEMENT_REL else "DISAGREE"
        acc.agreement = (
            f"stream {stream.mean_accepted_length:.3f} vs counters {counters.mean_accepted_length:.3f} "
            f"tokens per step ({diff:+.1%}): {verdict} within {AGREEMENT_REL:.0%}"
        )
    return acc


def window_contradiction(
    stream: StreamAcceptance | None, declared: int | None, semantics: WindowSemantics
) -> str | None:
    """A declared window that the stream contradicts: steps never reaching, or exceeding, its maximum."""
    if stream is None or declared is None or stream.steps < 50:
        return None
    most = max_tokens_per_step(semantics, declared)
    if stream.coalesced_events > 0.2 * (stream.steps + stream.coalesced_events):
        return (
            f"{stream.coalesced_events} decode events carry more than {most} tokens, the most one step can emit "
            f"at the declared window {declared} ({semantics}): the window is larger than declared, or the server "
            "coalesces steps"
        )
    reached = _last_nonzero(stream.per_position)
    if 0 < reached < len(stream.per_position) and stream.per_position[reached - 1] >= CAP_PILE_UP:
        return (
            f"{stream.per_position[reached - 1]:.0%} of {stream.steps} steps accepted exactly {reached} proposals "
            f"and none more, at the declared window {declared} ({semantics}, {len(stream.per_position)} "
            f"proposals): the server's window looks like {reached + (1 if semantics == 'nxdi' else 0)}"
        )
    return None


def _last_nonzero(per_position: Sequence[float]) -> int:
    n = 0
    for i, p in enumerate(per_position):
        if p > 0:
            n = i + 1
    return n
