"""Options and helpers shared by commands: config loading with flag overrides, consoles, output formats.

Conventions every command follows:

- ``-o/--output table|json|yaml``: the format of what a command reports. ``json`` and ``yaml`` put exactly one
  machine-readable document on stdout; progress, warnings and file locations go to stderr.
- ``--out-dir DIR``: where a command writes folders (runs, sweeps, a report, manifests). Older spellings
  (``--out``, render's ``-o``) still work, hidden from ``--help``.
- Consoles are full width when not a terminal (a file, a pipe, CI): tables are never cut with an ellipsis and
  sentences never wrapped to an imagined screen.
"""

from __future__ import annotations

import enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from spectrn.errors import ConfigError

if TYPE_CHECKING:  # pydantic models and the kubernetes client load only when a command runs, not for --help
    from spectrn.configuration.config import SpectrnConfig
    from spectrn.kube.api import KubeApi

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config", "-c", metavar="FILE", help="Config file (default: $SPECTRN_CONFIG or ./spectrn.yaml if present)."
    ),
]
DraftOpt = Annotated[str | None, typer.Option("--draft", metavar="MODEL", help="Draft model key, e.g. qwen3-1.7b.")]
WindowOpt = Annotated[
    int | None, typer.Option("--window", metavar="K", help="num_speculative_tokens (speculation window).")
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="KEY=VALUE",
        help="Override any config key: --set bench.concurrency=[8] (value parsed as YAML; repeatable).",
    ),
]

# How every command that talks to a cluster reaches it, with kubectl's flag names.
ContextOpt = Annotated[
    str | None, typer.Option("--context", metavar="NAME", help="Kube context (default: the current one).")
]
KubeconfigOpt = Annotated[
    Path | None,
    typer.Option("--kubeconfig", metavar="FILE", help="Kubeconfig file (default: $KUBECONFIG or ~/.kube/config)."),
]
KubeNamespaceOpt = Annotated[
    str | None,
    typer.Option(
        "--namespace",
        "-n",
        metavar="NAME",
        help="Kubernetes namespace (default: the config's `namespace`, spectrn).",
    ),
]


class Output(enum.StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


OutputOpt = Annotated[
    Output,
    typer.Option(
        "--output",
        "-o",
        metavar="table|json|yaml",
        case_sensitive=False,
        help="Output format: table (for people) or json / yaml (one document on stdout; progress and warnings on "
        "stderr).",
    ),
]
OUT_DIR_HELP = "Results root; the run goes to OUT_DIR/RUN_ID."
# Older spellings of --out-dir, accepted and hidden from --help.
OldOutOpt = Annotated[Path | None, typer.Option("--out", hidden=True)]


def out_dir_of(out_dir: Path | None, old: Path | None, default: Path, *, old_flag: str = "--out") -> Path:
    """``--out-dir``, or its hidden older spelling, or ``default``; both at once is an error."""
    if out_dir is not None and old is not None and out_dir != old:
        raise ConfigError(
            f"--out-dir {out_dir} and {old_flag} {old} both given", hint=f"{old_flag} is --out-dir's old name: use one"
        )
    return out_dir or old or default


def print_document(data: Any, output: Output) -> None:
    """``data`` (JSON-compatible) as one JSON or YAML document on stdout."""
    import json

    if output == Output.yaml:
        import yaml

        typer.echo(yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=10_000), nl=False)
    else:
        typer.echo(json.dumps(data, indent=2))


def levels_flag(concurrency: str | None) -> list[int] | None:
    if concurrency is None:
        return None
    try:
        return [int(x) for x in concurrency.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(
            f"--concurrency {concurrency!r} is not a comma-separated list of integers", hint="e.g. --concurrency 1,4,16"
        ) from None


def rates_flag(rate: str | None) -> list[float] | None:
    """``--rate 1,2,4`` -> [1.0, 2.0, 4.0]: one open-loop level per rate."""
    if rate is None:
        return None
    try:
        return [float(x) for x in rate.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(
            f"--rate {rate!r} is not a comma-separated list of rates (req/s)", hint="e.g. --rate 2 or --rate 1,2,4"
        ) from None


# Latency targets shared by `bench` and `sweep` (docs/slo.md).
SloOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--slo",
        metavar="SLO",
        help="A latency target, repeatable: p90:tpot<=50ms (percentile), ttft<=2s (per request: defines goodput), "
        "structured/p99:itl<=80ms (one prompt class); replaces bench.slo (docs/slo.md).",
    ),
]


def slo_flag(slo: list[str] | None) -> list[str] | None:
    """``--slo`` as the ``bench.slo`` override (None: not given, the config's SLOs stay)."""
    return list(slo) if slo else None


# Load-shape flags shared by `bench` and `sweep` (docs/load-shapes.md).
DurationOpt = Annotated[
    float | None,
    typer.Option("--duration", metavar="SECONDS", help="Run each level this long; --requests is then an upper bound."),
]
ArrivalsOpt = Annotated[
    str | None,
    typer.Option("--arrivals", metavar="poisson|constant|gamma", help="Open-loop arrival process (with --rate)."),
]
BurstinessOpt = Annotated[
    float | None,
    typer.Option("--burstiness", metavar="X", help="Gamma arrivals' shape: 1 = Poisson, < 1 burstier."),
]
MaxInFlightOpt = Annotated[
    int | None,
    typer.Option("--max-in-flight", metavar="N", help="Open loop: at most N requests in flight; later arrivals wait."),
]
TraceOpt = Annotated[
    str | None,
    typer.Option("--trace", metavar="FILE", help="Replay arrival times from a JSONL or CSV trace."),
]


def shape_flags(
    duration: float | None, arrivals: str | None, burstiness: float | None, max_in_flight: int | None, trace: str | None
) -> dict[str, Any]:
    """The load-shape flags as config overrides (``config_from_cli``); None: not given."""
    return {
        "bench__duration_s": duration,
        "bench__arrivals": arrivals,
        "bench__burstiness": burstiness,
        "bench__max_in_flight": max_in_flight,
        "bench__trace": trace,
    }


# A console that is not a terminal has no width to fit: tables and sentences are printed whole.
UNBOUNDED_WIDTH = 10_000


def _console(stderr: bool) -> Console:
    console = Console(stderr=stderr)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=UNBOUNDED_WIDTH)
    return console


def err_console() -> Console:
    """Progress, warnings and (in table output) results: stderr."""
    return _console(stderr=True)


def out_console() -> Console:
    """Results a command prints for people on stdout (``report``, ``compare``, ``status``)."""
    return _console(stderr=False)


def parse_sets(items: list[str] | None, texts: dict[str, str] | None = None) -> dict[str, Any]:
    """``--set KEY=VALUE`` items as {key: value parsed as YAML}; ``texts`` receives each value as written."""
    from spectrn.configuration.sources import yaml_value

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r} is not KEY=VALUE", hint="write e.g. --set bench.requests=64")
        out[key.strip()] = yaml_value(raw, what=f"--set {key.strip()}")
        if texts is not None:
            texts[key.strip()] = raw
    return out


# The flag each command uses for a configuration key (for messages that say where a bad value came from).
FLAG_NAMES = {
    "draft": "--draft",
    "num_speculative_tokens": "--window",
    "runtime": "--local",
    "bench.prompts": "--prompts",
    "bench.concurrency": "--concurrency",
    "bench.request_rate": "--rate",
    "bench.duration_s": "--duration",
    "bench.arrivals": "--arrivals",
    "bench.burstiness": "--burstiness",
    "bench.max_in_flight": "--max-in-flight",
    "bench.trace": "--trace",
    "bench.slo": "--slo",
    "bench.requests": "--requests",
    "bench.max_tokens": "--max-tokens",
    "bench.ignore_eos": "--ignore-eos/--no-ignore-eos",
    "bench.api": "--api",
    "bench.input_tokens": "--input-tokens",
    "bench.schedule": "--mode",
    "sim.time_scale": "--time-scale",
}


def config_from_cli(
    config: Path | None,
    sets: list[str] | None = None,
    *,
    cluster: bool,
    load_job: bool = False,
    console: Console | None = None,
    quiet_about: tuple[str, ...] = (),
    **flags: Any,
) -> SpectrnConfig:
    """Load the config, apply ``--set`` then explicit flags (``draft=..., num_speculative_tokens=...``).

    ``cluster``: the command renders or deploys for a cluster, so cluster-only warnings are shown (the
    placeholder bucket, DRA on Auto Mode) and a spectrn image without a registry is refused (for the
    simulator's pods, and with ``load_job`` for the load Job). Every command says so itself: nothing is read
    from a library's global state. ``quiet_about``: config keys whose warnings are not shown (values the
    command itself chose)."""
    from spectrn.configuration.sources import load_config

    texts: dict[str, str] = {}
    overrides = parse_sets(sets, texts)
    sources = {key: f"--set {key}" for key in overrides}
    for key, value in flags.items():
        if value is None:
            continue
        dotted = key.replace("__", ".")
        overrides[dotted] = value
        sources[dotted] = f"flag {FLAG_NAMES.get(dotted, dotted)}"
        texts.pop(dotted, None)
    cfg = load_config(config, overrides, sources=sources, texts=texts)
    console = console or err_console()
    messages = cfg.warnings()
    if cluster:
        messages += cfg.cluster_warnings() + cfg.check_cluster_images(load_job=load_job)
    for msg in messages:
        if msg.startswith(tuple(f"{key}:" for key in quiet_about)):
            continue  # the command set this value itself, on purpose
        console.print(f"[yellow]warning:[/] {escape(msg)}", highlight=False)
    return cfg


def connect_cluster(context: str | None, kubeconfig: Path | None) -> KubeApi:
    """The cluster named by --context / --kubeconfig (default: the current context, or in-cluster in a pod)."""
    from spectrn.kube.client import connect

    return connect(context=context, kubeconfig=str(kubeconfig) if kubeconfig else None)
