"""Options and helpers shared by commands: config loading with flag overrides, the console."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

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


def config_from_cli(
    config: Path | None,
    sets: list[str] | None = None,
    *,
    console: Console | None = None,
    **flags: Any,
) -> SpectrnConfig:
    """Load the config, apply ``--set`` then explicit flags (``draft=..., num_speculative_tokens=...``)."""
    from spectrn.spec.config import load_config

    overrides = parse_sets(sets)
    overrides.update({k.replace("__", "."): v for k, v in flags.items() if v is not None})
    cfg = load_config(config, overrides)
    console = console or err_console()
    for msg in cfg.warnings():
        console.print(f"[yellow]warning:[/] {msg}", highlight=False)
    return cfg


def connect_cluster(context: str | None, kubeconfig: Path | None) -> KubeApi:
    """The cluster named by --context / --kubeconfig (default: the current context, or in-cluster in a pod)."""
    from spectrn.kube.client import connect

    return connect(context=context, kubeconfig=str(kubeconfig) if kubeconfig else None)
