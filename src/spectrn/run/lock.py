"""The run folder's lock: one spectrn process at a time writes into a run folder.

A bench holds it from start to end (``bench/local.py``: ``claim_run_dir``); every command that writes into the
folder afterwards (analysis and its files, the report, the EMF file, a publish) holds it while it writes, so an
``analyze`` started while a bench still appends records is refused at once instead of summarising half a run
(and its summary being overwritten by the bench's own). The lock is ``paths.folder_lock``: an advisory ``flock``
on the folder itself, released however the process ends.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

from spectrn.errors import AnalysisError, SpectrnError


def busy_message(run_dir: Path) -> str:
    """What a second process is told (the words a second ``spectrn bench`` with the same run id gets)."""
    return f"run folder {run_dir} is in use by another spectrn process right now"


def hold_run_folder(
    run_dir: Path,
    *,
    error: type[SpectrnError] = AnalysisError,
    fix: str = "wait for it to finish (a bench still running, or another analyze, report or publish), then re-run",
) -> AbstractContextManager[None]:
    """Hold ``run_dir``'s lock for the block; ``error`` at once when another process holds it."""
    from spectrn.paths import folder_lock

    busy: Callable[[], SpectrnError] = lambda: error(busy_message(run_dir), hint=fix)  # noqa: E731
    return folder_lock(run_dir, busy)
