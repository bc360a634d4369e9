"""How commands show results on the terminal. Text that came from outside (server messages, prompt classes,
run ids, paths) is printed with markup off and control characters escaped."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from spectrn.errors import printable

if TYPE_CHECKING:
    from rich.console import Console

    from spectrn.finish import Finished
    from spectrn.run.summary import Summary


def say(console: Console, text: str, style: str | None = None) -> None:
    """One line of data: never interpreted as markup, control characters shown escaped."""
    console.print(printable(text), markup=False, highlight=False, style=style, soft_wrap=True)


def warn_unclean(console: Console, summary: Summary) -> None:
    """Every NOT A CLEAN RUN / not-a-performance-result warning, in red (a run is never shown without them)."""
    for w in summary.warnings():
        say(console, f"WARNING: {w}", style="bold red")


def print_summary(summary: Summary, console: Console) -> None:
    from spectrn.report.format import headline_lines, provenance_line
    from spectrn.report.tables import render_table

    console.print(render_table(summary))
    say(console, provenance_line(summary), style="dim")
    for line in headline_lines(summary):
        say(console, line, style="bold")
    warn_unclean(console, summary)
    for lv in summary.levels:
        for variant, vs in lv.variants.items():
            for cls, msg in vs.requests.error_examples.items():
                say(console, f"{variant}: {cls} e.g. {msg}", style="red")
        eq = lv.equivalence
        if eq is not None and eq.compared:
            style = "green" if eq.matched == eq.compared else "bold red"
            say(console, f"output equivalence: {eq.matched}/{eq.compared} greedy outputs identical ({eq.basis})", style)


def show_finished(done: Finished, console: Console) -> None:
    """The comparison table, headline and warnings of a finished run, and where its files are."""
    print_summary(done.summary, console)
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


def finish_and_show(run_dir: Path, console: Console, *, report: bool = True, publish: bool = False) -> None:
    """The one place a command finishes a run folder (analysed once, reported), shows it and, when asked,
    publishes it: local benches, the in-cluster bench (spectrn or llmperf), `spectrn collect`, `analyze`."""
    from spectrn.finish import finish
    from spectrn.loadgen.bench import require_successes

    done = finish(run_dir, report=report)
    show_finished(done, console)
    require_successes(done.summary, run_dir)
    if publish:
        from spectrn.publish.publisher import publish_run

        result = publish_run(run_dir, progress=publish_progress(console))
        for line in result.describe():
            say(console, line)
