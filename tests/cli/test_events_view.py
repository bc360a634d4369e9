"""The CLI's view of core events: data printed as data, progress as bars (terminal) or tenths (logs)."""

from __future__ import annotations

import io

from rich.console import Console

from spectrn.cli.progress import EventView
from spectrn.events import PROGRESS_LINE, Emitter, Event, progress_line


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def console(*, terminal: bool) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, force_terminal=terminal, width=10_000 if not terminal else 120, color_system=None), buf


def test_messages_are_data_never_markup() -> None:
    c, buf = console(terminal=False)
    view = EventView(c)
    view(Event("alert", "server said [bold red]boom[/] \x1b[2J"))
    assert buf.getvalue() == "server said [bold red]boom[/] \\x1b[2J\n"


def test_log_lines_every_tenth_with_time_left() -> None:
    c, buf = console(terminal=False)
    clock = Clock()
    emit = Emitter(EventView(c, clock=clock))
    for done in range(21):
        clock.t = done * 2.0
        emit.progress("r/baseline", "baseline", completed=done, total=20, unit="requests", errors=done // 10)
    lines = buf.getvalue().splitlines()
    assert len(lines) == 10  # 10%, 20%, ... 100%: a log gets a line per tenth, not one per request
    assert lines[0] == "baseline: 2/20 requests (10%), elapsed 4s, about 36s left"
    assert lines[4] == "baseline: 10/20 requests (50%), 1 error, elapsed 20s, about 20s left"
    assert lines[-1] == "baseline: 20/20 requests (100%), 2 errors, elapsed 40s, done"


def test_a_given_estimate_counts_down_and_quiet_keeps_announcements() -> None:
    c, buf = console(terminal=False)
    clock = Clock()
    emit = Emitter(EventView(c, progress=False, clock=clock))
    emit.progress("r/baseline", "baseline", completed=5, total=10, unit="requests")  # quiet: not shown
    emit.progress("s", "[1/2] qwen3-1.7b window 5 at c4", completed=0, total=2, unit="cells", eta_s=600,
                  announce=True)  # fmt: skip
    clock.t = 300.0
    emit.progress("s", "[2/2] qwen3-1.7b window 7 at c4", completed=1, total=2, unit="cells", eta_s=250,
                  announce=True)  # fmt: skip
    assert buf.getvalue().splitlines() == [
        "[1/2] qwen3-1.7b window 5 at c4: 0/2 cells (0%), elapsed 0s, about 10.0 min left",
        "[2/2] qwen3-1.7b window 7 at c4: 1/2 cells (50%), elapsed 5.0 min, about 4.2 min left",
    ]


def test_terminal_bars_show_time_left_and_drop_finished_steps() -> None:
    c, buf = console(terminal=True)
    clock = Clock()
    with EventView(c, clock=clock) as view:
        emit = Emitter(view)
        emit.progress("r1/baseline", "baseline", completed=0, total=4, unit="requests", group="r1")
        clock.t = 10.0
        emit.progress("r1/baseline", "baseline", completed=2, total=4, unit="requests", group="r1")
        assert view.time_left(view.tasks["r1/baseline"].rich_id) == "about 10s left"
        emit.progress("r1/baseline", "baseline", completed=4, total=4, unit="requests", group="r1")
        assert view.time_left(view.tasks["r1/baseline"].rich_id) == "done"
        emit.progress("r2/baseline", "baseline", completed=0, total=4, unit="requests", group="r2")
        assert list(view.tasks) == ["r2/baseline"]  # the finished bar of the previous cell is gone
    assert "requests" in buf.getvalue()


def test_the_load_pods_progress_lines_read_back() -> None:
    line = progress_line("speculative", 12, 40, "requests", 30.0, 70.0, errors=1)
    m = PROGRESS_LINE.match(line)
    assert m is not None
    assert (m["text"], m["completed"], m["total"], m["errors"]) == ("speculative", "12", "40", "1")
    assert PROGRESS_LINE.match("progress: 3 requests done") is None
