"""``spectrn bench``, ``loadgen``, ``analyze``, ``demo`` and ``ingest-llmperf``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from spectrn.cli.common import (
    OUT_DIR_HELP,
    ArrivalsOpt,
    BurstinessOpt,
    ConfigOpt,
    ContextOpt,
    DraftOpt,
    DurationOpt,
    KubeconfigOpt,
    KubeNamespaceOpt,
    MaxInFlightOpt,
    Output,
    OutputOpt,
    SetOpt,
    SloOpt,
    TraceOpt,
    WindowOpt,
    config_from_cli,
    connect_cluster,
    err_console,
    levels_flag,
    rates_flag,
    shape_flags,
    slo_flag,
)
from spectrn.cli.show import finish_and_show, say, show_finished
from spectrn.errors import ConfigError
from spectrn.labels import setup_label, stamped_id

if TYPE_CHECKING:
    from spectrn.cli.progress import EventView

# this module's commands; spectrn.cli.main adds them to the app
commands = typer.Typer()

EndpointOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--endpoint",
        "-e",
        metavar="NAME=URL",
        help="An OpenAI-compatible server (repeat: baseline=..., speculative=...).",
    ),
]
OutDirOpt = Annotated[Path, typer.Option("--out-dir", metavar="DIR", help=OUT_DIR_HELP)]
RunIdOpt = Annotated[
    str | None, typer.Option("--run-id", metavar="ID", help="Run id (default: time stamp + draft + window).")
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", metavar="NAME", help="Model name to request (default: what /v1/models lists)."),
]
PromptsOpt = Annotated[
    str | None,
    typer.Option(
        "--prompts",
        metavar="SET|FILE",
        help="Prompt set: structured, open, sample, all, or a file or saved dataset (YAML, JSONL, ShareGPT, CSV, "
        "Spec-Bench, Hugging Face save_to_disk; docs/workloads.md).",
    ),
]
ConcurrencyOpt = Annotated[
    str | None, typer.Option("--concurrency", metavar="1,4,16", help="Closed-loop load levels (comma-separated).")
]
RuntimeOpt = Annotated[
    str,
    typer.Option("--runtime", metavar="sim|vllm-cpu", help="Local runtime when no --endpoint is given."),
]


def parse_endpoints(items: list[str] | None) -> dict[str, str]:
    from urllib.parse import urlparse

    out: dict[str, str] = {}
    for item in items or []:
        name, sep, url = item.partition("=")
        name, url = name.strip(), url.strip()
        if not sep or not name or not url:
            raise ConfigError(
                f"--endpoint {item!r} is not NAME=URL", hint="write e.g. --endpoint baseline=http://127.0.0.1:8000"
            )
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ConfigError(
                f"--endpoint {name}: {url!r} is not an http(s) URL",
                hint="write e.g. http://host:8000 or http://host:8000/v1",
            )
        if name in out:
            raise ConfigError(f"--endpoint {name} given twice", hint="give each endpoint a distinct name")
        out[name] = url
    return out


def _bench_flags(
    prompts: str | None,
    concurrency: str | None,
    rate: str | None,
    requests: int | None,
    max_tokens: int | None,
    api: str | None,
    input_tokens: int | None,
    mode: str | None,
    ignore_eos: bool | None = None,
) -> dict[str, Any]:
    return {
        "bench__prompts": prompts,
        "bench__concurrency": levels_flag(concurrency),
        "bench__request_rate": rates_flag(rate),
        "bench__requests": requests,
        "bench__max_tokens": max_tokens,
        "bench__api": api,
        "bench__input_tokens": input_tokens,
        "bench__schedule": mode,
        "bench__ignore_eos": ignore_eos,
    }


@commands.command("bench")
def bench(
    config: ConfigOpt = None,
    sets: SetOpt = None,
    draft: DraftOpt = None,
    window: WindowOpt = None,
    endpoint: EndpointOpt = None,
    local: Annotated[
        bool, typer.Option("--local", help="Run locally: against --endpoint URLs, or start a local runtime.")
    ] = False,
    runtime: RuntimeOpt = "sim",
    prompts: PromptsOpt = None,
    concurrency: ConcurrencyOpt = None,
    rate: Annotated[
        str | None,
        typer.Option("--rate", metavar="1,2,4", help="Open-loop rates, req/s per endpoint (comma-separated levels)."),
    ] = None,
    duration: DurationOpt = None,
    arrivals: ArrivalsOpt = None,
    burstiness: BurstinessOpt = None,
    max_in_flight: MaxInFlightOpt = None,
    trace: TraceOpt = None,
    slo: SloOpt = None,
    requests: Annotated[
        int | None, typer.Option("--requests", metavar="N", help="Measured requests per endpoint and level.")
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option("--max-tokens", metavar="N", help="Output tokens per request (a cap with --no-ignore-eos)."),
    ] = None,
    ignore_eos: Annotated[
        bool | None,
        typer.Option(
            "--ignore-eos/--no-ignore-eos",
            help="Exactly --max-tokens per request, or natural lengths ending at EOS (default: on for the built-in "
            "prompt sets, off for a prompt file or dataset).",
            show_default=False,
        ),
    ] = None,
    input_tokens: Annotated[
        int | None, typer.Option("--input-tokens", metavar="N", help="Shape prompts to this many input tokens.")
    ] = None,
    api: Annotated[str | None, typer.Option("--api", metavar="chat|completions", help="OpenAI API to call.")] = None,
    mode: Annotated[
        str | None,
        typer.Option("--mode", metavar="simultaneous|interleaved", help="How the two endpoints share the schedule."),
    ] = None,
    model: ModelOpt = None,
    time_scale: Annotated[
        float | None,
        typer.Option(
            "--time-scale",
            metavar="X",
            help="Simulator time scale (runtime sim); with --endpoint, the time scale the simulators there were "
            "started with (figures are rescaled to real time).",
        ),
    ] = None,
    engine: Annotated[
        str, typer.Option("--engine", metavar="spectrn|llmperf", help="In-cluster load generator.")
    ] = "spectrn",
    run_id: RunIdOpt = None,
    out_dir: OutDirOpt = Path("results"),
    publish: Annotated[bool, typer.Option("--publish", help="Publish to CloudWatch after the run is on disk.")] = False,
    report: Annotated[bool, typer.Option("--report/--no-report", help="Write the HTML/PNG report.")] = True,
    repeats: Annotated[
        int,
        typer.Option(
            "--repeats",
            metavar="N",
            help="Run the same config N times in sequence (local runs): OUT_DIR/RUN_ID/RUN_ID-r1..rN, each a run "
            "folder, and OUT_DIR/RUN_ID/repeats.json with each figure's mean over the runs and a 95% interval that "
            "includes the run-to-run variance.",
        ),
    ] = 1,
    output: OutputOpt = Output.table,
    context: ContextOpt = None,
    kubeconfig: KubeconfigOpt = None,
    namespace: KubeNamespaceOpt = None,
) -> None:
    """Benchmark baseline vs speculative with identical traffic; analyze, report, optionally publish.

    Without --local or --endpoint, the load runs as a Job in the cluster next to the deployed services
    (--context / --kubeconfig / --namespace choose the cluster, as for `spectrn deploy`)."""
    from spectrn.bench.local import check_run_id, new_run_id
    from spectrn.cli.progress import EventView

    console = err_console()
    in_cluster = not (local or endpoint)  # the load runs as a Job next to the deployed services
    check_repeats(repeats, in_cluster=in_cluster)
    flags = _bench_flags(prompts, concurrency, rate, requests, max_tokens, api, input_tokens, mode, ignore_eos)
    flags.update(shape_flags(duration, arrivals, burstiness, max_in_flight, trace))
    flags["bench__slo"] = slo_flag(slo)
    cfg = config_from_cli(
        config,
        sets,
        cluster=in_cluster,
        load_job=in_cluster and engine == "spectrn",
        console=console,
        draft=draft,
        num_speculative_tokens=window,
        namespace=namespace,
        **flags,
    )
    if engine not in ("spectrn", "llmperf"):
        raise ConfigError(
            f"--engine {engine!r} is not spectrn or llmperf", hint="use --engine spectrn or --engine llmperf"
        )
    endpoints = parse_endpoints(endpoint)
    declared = draft is not None or window is not None
    unknown_setup = bool(endpoints) and not declared  # servers spectrn did not start and nobody described
    rid = check_run_id(run_id) if run_id else new_run_id(cfg, label="endpoints" if unknown_setup else None)
    if repeats > 1:
        from spectrn.cli.show import show_repeats

        parent = _repeats_folder(out_dir, rid, repeats)
        try:
            runs = []
            for i in range(1, repeats + 1):
                say(console, f"run {i} of {repeats}: {rid}-r{i}", style="bold")
                with EventView(console) as view:
                    d = _bench_local(cfg, endpoints, runtime, f"{rid}-r{i}", parent, model, time_scale, view,
                                     declared=declared)  # fmt: skip
                finish_and_show(d, console, report=report, publish=publish, output=None)
                runs.append(d)
        finally:
            if parent.is_dir() and not any(parent.iterdir()):  # no run started: leave nothing behind
                parent.rmdir()
        from spectrn.analyze.repeats import aggregate, write_repeats

        agg = aggregate(runs, rid, parent=parent)
        show_repeats(agg, write_repeats(parent, agg), output)
        return
    if endpoints or local:
        with EventView(console) as view:
            run_dir = _bench_local(cfg, endpoints, runtime, rid, out_dir, model, time_scale, view, declared=declared)
        engine = "spectrn"
    else:
        from spectrn.bench.incluster import run_incluster_bench
        from spectrn.errors import KubeError

        try:
            kube = connect_cluster(context, kubeconfig)
        except KubeError as e:
            raise type(e)(
                e.message,
                hint=f"{e.hint}; or bench without a cluster: `spectrn bench --local` (simulator) or "
                "`spectrn bench --endpoint baseline=URL --endpoint speculative=URL`",
            ) from None
        with EventView(console) as view:
            run_dir = run_incluster_bench(cfg, rid, engine, view, kube, out_root=out_dir)
    finish_and_show(run_dir, console, report=report, publish=publish, output=output)


def check_repeats(repeats: int, *, in_cluster: bool) -> None:
    """``--repeats``: at least 1; above 1 only for local runs (the in-cluster bench runs one load Job per call)."""
    if repeats < 1:
        raise ConfigError(
            f"--repeats {repeats} is below 1", hint="give --repeats N with N >= 1 (1, the default, is a single run)"
        )
    if repeats > 1 and in_cluster:
        raise ConfigError(
            f"--repeats {repeats} needs a local run (--local or --endpoint): the in-cluster bench runs one load Job "
            "per call",
            hint="add --local, or --endpoint baseline=URL --endpoint speculative=URL (e.g. port-forwarded "
            "services); or run the in-cluster bench N times with distinct --run-id and `spectrn compare` them",
        )


def _repeats_folder(out_dir: Path, rid: str, repeats: int) -> Path:
    """``OUT_DIR/RUN_ID``, which will hold ``RUN_ID-r1`` .. ``RUN_ID-rN`` and ``repeats.json``: refused when it
    exists and is not empty (another run's folder, or an earlier repeat), or when the runs' ids are not usable."""
    from spectrn.names import check_run_id

    check_run_id(f"{rid}-r{repeats}", source=f"--run-id with --repeats {repeats}: run i is <run-id>-r<i>")
    if ".." in out_dir.parts:
        raise ConfigError(f"--out-dir {out_dir} contains '..'", hint="give a plain path without '..' components")
    parent = out_dir / rid
    if parent.exists() and (not parent.is_dir() or any(parent.iterdir())):
        raise ConfigError(
            f"--repeats {repeats}: {parent} already exists and is not an empty folder (it would hold the runs and "
            "repeats.json)",
            hint="choose another --run-id, or move that folder away",
        )
    return parent


def _bench_local(
    cfg: Any,
    endpoints: dict[str, str],
    runtime: str,
    run_id: str,
    out_dir: Path,
    model: str | None,
    time_scale: float | None,
    view: EventView,
    *,
    declared: bool = False,
) -> Path:
    from spectrn.bench.local import bench_local

    return bench_local(cfg, endpoints, runtime, run_id, out_dir, model, time_scale, view, declared=declared)


@commands.command("loadgen")
def loadgen(
    endpoint: EndpointOpt = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
    prompts_file: Annotated[
        str | None, typer.Option("--prompts-file", metavar="FILE", help="Prompt set YAML (overrides bench.prompts).")
    ] = None,
    run_id: Annotated[
        str,
        typer.Option("--run-id", metavar="ID", help="Run id (default: a time stamp)."),
    ] = "",
    out_dir: Annotated[Path | None, typer.Option("--out-dir", metavar="DIR", help=OUT_DIR_HELP)] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            hidden=True,
            help="The run folder itself, instead of OUT_DIR/RUN_ID (the load pod's form; the run id defaults to its "
            "name).",
        ),
    ] = None,
    model: ModelOpt = None,
    shard_index: Annotated[int, typer.Option("--shard-index", metavar="I", help="This pod's shard (Indexed Job).")] = 0,
    shards: Annotated[int, typer.Option("--shards", metavar="N", help="Number of shards.")] = 1,
    analyze: Annotated[bool, typer.Option("--analyze/--no-analyze", help="Write summary.json when done.")] = False,
    hold: Annotated[
        float,
        typer.Option(
            "--hold-until-collected",
            metavar="SECONDS",
            help="Keep running up to SECONDS until RUN_DIR/.collected exists.",
        ),
    ] = 0.0,
    quiet: Annotated[
        bool, typer.Option("--quiet", help="Progress as plain lines, one per tenth of the run (pod logs).")
    ] = False,
) -> None:
    """The load generator alone (the load pod's entrypoint): run the schedule, write records."""
    from spectrn.bench.local import check_run_id, execute, plan_from_config
    from spectrn.cli.progress import EventView

    console = err_console()
    cfg = config_from_cli(config, sets, cluster=False, console=console)
    endpoints = parse_endpoints(endpoint)
    if not endpoints:
        raise ConfigError(
            "loadgen needs at least one --endpoint NAME=URL", hint="e.g. --endpoint baseline=http://qwen-vllm:8000"
        )
    if out is not None and out_dir is not None:
        raise ConfigError(
            "--out and --out-dir both given",
            hint="--out names the run folder, --out-dir the folder holding runs: use one",
        )
    if run_id:
        rid = check_run_id(run_id)
    elif out is not None:
        rid = check_run_id(out.name, source="--out (its folder name is the run id when --run-id is not given)")
    else:
        rid = check_run_id(stamped_id())
    plan = plan_from_config(
        cfg,
        endpoints,
        run_id=rid,
        out_root=out_dir or Path("results"),
        model=model,
        prompts=prompts_file,
        shard=shard_index,
        shards=shards,
        run_dir=out,
    )
    with EventView(console, bars=False if quiet else None) as view:
        outcome = execute(plan, cfg, view)
    print(json.dumps({"run_id": rid, "out": str(outcome.run_dir), "counts": outcome.counts}), flush=True)
    if analyze:
        from spectrn.finish import finish

        finish(outcome.run_dir, report=False)
    if hold > 0:
        marker = outcome.run_dir / ".collected"
        deadline = time.monotonic() + hold
        print(f"holding until {marker} exists (at most {hold:g}s)", flush=True)
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(2)


@commands.command("analyze")
def analyze(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="A run folder, results/<run-id>.")],
    report: Annotated[bool, typer.Option("--report/--no-report", help="Also write the report.")] = True,
    output: OutputOpt = Output.table,
) -> None:
    """(Re)compute summary.json and local outputs of a run folder; print the comparison table."""
    from spectrn.finish import finish

    console = err_console()
    show_finished(finish(run_dir, report=report), console, output)


@commands.command("ingest-llmperf")
def ingest_llmperf(
    results_dir: Annotated[
        Path, typer.Argument(metavar="RESULTS_DIR", help="Folder with one llmperf result folder per variant.")
    ],
    out_dir: Annotated[
        Path | None,
        typer.Option("--out-dir", metavar="DIR", help="Results root; the run goes to OUT_DIR/<RESULTS_DIR name>."),
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", hidden=True, help="The run folder itself (older form).")] = None,
    config: ConfigOpt = None,
    sets: SetOpt = None,
    output: OutputOpt = Output.table,
) -> None:
    """Turn llmperf result folders (the sample's load pod) into a spectrn run folder, analyzed and reported
    like any run (and publishable with `spectrn publish`)."""
    from spectrn.analyze.llmperf import ingest
    from spectrn.finish import finish
    from spectrn.paths import safe_output_dir
    from spectrn.run.records import RunMeta

    console = err_console()
    cfg = config_from_cli(config, sets, cluster=False, console=console)
    if out is not None and out_dir is not None:
        raise ConfigError(
            "--out and --out-dir both given", hint="--out (older form) names the run folder itself: use --out-dir"
        )
    dest = out if out is not None else (out_dir or Path("results")) / results_dir.name
    safe_output_dir(dest, what="--out" if out is not None else "--out-dir")
    meta = RunMeta(run_id=dest.name, spectrn_version="", started_at=time.time(), config=cfg)
    ingest(results_dir, dest, run_id=dest.name, meta=meta)
    show_finished(finish(dest), console, output)


@commands.command("demo")
def demo(
    runtime: Annotated[
        str, typer.Option("--runtime", metavar="sim|vllm-cpu", help="sim (default) or vllm-cpu (real vLLM on CPU).")
    ] = "sim",
    time_scale: Annotated[
        float, typer.Option("--time-scale", metavar="X", help="Simulator time scale (0.25 = 4x faster).")
    ] = 0.25,
    requests: Annotated[int, typer.Option("--requests", metavar="N", help="Measured requests per endpoint.")] = 36,
    out_dir: OutDirOpt = Path("results"),
    config: ConfigOpt = None,
    sets: SetOpt = None,
    output: OutputOpt = Output.table,
) -> None:
    """The whole local pipeline: start baseline + speculative servers, bench structured and open prompts,
    analyze, report, stop the servers."""
    from spectrn.bench.local import new_run_id
    from spectrn.cli.progress import EventView
    from spectrn.cli.show import say

    console = err_console()
    overrides: dict[str, Any] = {"runtime": "sim", "bench__prompts": "all", "bench__requests": requests}
    if runtime == "vllm-cpu":
        overrides.update(bench__max_tokens=64, bench__api="completions", num_speculative_tokens=4)
    quiet = ("num_speculative_tokens",) if runtime == "vllm-cpu" else ()  # the tiny tier's window, chosen here
    cfg = config_from_cli(config, sets, cluster=False, console=console, quiet_about=quiet, **overrides)
    if runtime == "vllm-cpu":  # the configured draft does not run: the id names what does
        rid = stamped_id(setup_label("vllm-cpu-tiny", min(cfg.num_speculative_tokens, 8), sep="-"), prefix="demo-")
    else:
        rid = new_run_id(cfg, prefix="demo-")
    for line in demo_header(cfg, runtime, time_scale):
        say(console, line, style="bold")
    with EventView(console) as view:
        run_dir = _bench_local(cfg, {}, runtime, rid, out_dir, None, time_scale, view)
    finish_and_show(run_dir, console, report=True, publish=False, output=output)


def demo_header(cfg: Any, runtime: str, time_scale: float) -> list[str]:
    """What the demo really runs: the simulator's preset models, or vLLM on CPU's tiny models."""
    if runtime == "vllm-cpu":
        from spectrn.runtimes.vllm_cpu import describe_models

        m = describe_models()
        k = min(cfg.num_speculative_tokens, 8)
        return [
            f"spectrn demo: real vLLM on CPU serving tiny offline models ({m['served_model_name']}, "
            f"{m['context']} of context), baseline vs draft-model speculation, window {k}",
            f"  target: {m['target']}",
            f"  draft:  {m['draft']}",
            "  NOT A PERFORMANCE RESULT: a correctness check of token accounting, acceptance and output "
            "equivalence on the bytes vLLM really sends; on a CPU, speculation is slower than plain decoding",
        ]
    return [
        f"spectrn demo: {cfg.target} baseline vs {cfg.draft} draft, window {cfg.num_speculative_tokens}, runtime "
        f"{runtime}" + (f" (simulated Neuron timing, time scale {time_scale:g})" if runtime == "sim" else "")
    ]
