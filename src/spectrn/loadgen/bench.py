"""Bench orchestration shared by ``spectrn bench``, ``spectrn loadgen``, ``spectrn demo`` and sweeps.

``plan_from_config`` turns the run spec into a ``RunPlan``; ``execute`` runs it with a rich progress view
(or none, in the pod) and returns the run folder; ``spectrn.finish.finish`` then writes every local output.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

from rich.console import Console

from spectrn.errors import BenchError, ConfigError, Interrupted, redact
from spectrn.loadgen.client import RequestParams
from spectrn.loadgen.prompts import build_schedule, load_prompt_set
from spectrn.loadgen.runner import Level, RunOutcome, RunPlan, run_bench
from spectrn.paths import safe_output_dir
from spectrn.run.summary import Provenance, ServerIdentity, Summary
from spectrn.spec.config import SpectrnConfig

RUN_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


def new_run_id(cfg: SpectrnConfig, prefix: str = "") -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    draft = cfg.draft.replace(".", "p") if cfg.uses_draft_model else "medusa"
    return f"{prefix}{stamp}-{draft}-k{cfg.num_speculative_tokens}"


def check_run_id(run_id: str) -> str:
    if not RUN_ID_RE.fullmatch(run_id) or ".." in run_id:
        raise ConfigError(
            f"--run-id {run_id!r} is not a safe folder name",
            hint="use letters, digits, '.', '_' and '-' only (at most 128 characters)",
        )
    return run_id


def levels_from_config(cfg: SpectrnConfig) -> list[Level]:
    if cfg.bench.request_rate is not None:
        return [Level.poisson(cfg.bench.request_rate)]
    return [Level.closed(c) for c in cfg.bench.concurrency]


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
) -> RunPlan:
    b = cfg.bench
    prompt_set = load_prompt_set(prompts or b.prompts)
    schedule = build_schedule(
        prompt_set, requests=b.requests, warmup=b.warmup, seed=b.seed, nonce=run_id if b.nonce else None
    )
    if shards < 1 or not 0 <= shard < shards:
        raise ConfigError(f"--shard-index {shard} is outside 0..{shards - 1}", hint="use 0 <= shard-index < shards")
    params = RequestParams(
        model=model or "",
        api=b.api,
        max_tokens=b.max_tokens,
        temperature=b.temperature,
        timeout_s=b.timeout_s,
        keep_output=keep_output,
    )
    out_dir = safe_output_dir(out_root, what="--out-dir") / check_run_id(run_id)
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
    )


def endpoint_provenance(
    cfg: SpectrnConfig,
    endpoints: dict[str, str],
    *,
    runtime: str = "endpoints",
    started: bool = False,
    profile: str | None = None,
    time_scale: float = 1.0,
) -> Provenance:
    """What a run's servers are, as far as the configuration says (the load generator adds what they expose).

    Draft and window come from the config only for servers spectrn started itself; for other endpoints they
    are ``unknown`` until the servers tell (metrics labels, /v1/models) or the user passes --draft/--window.
    """
    from spectrn.windows import for_dialect, for_profile

    semantics = for_profile(profile) if profile else for_dialect(cfg.vllm_dialect)
    servers = {}
    for name, url in endpoints.items():
        spec = name != "baseline"
        servers[name] = ServerIdentity(
            url=redact(url),
            profile=profile,
            draft=(cfg.draft if cfg.uses_draft_model else cfg.speculation_mode) if spec and started else None,
            window=cfg.num_speculative_tokens if spec and started else None,
            window_semantics=semantics if spec else None,
            source="config" if started else "unknown",
        )
    return Provenance(
        runtime=runtime, started_by_spectrn=started, profile=profile, time_scale=time_scale, servers=servers,
        instance_type=cfg.instance_type,
    )  # fmt: skip


def execute(plan: RunPlan, cfg: SpectrnConfig, console: Console | None, *, quiet: bool = False) -> RunOutcome:
    """Run the plan with a progress bar per endpoint; Ctrl-C stops cleanly and keeps finished records."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = console or Console(stderr=True)
    per_ep = sum(1 for r in plan.schedule if not r.warmup and r.index % plan.shards == plan.shard) * len(plan.levels)
    warm = sum(1 for r in plan.schedule if r.warmup and r.index % plan.shards == plan.shard)
    progress = Progress(
        TextColumn("{task.description:<12}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[errs]}"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
        transient=False,
    )
    tasks = {n: progress.add_task(n, total=per_ep + warm, errs="") for n in plan.endpoints}
    errors: dict[str, int] = dict.fromkeys(plan.endpoints, 0)

    def on_record(rec: Any) -> None:
        if rec.variant in tasks:
            if not rec.ok:
                errors[rec.variant] += 1
            progress.update(
                tasks[rec.variant],
                advance=1,
                errs=f"[red]{errors[rec.variant]} errors[/]" if errors[rec.variant] else "",
            )

    def on_phase(msg: str) -> None:
        if not quiet:
            progress.console.print(f"[dim]{msg}[/]")

    try:
        with progress:
            return asyncio.run(
                run_bench(plan, on_record=on_record, input_tokens=cfg.bench.input_tokens, on_phase=on_phase)
            )
    except KeyboardInterrupt:
        raise Interrupted(
            f"stopped by the user; finished requests are kept in {plan.out_dir}",
            hint=f"analyse them with `spectrn analyze {plan.out_dir}`",
        ) from None


def require_successes(summary: Summary, run_dir: Path) -> None:
    """A variant without a single successful request is a failed run (exit 4), not a result."""
    failed = sorted({v for lv in summary.levels for v, vs in lv.variants.items() if not vs.requests.completed})
    if failed:
        raise BenchError(
            f"no successful request on {', '.join(failed)}; every record and the summary are in {run_dir}",
            hint="read the error examples above (or requests.jsonl) and fix the server or the request settings",
        )
