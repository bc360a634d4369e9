"""The ``spectrn`` command: a Typer app whose commands live one per module in this package.

Wiring runs one way: this module imports the command modules and adds each one's ``commands`` group to
``app``; no command module imports this one.

Heavy libraries (kubernetes, boto3, matplotlib, aiohttp) are imported inside the command functions,
never here, so ``spectrn --help`` stays fast. ``main`` maps ``SpectrnError`` to ``Type: message`` on
stderr and the error's exit code; see ``spectrn.errors`` for the table.
"""

from __future__ import annotations

import sys

import typer

from spectrn import __version__
from spectrn.errors import SpectrnError, redact

app = typer.Typer(
    name="spectrn",
    help="Benchmark speculative decoding on vLLM/AWS Trainium: render, deploy, bench, analyze, publish, sweep.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"spectrn {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Benchmark speculative decoding on vLLM/AWS Trainium."""


def _register() -> None:
    """Add every command module's commands to ``app`` (once; modules import only light dependencies)."""
    if app.registered_commands:
        return
    from spectrn.cli import (
        bench_cmd,
        capacity_cmd,
        config_ref_cmd,
        deploy_cmd,
        init_cmd,
        publish_cmd,
        render_cmd,
        report_cmd,
        sim_cmd,
        sweep_cmd,
        twin_cmd,
    )

    for module in (
        init_cmd,
        render_cmd,
        deploy_cmd,
        bench_cmd,
        capacity_cmd,
        report_cmd,
        publish_cmd,
        sweep_cmd,
        twin_cmd,
        sim_cmd,
        config_ref_cmd,
    ):
        app.registered_commands.extend(module.commands.registered_commands)
        app.registered_groups.extend(module.commands.registered_groups)


def main(argv: list[str] | None = None) -> None:
    _register()
    try:
        rc = app(args=argv, prog_name="spectrn", standalone_mode=False)
    except SpectrnError as e:
        typer.echo(f"{type(e).__name__}: {e}", err=True)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        typer.echo("Interrupted: stopped by the user", err=True)
        sys.exit(130)
    except Exception as e:
        # Click's (or Typer's vendored Click's) usage errors, aborts and exits, matched by shape so that
        # both Typer layouts work.
        kind = type(e).__name__
        code = getattr(e, "exit_code", None)
        if kind == "Abort":
            typer.echo("Interrupted: aborted", err=True)
            sys.exit(130)
        if kind == "Exit" and isinstance(code, int):
            sys.exit(code)
        if hasattr(e, "format_message") and isinstance(code, int):
            typer.echo(f"Usage error: {redact(e.format_message())}", err=True)
            typer.echo("Try 'spectrn --help' or 'spectrn COMMAND --help'.", err=True)
            sys.exit(2)
        raise
    if rc == 130:  # Typer turns Ctrl-C inside a command into a silent exit code 130
        typer.echo("Interrupted: stopped by the user; files already written are kept", err=True)
    sys.exit(rc if isinstance(rc, int) else 0)
