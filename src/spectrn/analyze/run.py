"""Analyze one run folder: its records and counter deltas -> ``summary.json`` (nothing else)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from spectrn.analyze.summary import summarize
from spectrn.run.folder import RunFolder
from spectrn.run.summary import Summary


def analyze_folder(
    run_dir: Path, *, mix: Mapping[str, float] | None = None, seed: int = 0
) -> tuple[RunFolder, Summary]:
    """Summarise the run folder's records (one streaming pass) and write its ``summary.json``."""
    folder = RunFolder.open(run_dir)
    summary = summarize(folder.records(), folder.meta, acceptance=folder.acceptance(), mix=mix, seed=seed)
    folder.write_summary(summary)
    return folder, summary


def ensure_summary(folder: RunFolder) -> Summary:
    """The run's summary.json, or, for a run never analyzed (e.g. copied without it), the summary computed in
    memory: readers (report, publish, compare) leave ``spectrn analyze``'s file alone."""
    summary = folder.summary()
    if summary is None:
        summary = summarize(folder.records(), folder.meta, acceptance=folder.acceptance())
    return summary
