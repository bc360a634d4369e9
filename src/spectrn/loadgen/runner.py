"""A benchmark run: the same request schedule against every endpoint, records streamed to disk.

Order of a run, per endpoint set:
    reachability + model check -> input-length shaping (/tokenize) -> warm-up (recorded, flagged) ->
    for each load level: scrape /metrics -> measured requests -> scrape /metrics -> acceptance deltas

The checks and shaping are ``loadgen/prepare.py``, the load shapes ``loadgen/schedulers.py``, the records'
file ``loadgen/sink.py``. However a run stops (Ctrl-C, SIGTERM, an error), ``run.json`` says ``interrupted``
and why; everything that finished is kept.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

from spectrn import __version__
from spectrn.configuration.config import SpectrnConfig
from spectrn.errors import BenchError, EndpointError, redact, redact_url
from spectrn.loadgen import clock
from spectrn.loadgen.arrivals import Level as Level  # re-exported: the runner's callers name levels
from spectrn.loadgen.arrivals import open_loop_shape
from spectrn.loadgen.arrivals import poisson_arrivals as poisson_arrivals  # re-exported: older imports
from spectrn.loadgen.client import endpoint_url, request_trace_config
from spectrn.loadgen.clock import wall_now
from spectrn.loadgen.identity import identify
from spectrn.loadgen.metrics import acceptance_delta, parse_metrics, scrape
from spectrn.loadgen.plan import RunOutcome, RunPlan
from spectrn.loadgen.prepare import _check_endpoint, _shape_to_trace, shape_input_lengths
from spectrn.loadgen.prompts import Schedule, split_schedule
from spectrn.loadgen.schedulers import _closed_loop, _run_level, _together, closed_loop_ramp
from spectrn.loadgen.sink import OnRecord, RecordSink, _as_bench_error, ensure_fd_budget, write_error
from spectrn.names import check_name
from spectrn.run.folder import ACCEPTANCE, METRICS, RUN_JSON, RunFolder
from spectrn.run.load_shape import LoadShape
from spectrn.run.records import RunMeta
from spectrn.run.summary import Provenance

StopReason = Callable[[], str | None]


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
