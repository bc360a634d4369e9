"""The deterministic step engine: continuous batching, prefill, decode and speculative steps on a schedule.

One asyncio task drives the whole batch. Each request is a small state machine (waiting -> running ->
finished/aborted). Per step the engine:

1. picks the step: a *prefill* step if requests are waiting and the batch has room (up to
   ``max_num_seqs``; Neuron runs context encoding as its own pass, so decoding pauses meanwhile), else a
   *decode* step over every running request;
2. computes its duration from the cost model (``model.Resolved``) and its scheduled end, an absolute
   deadline on the loop clock (``time.monotonic``): the next step starts at the previous deadline, so
   lateness never accumulates;
3. plans what each request emits (prefill: the first token; decode: 1 token, or under speculation the
   accepted prefix of the step's proposals (``window - 1`` on NxDI, ``window`` upstream, see
   ``spectrn.windows``) plus the target's own token, cut at the request's length) and encodes the bytes in
   advance;
4. sleeps until the deadline (the last ``spin_s`` by busy-waiting, for sub-millisecond precision), writes
   every chunk at once, then does the bookkeeping (metrics, logs, finished requests). With writer processes
   (``spectrn.sim.writers``) the streams they own get their bytes before the sleep and are written by them at
   the same deadline; their write times come back asynchronously.

Acceptance draws come from ``random.Random(hash(seed, request counter, prompt))``: reproducible for a seed
and arrival order, different between requests. Output tokens come from ``tokens.OutputStream`` and do not
depend on speculation. Every chunk's scheduled time is recorded (``ChunkLog``), which is the ground truth
that client measurements are compared with.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import random
import time
from array import array
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any, Protocol

from spectrn.sim.faults import FaultPlan
from spectrn.sim.metrics import SimMetrics
from spectrn.sim.model import Resolved, predictability
from spectrn.sim.tokens import OutputStream, Token
from spectrn.sim.writers import WriterPool, request_short_slice


class Sink(Protocol):
    """Where a request's output goes (an SSE stream or a collected JSON body)."""

    def encode(self, req: SimRequest, tokens: list[Token], finish: str | None, first: bool) -> bytes | None: ...

    def write(self, req: SimRequest, data: bytes | None, finish: str | None) -> bool:
        """Deliver pre-encoded bytes; False if the client is gone."""
        ...


class ChunkLog:
    """Every chunk of one request, in compact arrays (about 24 bytes per chunk, invisible to the GC)."""

    __slots__ = ("t", "w", "n", "accepted")

    def __init__(self) -> None:
        self.t = array("d")  # scheduled emission time (time.monotonic() clock)
        self.w = array("d")  # when it was handed to the socket (w - t: the engine's own lateness)
        self.n = array("i")  # tokens in the chunk
        self.accepted = array("i")  # draft tokens accepted in the step (-1: prefill or no speculation)

    def append(self, t: float, n: int, accepted: int, w: float) -> None:
        self.t.append(t)
        self.w.append(w)
        self.n.append(n)
        self.accepted.append(accepted)

    def __len__(self) -> int:
        return len(self.t)

    def as_dicts(self) -> list[dict[str, float | int]]:
        return [
            {"t": t, "n": n, "accepted": a, "written": w}
            for t, n, a, w in zip(self.t, self.n, self.accepted, self.w, strict=True)
        ]


@dataclass(slots=True)
class SimRequest:
    rid: str
    counter: int
    prompt_text: str
    prompt_ids: list[int]
    target_len: int
    finish_reason: str
    max_tokens: int
    sink: Sink
    fault: FaultPlan
    output: OutputStream
    rng: random.Random
    probs: list[float]
    arrival: float
    done: asyncio.Future[None]
    created: int = 0
    emitted: int = 0
    events: int = 0
    admitted_at: float = 0.0
    first_at: float = 0.0
    last_at: float = 0.0
    finished: str | None = None
    chunks: ChunkLog = field(default_factory=ChunkLog)
    text_parts: list[str] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    writer: int = -2  # the writer process its chunks leave from (-1: the engine's own, -2: no writers at all)
    sid: int = 0  # its stream id in that writer
    unacked: int = 0  # chunks handed to the writer and not yet reported written
    release_on_ack: bool = False  # finished: resolve ``done`` once every chunk is written

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_ids)


@dataclass(slots=True)
class _Planned:
    req: SimRequest
    tokens: list[Token]
    accepted: int
    finish: str | None
    data: bytes | None
    written: float = 0.0
    remote: bool = False  # written by a writer process
    index: int = -1  # its position in the request's ChunkLog once recorded


class Engine:
    """Schedules and runs every request of one simulated server."""

    def __init__(
        self,
        model: Resolved,
        metrics: SimMetrics,
        *,
        max_num_seqs: int,
        seed: int,
        spin_s: float = 0.001,
        stall_rate: float = 0.0,
        stall_s: float = 0.0,
        log_size: int = 2000,
        kv_capacity_tokens: int = 0,
        writers: int = 0,
    ) -> None:
        self.model = model
        self.metrics = metrics
        self.max_num_seqs = max_num_seqs
        self.seed = seed
        self.spin_s = spin_s
        self.stall_rate = stall_rate
        self.stall_s = stall_s * model.time_scale
        self._stall_rng = random.Random(seed ^ 0x5EED)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.log: OrderedDict[str, SimRequest] = OrderedDict()
        self.log_size = log_size
        self.kv_capacity_tokens = kv_capacity_tokens
        self.counter = 0
        self.steps = 0
        # Per step: wake-up - deadline, last write - deadline, CPU seconds spent writing, chunks written.
        self.lateness: deque[tuple[float, float, float, int]] = deque(maxlen=2000)
        self._written_at = 0.0
        self._write_cpu = 0.0
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task[None] | None = None
        self.pool = WriterPool(writers) if writers else None
        self._remote: dict[int, dict[int, _Planned]] = {}  # step -> stream id -> chunk handed to a writer

    # ---- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        # Objects alive at start-up (modules, settings, the app) never need collecting: keep full collections short.
        gc.freeze()
        request_short_slice()
        if self.pool is not None:
            self.pool.start(self._on_written)
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name="spectrn-sim-engine")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        for req in [*self.running, *self.waiting]:
            self._finish(req, "abort", time.monotonic())
        self.running.clear()
        self.waiting.clear()
        if self.pool is not None:
            self.pool.stop()
            for req in self.log.values():
                if req.release_on_ack:
                    req.unacked = 0
                    self._release(req)

    def next_counter(self) -> int:
        self.counter += 1
        return self.counter

    def request_rng(self, counter: int, prompt: str) -> random.Random:
        digest = hashlib.blake2b(f"accept\x00{self.seed}\x00{counter}\x00{prompt}".encode(), digest_size=8).digest()
        return random.Random(int.from_bytes(digest, "little"))

    def attach(self, req: SimRequest, fd: int) -> None:
        """Let a writer process write this stream's chunks (its headers are sent; ``fd`` is its socket)."""
        if self.pool is not None and req.fault.disconnect_after_events is None:
            req.writer, req.sid = self.pool.open(fd)

    def submit(self, req: SimRequest) -> None:
        self.waiting.append(req)
        self.metrics.waiting.set(len(self.waiting))
        self.log[req.rid] = req
        while len(self.log) > self.log_size:
            self.log.popitem(last=False)
        assert self._wake is not None, "engine not started"
        self._wake.set()

    def cancel(self, req: SimRequest) -> None:
        """The client went away before the request finished."""
        if req.finished is None:
            if req in self.waiting:
                self.waiting.remove(req)
            self._finish(req, "abort", time.monotonic())

    # ---- the loop ---------------------------------------------------------------------------------
    async def _run(self) -> None:
        # time.monotonic, not loop.time(): uvloop's loop clock has millisecond resolution.
        now = time.monotonic
        assert self._wake is not None
        clock = now()
        while True:
            if any(r.finished is not None for r in self.running):  # cancelled between steps
                self.running = [r for r in self.running if r.finished is None]
                self.metrics.running.set(len(self.running))
            if not self.running and not self.waiting:
                self._wake.clear()
                await self._wake.wait()
                clock = now()
                continue
            start = clock
            admit = self._admissible(start)
            if admit:
                duration = self.model.prefill_s(sum(r.prompt_len for r in admit))
                end = start + duration
                plan = self._plan_prefill(admit, end)
            elif self.running:
                ctx = sum(r.prompt_len + r.emitted for r in self.running)
                duration = self.model.step_s(len(self.running), ctx)
                end = start + duration
                plan = self._plan_decode(end)
            else:
                # Only requests that arrived after this step's start are waiting: start when they did.
                await asyncio.sleep(0)
                clock = max(clock, min(r.arrival for r in self.waiting))
                continue
            if self.pool is not None:
                self._hand_off(plan, end)
            await self._sleep_until(end, duration, spin=not all(p.remote for p in plan))
            woke = now()
            cpu = time.thread_time()
            self._deliver(plan, end, prefill=bool(admit))
            self.lateness.append((woke - end, self._written_at - end, self._write_cpu - cpu, len(plan)))
            self.steps += 1
            clock = end
            if self.stall_rate and self._stall_rng.random() < self.stall_rate:
                clock += self.stall_s

    async def _sleep_until(self, deadline: float, duration: float, spin: bool = True) -> None:
        now = time.monotonic
        if not spin:  # writer processes write every chunk at the deadline: no need to be there to the microsecond
            await asyncio.sleep(max(0.0, deadline - now()))
            return
        spin_s = min(self.spin_s, 0.2 * duration)
        delay = deadline - now() - spin_s
        if delay > 0:
            await asyncio.sleep(delay)
        else:
            await asyncio.sleep(0)  # let handlers run even when behind schedule
        while now() < deadline:
            pass

    def _admissible(self, start: float) -> list[SimRequest]:
        free = self.max_num_seqs - len(self.running)
        out: list[SimRequest] = []
        while free > 0 and self.waiting and self.waiting[0].arrival <= start:
            req = self.waiting.popleft()
            if req.finished is not None:
                continue
            req.admitted_at = start
            out.append(req)
            free -= 1
        if out:
            self.running.extend(out)
            self.metrics.waiting.set(len(self.waiting))
            self.metrics.running.set(len(self.running))
        return out

    def _plan_prefill(self, admit: list[SimRequest], end: float) -> list[_Planned]:
        plan = []
        for req in admit:
            tokens = req.output.take(1)
            finish = req.finish_reason if req.target_len <= 1 else None
            plan.append(_Planned(req, tokens, -1, finish, req.sink.encode(req, tokens, finish, True)))
        return plan

    def _plan_decode(self, end: float) -> list[_Planned]:
        plan = []
        for req in self.running:
            accepted = -1
            n = 1
            if self.model.speculative:
                accepted = 0
                rnd = req.rng.random
                for p in req.probs:
                    if rnd() >= p:
                        break
                    accepted += 1
                n = accepted + 1
            remaining = req.target_len - req.emitted
            n = min(n, remaining)
            finish = req.finish_reason if n >= remaining else None
            tokens = req.output.take(n)
            plan.append(_Planned(req, tokens, accepted, finish, req.sink.encode(req, tokens, finish, False)))
        return plan

    def _deliver(self, plan: list[_Planned], t: float, *, prefill: bool) -> None:
        # Writes first, bookkeeping after: the chunks leave as close to the deadline as possible.
        now = time.monotonic
        gone = []
        for p in plan:
            req = p.req
            if p.remote:
                continue  # its writer process writes it at this same deadline
            if req.finished is None and not req.sink.write(req, p.data, p.finish):
                gone.append(req)
            p.written = now()
        self._written_at = now()
        self._write_cpu = time.thread_time()
        m = self.metrics
        proposals = self.model.proposals
        step_tokens = 0
        for p in plan:
            req = p.req
            if req.finished is not None:
                continue
            n = len(p.tokens)
            step_tokens += n
            if p.remote:
                p.index = len(req.chunks)  # its written time may come before or after this
            req.chunks.append(t, n, p.accepted, p.written)
            for tok_id, piece in p.tokens:
                req.token_ids.append(tok_id)
                req.text_parts.append(piece)
            req.emitted += n
            req.events += 1
            m.generation_tokens.inc(n)
            if prefill:
                req.first_at = t
                m.prompt_tokens.inc(req.prompt_len)
                m.ttft.observe(t - req.arrival)
                step_tokens += req.prompt_len
            else:
                m.itl.observe(t - req.last_at)
                if p.accepted >= 0:
                    m.spec_step(proposals, p.accepted)
            req.last_at = t
            if p.finish is not None:
                self._finish(req, p.finish, t)
        m.iteration_tokens.observe(step_tokens)
        if self.kv_capacity_tokens:
            used = sum(r.prompt_len + r.emitted for r in self.running if r.finished is None)
            m.kv_usage.set(min(1.0, used / self.kv_capacity_tokens))
        for req in gone:
            if req.finished is None:
                self._finish(req, "abort", t)
        if gone or any(p.finish for p in plan):
            self.running = [r for r in self.running if r.finished is None]
            m.running.set(len(self.running))

    def _finish(self, req: SimRequest, reason: str, t: float) -> None:
        if req.finished is not None:
            return
        req.finished = reason
        m = self.metrics
        m.success[reason].inc()
        if reason != "abort":
            m.e2e.observe(t - req.arrival)
            m.queue_time.observe(max(0.0, req.admitted_at - req.arrival))
            m.prefill_time.observe(req.first_at - req.admitted_at)
            m.decode_time.observe(t - req.first_at)
            m.inference_time.observe(t - req.admitted_at)
            m.req_prompt_tokens.observe(req.prompt_len)
            m.req_generation_tokens.observe(req.emitted)
            m.max_tokens_param.observe(req.max_tokens)
            m.request_done(req.emitted, req.max_tokens)
            if req.emitted > 1:
                m.tpot.observe((t - req.first_at) / (req.emitted - 1))
        if req.unacked:
            req.release_on_ack = True  # the writer process has this request's last chunks still to report
        else:
            self._release(req)

    def _release(self, req: SimRequest) -> None:
        """The request is over and every chunk has left: its handler may end the response."""
        req.release_on_ack = False
        if req.writer >= -1 and self.pool is not None:
            self.pool.close(req.writer, req.sid)
            req.writer = -2
        if not req.done.done():
            req.done.set_result(None)

    # ---- writer processes ----------------------------------------------------------------------------
    def _hand_off(self, plan: list[_Planned], deadline: float) -> None:
        """Send each writer its streams' chunks of this step before the deadline (they write at the deadline)."""
        assert self.pool is not None
        batches: dict[int, list[tuple[int, bytes]]] = {}
        handed: dict[int, _Planned] = {}
        gone = []
        for p in plan:
            req = p.req
            if req.writer >= 0 and p.data is not None and req.finished is None:
                tr = getattr(req.sink, "transport", None)
                if tr is None or tr.is_closing():  # the reader left (the engine's process sees the socket)
                    gone.append(req)
                    continue
                batches.setdefault(req.writer, []).append((req.sid, p.data))
                handed[req.sid] = p
                req.unacked += 1
                p.remote = True
        if batches:
            self._remote[self.steps] = handed
            for w, chunks in batches.items():
                self.pool.step(w, self.steps, deadline, chunks)
        if gone:
            for req in gone:
                self._finish(req, "abort", time.monotonic())
            self.running = [r for r in self.running if r.finished is None]
            self.metrics.running.set(len(self.running))

    def _on_written(self, step: int, done: list[tuple[int, float, bool]]) -> None:
        """A writer's report: when each chunk was written, and whether its reader was still there."""
        sent = self._remote.get(step, {})
        for sid, written_at, ok in done:
            p = sent.pop(sid, None)
            if p is None:
                continue
            req = p.req
            p.written = written_at
            if p.index >= 0:
                req.chunks.w[p.index] = written_at
            req.unacked -= 1
            if not ok and req.finished is None:
                self._finish(req, "abort", written_at)
                self.running = [r for r in self.running if r.finished is None]
                self.metrics.running.set(len(self.running))
            elif req.unacked == 0 and req.release_on_ack:
                self._release(req)
        if not sent:
            self._remote.pop(step, None)

    # ---- introspection ------------------------------------------------------------------------------
    def describe(self, req: SimRequest) -> dict[str, Any]:
        """Ground truth for one request (served at GET /sim/requests)."""
        return {
            "id": req.rid,
            "counter": req.counter,
            "prompt": req.prompt_text[:2000],
            "prompt_tokens": req.prompt_len,
            "predictability": predictability(req.prompt_text),
            "accept_prob": req.probs[0] if req.probs else None,
            "position_probs": req.probs,
            "expected_tokens_per_step": self.model.expected_tokens_per_step(req.prompt_text),
            "target_tokens": req.target_len,
            "emitted_tokens": req.emitted,
            "finish_reason": req.finished,
            "arrival": req.arrival,
            "admitted": req.admitted_at,
            "chunks": req.chunks.as_dicts(),
        }
