"""How a level's requests are sent: closed-loop workers on a ramp, open-loop arrivals, conversations turn by turn.

Closed-loop concurrency: ``C`` workers per endpoint pull the schedule in order. Open-loop Poisson arrivals: the
same seeded arrival times for every endpoint. Endpoints run ``simultaneous`` (as the published experiment: both
loaded at once) or ``interleaved`` (blocks of ``C`` requests alternate A, B, A, B, so slow drift in the
environment hits both alike).

Closed-loop workers start on a ramp (``closed_loop_ramp``): by default 10 ms apart, so the server's
ingress never sees all C first requests in the same millisecond and TTFT means the same thing at 1 and
at 256 streams (docs/benchmarks.md, "The default load shape"). Open-loop arrivals are generated as they
fall due: only requests in flight exist as tasks, so memory does not grow with ``--requests``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Iterator, Sequence
from dataclasses import replace
from typing import Any

from spectrn.errors import SpectrnError
from spectrn.loadgen.arrivals import Level, level_arrivals, shard_cap
from spectrn.loadgen.client import RequestParams, run_request
from spectrn.loadgen.clock import wall_now
from spectrn.loadgen.plan import RunPlan, _trace_row
from spectrn.loadgen.prompts import ScheduledRequest, turn_class
from spectrn.loadgen.sink import RecordSink
from spectrn.run.records import RequestRecord

# The default closed-loop start: one stream every AUTO_RAMP_STEP_S, the whole ramp at most AUTO_RAMP_MAX_S
# and at most half a warm-up request, so the first wave still overlaps almost entirely.
AUTO_RAMP_STEP_S = 0.010
AUTO_RAMP_MAX_S = 10.0


def closed_loop_ramp(plan: RunPlan, level: Level, warm_e2e: float | None) -> tuple[float, str]:
    """(seconds over which the level's closed-loop streams start, how that was chosen).

    ``bench.ramp_s`` set: that. Otherwise AUTO_RAMP_STEP_S per stream of the whole level (all shards),
    at most AUTO_RAMP_MAX_S and at most half the median warm-up request, so that every first-wave
    request still starts before the first one ends."""
    if plan.ramp_s is not None:
        return plan.ramp_s, "bench.ramp_s"
    streams = level.concurrency or 1
    ramp = AUTO_RAMP_STEP_S * (streams - 1)
    why = f"auto: {AUTO_RAMP_STEP_S * 1e3:g} ms per stream"
    if ramp > AUTO_RAMP_MAX_S:
        ramp, why = AUTO_RAMP_MAX_S, f"{why}, capped at {AUTO_RAMP_MAX_S:g} s"
    if warm_e2e is not None and ramp > warm_e2e / 2:
        ramp, why = warm_e2e / 2, f"{why}, capped at half a warm-up request ({warm_e2e:.3g} s)"
    return ramp, why


async def _together(*aws: Coroutine[Any, Any, None]) -> None:
    """Run ``aws`` concurrently; the first failure cancels the rest (no orphan keeps writing records)."""
    try:
        async with asyncio.TaskGroup() as tg:
            for aw in aws:
                tg.create_task(aw)
    except BaseExceptionGroup as eg:
        raise _first_error(eg) from None


def _first_error(eg: BaseExceptionGroup[BaseException]) -> BaseException:
    leaves: list[BaseException] = []

    def walk(g: BaseExceptionGroup[BaseException]) -> None:
        for e in g.exceptions:
            if isinstance(e, BaseExceptionGroup):
                walk(e)
            else:
                leaves.append(e)

    walk(eg)
    for e in leaves:  # a spectrn error explains itself best; then anything that is not a cancellation
        if isinstance(e, SpectrnError):
            return e
    return next((e for e in leaves if not isinstance(e, asyncio.CancelledError)), leaves[0])


async def _send(
    session: Any, name: str, url: str, plan: RunPlan, req: ScheduledRequest, level: Level, params: RequestParams
) -> list[RequestRecord]:
    """The request's records: one, or one per turn of a conversation (``req.turns``)."""
    if req.turns is None:
        return [
            await run_request(
                session,
                url,
                params,
                req.text,
                variant=name,
                index=req.index,
                prompt_id=req.prompt_id,
                prompt_class=req.prompt_class,
                level=level.label,
                warmup=req.warmup,
                shard=plan.shard,
                history=_system(req),
            )
        ]
    return await _conversation(session, name, url, plan, req, level, params)


def _system(req: ScheduledRequest) -> list[dict[str, str]]:
    """The workload's shared system prompt as the conversation's first message (none: empty)."""
    return [{"role": "system", "content": req.system}] if req.system else []


async def _conversation(
    session: Any, name: str, url: str, plan: RunPlan, req: ScheduledRequest, level: Level, params: RequestParams
) -> list[RequestRecord]:
    """Replay a multi-turn conversation: each turn is sent with every earlier turn and the server's own answers
    before it, so the context grows as in a chat. Both endpoints replay the same user turns; with greedy decoding
    their answers, and so their contexts, are identical. Turn N > 1 is recorded as class ``<class>-t<N>``, so its
    figures are reported apart from first turns. A turn that fails ends the conversation: the turns it leaves
    unsent are records with the error ``conversation_ended`` (they were planned and could not be sent)."""
    assert req.turns is not None
    history: list[dict[str, str]] = list(_system(req))
    out: list[RequestRecord] = []
    keep = replace(params, keep_output=True)  # the answer is the next turn's context
    for n, text in enumerate(req.turns, 1):
        cls = req.prompt_class if n == 1 else turn_class(req.prompt_class, n)
        if out and not out[-1].ok:
            out.append(
                RequestRecord(variant=name, index=req.index, prompt_id=req.prompt_id, prompt_class=cls, turn=n,
                              level=level.label, warmup=req.warmup, shard=plan.shard, sent_at=wall_now(),
                              error="conversation_ended", error_msg=f"turn {n - 1} failed: {out[-1].error}")
            )  # fmt: skip
            continue
        rec = await run_request(session, url, keep, text, variant=name, index=req.index, prompt_id=req.prompt_id,
                                prompt_class=cls, level=level.label, warmup=req.warmup, shard=plan.shard,
                                history=history, turn=n)  # fmt: skip
        history += [{"role": "user", "content": text}, {"role": "assistant", "content": rec.output_text or ""}]
        if not params.keep_output:
            rec.output_text, rec.output_token_ids = None, None
        out.append(rec)
    return out


def _params_for(plan: RunPlan, req: ScheduledRequest) -> RequestParams:
    """The request's parameters: a trace row's ``output_tokens`` replaces ``max_tokens`` for its request; else the
    workload's output length for the prompt does, capped at ``bench.max_tokens`` (vLLM ``bench serve`` likewise
    asks a dataset row for its own output length)."""
    row = _trace_row(plan, req)
    if row is not None and row.output_tokens is not None:
        return replace(plan.params, max_tokens=row.output_tokens)
    if req.output_tokens is not None and req.output_tokens < plan.params.max_tokens:
        return replace(plan.params, max_tokens=req.output_tokens)
    return plan.params


async def _closed_loop(
    session: Any,
    name: str,
    url: str,
    plan: RunPlan,
    items: Sequence[ScheduledRequest],
    level: Level,
    concurrency: int,
    sink: RecordSink,
    ramp_s: float = 0.0,
    deadline: float | None = None,
    sent: dict[str, int] | None = None,
) -> None:
    """``deadline`` (loop time): no request starts after it; those in flight finish (or hit the request
    timeout). Workers pull the schedule in order, so what each endpoint sent is a prefix of it."""
    it = iter(items)
    workers = max(1, min(concurrency, len(items)))
    streams = max(1, workers * plan.shards)
    loop = asyncio.get_running_loop()

    async def worker(k: int) -> None:
        if ramp_s > 0:  # stream k of this shard is stream k * shards + shard of the whole level
            await asyncio.sleep(ramp_s * (k * plan.shards + plan.shard) / streams)
        while deadline is None or loop.time() < deadline:
            req = next(it, None)
            if req is None:
                return
            if sent is not None:
                sent[name] = sent.get(name, 0) + req.turn_count
            recs = await _send(session, name, url, plan, req, level, _params_for(plan, req))
            # Let streams whose bytes are already here time-stamp them before this worker spends CPU on
            # writing its record and launching the next request (closed-loop waves end together).
            await asyncio.sleep(0)
            for rec in recs:
                sink.add(rec)

    await _together(*(worker(k) for k in range(workers)))


async def _open_loop(
    session: Any,
    name: str,
    url: str,
    plan: RunPlan,
    items: Sequence[ScheduledRequest],
    level: Level,
    arrivals: Iterator[float],
    t_start: float,
    sink: RecordSink,
    sent: dict[str, int] | None = None,
) -> None:
    """Send each request at its arrival time. Arrivals are produced as they fall due and a task exists
    only while its request is in flight (at most this shard's share of ``level.concurrency``, the in-flight
    cap); an arrival that finds the cap reached waits for a slot and is sent late: its TTFT counts from the
    send, as ``vllm bench serve --max-concurrency`` and guidellm count it, and the record's ``queued_s``
    says how long it waited. With ``plan.duration_s`` no arrival at or after the duration is sent."""
    slots = asyncio.Semaphore(shard_cap(level, plan.shards))
    loop = asyncio.get_running_loop()

    async def one(req: ScheduledRequest, queued: float | None) -> None:
        try:
            recs = await _send(session, name, url, plan, req, level, _params_for(plan, req))
        finally:
            slots.release()
        if queued is not None:
            recs[0].queued_s = round(queued, 6)
        await asyncio.sleep(0)
        for rec in recs:
            sink.add(rec)

    try:
        async with asyncio.TaskGroup() as tg:
            for req, at in zip(items, arrivals, strict=False):
                if plan.duration_s is not None and at >= plan.duration_s:
                    break
                delay = t_start + at - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
                full = slots.locked()
                await slots.acquire()
                if sent is not None:
                    sent[name] = sent.get(name, 0) + req.turn_count
                # only the wait for a slot is queueing; a few ms of event-loop lateness is not
                tg.create_task(one(req, loop.time() - (t_start + at) if full else None))
    except BaseExceptionGroup as eg:
        raise _first_error(eg) from None


def _trace_arrivals(plan: RunPlan, items: Sequence[ScheduledRequest]) -> Iterator[float]:
    """Each measured request's trace offset; the level ends with the trace (a shorter trace, fewer requests)."""
    for req in items:
        row = _trace_row(plan, req)
        if row is None:
            return
        yield row.offset_s


async def _run_level(
    session: Any,
    plan: RunPlan,
    urls: dict[str, str],
    items: Sequence[ScheduledRequest],
    level: Level,
    sink: RecordSink,
    ramp_s: float,
    sent: dict[str, int] | None = None,
) -> None:
    if not items:
        return
    if level.open_loop:
        t_start = asyncio.get_running_loop().time() + 0.05

        def arrivals() -> Iterator[float]:  # one generator per endpoint: the same seeded times for each
            if level.trace:
                return _trace_arrivals(plan, items)
            return level_arrivals(level, plan.seed, plan.shards, plan.shard)

        await _together(
            *(_open_loop(session, n, u, plan, items, level, arrivals(), t_start, sink, sent) for n, u in urls.items())
        )
        return
    concurrency = max(1, -(-(level.concurrency or 1) // plan.shards))
    loop = asyncio.get_running_loop()
    deadline = None if plan.duration_s is None else loop.time() + plan.duration_s
    if plan.mode == "interleaved":
        for start in range(0, len(items), concurrency):
            if deadline is not None and loop.time() >= deadline:
                break  # checked once per block, so both endpoints get the same blocks
            block = items[start : start + concurrency]
            for name, url in urls.items():
                await _closed_loop(session, name, url, plan, block, level, concurrency, sink, ramp_s, sent=sent)
        return
    await _together(
        *(
            _closed_loop(session, n, u, plan, items, level, concurrency, sink, ramp_s, deadline, sent)
            for n, u in urls.items()
        )
    )
