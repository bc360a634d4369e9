"""Events: how the core tells whoever is watching what it is doing. The core never prints.

A core function that runs for a while takes ``on_event: OnEvent | None`` and calls it with ``Event`` values;
the CLI (``spectrn.cli.render``) turns them into lines and progress bars, tests collect them in a list, and
``None`` means nobody is watching.

    Event("info", "sweep s1: results/s1")                          a line of information
    Event("progress", "baseline", {"task": "r1/baseline", "completed": 3, "total": 40, "unit": "requests"})

``text`` may carry data from outside (server messages, prompt classes, ids, paths): a renderer shows it as
data, never as markup. ``fields`` carries what a renderer needs beyond the text (a bar's figures).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Kind = Literal["heading", "info", "detail", "ok", "warning", "alert", "progress"]
"""heading: a section title; info: a plain line; detail: a secondary line; ok: a good outcome;
warning: something to look at; alert: a wrong result (output divergence, a failed step); progress: a bar."""


@dataclass(frozen=True)
class Event:
    kind: Kind
    text: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)


OnEvent = Callable[[Event], None]


class Emitter:
    """``emit = Emitter(on_event)``; ``emit("info", "text")``, ``emit.progress(...)``; silent without a receiver."""

    def __init__(self, on_event: OnEvent | None) -> None:
        self.on_event = on_event

    def __bool__(self) -> bool:
        return self.on_event is not None

    def __call__(self, kind: Kind, text: str = "", **fields: Any) -> None:
        if self.on_event is not None:
            self.on_event(Event(kind, text, fields))

    def progress(
        self,
        task: str,
        text: str,
        *,
        completed: int,
        total: int,
        unit: str,
        group: str = "",
        **fields: Any,
    ) -> None:
        """A progress bar ``task`` (a stable key) now stands at ``completed`` of ``total`` ``unit``.

        ``group``: bars of one step (one run's endpoints); a renderer may drop finished bars of an earlier group.
        Optional fields: ``errors`` (failed units so far), ``eta_s`` (the caller's own estimate of the time left,
        when it knows better than the rate so far), ``announce`` (show this update even in a log)."""
        self("progress", text, task=task, completed=completed, total=total, unit=unit, group=group, **fields)


def fmt_duration(s: float) -> str:
    """``42s``, ``3.5 min``, ``1.2 h``."""
    s = max(0.0, s)
    if s < 90:
        return f"{s:.0f}s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


def eta_s(elapsed_s: float, completed: int, total: int) -> float | None:
    """Time left at the average rate so far (None before the first unit is done)."""
    if completed <= 0 or total <= 0:
        return None
    return max(0.0, elapsed_s * (total - completed) / completed)


def progress_line(
    text: str, completed: int, total: int, unit: str, elapsed_s: float, left_s: float | None, errors: int = 0
) -> str:
    """A progress update as one line of a log: ``baseline: 12/40 requests (30%), 1 error, elapsed 12s, about 28s
    left``. ``spectrn loadgen`` writes these into the load pod's log; ``PROGRESS_LINE`` reads them back."""
    pct = f" ({100 * completed // total}%)" if total > 0 else ""
    errs = f", {errors} error{'s' if errors != 1 else ''}" if errors else ""
    if completed >= total > 0:
        left = "done"
    elif left_s is None:
        left = "estimating time left"
    else:
        left = f"about {fmt_duration(left_s)} left"
    return f"{text}: {completed}/{total} {unit}{pct}{errs}, elapsed {fmt_duration(elapsed_s)}, {left}"


PROGRESS_LINE = re.compile(
    r"^(?P<text>[A-Za-z0-9][A-Za-z0-9._-]{0,62}): (?P<completed>\d+)/(?P<total>\d+) (?P<unit>requests)\b"
    r"(?: \(\d+%\))?(?:, (?P<errors>\d+) errors?)?"
)
"""A ``progress_line`` of the load generator (an endpoint's requests), as found in a load pod's log."""
