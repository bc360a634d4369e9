"""``spectrn config-reference``: the configuration table generated from the model's field descriptions.

README.md carries the table between two markers; ``--write`` refreshes it there and ``--check`` fails
when it is stale, so the documentation can never drift from ``spectrn.configuration.config``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from spectrn.errors import ConfigError

# this module's commands; spectrn.cli.main adds them to the app
commands = typer.Typer()

START = "<!-- config-reference:start -->"
END = "<!-- config-reference:end -->"


def splice(text: str, table: str, *, where: str = "README.md") -> str:
    """``text`` with the part between the markers replaced by ``table``."""
    start, end = text.find(START), text.find(END)
    if start < 0 or end < 0 or end < start:
        raise ConfigError(
            f"{where} lacks the markers {START} ... {END}",
            hint="add both markers, on their own lines, where the table belongs",
        )
    return f"{text[: start + len(START)]}\n{table}\n{text[end:]}"


@commands.command("config-reference")
def config_reference(
    write: Annotated[
        Path | None,
        typer.Option("--write", metavar="FILE", help="Refresh the table between the markers in this file (README.md)."),
    ] = None,
    check: Annotated[
        Path | None, typer.Option("--check", metavar="FILE", help="Exit non-zero if this file's table is stale.")
    ] = None,
) -> None:
    """Print the configuration reference (Markdown), or refresh / check it in README.md."""
    from spectrn.configuration.reference import config_reference_markdown
    from spectrn.paths import atomic_write_text

    table = config_reference_markdown()
    target = write or check
    if target is None:
        typer.echo(table)
        return
    try:
        text = target.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{target} cannot be read: {e.strerror}", hint="give the path of README.md") from None
    updated = splice(text, table, where=str(target))
    if check is not None:
        if updated != text:
            raise ConfigError(
                f"{target}: the configuration reference is stale",
                hint="run `spectrn config-reference --write README.md` (or `make docs`)",
            )
        typer.echo(f"{target}: configuration reference is up to date")
        return
    if updated != text:
        atomic_write_text(target, updated)
    typer.echo(f"{target}: configuration reference {'updated' if updated != text else 'already up to date'}")


@commands.command("schemas")
def schemas(
    write: Annotated[
        Path | None,
        typer.Option("--write", metavar="DIR", help="Write the JSON Schemas into this folder (e.g. docs/schemas)."),
    ] = None,
) -> None:
    """The JSON Schemas of summary.json, run.json and requests.jsonl (print their names, or write them)."""
    from spectrn.run.schemas import schema_texts, write_schemas

    if write is None:
        for name in schema_texts():
            typer.echo(name)
        return
    from spectrn.paths import safe_output_dir

    for path in write_schemas(safe_output_dir(write, what="--write folder")):
        typer.echo(f"wrote {path}")
