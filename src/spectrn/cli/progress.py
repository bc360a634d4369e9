"""How the CLI shows the core's events (``spectrn.events``): lines of data and progress bars with an ETA.

On a terminal, progress is a set of live bars (description, bar, done/total, errors, elapsed, time left); in a
log, a file, a pipe or CI, the same progress is one line per tenth of the way (``progress_line``), so nothing
is redrawn and nothing is cut. Every text is printed as data: markup off, control characters escaped.

    with EventView(console) as view:
        execute(plan, cfg, view)          # the core calls view(event)
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from spectrn.cli.show import say
from spectrn.events import Event, eta_s, fmt_duration, progress_line

if TYPE_CHECKING:
    from rich.console import Console

STYLES: dict[str, str | None] = {
    "heading": "bold",
    "info": None,
    "detail": "dim",
    "ok": "green",
    "warning": "yellow",
    "alert": "bold red",
}


@dataclass
class _Task:
    text: str
    group: str
    started: float
    completed: int = 0
    total: int = 0
    tenth: int = 0  # the last tenth of the way printed as a line
    eta: tuple[float, float] | None = None  # (the caller's estimate of the time left, when it was given)
    rich_id: Any = None
    extra: dict[str, Any] = field(default_factory=dict)

    def left_s(self, now: float) -> float | None:
        if self.eta is not None:
            estimate, at = self.eta
            return max(0.0, estimate - (now - at))
        return eta_s(now - self.started, self.completed, self.total)


class EventView:
    """A receiver of core events that shows them on ``console``.

    ``bars``: live progress bars (default: when the console is a terminal), else log lines. ``progress``: False
    shows no per-item progress at all (``--quiet``), only updates the core marks ``announce`` (a sweep's cells).
    Use it as a context manager, so live bars are closed before the results are printed."""

    def __init__(
        self,
        console: Console,
        *,
        bars: bool | None = None,
        progress: bool = True,
        clock: Any = time.monotonic,
    ) -> None:
        self.console = console
        self.bars = console.is_terminal if bars is None else bars
        self.progress = progress
        self.clock = clock
        self.tasks: dict[str, _Task] = {}
        self._live: Progress | None = None

    def __enter__(self) -> EventView:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def __call__(self, event: Event) -> None:
        if event.kind == "progress":
            self._progress(event)
        else:
            say(self.console, event.text, style=STYLES.get(event.kind))

    # ---- progress ----
    def _progress(self, event: Event) -> None:
        f = event.fields
        announce = bool(f.get("announce"))
        if not self.progress and not announce:
            return
        key = str(f.get("task") or event.text)
        now = self.clock()
        task = self.tasks.get(key)
        if task is None:
            task = self.tasks[key] = _Task(event.text, str(f.get("group") or ""), now)
        task.text = event.text
        task.completed = int(f.get("completed") or 0)
        task.total = int(f.get("total") or 0)
        task.extra = {k: f[k] for k in ("unit", "errors") if k in f}
        if f.get("eta_s") is not None:
            task.eta = (float(f["eta_s"]), now)
        if self.bars:
            self._bar(key, task)
        else:
            self._line(task, now, announce)

    def _line(self, task: _Task, now: float, announce: bool) -> None:
        tenth = 10 * task.completed // task.total if task.total > 0 else 0
        if not announce and tenth <= task.tenth:
            return
        task.tenth = max(task.tenth, tenth)
        line = progress_line(
            task.text,
            task.completed,
            task.total,
            str(task.extra.get("unit", "")),
            now - task.started,
            task.left_s(now),
            int(task.extra.get("errors") or 0),
        )
        say(self.console, line, style="dim")

    def _bar(self, key: str, task: _Task) -> None:
        live = self._live or self._start()
        if task.rich_id is None:
            self._drop_finished(task.group)
            task.rich_id = live.add_task(task.text, total=task.total or None, key=key, unit="", errs="")
        errors = int(task.extra.get("errors") or 0)
        live.update(
            task.rich_id,
            description=task.text,
            completed=task.completed,
            total=task.total or None,
            errs=f"{errors} error{'s' if errors != 1 else ''}" if errors else "",
            unit=str(task.extra.get("unit", "")),
        )

    def _drop_finished(self, group: str) -> None:
        """A new step began: finished bars of earlier steps (a sweep's previous cell) go."""
        assert self._live is not None
        for key, t in list(self.tasks.items()):
            if t.rich_id is not None and t.group != group and t.total and t.completed >= t.total:
                self._live.remove_task(t.rich_id)
                del self.tasks[key]

    def _start(self) -> Progress:
        self._live = Progress(
            TextColumn("{task.description}", markup=False),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[unit]}", markup=False),
            TextColumn("[red]{task.fields[errs]}"),
            TimeElapsedColumn(),
            _LeftColumn(self),
            console=self.console,
            transient=False,
        )
        self._live.start()
        return self._live

    def time_left(self, rich_id: TaskID) -> str:
        task = next((t for t in self.tasks.values() if t.rich_id == rich_id), None)
        if task is None:
            return ""
        if task.total and task.completed >= task.total:
            return "done"
        left = task.left_s(self.clock())
        return "estimating time left" if left is None else f"about {fmt_duration(left)} left"


class _LeftColumn(ProgressColumn):
    """The time left: the core's own estimate when it gave one (a sweep), else the average rate so far."""

    max_refresh = 1.0

    def __init__(self, view: EventView) -> None:
        super().__init__()
        self.view = view

    def render(self, task: Task) -> Text:
        return Text(self.view.time_left(task.id), style="cyan")
