"""The server's engine steps, rebuilt from what the client saw (pure; numpy).

A continuous-batching server advances every running request by one step at a time and streams each request's
tokens of a step in one event, so the events of all requests cluster in time, one cluster per step. From the
client's own records (``sent_at`` plus each event's arrival time, tokens per event, prompt tokens) this module
finds those clusters and, for each step:

- ``decode``: the requests that got a decode event (the batch ``b``) and ``context``: their context tokens
  before the step (prompt + tokens emitted so far, ``C``);
- ``prefills`` / ``prefill_tokens``: the requests whose first token the step emitted, and their prompt tokens;
- ``duration``: the time since the previous step ended, in real seconds (divided by the run's time scale).

A duration is kept only when it is one step's work: the engine was busy when the previous step ended (some
request was still running, so the next step started at once: no idle time in the gap), every request running
at that moment got an event in a decode step (none was missed or merged), the cluster holds at most one event
per request, and the previous step passed the same checks (its end time is then a step boundary, not a client
read that split or merged two steps). Everything else is dropped and counted.

Events that arrive in one socket read share a time stamp (``spectrn.loadgen.client``), so two steps of one
request can look simultaneous when the client fell behind: the one-event-per-request check catches that.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from spectrn.run.records import RequestRecord

CLUSTER_FRACTION = 0.3  # events closer than this share of a request's median gap belong to one step


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

    gaps = np.concatenate([np.diff(np.asarray(r.chunk_times[1:], dtype=float)) for r in recs if len(r.chunk_times) > 2])
    gaps = gaps[gaps > 0]
    if gaps.size == 0:
        out.drop("no decode gaps")
        return out
    tol = CLUSTER_FRACTION * float(np.median(gaps))
    out.tolerance_s = tol / time_scale

    order = np.argsort(t, kind="stable")
    t, rid, before, first, last = t[order], rid[order], before[order], first[order], last[order]
    cluster = _split_repeats(np.concatenate(([0], np.cumsum(np.diff(t) > tol))), rid)
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
    size = np.bincount(cluster, minlength=n_clusters)
    unique = np.bincount(cluster[_first_of_pair(cluster, rid)], minlength=n_clusters)
    dup = unique != size
    starts = np.bincount(cluster[first], minlength=n_clusters)
    ends = np.bincount(cluster[last], minlength=n_clusters)
    running_after = np.cumsum(starts) - np.cumsum(ends)  # requests still running after each step

    first_level = np.full(n_clusters, -1, dtype=np.int64)
    first_level[cluster[::-1]] = rid[::-1]  # some request of each cluster, for its load level

    ok = np.ones(n_clusters, dtype=bool)
    ok[dup] = False
    out.drop("two events of one request in one cluster", int(dup.sum()))
    missed = np.zeros(n_clusters, dtype=bool)
    missed[1:] = (n_dec[1:] > 0) & (n_dec[1:] != running_after[:-1])
    ok[missed] = False
    out.drop("decode step without every running request", int((missed & ~dup).sum()))
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


def _counts(r: RequestRecord) -> Sequence[int]:
    """Tokens per event (a record with fewer counts than events: one token for each missing count)."""
    n = len(r.chunk_times)
    counts = list(r.chunk_tokens[:n])
    return counts + [1] * (n - len(counts))


def _first_of_pair(cluster: object, rid: object) -> object:
    """Indices of the first event of each (cluster, request) pair: fewer than the cluster's events = a request
    appears twice in it."""
    import numpy as np

    c = np.asarray(cluster)
    r = np.asarray(rid)
    order = np.lexsort((r, c))
    cs, rs = c[order], r[order]
    new = np.ones(cs.size, dtype=bool)
    new[1:] = (cs[1:] != cs[:-1]) | (rs[1:] != rs[:-1])
    return order[new]


def _split_repeats(cluster: Any, rid: Any) -> Any:
    """Start a new cluster where a request's second event would join one (events in time order): one step
    carries one event per request, so a repeat means two steps arrived closer than the tolerance."""
    import numpy as np

    size = np.bincount(cluster)
    pairs = np.bincount(cluster[_first_of_pair(cluster, rid)], minlength=size.size)
    if (pairs == size).all():
        return cluster
    out = cluster.copy()
    shift = 0
    seen: set[int] = set()
    current = -1
    for i in range(cluster.size):
        c = int(cluster[i])
        if c != current:
            current, seen = c, set()
        r = int(rid[i])
        if r in seen:
            shift += 1
            seen = set()
        seen.add(r)
        out[i] = c + shift
    return out
