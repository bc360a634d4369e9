"""How commands show results on the terminal. Text that came from outside (server messages, prompt classes,
run ids, paths) is printed with markup off and control characters escaped."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from spectrn.cli.common import Output, print_document
from spectrn.errors import printable
from spectrn.labels import setup_label

if TYPE_CHECKING:
    from rich.console import Console

    from spectrn.finish import Finished
    from spectrn.run.repeats import Repeats
    from spectrn.run.summary import Summary
    from spectrn.run.sweep_analysis import SweepAnalysis


def say(console: Console, text: str, style: str | None = None) -> None:
    """One line of data: never interpreted as markup, control characters shown escaped."""
    console.print(printable(text), markup=False, highlight=False, style=style, soft_wrap=True)


def print_table(console: Console, table: Any) -> None:
    """A rich table with its title on a line of its own: a title inside the table wraps at the table's width."""
    if table.title is not None:
        say(console, str(table.title), style="bold")
        table.title = None
    console.print(table)


def warn_unclean(console: Console, summary: Summary) -> None:
    """Every NOT A CLEAN RUN / not-a-performance-result warning, in red (a run is never shown without them)."""
    for w in summary.warnings():
        say(console, f"WARNING: {w}", style="bold red")


def print_summary(
    summary: Summary, console: Console, warnings: Console | None = None, *, max_num_seqs: int | None = None
) -> None:
    """The comparison table, provenance and headline of a run on ``console``; every warning and error example
    on ``warnings`` (default: ``console``), so that a table redirected to a file keeps only the results.

    A run that is not a performance result (vLLM on CPU, coalesced streams) says so first, in a banner, and
    its headline is what it does prove (token accounting, acceptance, output equivalence), not speedups."""
    from spectrn.report.format import (
        correctness_lines,
        headline_lines,
        not_performance_banner,
        price_line,
        provenance_line,
    )
    from spectrn.report.tables import render_table

    performance = summary.verdict.performance
    if not performance:
        say(console, not_performance_banner(summary), style="bold white on red")
    from spectrn.report.batch_limit import batch_limit_lines

    print_table(console, render_table(summary))
    price = price_line(summary)
    if price is not None:
        say(console, price, style="dim")
    say(console, provenance_line(summary), style="dim")
    for line in batch_limit_lines(summary, max_num_seqs):
        say(console, f"note: {line}", style="yellow")
    if performance:
        for line in headline_lines(summary):
            say(console, line, style="bold")
    else:
        say(console, "correctness (what this run does show; the timings above are not performance figures):")
        for line in correctness_lines(summary):
            say(console, f"  {line}", style="bold")
    warn = warnings or console
    warn_unclean(warn, summary)
    several = len(summary.levels) > 1
    for lv in summary.levels:
        at = f" at load {lv.label}" if several else ""
        for variant, vs in lv.variants.items():
            for cls, msg in vs.requests.error_examples.items():
                say(warn, f"{variant}{at}: {cls} e.g. {msg}", style="red")
        eq = lv.equivalence
        if eq is not None and eq.compared and performance:
            style = "green" if eq.matched == eq.compared else "bold red"
            say(
                console,
                f"output equivalence{at}: {eq.matched}/{eq.compared} greedy outputs identical ({eq.basis})",
                style,
            )


def show_finished(done: Finished, console: Console, output: Output = Output.table) -> None:
    """A finished run: the comparison table and headline on stdout (``output`` table), or the summary as one
    JSON / YAML document on stdout; the warnings and where its files are on ``console`` (stderr)."""
    if output == Output.table:
        from spectrn.cli.common import out_console

        cfg = done.folder.meta.config
        print_summary(done.summary, out_console(), console, max_num_seqs=cfg.max_num_seqs)
    else:
        print_document(done.summary.model_dump(mode="json"), output)
        warn_unclean(console, done.summary)
    if done.emf_path is not None:
        say(console, f"CloudWatch Embedded Metric Format lines: {done.emf_path}", style="dim")
    if done.report_path is not None:
        say(console, f"report: {done.report_path}")
    say(console, f"results: {done.folder.path}")


def publish_progress(console: Console) -> Callable[[int, int], None]:
    def progress(done: int, total: int) -> None:
        if done == total or done % 50 == 0:
            say(console, f"PutMetricData {done}/{total}", style="dim")

    return progress


def finish_and_show(
    run_dir: Path,
    console: Console,
    *,
    report: bool = True,
    publish: bool = False,
    output: Output | None = Output.table,
) -> None:
    """The one place a command finishes a run folder (analyzed once, reported), shows it and, when asked,
    publishes it: local benches, the in-cluster bench (spectrn or llmperf), `spectrn collect`, `analyze`.
    ``output`` None: only the run's warnings and folder, on ``console`` (one of `bench --repeats`' runs, whose
    aggregate is the command's result)."""
    from spectrn.bench.local import require_successes
    from spectrn.finish import finish

    done = finish(run_dir, report=report)
    if output is None:
        warn_unclean(console, done.summary)
        say(console, f"results: {done.folder.path}")
    else:
        show_finished(done, console, output)
    require_successes(done.summary, run_dir)
    if publish:
        from spectrn.publish.publisher import publish_run

        result = publish_run(run_dir, progress=publish_progress(console))
        for line in result.describe():
            say(console, line)


def print_sweep_analysis(analysis: SweepAnalysis, console: Console, artifacts: dict[str, str] | None = None) -> None:
    """A sweep's matrix per load level, recommendations, crossovers, explanations, predictions, equivalence."""
    from rich.table import Table
    from rich.text import Text

    from spectrn.report.sweep import PRED_HEADER, matrix_table, objective_lines, prediction_rows, refined_lines

    def table(title: str, header: list[str], rows: list[list[str]], left: tuple[str, ...] = ()) -> None:
        t = Table(title=Text(title), title_justify="left")
        for h in header:
            t.add_column(Text(h), justify="left" if h in left else "right")
        for row in rows:
            t.add_row(*(Text(c) for c in row))
        print_table(console, t)

    for note in analysis.timing:  # figures not in real time say so before any figure
        say(console, f"timing: {note}", style="bold")
    for level in analysis.levels:
        header, rows = matrix_table(analysis, level)
        table(f"TPOT p50 speedup (baseline / speculative) at {level}, 95% CI", header, rows, left=("draft",))
    decision = objective_lines(analysis)
    if decision:
        say(console, decision[0], style="bold")
        for line in decision[1:]:
            say(console, f"  {line}", style="green" if "TTFT regresses" not in line else "yellow")
    say(console, "recommendations (TPOT p50 speedup)", style="bold")
    for r in analysis.recommendations:
        say(console, f"  {r.text}", style="green" if r.meaningful else "yellow")
        if r.weights:
            say(console, "    (mix weights " + ", ".join(f"{c}={x:.2f}" for c, x in r.weights.items()) + ")")
    if analysis.crossovers:
        say(console, "load crossover", style="bold")
        for c in analysis.crossovers:
            say(console, f"  {c.text}")
    expl = analysis.explanations
    for f in expl.cost_fits:
        if f.draft_s is not None:
            ratio = f.draft_to_target
            say(
                console,
                f"  cost model {f.draft} @ {f.level}: step(k) = {_ms(f.intercept_s)} ms + k x "
                f"{_ms(f.draft_s)} ms" + (f" (one window token = {ratio:.3f} target steps)" if ratio else ""),
            )
    flagged = [e for e in expl.cells if e.disagreements]
    if flagged:
        say(console, "where the textbook expectation and the measurement disagree", style="bold")
        for e in flagged[:12]:
            say(console, f"  {e.text}")
        if len(flagged) > 12:
            say(console, f"  ... {len(flagged) - 12} more in analysis.json")
    pred = analysis.prediction
    if pred.comparison:
        table("prediction vs measurement (TPOT)", PRED_HEADER, prediction_rows(pred), left=tuple(PRED_HEADER))
        if pred.choice:
            ch = pred.choice
            say(console, f"  predicted optimum: {ch.draft} window {ch.window}")
        for line in refined_lines(pred):
            say(console, f"  {line}")
    eq = analysis.equivalence
    if eq.compared:
        if eq.matched == eq.compared:
            say(
                console,
                f"output equivalence: {eq.matched}/{eq.compared} greedy outputs identical (100%) across all cells",
                style="green",
            )
        else:
            say(
                console,
                f"OUTPUT DIVERGENCE: {eq.compared - eq.matched} of {eq.compared} greedy outputs differ "
                f"between baseline and speculative ({eq.match_rate or 0.0:.1%} match)",
                style="bold red",
            )
            for d in eq.divergences[:10]:
                say(
                    console,
                    f"  {setup_label(d.draft, d.window)} @ {d.level}: prompt {d.prompt_id} (index "
                    f"{d.index}) first differs at token {d.first_divergence}",
                    style="red",
                )
    if artifacts:
        say(console, "compiled artifacts", style="bold")
        for k, v in artifacts.items():
            say(console, f"  {k}: {v}")


def _ms(v: Any) -> str:
    return f"{v * 1e3:.2f}" if isinstance(v, int | float) else "n/a"


def key_value_table(title: str, data: dict[str, Any]) -> Any:
    """A two-column table of ``data`` (values shown as data, lists joined)."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=Text(title), title_justify="left")
    t.add_column("figure")
    t.add_column("value", justify="right")
    for k, v in data.items():
        t.add_row(Text(str(k)), Text(", ".join(map(str, v)) if isinstance(v, list) else str(v)))
    return t


def show_repeats(repeats: Repeats, path: Path, output: Output = Output.table) -> None:
    """The aggregate of repeated runs: its table on stdout (or one JSON / YAML document); warnings and where
    it was written on stderr."""
    from spectrn.cli.common import err_console, out_console
    from spectrn.report.repeats import repeats_table

    if output == Output.table:
        print_table(out_console(), repeats_table(repeats))
    else:
        print_document(repeats.model_dump(mode="json"), output)
    console = err_console()
    for w in repeats.warnings:
        say(console, f"WARNING: {w}", style="bold red")
    say(console, f"repeats: {path}")


def show_capacity(result: Any, folder: Path, written: list[Path], output: Output = Output.table) -> None:
    """A capacity search: its table and sentences on stdout (or one JSON / YAML document); where it was
    written on stderr."""
    from rich.table import Table
    from rich.text import Text

    from spectrn.cli.common import err_console, out_console
    from spectrn.report.capacity import capacity_rows, summary_lines

    if output != Output.table:
        print_document(result.model_dump(mode="json"), output)
    else:
        console = out_console()
        header, rows = capacity_rows(result)
        t = Table(title=Text(f"capacity at the SLO: {result.capacity_id}"), title_justify="left")
        for i, h in enumerate(header):
            t.add_column(Text(h), justify="left" if i == 0 else "right")
        for r in rows:
            t.add_row(*(Text(x) for x in r))
        print_table(console, t)
        for line in summary_lines(result):
            say(console, line)
    console = err_console()
    say(console, f"capacity: {folder / 'capacity.json'}")
    for p in written:
        say(console, f"report: {p}")
