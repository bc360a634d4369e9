"""A benchmark run: the same request schedule against every endpoint, records streamed to disk.

Order of a run, per endpoint set:
    reachability + model check -> input-length shaping (/tokenize) -> warm-up (recorded, flagged) ->
    for each load level: scrape /metrics -> measured requests -> scrape /metrics -> acceptance deltas

Load shapes: closed-loop concurrency (``C`` workers per endpoint pulling the schedule in order) or
open-loop Poisson arrivals (the same seeded arrival times for every endpoint). Endpoints run
``simultaneous`` (as the published experiment: both loaded at once) or ``interleaved`` (blocks of ``C``
requests alternate A, B, A, B, so slow drift in the environment hits both alike).

Closed-loop workers start on a ramp (``closed_loop_ramp``): by default 10 ms apart, so the server's
ingress never sees all C first requests in the same millisecond and TTFT means the same thing at 1 and
at 256 streams (docs/benchmarks.md, "The default load shape"). Open-loop arrivals are generated as they
fall due: only requests in flight exist as tasks, so memory does not grow with ``--requests``.

Every finished request is appended to ``requests.jsonl`` at once and then dropped from memory, so an
interrupted or killed run keeps everything that finished and memory stays flat for long runs. However a
run stops (Ctrl-C, SIGTERM, an error), ``run.json`` says ``interrupted`` and why; a disk that refuses a
write or a client out of file descriptors is a ``BenchError``, not a server's error.
"""

from __future__ import annotations

import asyncio
import errno
import statistics
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spectrn import __version__
from spectrn.errors import BenchError, EndpointError, SpectrnError, one_line, redact, redact_url
from spectrn.loadgen import clock
from spectrn.loadgen.arrivals import Level as Level  # re-exported: the runner's callers name levels
from spectrn.loadgen.arrivals import (
    TraceRow,
    level_arrivals,
    open_loop_shape,
    shard_cap,
)
from spectrn.loadgen.arrivals import poisson_arrivals as poisson_arrivals  # re-exported: older imports
from spectrn.loadgen.arrivals import poisson_offsets as poisson_offsets
from spectrn.loadgen.client import RequestParams, endpoint_url, request_trace_config, run_request
from spectrn.loadgen.clock import wall_now
from spectrn.loadgen.identity import identify
from spectrn.loadgen.metrics import acceptance_delta, parse_metrics, scrape
from spectrn.loadgen.prompts import Schedule, ScheduledRequest, split_schedule, turn_class
from spectrn.loadgen.stream import MAX_TOKEN_COUNT
from spectrn.names import check_name
from spectrn.run.folder import ACCEPTANCE, METRICS, REQUESTS, RUN_JSON, RunFolder
from spectrn.run.load_shape import LoadShape
from spectrn.run.records import RequestRecord, RunMeta
from spectrn.run.summary import Provenance
from spectrn.spec.config import SpectrnConfig

OnRecord = Callable[[RequestRecord], None]
StopReason = Callable[[], str | None]

# The default closed-loop start: one stream every AUTO_RAMP_STEP_S, the whole ramp at most AUTO_RAMP_MAX_S
# and at most half a warm-up request, so the first wave still overlaps almost entirely.
AUTO_RAMP_STEP_S = 0.010
AUTO_RAMP_MAX_S = 10.0
MAX_JSON_BODY_BYTES = 1 << 20  # /v1/models and /tokenize answers


@dataclass
class RunPlan:
    run_id: str
    out_dir: Path
    endpoints: dict[str, str]
    schedule: Sequence[ScheduledRequest]
    params: RequestParams
    levels: list[Level]
    mode: str = "simultaneous"
    seed: int = 0
    shard: int = 0
    shards: int = 1
    config: dict[str, Any] = field(default_factory=dict)
    engine: str = "spectrn"
    ramp_s: float | None = None  # None: automatic (closed_loop_ramp)
    provenance: Provenance | None = None
    duration_s: float | None = None  # each level ends this long after its start (bench.duration_s)
    trace: Sequence[TraceRow] | None = None  # a "trace" level's rows: measured request k starts at row k
    trace_file: str = ""
    trace_first_index: int = 0  # schedule index of the first measured request (row 0): the warm-up count


@dataclass
class RunOutcome:
    run_dir: Path
    counts: dict[str, dict[str, int]]
    acceptance: dict[str, dict[str, Any] | None]
    interrupted: bool
    notes: list[str]


def fd_budget(plan: RunPlan) -> int:
    """File descriptors a closed-loop run holds at its peak: a connection per stream and endpoint, plus
    the results files, the event loop and the interpreter's own."""
    streams = max((lv.concurrency or 1 for lv in plan.levels if not lv.open_loop), default=0)
    return -(-streams // plan.shards) * len(plan.endpoints) + 64


def ensure_fd_budget(plan: RunPlan) -> None:
    """Raise the soft open-file limit towards the hard one when the run needs it; refuse a closed-loop run
    that cannot fit, before anything is sent, rather than fail mid-run."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    need = fd_budget(plan)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    target = need if hard == resource.RLIM_INFINITY else min(hard, need)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    except (ValueError, OSError):
        pass
    if soft < need:
        raise BenchError(
            f"this run needs about {need} open files (a connection per stream and endpoint, plus 64) but the "
            f"open-file limit is {soft} (hard limit {hard})",
            hint=f"raise it (`ulimit -n {2 * need}`) or lower --concurrency",
        )


def write_error(path: Path, e: OSError) -> BenchError:
    """A results file that cannot be written (disk full, read-only, no permission), as a BenchError."""
    if e.errno in (errno.EMFILE, errno.ENFILE):
        return BenchError(
            f"out of file descriptors while writing {path} ({e.strerror}); the run was stopped",
            hint="raise the open-file limit (`ulimit -n 65536`) or lower --concurrency / --rate",
        )
    fixes = {
        errno.ENOSPC: "free space on that disk, or pass --out-dir on another disk",
        errno.EDQUOT: "free space within your quota, or pass --out-dir on another disk",
        errno.EFBIG: "the file passed a size limit (`ulimit -f`); raise it or pass --out-dir elsewhere",
        errno.EROFS: "the disk is read-only: pass --out-dir on a writable disk",
        errno.EACCES: "no permission to write there: pass --out-dir on a folder you can write",
        errno.EPERM: "no permission to write there: pass --out-dir on a folder you can write",
    }
    return BenchError(
        f"cannot write {path}: {e.strerror or e}; records written before this point are kept",
        hint=fixes.get(e.errno or 0, "check the disk and the folder's permissions, or pass another --out-dir"),
    )


def _as_bench_error(path: Path, write: Callable[[], object]) -> None:
    """One write through the run folder (``RunFolder``), its OSError a BenchError naming ``path``."""
    try:
        write()
    except OSError as e:
        raise write_error(path, e) from None


class RecordSink:
    """Appends each record as one JSON line and flushes, so a killed process loses at most one line."""

    def __init__(self, folder: RunFolder, on_record: OnRecord | None) -> None:
        self.path = path = folder.file(REQUESTS)
        try:
            self._f = folder.append_records()
        except OSError as e:
            raise write_error(path, e) from None
        self._on_record = on_record
        self._broken = False
        self.counts: dict[str, dict[str, int]] = {}
        self.token_sources: dict[str, dict[str, int]] = {}
        self.token_warnings: dict[str, int] = {}
        self.warm_e2e: list[float] = []

    def add(self, rec: RequestRecord) -> None:
        try:
            self._f.write(rec.model_dump_json(exclude_none=True) + "\n")
            self._f.flush()
        except OSError as e:
            self._broken = True
            raise write_error(self.path, e) from None
        c = self.counts.setdefault(rec.variant, {"completed": 0, "errors": 0, "warmup": 0})
        if rec.warmup:
            c["warmup"] += 1
            if rec.ok and rec.e2e is not None:
                self.warm_e2e.append(rec.e2e)
        elif rec.ok:
            c["completed"] += 1
        else:
            c["errors"] += 1
        if rec.chunk_times:
            src = self.token_sources.setdefault(rec.variant, {})
            src[rec.token_source] = src.get(rec.token_source, 0) + 1
        if rec.token_warning:
            self.token_warnings[rec.variant] = self.token_warnings.get(rec.variant, 0) + 1
        if self._on_record:
            self._on_record(rec)

    def close(self) -> None:
        try:
            self._f.close()
        except OSError as e:
            if not self._broken:  # the first failure was already reported
                raise write_error(self.path, e) from None

    def token_notes(self) -> list[str]:
        notes = []
        for name, sources in sorted(self.token_sources.items()):
            n = sum(sources.values())
            parts = ", ".join(f"{k} {v}" for k, v in sorted(sources.items()))
            notes.append(f"{name}: tokens per chunk counted from {parts} (records with tokens: {n})")
            if sources.get("text"):
                notes.append(
                    f"{name}: {sources['text']} of {n} records counted tokens from text length (the server sent "
                    "neither token_ids nor per-event usage): per-chunk counts and per-token latencies are estimates"
                )
        for name, k in sorted(self.token_warnings.items()):
            notes.append(
                f"{name}: {k} record(s) where token_ids and usage.completion_tokens disagree (token_ids counted; "
                "see token_warning in requests.jsonl)"
            )
        return notes


# ---- what the server says outside the stream, typed ----------------------------------------------------


class _ModelCard(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    id: str = Field(min_length=1, max_length=1000)


class _ModelList(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    data: list[_ModelCard] = Field(default_factory=list, max_length=10_000)


class _Tokenized(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    count: int | None = Field(default=None, ge=0, le=MAX_TOKEN_COUNT)
    tokens: list[int] | None = Field(default=None, max_length=MAX_TOKEN_COUNT)


async def _get_body(resp: Any, limit: int) -> bytes:
    buf = bytearray()
    while len(buf) <= limit:
        chunk = await resp.content.read(limit + 1 - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


async def _check_endpoint(session: Any, name: str, base_url: str, model: str | None) -> str:
    """Confirm the endpoint answers /v1/models; return the model to use."""
    import aiohttp

    root = base_url.rstrip("/").removesuffix("/v1")
    url = root + "/v1/models"
    shown = redact_url(base_url)
    fix = "check the URL points at a vLLM OpenAI server (`curl <url>/v1/models`)"
    try:
        # vLLM answers /v1/models while its engine is still loading or compiling; /health tells the truth.
        # A server without /health (404, other OpenAI-compatible servers) is judged by /v1/models alone.
        async with session.get(
            root + "/health", timeout=aiohttp.ClientTimeout(total=15), allow_redirects=False
        ) as resp:
            if resp.status >= 500:
                raise EndpointError(
                    f"endpoint {name} ({shown}) is not ready: /health answered HTTP {resp.status}",
                    hint="wait until `curl <url>/health` answers 200 (a Neuron server may still be compiling; "
                    "`spectrn status` shows progress)",
                )
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=15), allow_redirects=False) as resp:
            if 300 <= resp.status < 400:
                target = redact_url(resp.headers.get("Location", "(no Location header)"))
                raise EndpointError(
                    f"endpoint {name} ({shown}) redirects /v1/models to {target} (HTTP {resp.status}); "
                    "redirects are not followed",
                    hint="give --endpoint the final URL",
                )
            if resp.status != 200:
                raise EndpointError(
                    f"endpoint {name} ({shown}) answered HTTP {resp.status} on /v1/models",
                    hint="check the URL points at a vLLM OpenAI server and that it has finished starting",
                )
            raw = await _get_body(resp, MAX_JSON_BODY_BYTES)
    except (aiohttp.ClientError, TimeoutError, OSError) as e:
        raise EndpointError(
            f"endpoint {name} ({shown}) is unreachable: {type(e).__name__}: {redact(str(e))}",
            hint="check the URL and that the server is running (`spectrn status`, or `curl <url>/health`)",
        ) from None
    if len(raw) > MAX_JSON_BODY_BYTES:
        raise EndpointError(f"endpoint {name} ({shown}) sent over {MAX_JSON_BODY_BYTES} bytes on /v1/models", hint=fix)
    try:
        listing = _ModelList.model_validate_json(raw)
    except ValidationError as e:
        raise EndpointError(
            f"endpoint {name} ({shown}) answered /v1/models with something that is not a model list: {one_line(e)}",
            hint=fix,
        ) from None
    served = [m.id for m in listing.data]
    if model:
        if served and model not in served:
            raise EndpointError(
                f"endpoint {name} serves {', '.join(served[:20])}, not model {model!r}",
                hint="pass --model with one of those names",
            )
        return model
    if not served:
        raise EndpointError(f"endpoint {name} lists no models on /v1/models", hint="pass --model explicitly")
    return served[0]


async def shape_input_lengths(
    session: Any, base_url: str, model: str, schedule: Sequence[ScheduledRequest], target: int
) -> tuple[list[ScheduledRequest], str]:
    """Pad or trim each distinct prompt to ``target`` tokens using the server's /tokenize.

    Padding repeats the prompt's own text (it keeps its structure); trimming drops trailing words. When
    /tokenize is unavailable or answers something that is not a count, the length is estimated at 4
    characters per token, and the note says so and why.
    """
    import aiohttp

    root = base_url.rstrip("/").removesuffix("/v1")
    cache: dict[str, str] = {}
    why: list[str] = []

    async def count(text: str) -> int | None:
        try:
            async with session.post(
                f"{root}/tokenize",
                json={"model": model, "prompt": text, "add_special_tokens": False},
                timeout=aiohttp.ClientTimeout(total=15),
                allow_redirects=False,
            ) as resp:
                if resp.status != 200:
                    why.append(f"/tokenize answered HTTP {resp.status}")
                    return None
                raw = await _get_body(resp, MAX_JSON_BODY_BYTES)
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            why.append(f"/tokenize failed: {type(e).__name__}")
            return None
        try:
            got = _Tokenized.model_validate_json(raw)
        except ValidationError as e:
            why.append(f"/tokenize answer unusable: {one_line(e)}")
            return None
        if got.count is not None:
            return got.count
        if got.tokens is not None:
            return len(got.tokens)
        why.append("/tokenize answer has neither count nor tokens")
        return None

    def estimate(pool: list[str]) -> str:
        return " ".join(pool)[: 4 * target]

    async def fit(text: str) -> str:
        words = text.split(" ")
        pool = list(words)
        while len(pool) < 8 * target + 8:
            pool.extend(words)
        lo, hi = 1, len(pool)
        if why or await count(" ".join(pool[: min(hi, 4 * target)])) is None:
            return estimate(pool)
        while lo < hi:  # smallest word count whose token count >= target
            mid = (lo + hi) // 2
            n = await count(" ".join(pool[:mid]))
            if n is None:
                return estimate(pool)
            if n >= target:
                hi = mid
            else:
                lo = mid + 1
        return " ".join(pool[:lo])

    out = []
    for req in schedule:
        if req.text not in cache:
            cache[req.text] = await fit(req.text)
        turns = (cache[req.text], *req.turns[1:]) if req.turns else None  # later turns keep their own text
        out.append(replace(req, text=cache[req.text], turns=turns))
    note = (
        f"input length {target} tokens ESTIMATED at 4 characters/token: the server has no usable /tokenize "
        f"({redact(why[0])})"
        if why
        else f"input length shaped to {target} tokens with the server's /tokenize"
    )
    return out, note


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


def _trace_row(plan: RunPlan, req: ScheduledRequest) -> TraceRow | None:
    if plan.trace is None or req.warmup:
        return None
    k = req.index - plan.trace_first_index
    return plan.trace[k] if 0 <= k < len(plan.trace) else None


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


async def _prewarm(session: Any, endpoints: dict[str, str], connections: int) -> None:
    """Open ``connections`` keep-alive connections per endpoint before a level starts, so that the burst
    of a closed-loop start does not charge TCP set-up to the first requests' TTFT."""
    import aiohttp

    async def one(url: str) -> None:
        try:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=10), allow_redirects=False) as resp:
                await resp.read()
        except (aiohttp.ClientError, TimeoutError, OSError):
            pass

    n = min(connections, 512)
    await asyncio.gather(
        *(one(base.rstrip("/").removesuffix("/v1") + "/v1/models") for base in endpoints.values() for _ in range(n))
    )


async def _scrape_all(session: Any, plan: RunPlan, tag: str, notes: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    mdir = plan.out_dir / METRICS
    try:
        mdir.mkdir(exist_ok=True)
    except OSError as e:
        raise write_error(mdir, e) from None
    for name, base in plan.endpoints.items():
        text, problem = await scrape(session, base)
        if text is None:
            notes.append(f"{name}: {problem}; acceptance not reported")
            out[name] = None
            continue
        scrape_name = f"{name}.{tag}.prom"  # name: checked by check_name before the run
        _as_bench_error(mdir / scrape_name, partial(RunFolder(plan.out_dir).write_scrape, scrape_name, text))
        snap = await asyncio.to_thread(parse_metrics, text)  # bounded, but up to a second: off the event loop
        for p in snap.problems:
            notes.append(f"{name}: {p}; acceptance not reported")
        out[name] = None if snap.problems else snap
    return out


@dataclass
class _RunState:
    started: float
    notes: list[str] = field(default_factory=list)
    planned: dict[str, dict[str, int]] = field(default_factory=dict)
    planned_warmup: dict[str, int] = field(default_factory=dict)
    load_shape: dict[str, LoadShape] = field(default_factory=dict)
    token_sources: dict[str, dict[str, int]] = field(default_factory=dict)
    interrupted: bool = False
    stop_reason: str | None = None


def write_run_meta(plan: RunPlan, state: _RunState, finished: float | None) -> None:
    meta = RunMeta(
        run_id=plan.run_id,
        spectrn_version=__version__,
        started_at=state.started,
        finished_at=finished,
        endpoints={name: redact_url(url) for name, url in plan.endpoints.items()},  # no credentials on disk
        engine=plan.engine,
        config=SpectrnConfig.model_validate(plan.config),
        interrupted=state.interrupted,
        stop_reason=redact(state.stop_reason) if state.stop_reason else None,
        notes=[redact(n) for n in state.notes],
        planned=state.planned,
        load_shape=state.load_shape,
        token_sources=state.token_sources,
        model=plan.params.model,
        api=plan.params.api,
        max_tokens=plan.params.max_tokens,
        ignore_eos=plan.params.ignore_eos,
        levels=[lv.label for lv in plan.levels],
        mode=plan.mode,
        shard=plan.shard,
        shards=plan.shards,
        planned_warmup=state.planned_warmup,
        provenance=plan.provenance or Provenance(),
    )
    folder = RunFolder(plan.out_dir)
    _as_bench_error(folder.file(RUN_JSON), lambda: folder.write_meta(meta))


async def _shape_to_trace(
    session: Any, plan: RunPlan, measured: Sequence[ScheduledRequest], notes: list[str]
) -> list[ScheduledRequest]:
    """Each measured request shaped to its trace row's ``input_tokens`` (rows without one keep their prompt),
    one /tokenize pass per distinct length; the first endpoint's tokenizer speaks for all, as for input_tokens."""
    out = list(measured)
    targets: dict[int, list[int]] = {}
    for k, req in enumerate(out):
        row = _trace_row(plan, req)
        if row is not None and row.input_tokens:
            targets.setdefault(row.input_tokens, []).append(k)
    first = next(iter(plan.endpoints.values()))
    for target, where in sorted(targets.items()):
        shaped, note = await shape_input_lengths(session, first, plan.params.model, [out[k] for k in where], target)
        for k, req in zip(where, shaped, strict=True):
            out[k] = req
        if "ESTIMATED" in note and note not in notes:
            notes.append(note)
    notes.append(f"trace input_tokens: prompts shaped to {len(targets)} distinct length(s)")
    return out


def _load_shape(plan: RunPlan, level: Level, ramp_s: float, why: str) -> LoadShape:
    if level.open_loop:
        return open_loop_shape(
            level,
            shards=plan.shards,
            seed=plan.seed,
            duration_s=plan.duration_s,
            trace=plan.trace,
            trace_file=plan.trace_file,
        )
    streams = level.concurrency or 1
    return LoadShape(
        kind="closed-loop",
        concurrency=streams,
        concurrency_this_shard=max(1, -(-streams // plan.shards)),
        mode=plan.mode,
        ramp_s=round(ramp_s, 6),
        ramp=why,
        start_interval_s=round(ramp_s / streams, 6) if streams > 1 else 0.0,
        first_wave="measured",
        duration_s=plan.duration_s,
    )


def _level_ended(
    plan: RunPlan, level: Level, state: _RunState, sent: dict[str, int], planned: int, took: float
) -> None:
    """A duration run plans an upper bound: record what each endpoint really sent, and say when the schedule
    ran out before the duration (the level was shorter than asked)."""
    if plan.duration_s is None:
        return
    for name in plan.endpoints:
        state.planned.setdefault(name, {})[level.label] = sent.get(name, 0)
    shape = state.load_shape.get(level.label)
    if shape is not None:
        shape.sent = {name: sent.get(name, 0) for name in plan.endpoints}
    if took < plan.duration_s and all(sent.get(name, 0) >= planned for name in plan.endpoints):
        state.notes.append(
            f"level {level.label} ended after all {planned} scheduled request(s) in {took:.3g} s, before "
            f"bench.duration_s {plan.duration_s:g} s: raise bench.requests (--requests) for a longer level"
        )


async def run_bench(
    plan: RunPlan,
    *,
    on_record: OnRecord | None = None,
    input_tokens: int | None = None,
    on_phase: Callable[[str], None] | None = None,
    stop_reason: StopReason | None = None,
) -> RunOutcome:
    """Execute ``plan``; everything observed lands in ``plan.out_dir`` even if the run is interrupted.

    ``stop_reason`` names what cancelled the run (e.g. ``"SIGTERM"``) for ``run.json``."""
    import aiohttp

    if not plan.endpoints:
        raise BenchError("no endpoints to benchmark", hint="pass --endpoint NAME=URL (twice for an A/B run)")
    for name in plan.endpoints:  # endpoint names become file names (metrics/<name>.*.prom, llmperf folders)
        check_name(name, what="endpoint name", source="--endpoint NAME=URL")
    if (plan.out_dir / "requests.jsonl").exists():
        raise BenchError(
            f"{plan.out_dir} already holds a run (requests.jsonl exists)",
            hint="choose another --run-id, or remove the folder",
        )
    ensure_fd_budget(plan)
    state = _RunState(started=wall_now())
    clock_offset = clock.offset()  # the system clock against the monotonic one, to detect a step during the run
    acceptance: dict[str, dict[str, Any] | None] = {}
    phase = on_phase or (lambda _msg: None)
    sink: RecordSink | None = None
    warm, measured = split_schedule(plan.schedule, plan.shard, plan.shards)  # views: nothing copied
    # a conversation plans one request per turn
    n_measured = measured.turn_total() if isinstance(measured, Schedule) else sum(r.turn_count for r in measured)
    n_warm = warm.turn_total() if isinstance(warm, Schedule) else sum(r.turn_count for r in warm)
    state.planned = {name: {lv.label: n_measured for lv in plan.levels} for name in plan.endpoints}
    state.planned_warmup = dict.fromkeys(plan.endpoints, n_warm)
    connector = aiohttp.TCPConnector(limit=0, force_close=False, enable_cleanup_closed=True)
    try:
        async with aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
            auto_decompress=False,
            trace_configs=[request_trace_config()],
        ) as session:
            # Endpoints are checked before anything is written: a run that cannot start leaves no run folder.
            phase("checking endpoints")
            models = {
                n: await _check_endpoint(session, n, u, plan.params.model or None) for n, u in plan.endpoints.items()
            }
            if len(set(models.values())) > 1 and not plan.params.model:
                raise EndpointError(
                    f"endpoints serve different models: {models}", hint="pass --model to choose the one to request"
                )
            if not plan.params.model:
                plan.params = replace(plan.params, model=next(iter(models.values())))
            if plan.provenance is not None:
                plan.provenance = await identify(session, plan.endpoints, models, plan.provenance)
            try:
                plan.out_dir.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise write_error(plan.out_dir, e) from None
            write_run_meta(plan, state, None)
            sink = RecordSink(RunFolder(plan.out_dir), on_record)
            if input_tokens:
                phase(f"shaping prompts to {input_tokens} input tokens")
                first = next(iter(plan.endpoints.values()))
                shaped, note = await shape_input_lengths(
                    session, first, plan.params.model, [*warm, *measured], input_tokens
                )
                state.notes.append(note)
                warm = [r for r in shaped if r.warmup]
                measured = [r for r in shaped if not r.warmup]
            if plan.trace is not None and any(row.input_tokens for row in plan.trace):
                phase("shaping prompts to the trace's input_tokens")
                measured = await _shape_to_trace(session, plan, measured, state.notes)
            urls = {n: endpoint_url(u, plan.params.api) for n, u in plan.endpoints.items()}
            if warm:
                phase(f"warm-up: {len(warm)} request(s) per endpoint")
                c = plan.levels[0].concurrency or 1
                await _together(
                    *(_closed_loop(session, n, u, plan, warm, Level("warmup", c), c, sink) for n, u in urls.items())
                )
            warm_e2e = statistics.median(sink.warm_e2e) if sink.warm_e2e else None
            for level in plan.levels:
                ramp_s, why = closed_loop_ramp(plan, level, warm_e2e) if not level.open_loop else (0.0, "")
                state.load_shape[level.label] = _load_shape(plan, level, ramp_s, why)
                until = f" for at most {plan.duration_s:g} s" if plan.duration_s is not None else ""
                phase(f"level {level.label}: {len(measured)} request(s) per endpoint{until}")
                await _prewarm(session, plan.endpoints, level.concurrency or 1)
                before = await _scrape_all(session, plan, f"{level.label}.before", state.notes)
                sent: dict[str, int] = {}
                t0 = time.monotonic()
                await _run_level(session, plan, urls, measured, level, sink, ramp_s, sent)
                _level_ended(plan, level, state, sent, len(measured), time.monotonic() - t0)
                after = await _scrape_all(session, plan, f"{level.label}.after", state.notes)
                for name in plan.endpoints:
                    acceptance[f"{name}@{level.label}"] = acceptance_delta(before.get(name), after.get(name))
    except BaseException as e:
        state.interrupted = True
        if isinstance(e, asyncio.CancelledError | KeyboardInterrupt):
            state.stop_reason = (stop_reason() if stop_reason else None) or "Ctrl-C or cancelled"
        else:
            state.stop_reason = f"an error: {type(e).__name__}: {e}"
        state.notes.append(f"run interrupted by {state.stop_reason}: records of finished requests are kept")
        raise
    finally:
        if sink is not None:
            failing = state.interrupted
            try:
                sink.close()
                state.token_sources = sink.token_sources
                state.notes.extend(sink.token_notes())
                step = clock.step_note(clock_offset, wall_now() - state.started)
                if step:
                    state.notes.append(step)
                folder = RunFolder(plan.out_dir)
                _as_bench_error(folder.file(ACCEPTANCE), lambda: folder.write_acceptance(acceptance))
                write_run_meta(plan, state, wall_now())
            except BenchError:
                if not failing:  # a run already failing keeps its first error
                    raise
    assert sink is not None  # the session block either opened the sink or raised
    return RunOutcome(plan.out_dir, sink.counts, acceptance, state.interrupted, state.notes)
