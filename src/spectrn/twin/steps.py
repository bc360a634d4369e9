"""The server's engine steps, rebuilt from what the client saw (pure; numpy).

A continuous-batching server advances every running request by one step at a time and streams each request's
tokens of a step in one event, so the events of all requests cluster in time, one cluster per step. From the
client's own records (``sent_at`` plus each event's arrival time, tokens per event, prompt tokens) this module
finds those clusters (``_cluster``: one event per running request per decode step; first tokens in prefill
steps of their own, as Neuron's context encoding and the simulator run them) and, for each step:

- ``decode``: the requests that got a decode event (the batch ``b``) and ``context``: their context tokens
  before the step (prompt + tokens emitted so far, ``C``);
- ``prefills`` / ``prefill_tokens``: the requests whose first token the step emitted, and their prompt tokens;
- ``duration``: the time since the previous step ended, in real seconds (divided by the run's time scale). A
  step ends at its earliest event: the one the client's reads delayed least.

A duration is kept only when it is one step's work: the engine was busy when the previous step ended (some
request was still running, so the next step started at once: no idle time in the gap), every request running
at that moment got an event in a decode step (none was missed or split off by a late read), and the previous
step passed the same checks (its end time is then a step boundary). Everything else is dropped and counted.

A client busy with other streams reads events late, by milliseconds on a loaded machine, and events that
arrive in one socket read share a time stamp (``spectrn.loadgen.client``): the clustering tolerates a step's
events arriving up to ``SPREAD_FRACTION`` of a step apart, and a request seen twice always starts a new step.
A server that runs prefills inside decode steps (vLLM V1's chunked prefill) shows its first tokens as
near-instant prefill steps of their own; the simulator cannot mix them either, so the twin of such a server
charges that work to the decode steps around it (docs/twin.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from spectrn.run.records import RequestRecord

SPREAD_FRACTION = 0.8  # the events of one step may arrive this share of a step apart (a client busy elsewhere)
PREFILL_JOIN_FRACTION = 0.5  # the first tokens of one prefill step may arrive this share of a step apart


@dataclass(frozen=True)
class Step:
    """One engine step of one server, as the client saw it."""

    variant: str
    level: str
    decode: int
    context: int
    prefills: int
    prefill_tokens: int
    duration: float
    end: float
    index: int  # the step's position in its server's timeline: consecutive steps have consecutive indices


@dataclass
class Timeline:
    """The usable steps of one server in one run, and what was dropped."""

    variant: str
    steps: list[Step] = field(default_factory=list)
    clusters: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    tolerance_s: float = 0.0
    prompt_tokens_known: bool = True

    def drop(self, why: str, n: int = 1) -> None:
        if n:
            self.dropped[why] = self.dropped.get(why, 0) + n


def timeline(records: Iterable[RequestRecord], variant: str, *, time_scale: float = 1.0) -> Timeline:
    """The steps of ``variant``'s server from every record of it (warm-up included: it occupied the server)."""
    import numpy as np

    recs = [r for r in records if r.variant == variant and r.chunk_times]
    out = Timeline(variant=variant)
    if not recs:
        return out
    out.prompt_tokens_known = all(r.prompt_tokens is not None for r in recs)
    n_events = [len(r.chunk_times) for r in recs]
    rid = np.repeat(np.arange(len(recs)), n_events)
    t = np.concatenate([r.sent_at + np.asarray(r.chunk_times, dtype=float) for r in recs])
    before = np.concatenate([np.concatenate(([0], np.cumsum(_counts(r))[:-1])) for r in recs])
    prompt = np.asarray([r.prompt_tokens or 0 for r in recs], dtype=np.int64)
    first = np.concatenate([np.arange(n) == 0 for n in n_events])
    last = np.concatenate([np.arange(n) == n - 1 for n in n_events])
    levels = [r.level for r in recs]

    own = [_median_gap(r.chunk_times) for r in recs]
    known = [g for g in own if g is not None]
    if not known:
        out.drop("no decode gaps")
        return out
    overall = float(np.median(known))
    gap = np.asarray([g if g is not None else overall for g in own])
    out.tolerance_s = SPREAD_FRACTION * overall / time_scale

    order = np.argsort(t, kind="stable")
    t, rid, before, first, last = t[order], rid[order], before[order], first[order], last[order]
    cluster = _cluster(t, rid, first, last, gap)
    n_clusters = int(cluster[-1]) + 1
    out.clusters = n_clusters
    start_idx = np.searchsorted(cluster, np.arange(n_clusters), side="left")
    end_t = t[start_idx]  # earliest arrival: least delayed by the client's reads

    ctx = prompt[rid] + before
    dec = ~first
    n_dec = np.bincount(cluster, weights=dec, minlength=n_clusters).astype(np.int64)
    n_first = np.bincount(cluster, weights=first, minlength=n_clusters).astype(np.int64)
    ctx_sum = np.bincount(cluster, weights=np.where(dec, ctx, 0), minlength=n_clusters).astype(np.int64)
    pre_tok = np.bincount(cluster, weights=np.where(first, prompt[rid], 0), minlength=n_clusters).astype(np.int64)
    starts = np.bincount(cluster[first], minlength=n_clusters)
    ends = np.bincount(cluster[last], minlength=n_clusters)
    running_after = np.cumsum(starts) - np.cumsum(ends)  # requests still running after each step

    first_level = np.full(n_clusters, -1, dtype=np.int64)
    first_level[cluster[::-1]] = rid[::-1]  # some request of each cluster, for its load level

    ok = np.ones(n_clusters, dtype=bool)
    missed = np.zeros(n_clusters, dtype=bool)
    missed[1:] = (n_dec[1:] > 0) & (n_dec[1:] != running_after[:-1])
    ok[missed] = False
    out.drop("decode step without every running request", int(missed.sum()))
    unseen = np.zeros(n_clusters, dtype=bool)
    unseen[1:] = np.diff(end_t) <= 0  # read in one socket read with the step before: its end was not observed
    ok[unseen & ~missed] = False
    out.drop("step read together with the one before (its end not seen)", int((unseen & ~missed).sum()))
    for j in range(n_clusters):
        if j == 0:
            out.drop("first step (no start time)")
            continue
        if not ok[j]:
            continue
        if running_after[j - 1] <= 0:
            out.drop("engine idle before the step")
            continue
        if not ok[j - 1]:
            out.drop("previous step unusable (start unknown)")
            continue
        out.steps.append(
            Step(
                variant=variant,
                level=levels[int(first_level[j])],
                decode=int(n_dec[j]),
                context=int(ctx_sum[j]),
                prefills=int(n_first[j]),
                prefill_tokens=int(pre_tok[j]),
                duration=float(end_t[j] - end_t[j - 1]) / time_scale,
                end=float(end_t[j]),
                index=j,
            )
        )
    return out


def _median_gap(times: Sequence[float]) -> float | None:
    """A request's median gap between decode events (its typical step), or None with fewer than two gaps."""
    import numpy as np

    if len(times) < 3:
        return None
    gaps = np.diff(np.asarray(times[1:], dtype=float))
    gaps = gaps[gaps > 0]
    return float(np.median(gaps)) if gaps.size else None


def _counts(r: RequestRecord) -> Sequence[int]:
    """Tokens per event (a record with fewer counts than events: one token for each missing count)."""
    n = len(r.chunk_times)
    counts = list(r.chunk_tokens[:n])
    return counts + [1] * (n - len(counts))


def _cluster(t: Any, rid: Any, first: Any, last: Any, gap: Any) -> Any:
    """Step index of each event (events in time order), knowing that a decode step has one event per running
    request and that a prefill step (first tokens) is a step of its own, as on Neuron and in the simulator: a
    step is closed when a request shows up again (its next step), when every running request has its event,
    when first tokens and decode events meet, or when its events spread over more than ``SPREAD_FRACTION`` of a
    step (``PREFILL_JOIN_FRACTION`` for first tokens: a prefill step writes all of them at once, and the next
    prefill can follow within a step). ``gap``: each request's median gap between decode events."""
    import numpy as np

    out = np.empty(t.size, dtype=np.int64)
    running: set[int] = set()
    members: set[int] = set()
    starts: list[int] = []
    ends: list[int] = []
    c = -1
    c_start = 0.0
    c_gap = 0.0
    decode = False
    for i in range(t.size):
        r = int(rid[i])
        ti = float(t[i])
        is_first = bool(first[i])
        g = float(gap[r])
        spread = (SPREAD_FRACTION if decode else PREFILL_JOIN_FRACTION) * min(c_gap, g)
        new = c < 0 or r in members or ti - c_start > spread or is_first != (not decode)
        if not new and decode and running <= members:
            new = True  # every running request has its event: the step is complete
        if new:
            running.update(starts)
            running.difference_update(ends)
            starts, ends = [], []
            members = set()
            c += 1
            c_start, c_gap, decode = ti, g, False
        out[i] = c
        members.add(r)
        c_gap = min(c_gap, g)
        decode = decode or not is_first
        if is_first:
            starts.append(r)
        if bool(last[i]):
            ends.append(r)
    return out
