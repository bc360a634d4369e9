"""A benchmark run: the same request schedule against every endpoint, records streamed to disk.

Order of a run, per endpoint set:
    reachability + model check -> input-length shaping (/tokenize) -> warm-up (recorded, flagged) ->
    for each load level: scrape /metrics -> measured requests -> scrape /metrics -> acceptance deltas

Load shapes: closed-loop concurrency (``C`` workers per endpoint pulling the schedule in order) or
open-loop Poisson arrivals (the same seeded arrival times for every endpoint). Endpoints run
``simultaneous`` (as the published experiment: both loaded at once) or ``interleaved`` (blocks of ``C``
requests alternate A, B, A, B, so slow drift in the environment hits both alike).

Every finished request is appended to ``requests.jsonl`` at once and then dropped from memory, so an
interrupted or killed run keeps everything that finished and memory stays flat for long runs.
"""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spectrn import __version__
from spectrn.errors import BenchError, EndpointError, redact
from spectrn.loadgen.client import RequestParams, endpoint_url, request_trace_config, run_request
from spectrn.loadgen.metrics import acceptance_delta, parse_metrics, scrape
from spectrn.loadgen.prompts import ScheduledRequest
from spectrn.paths import atomic_write_text
from spectrn.run.records import RequestRecord, RunMeta
from spectrn.run.summary import Provenance
from spectrn.spec.config import SpectrnConfig

OnRecord = Callable[[RequestRecord], None]


@dataclass(frozen=True)
class Level:
    label: str
    concurrency: int | None = None
    rate: float | None = None

    @staticmethod
    def closed(c: int) -> Level:
        return Level(f"c{c}", concurrency=c)

    @staticmethod
    def poisson(rate: float, max_in_flight: int = 1024) -> Level:
        return Level(f"r{rate:g}", rate=rate, concurrency=max_in_flight)


@dataclass
class RunPlan:
    run_id: str
    out_dir: Path
    endpoints: dict[str, str]
    schedule: list[ScheduledRequest]
    params: RequestParams
    levels: list[Level]
    mode: str = "simultaneous"
    seed: int = 0
    shard: int = 0
    shards: int = 1
    config: dict[str, Any] = field(default_factory=dict)
    engine: str = "spectrn"
    ramp_s: float = 0.0
    provenance: Provenance | None = None


@dataclass
class RunOutcome:
    run_dir: Path
    counts: dict[str, dict[str, int]]
    acceptance: dict[str, dict[str, Any] | None]
    interrupted: bool
    notes: list[str]


class RecordSink:
    """Appends each record as one JSON line and flushes, so a killed process loses at most one line."""

    def __init__(self, path: Path, on_record: OnRecord | None) -> None:
        self._f = path.open("a", encoding="utf-8")
        self._on_record = on_record
        self.counts: dict[str, dict[str, int]] = {}

    def add(self, rec: RequestRecord) -> None:
        self._f.write(rec.model_dump_json(exclude_none=True) + "\n")
        self._f.flush()
        c = self.counts.setdefault(rec.variant, {"completed": 0, "errors": 0, "warmup": 0})
        if rec.warmup:
            c["warmup"] += 1
        elif rec.ok:
            c["completed"] += 1
        else:
            c["errors"] += 1
        if self._on_record:
            self._on_record(rec)

    def close(self) -> None:
        self._f.close()


async def _check_endpoint(session: Any, name: str, base_url: str, model: str | None) -> str:
    """Confirm the endpoint answers /v1/models; return the model to use."""
    import aiohttp

    root = base_url.rstrip("/").removesuffix("/v1")
    url = root + "/v1/models"
    try:
        # vLLM answers /v1/models while its engine is still loading or compiling; /health tells the truth.
        # A server without /health (404, other OpenAI-compatible servers) is judged by /v1/models alone.
        async with session.get(root + "/health", timeout=aiohttp.ClientTimeout(total=15)) as resp:
            if resp.status >= 500:
                raise EndpointError(
                    f"endpoint {name} ({base_url}) is not ready: /health answered HTTP {resp.status}",
                    hint="wait until `curl <url>/health` answers 200 (a Neuron server may still be compiling; "
                    "`spectrn status` shows progress)",
                )
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=15)) as resp:
            if resp.status != 200:
                raise EndpointError(
                    f"endpoint {name} ({base_url}) answered HTTP {resp.status} on /v1/models",
                    hint="check the URL points at a vLLM OpenAI server and that it has finished starting",
                )
            data = await resp.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError) as e:
        raise EndpointError(
            f"endpoint {name} ({base_url}) is unreachable: {type(e).__name__}: {e}",
            hint="check the URL and that the server is running (`spectrn status`, or `curl <url>/health`)",
        ) from None
    served = [m.get("id") for m in (data.get("data") or []) if isinstance(m, dict)]
    if model:
        if served and model not in served:
            raise EndpointError(
                f"endpoint {name} serves {', '.join(map(str, served))}, not model {model!r}",
                hint="pass --model with one of those names",
            )
        return model
    if not served:
        raise EndpointError(f"endpoint {name} lists no models on /v1/models", hint="pass --model explicitly")
    return str(served[0])


async def shape_input_lengths(
    session: Any, base_url: str, model: str, schedule: list[ScheduledRequest], target: int
) -> tuple[list[ScheduledRequest], str]:
    """Pad or trim each distinct prompt to ``target`` tokens using the server's /tokenize.

    Padding repeats the prompt's own text (it keeps its structure); trimming drops trailing words. When
    /tokenize is unavailable the length is estimated at 4 characters per token, and the note says so.
    """
    import aiohttp

    root = base_url.rstrip("/").removesuffix("/v1")
    cache: dict[str, str] = {}
    estimated = False

    async def count(text: str) -> int | None:
        try:
            async with session.post(
                f"{root}/tokenize",
                json={"model": model, "prompt": text, "add_special_tokens": False},
                timeout=aiohttp.ClientTimeout(total=15),
            ) as resp:
                if resp.status != 200:
                    return None
                data = await resp.json(content_type=None)
                return int(data.get("count", len(data.get("tokens", []))))
        except (aiohttp.ClientError, TimeoutError, ValueError, TypeError):
            return None

    async def fit(text: str) -> str:
        nonlocal estimated
        words = text.split(" ")
        pool = list(words)
        while len(pool) < 8 * target + 8:
            pool.extend(words)
        lo, hi = 1, len(pool)
        first = await count(" ".join(pool[: min(hi, 4 * target)]))
        if first is None:
            estimated = True
            out = " ".join(pool)
            return out[: 4 * target]
        while lo < hi:  # smallest word count whose token count >= target
            mid = (lo + hi) // 2
            n = await count(" ".join(pool[:mid]))
            if n is None:
                estimated = True
                return " ".join(pool)[: 4 * target]
            if n >= target:
                hi = mid
            else:
                lo = mid + 1
        return " ".join(pool[:lo])

    out = []
    for req in schedule:
        if req.text not in cache:
            cache[req.text] = await fit(req.text)
        out.append(ScheduledRequest(req.index, req.prompt_id, req.prompt_class, cache[req.text], req.warmup))
    note = (
        f"input length {target} tokens ESTIMATED at 4 characters/token: the server has no usable /tokenize"
        if estimated
        else f"input length shaped to {target} tokens with the server's /tokenize"
    )
    return out, note


def poisson_offsets(n: int, rate: float, seed: int) -> list[float]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(n):
        t += rng.expovariate(rate)
        out.append(t)
    return out


async def _send(session: Any, name: str, url: str, plan: RunPlan, req: ScheduledRequest, level: Level) -> RequestRecord:
    return await run_request(
        session,
        url,
        plan.params,
        req.text,
        variant=name,
        index=req.index,
        prompt_id=req.prompt_id,
        prompt_class=req.prompt_class,
        level=level.label,
        warmup=req.warmup,
        shard=plan.shard,
    )


async def _closed_loop(
    session: Any,
    name: str,
    url: str,
    plan: RunPlan,
    items: Sequence[ScheduledRequest],
    level: Level,
    concurrency: int,
    sink: RecordSink,
) -> None:
    it = iter(items)
    workers = max(1, min(concurrency, len(items)))

    async def worker(k: int) -> None:
        if plan.ramp_s > 0:
            await asyncio.sleep(plan.ramp_s * k / workers)
        for req in it:
            rec = await _send(session, name, url, plan, req, level)
            # Let streams whose bytes are already here time-stamp them before this worker spends CPU on
            # writing its record and launching the next request (closed-loop waves end together).
            await asyncio.sleep(0)
            sink.add(rec)

    await asyncio.gather(*(worker(k) for k in range(workers)))


async def _open_loop(
    session: Any,
    name: str,
    url: str,
    plan: RunPlan,
    items: Sequence[ScheduledRequest],
    level: Level,
    offsets: list[float],
    t_start: float,
    sink: RecordSink,
) -> None:
    limit = asyncio.Semaphore(level.concurrency or 1024)
    loop = asyncio.get_running_loop()

    async def one(req: ScheduledRequest, at: float) -> None:
        delay = t_start + at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        async with limit:
            rec = await _send(session, name, url, plan, req, level)
        await asyncio.sleep(0)
        sink.add(rec)

    await asyncio.gather(*(one(r, at) for r, at in zip(items, offsets, strict=True)))


async def _run_level(
    session: Any,
    plan: RunPlan,
    urls: dict[str, str],
    items: list[ScheduledRequest],
    level: Level,
    sink: RecordSink,
) -> None:
    if not items:
        return
    if level.rate is not None:
        offsets = poisson_offsets(len(items), level.rate / plan.shards, plan.seed)
        t_start = asyncio.get_running_loop().time() + 0.05
        await asyncio.gather(
            *(_open_loop(session, n, u, plan, items, level, offsets, t_start, sink) for n, u in urls.items())
        )
        return
    concurrency = max(1, -(-(level.concurrency or 1) // plan.shards))
    if plan.mode == "interleaved":
        for start in range(0, len(items), concurrency):
            block = items[start : start + concurrency]
            for name, url in urls.items():
                await _closed_loop(session, name, url, plan, block, level, concurrency, sink)
        return
    await asyncio.gather(*(_closed_loop(session, n, u, plan, items, level, concurrency, sink) for n, u in urls.items()))


async def _prewarm(session: Any, endpoints: dict[str, str], connections: int) -> None:
    """Open ``connections`` keep-alive connections per endpoint before a level starts, so that the burst
    of a closed-loop start does not charge TCP set-up to the first requests' TTFT."""
    import aiohttp

    async def one(url: str) -> None:
        try:
            async with session.get(url, timeout=aiohttp.ClientTimeout(total=10)) as resp:
                await resp.read()
        except (aiohttp.ClientError, TimeoutError):
            pass

    n = min(connections, 512)
    await asyncio.gather(
        *(one(base.rstrip("/").removesuffix("/v1") + "/v1/models") for base in endpoints.values() for _ in range(n))
    )


async def _scrape_all(session: Any, plan: RunPlan, tag: str, notes: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    mdir = plan.out_dir / "metrics"
    mdir.mkdir(exist_ok=True)
    for name, base in plan.endpoints.items():
        text, problem = await scrape(session, base)
        if text is None:
            notes.append(f"{name}: {problem}; acceptance not reported")
            out[name] = None
            continue
        (mdir / f"{name}.{tag}.prom").write_text(text, encoding="utf-8")
        snap = parse_metrics(text)
        for p in snap.problems:
            notes.append(f"{name}: {p}; acceptance not reported")
        out[name] = None if snap.problems else snap
    return out


def write_run_meta(plan: RunPlan, started: float, finished: float | None, interrupted: bool, notes: list[str]) -> None:
    meta = RunMeta(
        run_id=plan.run_id,
        spectrn_version=__version__,
        started_at=started,
        finished_at=finished,
        endpoints={name: redact(url) for name, url in plan.endpoints.items()},  # no credentials on disk
        engine=plan.engine,
        config=SpectrnConfig.model_validate(plan.config),
        interrupted=interrupted,
        notes=notes,
        model=plan.params.model,
        api=plan.params.api,
        max_tokens=plan.params.max_tokens,
        levels=[lv.label for lv in plan.levels],
        mode=plan.mode,
        shard=plan.shard,
        shards=plan.shards,
        planned_requests={
            lv.label: sum(1 for r in plan.schedule if not r.warmup and r.index % plan.shards == plan.shard)
            for lv in plan.levels
        },
        provenance=plan.provenance or Provenance(),
    )
    atomic_write_text(plan.out_dir / "run.json", meta.model_dump_json(indent=2))


async def run_bench(
    plan: RunPlan,
    *,
    on_record: OnRecord | None = None,
    input_tokens: int | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> RunOutcome:
    """Execute ``plan``; everything observed lands in ``plan.out_dir`` even if the run is interrupted."""
    import aiohttp

    if not plan.endpoints:
        raise BenchError("no endpoints to benchmark", hint="pass --endpoint NAME=URL (twice for an A/B run)")
    if (plan.out_dir / "requests.jsonl").exists():
        raise BenchError(
            f"{plan.out_dir} already holds a run (requests.jsonl exists)",
            hint="choose another --run-id, or remove the folder",
        )
    started = time.time()
    notes: list[str] = []
    acceptance: dict[str, dict[str, Any] | None] = {}
    interrupted = False
    phase = on_phase or (lambda _msg: None)
    sink: RecordSink | None = None
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
                plan.params = RequestParams(**{**plan.params.__dict__, "model": next(iter(models.values()))})
            plan.out_dir.mkdir(parents=True, exist_ok=True)
            write_run_meta(plan, started, None, False, notes)
            sink = RecordSink(plan.out_dir / "requests.jsonl", on_record)
            schedule = [r for r in plan.schedule if r.index % plan.shards == plan.shard]
            if input_tokens:
                phase(f"shaping prompts to {input_tokens} input tokens")
                first = next(iter(plan.endpoints.values()))
                schedule, note = await shape_input_lengths(session, first, plan.params.model, schedule, input_tokens)
                notes.append(note)
            urls = {n: endpoint_url(u, plan.params.api) for n, u in plan.endpoints.items()}
            warm = [r for r in schedule if r.warmup]
            measured = [r for r in schedule if not r.warmup]
            if warm:
                phase(f"warm-up: {len(warm)} request(s) per endpoint")
                c = plan.levels[0].concurrency or 1
                await asyncio.gather(
                    *(_closed_loop(session, n, u, plan, warm, Level("warmup", c), c, sink) for n, u in urls.items())
                )
            for level in plan.levels:
                phase(f"level {level.label}: {len(measured)} request(s) per endpoint")
                await _prewarm(session, plan.endpoints, level.concurrency or 1)
                before = await _scrape_all(session, plan, f"{level.label}.before", notes)
                await _run_level(session, plan, urls, measured, level, sink)
                after = await _scrape_all(session, plan, f"{level.label}.after", notes)
                for name in plan.endpoints:
                    acceptance[f"{name}@{level.label}"] = acceptance_delta(before.get(name), after.get(name))
    except (asyncio.CancelledError, KeyboardInterrupt):
        interrupted = True
        notes.append("run interrupted: records of finished requests are kept")
        raise
    finally:
        if sink is not None:
            sink.close()
            atomic_write_text(plan.out_dir / "acceptance.json", json.dumps(acceptance, indent=2))
            write_run_meta(plan, started, time.time(), interrupted, notes)
    assert sink is not None  # the session block either opened the sink or raised
    return RunOutcome(plan.out_dir, sink.counts, acceptance, interrupted, notes)
