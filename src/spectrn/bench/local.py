"""Bench orchestration shared by ``spectrn bench``, ``spectrn loadgen``, ``spectrn demo`` and sweeps.

``plan_from_config`` turns the run spec into a ``RunPlan``; ``execute`` runs it, reporting progress as
events (``spectrn.events``; the CLI shows them), and returns the run folder; ``bench_local`` does the same
around local servers it starts and stops; ``finish`` analyzes it and writes the local outputs (summary,
llmperf-compatible files, EMF metrics, report). Publishing to CloudWatch happens only after everything is on
disk, so a failed publish loses nothing and can be retried with ``spectrn publish``.

A run folder is held (``claim_run_dir``: an exclusive lock on the folder) from before the local servers
start until the run's last file is written, so a second bench with the same run id fails at once instead
of interleaving records. SIGTERM is handled like Ctrl-C: the run stops, ``run.json`` says
``interrupted``, local servers are stopped, and the command exits 143 (``Terminated``).
"""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import Any

from spectrn.configuration.config import SpectrnConfig
from spectrn.errors import BenchError, ConfigError, Interrupted, Terminated, redact_url
from spectrn.events import Emitter, OnEvent
from spectrn.labels import run_id, stamped_id
from spectrn.loadgen.arrivals import read_trace
from spectrn.loadgen.client import RequestParams
from spectrn.loadgen.plan import RunOutcome, RunPlan
from spectrn.loadgen.prompts import BUILTIN_SETS, COMBINED_SETS, build_schedule, split_schedule
from spectrn.loadgen.runner import Level, run_bench
from spectrn.loadgen.sink import write_error
from spectrn.loadgen.workloads import load_workload
from spectrn.names import check_name
from spectrn.names import check_run_id as check_run_id
from spectrn.paths import folder_lock, safe_output_dir
from spectrn.run.summary import Provenance, ServerIdentity, Summary


def new_run_id(cfg: SpectrnConfig, prefix: str = "", *, label: str | None = None) -> str:
    """``<time>-<draft>-k<window>``; ``label`` instead of the draft and window for servers whose setup spectrn
    does not know (endpoints it did not start and whose draft and window nobody declared)."""
    if label is not None:
        return stamped_id(label, prefix=prefix)
    return run_id(cfg.draft_label, cfg.num_speculative_tokens, prefix=prefix)


def levels_from_config(cfg: SpectrnConfig) -> list[Level]:
    """The run's load levels: a trace (one level), open-loop rates, or closed-loop concurrencies
    (``SpectrnConfig`` refuses a run that asks for two of them; docs/load-shapes.md)."""
    b = cfg.bench
    if b.trace is not None:
        return [Level.replay(b.max_in_flight)]
    if b.request_rate is not None:
        return [Level.open(r, b.arrivals, b.burstiness, b.max_in_flight) for r in b.request_rate]
    return [Level.closed(c) for c in b.concurrency]


def plan_from_config(
    cfg: SpectrnConfig,
    endpoints: dict[str, str],
    *,
    run_id: str,
    out_root: Path,
    model: str | None = None,
    prompts: str | None = None,
    shard: int = 0,
    shards: int = 1,
    keep_output: bool = True,
    provenance: Provenance | None = None,
    run_dir: Path | None = None,
    on_event: OnEvent | None = None,
) -> RunPlan:
    """``run_dir``: the run folder itself (``spectrn loadgen --out``); default ``out_root/run_id``. The workload
    is read here, before any server is contacted; its warnings (low-diversity classes) go to ``on_event``."""
    b = cfg.bench
    prompt_set, warnings = load_workload(
        prompts or b.prompts,
        b.workload,
        seed=b.seed,
        what="--prompts-file" if prompts else flag_or_key(cfg, "bench.prompts"),
    )
    for message in warnings:
        Emitter(on_event)("warning", f"warning: {message}")
    trace = read_trace(Path(b.trace), what=flag_or_key(cfg, "bench.trace")) if b.trace is not None else None
    requests = min(b.requests, len(trace)) if trace is not None else b.requests  # a trace row per request
    schedule = build_schedule(
        prompt_set, requests=requests, warmup=b.warmup, seed=b.seed, nonce=run_id if b.nonce else None
    )
    if shards < 1 or not 0 <= shard < shards:
        raise ConfigError(f"--shard-index {shard} is outside 0..{shards - 1}", hint="use 0 <= shard-index < shards")
    params = RequestParams(
        model=model or "",
        api=b.api,
        max_tokens=b.max_tokens,
        temperature=b.temperature,
        ignore_eos=ignore_eos_of(cfg),
        timeout_s=b.timeout_s,
        keep_output=keep_output,
    )
    for name in endpoints:
        check_name(name, what="endpoint name", source="--endpoint NAME=URL")
    # run ids given by users pass check_run_id at the CLI; generated ones (sweep cells) at least name a safe folder
    folder = check_name(run_id, what="run id", source="--run-id", example="20260101-1200")
    out_dir = safe_output_dir(out_root, what="--out-dir") / folder
    if run_dir is not None:
        name = check_name(run_dir.name, what="run folder name", source="--out", example="20260101-1200")
        out_dir = safe_output_dir(run_dir.parent, what="--out") / name
    return RunPlan(
        run_id=run_id,
        out_dir=out_dir,
        endpoints=endpoints,
        schedule=schedule,
        params=params,
        levels=levels_from_config(cfg),
        mode=b.schedule,
        seed=b.seed,
        shard=shard,
        shards=shards,
        config=cfg.model_dump(mode="json"),
        ramp_s=b.ramp_s,
        provenance=provenance or endpoint_provenance(cfg, endpoints),
        duration_s=b.duration_s,
        trace=trace,
        trace_file=b.trace or "",
        trace_first_index=b.warmup,
    )


def ignore_eos_of(cfg: SpectrnConfig) -> bool:
    """``bench.ignore_eos``, or unset its automatic value: on when ``bench.prompts`` names a built-in set, whose
    fixed lengths keep runs comparable with each other and with the published experiment; off for a user's
    prompt file or dataset, whose natural output lengths are part of the workload being measured.

    Decided by ``bench.prompts`` alone, never by ``spectrn loadgen --prompts-file``: the load pod reads even a
    built-in set from a mounted file, and its config still names the set (a user's workload: the mount path)."""
    from spectrn.loadgen.synthetic import SYNTHETIC

    if cfg.bench.ignore_eos is not None:
        return cfg.bench.ignore_eos
    # synthetic lengths are drawn to be the outputs' lengths: only ignore_eos makes them so
    return cfg.bench.prompts in BUILTIN_SETS or cfg.bench.prompts in COMBINED_SETS or cfg.bench.prompts == SYNTHETIC


def flag_or_key(cfg: SpectrnConfig, key: str) -> str:
    """How to name a setting in a message: the flag that gave its value (``--prompts``), else its config key."""
    origin = cfg.origin_of(key)
    return origin.removeprefix("flag ") if origin.startswith("flag ") else key


_HELD: set[Path] = set()


@contextmanager
def claim_run_dir(run_dir: Path) -> Iterator[Path]:
    """Create ``run_dir`` and hold an exclusive lock on it until the block ends (re-entrant in one process).

    A second process claiming the same folder gets a ``BenchError`` at once; a folder that already holds
    a run is refused; a folder this claim created and that is still empty at the end is removed again, so
    a run that could not start leaves nothing behind."""
    key = run_dir.absolute()
    if key in _HELD:
        yield run_dir
        return
    created = not run_dir.exists()
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise write_error(run_dir, e) from None
    if not run_dir.is_dir():
        raise ConfigError(f"run folder {run_dir} exists and is not a folder", hint="choose another --run-id")

    def busy() -> BenchError:
        return BenchError(
            f"run folder {run_dir} is in use by another spectrn process right now (same run id)",
            hint="wait for that bench to finish, or choose another --run-id",
        )

    try:
        with folder_lock(run_dir, busy):
            if (run_dir / "requests.jsonl").exists():
                raise BenchError(
                    f"{run_dir} already holds a run (requests.jsonl exists)",
                    hint="choose another --run-id, or remove the folder",
                )
            _HELD.add(key)
            try:
                yield run_dir
            finally:
                _HELD.discard(key)
    finally:
        if created:
            try:
                run_dir.rmdir()  # only succeeds when nothing was written
            except OSError:
                pass


@contextmanager
def sigterm_raises(what: str) -> Iterator[None]:
    """While the block runs (main thread only), SIGTERM raises ``Terminated`` once, so ``with`` blocks around
    it (local servers, run folder) clean up; a second SIGTERM during that clean-up is ignored."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    fired = False

    def handler(_sig: int, _frame: FrameType | None) -> None:
        nonlocal fired
        if fired:
            return
        fired = True
        raise Terminated(f"stopped by SIGTERM {what}", hint="nothing to clean up: local servers were stopped")

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def execute(plan: RunPlan, cfg: SpectrnConfig, on_event: OnEvent | None = None, *, quiet: bool = False) -> RunOutcome:
    """Run the plan, reporting each endpoint's progress (requests done of planned, errors) and the run's phases
    to ``on_event`` (``quiet``: neither, for 10,000-request runs and pods that only need the result). Ctrl-C or
    SIGTERM stops cleanly and keeps finished records (``run.json`` then says ``interrupted`` and why)."""
    emit = Emitter(None if quiet else on_event)
    warm, measured = split_schedule(plan.schedule, plan.shard, plan.shards)
    per_ep = len(measured) * len(plan.levels)
    total = per_ep + len(warm)
    done: dict[str, int] = dict.fromkeys(plan.endpoints, 0)
    errors: dict[str, int] = dict.fromkeys(plan.endpoints, 0)
    stopped: list[str] = []

    def show(name: str) -> None:
        emit.progress(
            f"{plan.run_id}/{name}", name, completed=done[name], total=total, unit="requests", group=plan.run_id,
            errors=errors[name],
        )  # fmt: skip

    def on_record(rec: Any) -> None:
        if rec.variant in done:
            done[rec.variant] += 1
            if not rec.ok:
                errors[rec.variant] += 1
            show(rec.variant)

    def on_phase(msg: str) -> None:
        emit("detail", msg)

    async def main() -> RunOutcome:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        previous = signal.getsignal(signal.SIGTERM)
        watching = threading.current_thread() is threading.main_thread() and task is not None

        def on_sigterm() -> None:
            if not stopped:
                stopped.append("SIGTERM")
                assert task is not None
                task.cancel()

        if watching:
            loop.add_signal_handler(signal.SIGTERM, on_sigterm)
        try:
            return await run_bench(
                plan,
                on_record=on_record if emit else None,
                input_tokens=cfg.bench.input_tokens,
                on_phase=on_phase,
                stop_reason=lambda: stopped[0] if stopped else None,
            )
        finally:
            if watching:
                loop.remove_signal_handler(signal.SIGTERM)
                signal.signal(signal.SIGTERM, previous)

    where = f"finished requests are kept in {plan.out_dir}"
    fix = f"analyze them with `spectrn analyze {plan.out_dir}`"
    with claim_run_dir(plan.out_dir):
        try:
            for name in plan.endpoints:
                show(name)
            return asyncio.run(main())
        except KeyboardInterrupt:
            raise Interrupted(f"stopped by the user; {where}", hint=fix) from None
        except asyncio.CancelledError:
            if stopped:
                raise Terminated(f"stopped by SIGTERM; {where}", hint=fix) from None
            raise


def local_runtime(cfg: SpectrnConfig, runtime: str, work_dir: Path, time_scale: float | None) -> Any:
    """The local server pair for ``bench --local`` (not started yet: use it as a context manager)."""
    if time_scale is not None and not 0 < time_scale <= 100:
        raise ConfigError(f"--time-scale {time_scale:g} is outside (0, 100]", hint="e.g. --time-scale 0.25 (4x faster)")
    if runtime == "sim":
        from spectrn.runtimes.sim_pair import SimPair

        return SimPair(cfg, work_dir, time_scale=time_scale)
    if runtime == "vllm-cpu":
        from spectrn.runtimes.vllm_cpu import VllmCpuPair

        return VllmCpuPair(work_dir, num_speculative_tokens=min(cfg.num_speculative_tokens, 8))
    raise ConfigError(f"--runtime {runtime!r} is not a local runtime", hint="use --runtime sim or --runtime vllm-cpu")


def bench_local(
    cfg: SpectrnConfig,
    endpoints: dict[str, str],
    runtime: str,
    run_id: str,
    out_root: Path,
    model: str | None,
    time_scale: float | None,
    on_event: OnEvent | None = None,
    *,
    declared: bool = False,
) -> Path:
    """``spectrn bench --local``: against ``endpoints``, or against a local server pair started (and always
    stopped) here. Every input is checked before a server starts or a file is written. ``declared``: the user
    named the endpoints' draft and window (--draft/--window)."""
    if endpoints:
        if time_scale is not None and not 0 < time_scale <= 100:
            raise ConfigError(f"--time-scale {time_scale:g} is outside (0, 100]", hint="the --time-scale the "
                              "servers were started with, e.g. 0.25")  # fmt: skip
        # no server says its time scale (a real one runs in real time): a simulator's is what the user declares
        prov = endpoint_provenance(cfg, endpoints, declared=declared, time_scale=time_scale or 1.0)
        plan = plan_from_config(
            cfg, endpoints, run_id=run_id, out_root=out_root, model=model, provenance=prov, on_event=on_event
        )
        return execute(plan, cfg, on_event).run_dir
    pair = local_runtime(cfg, runtime, out_root / run_id / "servers", time_scale)  # checks, starts nothing
    plan = plan_from_config(cfg, {}, run_id=run_id, out_root=out_root, model=model, on_event=on_event)
    with sigterm_raises("while the local servers were starting or stopping"), claim_run_dir(plan.out_dir):
        with pair:
            Emitter(on_event)("detail", f"{runtime} servers: {pair.endpoints}", endpoints=dict(pair.endpoints))
            plan.endpoints = dict(pair.endpoints)
            plan.params = replace(plan.params, model=model or pair.model)
            plan.provenance = endpoint_provenance(
                cfg, plan.endpoints, runtime=runtime, started=True, profile=getattr(pair, "profile", None),
                time_scale=getattr(pair, "time_scale", 1.0) if runtime == "sim" else 1.0,
                draft="tiny draft model" if runtime == "vllm-cpu" else None,
                window=getattr(pair, "num_speculative_tokens", None) if runtime == "vllm-cpu" else None,
            )  # fmt: skip
            return execute(plan, cfg, on_event).run_dir


def require_successes(summary: Summary, run_dir: Path) -> None:
    """A variant without a single successful request is a failed run (exit 4), not a result."""
    failed = sorted({v for lv in summary.levels for v, vs in lv.variants.items() if not vs.requests.completed})
    if failed:
        raise BenchError(
            f"no successful request on {', '.join(failed)}; every record and the summary are in {run_dir}",
            hint="read the error examples above (or requests.jsonl) and fix the server or the request settings",
        )


def endpoint_provenance(
    cfg: SpectrnConfig,
    endpoints: dict[str, str],
    *,
    runtime: str = "endpoints",
    started: bool = False,
    profile: str | None = None,
    time_scale: float = 1.0,
    declared: bool = False,
    draft: str | None = None,
    window: int | None = None,
) -> Provenance:
    """What a run's servers are, as far as the configuration says (the load generator adds what they expose,
    ``spectrn.loadgen.identity``).

    Draft and window come from the config for servers spectrn started itself, or when the user declared them
    (``declared``: ``--draft``/``--window`` on a run against endpoints); otherwise they are ``unknown`` until the
    servers tell (``spectrn.loadgen.identity``). ``draft`` / ``window``: what a started runtime really serves when
    the config does not say (vllm-cpu).
    """
    from spectrn.dialects import semantics_of, semantics_of_profile

    semantics = semantics_of_profile(profile) if profile else semantics_of(cfg.vllm_dialect, cfg.plugin_release)
    known = started or declared
    neuron = cfg.runtime == "neuron" and runtime in ("endpoints", "cluster")
    servers = {}
    for name, url in endpoints.items():
        spec = name != "baseline"
        servers[name] = ServerIdentity(
            url=redact_url(url),
            profile=profile,
            draft=(draft or (cfg.draft if cfg.uses_draft_model else cfg.speculation_mode)) if spec and known else None,
            window=(window or cfg.num_speculative_tokens) if spec and known else None,
            window_semantics=semantics if spec else None,
            source="config" if started else "declared" if declared else "unknown",
            # a Neuron server's command line is the config's (spectrn render/deploy); local servers run their own
            scheduling=cfg.dialect.scheduling_mode(cfg, spec) if neuron else None,
        )
    return Provenance(
        runtime=runtime, started_by_spectrn=started, profile=profile, time_scale=time_scale, servers=servers,
        instance_type=cfg.instance_type,
    )  # fmt: skip
