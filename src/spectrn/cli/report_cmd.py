"""``spectrn report`` (HTML + PNG + Markdown for one run) and ``spectrn compare`` (two runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

# this module's commands; spectrn.cli.main adds them to the app
commands = typer.Typer()


@commands.command("report")
def report(
    run_dir: Annotated[Path, typer.Argument(help="Run folder, e.g. results/<run-id>.")],
    out: Annotated[Path | None, typer.Option("--out", help="Output folder (default: <run folder>/report).")] = None,
    table: Annotated[bool, typer.Option("--table/--no-table", help="Also print the comparison table.")] = True,
) -> None:
    """Write a self-contained HTML report with PNG plots and a Markdown summary for a run."""
    from rich.console import Console

    from spectrn.analyze.run import ensure_summary
    from spectrn.cli.common import err_console
    from spectrn.cli.show import warn_unclean
    from spectrn.report.html import build_report
    from spectrn.report.tables import render_table
    from spectrn.run.folder import RunFolder

    summary = ensure_summary(RunFolder.open(run_dir))
    index = build_report(run_dir, out)
    if table:
        Console().print(render_table(summary))
    warn_unclean(err_console(), summary)  # an unclean run is never reported without saying so
    typer.echo(f"report: {index}")
    typer.echo(f"plots: {index.parent}/*.png")
    typer.echo(f"pull-request summary: {index.parent / 'summary.md'}")


@commands.command("compare")
def compare(
    run_a: Annotated[Path, typer.Argument(help="First run folder (A, the reference).")],
    run_b: Annotated[Path, typer.Argument(help="Second run folder (B).")],
    markdown: Annotated[
        Path | None, typer.Option("--markdown", help="Also write the comparison as Markdown to this file.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON instead of a table.")] = False,
) -> None:
    """Compare two runs: their configuration differences and speedups side by side."""
    from rich.console import Console

    from spectrn.errors import ConfigError
    from spectrn.paths import atomic_write_text
    from spectrn.report.compare import compare_markdown, compare_runs, compare_table

    if markdown is not None and ".." in markdown.parts:
        raise ConfigError(f"--markdown {markdown} contains '..'", hint="give a plain path without '..' components")
    cmp = compare_runs(run_a, run_b)
    if as_json:
        typer.echo(json.dumps(cmp, indent=2))
    else:
        console = Console()
        for w in cmp["warnings"]:
            console.print(f"WARNING: {w}", style="bold red", markup=False, highlight=False)
        for k, (va, vb) in cmp["provenance_differences"].items():
            console.print(f"provenance differs: {k}: {va} -> {vb}", markup=False, highlight=False)
        console.print(compare_table(cmp))
        diffs = cmp["config_differences"]
        if diffs:
            console.print("configuration differences (A -> B):", highlight=False)
            for k, (va, vb) in list(diffs.items())[:30]:
                console.print(f"  {k}: {json.dumps(va)} -> {json.dumps(vb)}", highlight=False, markup=False)
    if markdown:
        atomic_write_text(markdown, compare_markdown(cmp))
        typer.echo(f"wrote {markdown}")
