"""``spectrn sweep`` (draft x window x load, or --predict) and ``spectrn compile`` (precompile Jobs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from spectrn.cli.common import (
    ArrivalsOpt,
    BurstinessOpt,
    ConfigOpt,
    ContextOpt,
    DurationOpt,
    KubeconfigOpt,
    KubeNamespaceOpt,
    MaxInFlightOpt,
    Output,
    OutputOpt,
    SetOpt,
    SloOpt,
    config_from_cli,
    connect_cluster,
    err_console,
    levels_flag,
    print_document,
    rates_flag,
    shape_flags,
    slo_flag,
)
from spectrn.errors import ConfigError
from spectrn.labels import setup_label

# this module's commands; spectrn.cli.main adds them to the app
commands = typer.Typer()

DraftsOpt = Annotated[
    str | None,
    typer.Option(
        "--drafts", metavar="MODEL,MODEL", help="Comma-separated draft model keys (default: the config's draft)."
    ),
]
WindowsOpt = Annotated[
    str | None,
    typer.Option("--windows", metavar="5,7,10", help="Comma-separated windows (default: the config's window)."),
]


def _grid_flags(cfg: Any, drafts: str | None, windows: str | None) -> tuple[list[str], list[int]]:
    from spectrn.sweep.grid import parse_list

    d = parse_list(drafts, "--drafts", str) or [cfg.draft]
    w = parse_list(windows, "--windows", int) or [cfg.num_speculative_tokens]
    return d, w


@commands.command("sweep")
def sweep(
    drafts: DraftsOpt = None,
    windows: WindowsOpt = None,
    concurrency: Annotated[
        str | None,
        typer.Option("--concurrency", metavar="1,4,16", help="Closed-loop load levels (one cell each)."),
    ] = None,
    rate: Annotated[
        str | None,
        typer.Option("--rate", metavar="1,2,4", help="Open-loop rates, req/s per endpoint (one cell per rate)."),
    ] = None,
    duration: DurationOpt = None,
    arrivals: ArrivalsOpt = None,
    burstiness: BurstinessOpt = None,
    max_in_flight: MaxInFlightOpt = None,
    slo: SloOpt = None,
    prompts: Annotated[
        str | None,
        typer.Option(
            "--prompts",
            metavar="SET|FILE",
            help="Prompt set: structured, open, sample, all, or a file or saved dataset (docs/workloads.md).",
        ),
    ] = None,
    local: Annotated[
        bool, typer.Option("--local", help="Run on local simulator processes instead of the cluster.")
    ] = False,
    runtime: Annotated[
        str,
        typer.Option(
            "--runtime",
            metavar="sim|vllm-cpu",
            help="With --local: sim (simulator) or vllm-cpu (real vLLM on CPU, windows only).",
        ),
    ] = "sim",
    predict: Annotated[
        bool,
        typer.Option(
            "--predict", help="Measure only the largest window per draft, predict the rest, confirm the optimum."
        ),
    ] = False,
    mix: Annotated[
        str | None,
        typer.Option(
            "--mix",
            metavar="CLASS=WEIGHT,...",
            help="Prompt-class weights of your traffic, e.g. structured=0.7,open=0.3.",
        ),
    ] = None,
    sweep_id: Annotated[
        str | None,
        typer.Option("--sweep-id", metavar="ID", help="Sweep id (folder under --out-dir); default: a time stamp."),
    ] = None,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue an existing sweep: finished cells are skipped.")
    ] = False,
    time_scale: Annotated[
        float | None,
        typer.Option("--time-scale", metavar="X", help="Simulator time scale with --local (0.1 = 10x faster)."),
    ] = None,
    requests: Annotated[
        int | None, typer.Option("--requests", metavar="N", help="Measured requests per endpoint and cell.")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option("--max-tokens", metavar="N", help="Output tokens per request.")
    ] = None,
    min_gain: Annotated[
        float,
        typer.Option(
            "--min-gain", metavar="X", min=0.0, help="Smallest speedup over 1 that counts as a meaningful gain."
        ),
    ] = 0.05,
    objective: Annotated[
        str | None,
        typer.Option(
            "--objective",
            metavar="cost|capacity|tpot|e2e[:pNN]",
            help="Rank configurations by $/M output tokens at the SLO, capacity at the SLO, TPOT p50 speedup or "
            "e2e at a percentile (e2e:p99; default p90). Default: cost when SLOs are set, else tpot (docs/sweeps.md).",
        ),
    ] = None,
    quiet: Annotated[
        bool, typer.Option("--quiet", help="No per-request progress (each cell is still announced).")
    ] = False,
    report: Annotated[bool, typer.Option("--report/--no-report", help="Write sweep.md and report/index.html.")] = True,
    out_dir: Annotated[
        Path, typer.Option("--out-dir", metavar="DIR", help="Results root; the sweep goes to OUT_DIR/SWEEP_ID.")
    ] = Path("results"),
    output: OutputOpt = Output.table,
    twin: Annotated[
        Path | None,
        typer.Option(
            "--twin",
            metavar="FILE",
            help="With --local: serve this twin (spectrn twin calibrate) instead of a preset; its batch limit, "
            "context limit, profile and draft are the defaults.",
        ),
    ] = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
    context: ContextOpt = None,
    kubeconfig: KubeconfigOpt = None,
    namespace: KubeNamespaceOpt = None,
) -> None:
    """Find the best draft and window for your prompts: run every cell against the shared baseline (resumable),
    recommend per prompt class and for your mix, find the load crossover, check output equivalence."""
    from spectrn.cli.progress import EventView
    from spectrn.cli.show import print_sweep_analysis, say
    from spectrn.sweep.grid import check_sweep_id, new_sweep_id
    from spectrn.sweep.objective import parse_objective
    from spectrn.sweep.orchestrate import Sweep, SweepOptions
    from spectrn.sweep.recommend import parse_mix
    from spectrn.sweep.runners import local_runner

    parse_objective(objective)  # a bad --objective stops the command before anything runs

    console = err_console()
    flags: dict[str, Any] = {
        "bench__prompts": prompts,
        "bench__concurrency": levels_flag(concurrency),
        "bench__request_rate": rates_flag(rate),
        **shape_flags(duration, arrivals, burstiness, max_in_flight, None),
        "bench__slo": slo_flag(slo),
        "bench__requests": requests,
        "bench__max_tokens": max_tokens,
        "sim__time_scale": time_scale,
        "namespace": namespace,
    }
    if local:
        flags["runtime"] = "sim"
    if twin is not None:
        from spectrn.twin.model import twin_settings

        if not local or runtime != "sim":
            raise ConfigError("--twin needs --local (and the sim runtime)", hint="add --local")
        sets = [*twin_settings(twin), *(sets or [])]  # the user's --set still wins
    cfg = config_from_cli(config, sets, cluster=not local, load_job=not local, console=console, **flags)
    d, w = _grid_flags(cfg, drafts, windows)
    if runtime not in ("sim", "vllm-cpu"):
        raise ConfigError(
            f"--runtime {runtime!r} is not sim or vllm-cpu", hint="use --runtime sim or --runtime vllm-cpu"
        )
    if runtime == "vllm-cpu":
        if not local:
            raise ConfigError("--runtime vllm-cpu needs --local", hint="add --local")
        if len(d) > 1:
            raise ConfigError(
                "--drafts: the vllm-cpu tier has one tiny draft model, so only windows can be swept",
                hint="pass a single --drafts value (it labels the cells) and several --windows",
            )
        if max(w) > 8:
            raise ConfigError("--windows: at most 8 on the vllm-cpu tier", hint="use windows between 1 and 8")
    if resume and sweep_id is None:
        sweep_id = _latest_sweep(out_dir)
    sid = check_sweep_id(sweep_id) if sweep_id else new_sweep_id()
    if resume and not (out_dir / sid / "sweep.json").exists():
        raise ConfigError(
            f"--resume: there is no sweep {sid} under {out_dir}",
            hint="check --sweep-id and --out-dir, or drop --resume",
        )
    from spectrn.bench.local import flag_or_key
    from spectrn.loadgen.workloads import load_workload

    # now, not once servers are up
    _, workload_warnings = load_workload(
        cfg.bench.prompts, cfg.bench.workload, seed=cfg.bench.seed, what=flag_or_key(cfg, "bench.prompts")
    )
    for msg in workload_warnings:
        console.print(f"[yellow]warning:[/] {escape(msg)}", highlight=False)
    opts = SweepOptions(drafts=d, windows=w, predict=predict, weights=parse_mix(mix), quiet=quiet, min_gain=min_gain,
                        objective=parse_objective(objective))  # fmt: skip
    kube = None
    if not local:
        kube = connect_cluster(context, kubeconfig)  # before anything is written: no cluster, no sweep folder
    with EventView(console, progress=not quiet) as view:
        sw = Sweep(cfg, sid, out_dir, opts, view, resume=resume)
        say(console, f"sweep {sid}: {sw.sweep_dir}")
        if kube is None:
            from spectrn.bench.local import sigterm_raises

            # SIGTERM outside a cell's requests (those stop on their own) unwinds too, stopping the servers.
            with sigterm_raises(f"while sweep {sid} ran; finished cells are kept"):
                result = sw.run(lambda: local_runner(cfg, sw.sweep_dir, time_scale, runtime, twin))
            artifacts = {setup_label(x, y, sep="-"): f"not needed ({runtime})" for x in d for y in w}
        else:
            from spectrn.deploy.compile import artifact_status
            from spectrn.sweep.runners import ClusterRunner

            artifacts = artifact_status(kube, cfg, d, w)
            say(console, "compiled artifacts: " + ", ".join(f"{k} {v}" for k, v in artifacts.items()))
            result = sw.run(lambda: ClusterRunner(kube, cfg, sid, view))
    from spectrn.report.sweep import write_report
    from spectrn.sweep.manifest import finite
    from spectrn.sweep.orchestrate import ANALYSIS

    say(console, f"ran {len(result.ran)} cell(s), skipped {len(result.skipped)} finished cell(s)")
    analysis = result.analysis
    if output == Output.table:
        from spectrn.cli.common import out_console

        print_sweep_analysis(analysis, out_console(), artifacts)
    else:
        print_document({**finite(analysis.model_dump(mode="json")), "artifacts": artifacts}, output)
    if report:
        html = write_report(sw.sweep_dir, analysis, artifacts)
        say(console, f"report: {html}")
    say(console, f"analysis: {sw.sweep_dir / ANALYSIS}")


def _latest_sweep(out_dir: Path) -> str:
    manifests = sorted(out_dir.glob("*/sweep.json"), key=lambda p: p.stat().st_mtime)
    if not manifests:
        raise ConfigError(f"--resume: no sweep found under {out_dir}", hint="pass --sweep-id ID or start a new sweep")
    return manifests[-1].parent.name


@commands.command("compile")
def compile_(
    drafts: DraftsOpt = None,
    windows: WindowsOpt = None,
    baseline: Annotated[
        bool, typer.Option("--baseline/--no-baseline", help="Also precompile the baseline configuration.")
    ] = True,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the Jobs as YAML; apply nothing.")] = False,
    wait: Annotated[bool, typer.Option("--wait/--no-wait", help="Wait until every Job has finished.")] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout", metavar="SECONDS", help="Seconds to wait with --wait (default: startup budget + 1 h)."
        ),
    ] = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
    context: ContextOpt = None,
    kubeconfig: KubeconfigOpt = None,
    namespace: KubeNamespaceOpt = None,
) -> None:
    """Precompile each sweep configuration into the S3 volume with one Kubernetes Job per configuration."""
    from spectrn.cli.show import say
    from spectrn.deploy import compile as comp

    console = err_console()
    cfg = config_from_cli(config, sets, cluster=True, console=console, namespace=namespace)
    d, w = _grid_flags(cfg, drafts, windows)
    jobs = comp.compile_jobs(cfg, d, w, baseline=baseline)
    prereqs = comp.prerequisites(cfg)
    if dry_run:
        from spectrn.render.output import to_yaml

        typer.echo(to_yaml([*prereqs, *jobs]), nl=False)
        return
    kube = connect_cluster(context, kubeconfig)
    applied = comp.apply_jobs(kube, jobs, prereqs)
    for name in applied:
        say(console, f"applied Job {cfg.namespace}/{name}")
    if wait:
        states = comp.wait_jobs(kube, cfg, applied, timeout_s=timeout, on_update=lambda m: say(console, m))
        failed = [n for n, s in states.items() if s != "Complete"]
        if failed:
            raise comp.CompileError(
                f"compile Job(s) did not complete: {', '.join(f'{n} ({states[n]})' for n in failed)}",
                hint=f"see `kubectl -n {cfg.namespace} logs job/<name>`",
            )
        say(console, f"{len(applied)} configuration(s) compiled", style="green")
