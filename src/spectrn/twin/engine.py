"""The simulator's engine, offline: one closed-loop load level in simulated time, no HTTP, no sleeping (pure).

It follows ``spectrn.sim.engine.Engine``'s rules step for step, on the same cost and acceptance model
(``spectrn.sim.model.Resolved``):

- a step starts when the previous one ends; requests that arrived by then are admitted (up to the batch limit)
  in a prefill step of their summed prompt tokens, which pauses decoding; otherwise every running request
  decodes one step; an idle engine waits for the next arrival;
- a speculative decode step draws each proposal in order with its conditional acceptance and stops at the first
  rejection, emitting the accepted prefix plus one token, cut at the request's length;

and the load generator's closed loop (``spectrn.loadgen.schedulers``): ``c`` workers started over a ramp, each
sending its next request as soon as the previous one finished (it arrives a moment after the step that
finished it began its successor, so it waits for that step, as over a real socket).

Metrics are the analysis' definitions (``spectrn.analyze.metrics``): TTFT, TPOT = (e2e - TTFT) / (n - 1),
e2e, and aggregate throughput = tokens / (last end - first send).
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from spectrn.sim.model import Resolved

TURNAROUND_S = 1e-6  # a finished request's successor arrives this long after the step that finished it ended


@dataclass(frozen=True)
class ClassLoad:
    """One prompt class of the workload: its share, prompt length and conditional acceptance per position."""

    name: str
    weight: float
    prompt_tokens: int
    position_probs: Sequence[float]


@dataclass
class _Req:
    cls: int
    prompt: int
    target: int
    sent: float
    first: float = -1.0
    last: float = -1.0
    emitted: int = 0


@dataclass
class LevelResult:
    """Per request (in completion order): class, TTFT, TPOT, e2e; plus aggregate throughput (tokens/s)."""

    classes: list[str]
    cls: list[int] = field(default_factory=list)
    ttft: list[float] = field(default_factory=list)
    tpot: list[float] = field(default_factory=list)
    e2e: list[float] = field(default_factory=list)
    tokens: int = 0
    span_s: float = 0.0
    steps: int = 0

    @property
    def throughput(self) -> float:
        return self.tokens / self.span_s if self.span_s > 0 else 0.0

    def p50(self, metric: str, cls: str | None = None) -> float | None:
        import numpy as np

        values = getattr(self, metric)
        if cls is not None:
            k = self.classes.index(cls)
            values = [v for v, c in zip(values, self.cls, strict=True) if c == k]
        values = [v for v in values if v == v]
        return float(np.median(values)) if values else None


def schedule(classes: Sequence[ClassLoad], n: int) -> list[int]:
    """``n`` class indices in proportion to the weights, evenly interleaved (smooth weighted round robin)."""
    total = sum(c.weight for c in classes)
    credit = [0.0] * len(classes)
    out = []
    for _ in range(n):
        for i, c in enumerate(classes):
            credit[i] += c.weight
        i = max(range(len(classes)), key=lambda j: credit[j])
        credit[i] -= total
        out.append(i)
    return out


def run_level(
    model: Resolved,
    classes: Sequence[ClassLoad],
    *,
    concurrency: int,
    requests: int,
    max_tokens: int,
    batch_limit: int,
    ramp_s: float = 0.0,
    seed: int = 0,
    order: Sequence[int] | None = None,
) -> LevelResult:
    """One closed-loop level of ``requests`` requests on ``model`` (real seconds: time scale ignored).
    ``order``: the class of each request in sending order (default: ``schedule``)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    order = list(order) if order is not None else schedule(classes, requests)
    requests = len(order)
    spec = model.speculative
    props = model.proposals if spec else 0
    probs = np.zeros((len(classes), max(props, 1)))
    for i, c in enumerate(classes):
        row = list(c.position_probs)[:props]
        probs[i, : len(row)] = row
    scale = 1.0 / model.time_scale
    out = LevelResult(classes=[c.name for c in classes])
    workers = max(1, min(concurrency, requests))
    pending: list[tuple[float, int]] = []  # (arrival, sequence) of requests sent and not yet at the engine
    reqs: dict[int, _Req] = {}
    next_req = 0

    def send(at: float) -> None:
        nonlocal next_req
        if next_req >= requests:
            return
        k = order[next_req]
        reqs[next_req] = _Req(cls=k, prompt=classes[k].prompt_tokens, target=max_tokens, sent=at)
        heapq.heappush(pending, (at, next_req))
        next_req += 1

    for w in range(workers):
        send(ramp_s * w / workers)
    waiting: deque[int] = deque()
    running: list[int] = []
    clock = 0.0
    first_send = min(r.sent for r in reqs.values())
    last_end = first_send
    while pending or waiting or running:
        while pending and pending[0][0] <= clock:
            waiting.append(heapq.heappop(pending)[1])
        if not running and not waiting:
            clock = max(clock, pending[0][0])
            continue
        free = batch_limit - len(running)
        admit = []
        while free > 0 and waiting:
            admit.append(waiting.popleft())
            free -= 1
        finished: list[int] = []
        if admit:
            end = clock + model.prefill_s(sum(reqs[i].prompt for i in admit)) * scale
            for i in admit:
                r = reqs[i]
                r.first = r.last = end
                r.emitted = 1
                if r.target <= 1:
                    finished.append(i)
            running.extend(admit)
        else:
            ctx = sum(reqs[i].prompt + reqs[i].emitted for i in running)
            end = clock + model.step_s(len(running), ctx) * scale
            if spec and props:
                cls = np.fromiter((reqs[i].cls for i in running), dtype=np.int64, count=len(running))
                hits = rng.random((len(running), props)) < probs[cls]
                accepted = np.cumprod(hits, axis=1).sum(axis=1)
            else:
                accepted = np.zeros(len(running), dtype=np.int64)
            for i, a in zip(running, accepted, strict=True):
                r = reqs[i]
                r.emitted += min(int(a) + 1, r.target - r.emitted)
                r.last = end
                if r.emitted >= r.target:
                    finished.append(i)
        out.steps += 1
        clock = end
        for i in finished:
            r = reqs[i]
            out.cls.append(r.cls)
            out.ttft.append(r.first - r.sent)
            out.e2e.append(r.last - r.sent)
            out.tpot.append((r.last - r.first) / (r.emitted - 1) if r.emitted > 1 else float("nan"))
            out.tokens += r.emitted
            last_end = max(last_end, r.last)
            send(end + TURNAROUND_S)
        if finished:
            done = set(finished)
            running = [i for i in running if i not in done]
    out.span_s = last_end - first_send
    return out


def class_loads(
    model: Resolved, texts: Mapping[str, str], weights: Mapping[str, float], prompt_tokens: Mapping[str, float]
) -> list[ClassLoad]:
    """The workload's classes with the acceptance ``model`` gives a prompt of each (``texts``: one per class)."""
    return [
        ClassLoad(
            name=name,
            weight=w,
            prompt_tokens=max(1, int(round(prompt_tokens.get(name, 64.0)))),
            position_probs=model.position_probs(texts[name]),
        )
        for name, w in weights.items()
        if w > 0
    ]
