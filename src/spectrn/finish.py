"""Finishing a run: the one procedure every entry point calls once its records are on disk.

    records on disk -> summary.json -> llmperf-compatible files -> metrics.emf.jsonl -> report/ -> (publish)

Called by ``spectrn bench`` (local and in-cluster), ``loadgen``, ``analyze``, ``collect``, ``ingest-llmperf``
and every sweep cell, with one failure policy: each file is written atomically, the summary first; a report
or EMF failure is a ``SpectrnError`` naming the step (the summary already written stays); publishing, when
asked, runs last, only after everything is on disk, so a failed publish can be retried with
``spectrn publish``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spectrn.analyze.run import analyze_folder
from spectrn.errors import AnalysisError, SpectrnError
from spectrn.run.folder import RunFolder
from spectrn.run.lock import hold_run_folder
from spectrn.run.summary import Summary


@dataclass
class Finished:
    """What finishing wrote."""

    folder: RunFolder
    summary: Summary
    summary_path: Path
    llmperf_files: list[Path] = field(default_factory=list)
    emf_path: Path | None = None
    report_path: Path | None = None
    published: Any = None


def finish(
    run_dir: Path,
    *,
    report: bool = True,
    emf: bool = True,
    mix: Mapping[str, float] | None = None,
    publish: Callable[[RunFolder], Any] | None = None,
) -> Finished:
    """Analyze ``run_dir`` and write every local output; then ``publish(folder)`` when given.

    The writes hold the run folder's lock (``run/lock.py``): a bench still writing the folder, or another
    command finishing it, makes this one fail at once with nothing written. A publish takes the lock itself."""
    RunFolder.open(run_dir)  # not a run folder: say so before locking it
    with hold_run_folder(run_dir):
        folder, summary = analyze_folder(run_dir, mix=mix)
        done = Finished(folder, summary, folder.file("summary.json"))
        if folder.meta.engine != "llmperf":  # an llmperf run has llmperf's own files already
            from spectrn.analyze.llmperf import write_llmperf_files

            done.llmperf_files = _step("llmperf-compatible files", lambda: write_llmperf_files(folder))
        if emf:
            from spectrn.publish.emf import write_emf

            done.emf_path = _step("EMF metrics", lambda: write_emf(folder.path))
        if report:
            from spectrn.report.html import build_report

            done.report_path = _step("report", lambda: build_report(folder.path))
    if publish is not None:
        done.published = publish(folder)
    return done


def _step(what: str, fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except SpectrnError:
        raise
    except OSError as e:
        raise AnalysisError(
            f"writing the {what} failed: {e.strerror or e}",
            hint="check free space and permissions, then re-run `spectrn analyze` on the run folder",
        ) from None
