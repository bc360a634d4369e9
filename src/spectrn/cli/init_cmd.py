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
) -> None:
    """Write a commented default configuration file."""
    from spectrn.paths import atomic_write_text
    from spectrn.spec.reference import commented_default_yaml

    if path.exists() and not force:
        raise ConfigError(f"{path} already exists", hint="pass --force to overwrite it")
    atomic_write_text(path, commented_default_yaml())
    typer.echo(f"wrote {path}")
