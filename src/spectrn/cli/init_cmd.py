"""``spectrn init``: write a commented default spectrn.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from spectrn.errors import ConfigError

# this module's commands; spectrn.cli.main adds them to the app
commands = typer.Typer()


@commands.command("init")
def init(
    path: Annotated[Path, typer.Argument(metavar="FILE", help="File to write.")] = Path("spectrn.yaml"),
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing file.")] = False,
    preset: Annotated[
        str | None,
        typer.Option(
            "--preset",
            metavar="NAME",
            help="Start from a target/draft pair the current Neuron stack runs (llama-3.1-8b-eagle3, "
            "gpt-oss-120b-eagle3; docs/neuron.md, Presets).",
        ),
    ] = None,
) -> None:
    """Write a commented default configuration file."""
    from spectrn.configuration.presets import PRESETS
    from spectrn.configuration.reference import commented_default_yaml
    from spectrn.paths import atomic_write_text

    if preset is not None and preset not in PRESETS:
        raise ConfigError(
            f"--preset: unknown preset {preset!r}", hint=f"choose one of {', '.join(PRESETS)}, or omit --preset"
        )
    if path.exists() and not force:
        raise ConfigError(f"{path} already exists", hint="pass --force to overwrite it")
    values = PRESETS[preset] if preset is not None else None
    atomic_write_text(path, commented_default_yaml(values, preset=preset))
    typer.echo(f"wrote {path}")
