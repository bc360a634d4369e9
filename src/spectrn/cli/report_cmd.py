"""``spectrn report`` (HTML + PNG + Markdown for one run) and ``spectrn compare`` (two runs)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from spectrn.cli.common import OldOutOpt, Output, OutputOpt, out_dir_of, print_document

# this module's commands; spectrn.cli.main adds them to the app
commands = typer.Typer()


@commands.command("report")
def report(
    run_dir: Annotated[Path, typer.Argument(metavar="RUN_DIR", help="Run folder, e.g. results/<run-id>.")],
    out_dir: Annotated[
        Path | None,
        typer.Option("--out-dir", metavar="DIR", help="Folder for the report (default: RUN_DIR/report)."),
    ] = None,
    out: OldOutOpt = None,
    table: Annotated[bool, typer.Option("--table/--no-table", help="Also print the comparison table.")] = True,
) -> None:
    """Write a self-contained HTML report with PNG plots and a Markdown summary for a run."""
    from spectrn.analyze.run import ensure_summary
    from spectrn.cli.common import err_console, out_console
    from spectrn.cli.show import print_table, warn_unclean
    from spectrn.report.html import build_report
    from spectrn.report.tables import render_table
    from spectrn.run.folder import REPORT, RunFolder
    from spectrn.run.lock import hold_run_folder

    folder = RunFolder.open(run_dir)
    with hold_run_folder(run_dir):  # not while a bench or an analyze writes the folder
        summary = ensure_summary(folder)
        index = build_report(run_dir, out_dir_of(out_dir, out, folder.file(REPORT)))
    if table:
        print_table(out_console(), render_table(summary))
    warn_unclean(err_console(), summary)  # an unclean run is never reported without saying so
    typer.echo(f"report: {index}")
    typer.echo(f"plots: {index.parent}/*.png")
    typer.echo(f"pull-request summary: {index.parent / 'summary.md'}")


@commands.command("compare")
def compare(
    run_a: Annotated[Path, typer.Argument(metavar="RUN_A", help="First run folder (A, the reference).")],
    run_b: Annotated[Path, typer.Argument(metavar="RUN_B", help="Second run folder (B).")],
    markdown: Annotated[
        Path | None,
        typer.Option("--markdown", metavar="FILE", help="Also write the comparison as Markdown to this file."),
    ] = None,
    output: OutputOpt = Output.table,
    as_json: Annotated[bool, typer.Option("--json", help="Same as -o json.")] = False,
) -> None:
    """Compare two runs: their configuration differences and speedups side by side."""
    from spectrn.cli.common import err_console, out_console
    from spectrn.cli.show import print_table
    from spectrn.errors import ConfigError
    from spectrn.paths import atomic_write_text
    from spectrn.report.compare import compare_markdown, compare_runs, compare_table, differences_table

    if markdown is not None and ".." in markdown.parts:
        raise ConfigError(f"--markdown {markdown} contains '..'", hint="give a plain path without '..' components")
    cmp = compare_runs(run_a, run_b)
    if as_json:
        output = Output.json
    if output != Output.table:
        print_document(cmp, output)
    else:
        console = out_console()
        for w in cmp["warnings"]:
            console.print(f"WARNING: {w}", style="bold red", markup=False, highlight=False)
        for k, (va, vb) in cmp["provenance_differences"].items():
            console.print(f"provenance differs: {k}: {va} -> {vb}", markup=False, highlight=False)
        print_table(console, compare_table(cmp))
        if cmp["differences"]:
            print_table(console, differences_table(cmp))
        diffs = cmp["config_differences"]
        if diffs:
            console.print("configuration differences (A -> B):", highlight=False)
            for k, (va, vb) in list(diffs.items())[:30]:
                console.print(f"  {k}: {json.dumps(va)} -> {json.dumps(vb)}", highlight=False, markup=False)
    if markdown:
        atomic_write_text(markdown, compare_markdown(cmp))
        if output == Output.table:
            typer.echo(f"wrote {markdown}")
        else:
            err_console().print(f"wrote {markdown}", markup=False, highlight=False, soft_wrap=True)
