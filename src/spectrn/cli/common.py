"""Options and helpers shared by commands: config loading with flag overrides, the console."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from spectrn.errors import ConfigError

if TYPE_CHECKING:  # pydantic models and the kubernetes client load only when a command runs, not for --help
    from spectrn.kube.client import KubeApi
    from spectrn.spec.config import SpectrnConfig

ConfigOpt = Annotated[
    Path | None,
    typer.Option("--config", "-c", help="Config file (default: $SPECTRN_CONFIG or ./spectrn.yaml if present)."),
]
DraftOpt = Annotated[str | None, typer.Option("--draft", help="Draft model key, e.g. qwen3-1.7b.")]
WindowOpt = Annotated[int | None, typer.Option("--window", help="num_speculative_tokens (speculation window).")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override any config key: --set bench.concurrency=[8] (value parsed as YAML)."),
]

# How every command that talks to a cluster reaches it, with kubectl's flag names.
ContextOpt = Annotated[str | None, typer.Option("--context", help="Kube context (default: the current one).")]
KubeconfigOpt = Annotated[
    Path | None, typer.Option("--kubeconfig", help="Kubeconfig file (default: $KUBECONFIG or ~/.kube/config).")
]
KubeNamespaceOpt = Annotated[
    str | None,
    typer.Option("--namespace", "-n", help="Kubernetes namespace (default: the config's `namespace`, spectrn)."),
]


def levels_flag(concurrency: str | None) -> list[int] | None:
    if concurrency is None:
        return None
    try:
        return [int(x) for x in concurrency.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(
            f"--concurrency {concurrency!r} is not a comma-separated list of integers", hint="e.g. --concurrency 1,4,16"
        ) from None


def err_console() -> Console:
    console = Console(stderr=True)
    if not console.is_terminal:  # logs and CI: wide enough for the comparison table
        console = Console(stderr=True, width=140)
    return console


def parse_sets(items: list[str] | None) -> dict[str, Any]:
    from spectrn.spec.config import yaml_value

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r} is not KEY=VALUE", hint="write e.g. --set bench.requests=64")
        out[key.strip()] = yaml_value(raw, what=f"--set {key.strip()}")
    return out


# The flag each command uses for a configuration key (for messages that say where a bad value came from).
FLAG_NAMES = {
    "draft": "--draft",
    "num_speculative_tokens": "--window",
    "runtime": "--local",
    "bench.prompts": "--prompts",
    "bench.concurrency": "--concurrency",
    "bench.request_rate": "--rate",
    "bench.requests": "--requests",
    "bench.max_tokens": "--max-tokens",
    "bench.api": "--api",
    "bench.input_tokens": "--input-tokens",
    "bench.schedule": "--mode",
    "sim.time_scale": "--time-scale",
}
# Commands that render or deploy objects for a cluster (unless run with --local).
CLUSTER_COMMANDS = frozenset({"render", "deploy", "compile", "sweep", "bench"})
# ... and those of them that start spectrn's load Job (which needs spectrn's image).
LOAD_JOB_COMMANDS = frozenset({"sweep", "bench"})


def _running_command() -> tuple[str | None, dict[str, Any]]:
    """The name and parameters of the command being run (Click's context), or (None, {}) outside one."""
    import click

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return None, {}
    return ctx.info_name, dict(ctx.params)


def config_from_cli(
    config: Path | None,
    sets: list[str] | None = None,
    *,
    console: Console | None = None,
    cluster: bool | None = None,
    load_job: bool | None = None,
    **flags: Any,
) -> SpectrnConfig:
    """Load the config, apply ``--set`` then explicit flags (``draft=..., num_speculative_tokens=...``).

    ``cluster``: the command renders or deploys for a cluster, so cluster-only warnings are shown (the
    placeholder bucket, DRA on Auto Mode) and a spectrn image without a registry is refused (for the
    simulator's pods, and with ``load_job`` for the load Job). Default: the running command is one of
    ``CLUSTER_COMMANDS`` without ``--local``."""
    from spectrn.spec.config import load_config

    name, params = _running_command()
    if cluster is None:
        cluster = name in CLUSTER_COMMANDS and not params.get("local") and not params.get("endpoint")
    if load_job is None:
        load_job = name in LOAD_JOB_COMMANDS and params.get("engine", "spectrn") == "spectrn"
    overrides = parse_sets(sets)
    sources = {key: f"--set {key}" for key in overrides}
    for key, value in flags.items():
        if value is None:
            continue
        dotted = key.replace("__", ".")
        overrides[dotted] = value
        sources[dotted] = f"flag {FLAG_NAMES.get(dotted, dotted)}"
    cfg = load_config(config, overrides, sources=sources)
    console = console or err_console()
    messages = cfg.warnings()
    if cluster:
        messages += cfg.cluster_warnings() + cfg.check_cluster_images(load_job=load_job)
    for msg in messages:
        console.print(f"[yellow]warning:[/] {escape(msg)}", highlight=False)
    return cfg


def connect_cluster(context: str | None, kubeconfig: Path | None) -> KubeApi:
    """The cluster named by --context / --kubeconfig (default: the current context, or in-cluster in a pod)."""
    from spectrn.kube.client import connect

    return connect(context=context, kubeconfig=str(kubeconfig) if kubeconfig else None)
