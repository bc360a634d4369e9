"""``results/<run-id>/``: the one module that knows the run folder's files, reads them and writes them.

    run.json            RunMeta (written by the load generator, at start and at the end)
    requests.jsonl      one RequestRecord per finished request, appended as each finishes
    acceptance.json     spec-decode counter deltas per ``variant@level`` (null: not reported)
    metrics/            raw /metrics scrapes
    summary.json        Summary (analysis)
    <variant>/          llmperf-compatible files (analysis)
    metrics.emf.jsonl   CloudWatch Embedded Metric Format lines
    publish.json        the CloudWatch publish ledger
    report/             index.html, *.png, summary.md

Every reader asks this module, so a missing or damaged file gives the same error everywhere. Records are
streamed, never loaded whole: a run of a million requests is read in bounded memory.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cached_property
from pathlib import Path
from typing import Any

from spectrn.errors import AnalysisError, one_line
from spectrn.run.records import RequestRecord, RunMeta, iter_records, read_run_meta
from spectrn.run.summary import SCHEMA_VERSION, Acceptance, Summary

RUN_JSON = "run.json"
REQUESTS = "requests.jsonl"
ACCEPTANCE = "acceptance.json"
SUMMARY = "summary.json"
EMF = "metrics.emf.jsonl"
PUBLISH_STATE = "publish.json"
REPORT = "report"
METRICS = "metrics"


class RunFolder:
    """A run folder read back (lazily) and the writes analysis makes into it."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    @classmethod
    def open(cls, path: Path | str) -> RunFolder:
        """A run folder that exists and holds a run.json; AnalysisError naming the problem otherwise."""
        folder = cls(Path(path))
        if not (folder.path / RUN_JSON).is_file():
            from spectrn.run.locate import describe_not_a_run

            what, fix = describe_not_a_run(folder.path)
            raise AnalysisError(f"not a run folder: {what}", hint=fix)
        return folder

    def file(self, name: str) -> Path:
        return self.path / name

    # ---- reading ----------------------------------------------------------------------------------------

    @cached_property
    def meta(self) -> RunMeta:
        path = self.file(RUN_JSON)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise AnalysisError(f"{path} is missing", hint="pass a run folder written by `spectrn bench`") from None
        except json.JSONDecodeError as e:
            raise AnalysisError(
                f"{path} is not valid run metadata: Invalid JSON: {one_line(e)}",
                hint="restore run.json, or re-run the bench",
            ) from None
        except (OSError, ValueError) as e:
            raise AnalysisError(
                f"{path} is not valid run metadata: {one_line(e)}", hint="restore run.json, or re-run the bench"
            ) from None
        return read_run_meta(raw, str(path))

    @property
    def run_id(self) -> str:
        return self.meta.run_id

    def records(self, *, measured: bool = True) -> Iterator[RequestRecord]:
        """The run's records in file order (warm-up requests left out unless ``measured=False``)."""
        for rec in iter_records(self.file(REQUESTS)):
            if measured and rec.warmup:
                continue
            yield rec

    def acceptance(self) -> dict[str, Any]:
        """``acceptance.json``: {``variant@level``: counter delta or null}; {} when absent."""
        raw = self._json(ACCEPTANCE)
        if raw is None:
            return {}
        if isinstance(raw, dict) and isinstance(raw.get("variants"), dict):
            raw = raw["variants"]
        if not isinstance(raw, dict) or not all(v is None or isinstance(v, dict) for v in raw.values()):
            raise AnalysisError(
                f"{self.file(ACCEPTANCE)} is not an object of counter deltas",
                hint="restore it from the original run, or delete it (acceptance then comes from the stream)",
            )
        return raw

    def summary(self) -> Summary | None:
        """``summary.json`` as a ``Summary``; None when the run was not analyzed yet."""
        raw = self._json(SUMMARY)
        if raw is None:
            return None
        if not isinstance(raw, dict) or raw.get("schema_version") != SCHEMA_VERSION:
            raise AnalysisError(
                f"{self.file(SUMMARY)} is not a summary of schema version {SCHEMA_VERSION}",
                hint=f"re-analyze the run: `spectrn analyze {self.path}`",
            )
        try:
            return Summary.model_validate(raw)
        except ValueError as e:
            raise AnalysisError(
                f"{self.file(SUMMARY)} does not match the summary schema: {one_line(e)}",
                hint=f"re-analyze the run: `spectrn analyze {self.path}`",
            ) from None

    def require_summary(self) -> Summary:
        summary = self.summary()
        if summary is None:
            raise AnalysisError(f"{self.path} has no summary.json", hint=f"run `spectrn analyze {self.path}` first")
        return summary

    def acceptance_for(self, variant: str, level: str) -> Acceptance | None:
        summary = self.summary()
        if summary is None:
            return None
        try:
            vs = summary.level(level).variants.get(variant)
        except KeyError:
            return None
        return vs.acceptance if vs is not None else None

    def _json(self, name: str) -> Any:
        path = self.file(name)
        if not path.exists():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise AnalysisError(
                f"{path} is not valid JSON: {one_line(e)}", hint="restore it, or remove it and re-run `spectrn analyze`"
            ) from None

    # ---- writing ----------------------------------------------------------------------------------------

    def write_summary(self, summary: Summary) -> Path:
        from spectrn.paths import atomic_write_text

        path = self.file(SUMMARY)
        atomic_write_text(path, summary.model_dump_json(indent=2) + "\n")
        return path

    def write_meta(self, meta: RunMeta) -> Path:
        from spectrn.paths import atomic_write_text

        path = self.file(RUN_JSON)
        atomic_write_text(path, meta.model_dump_json(indent=2) + "\n")
        vars(self).pop("meta", None)  # the cached_property reads the new file next time
        return path


def dim_value(v: str | None) -> str:
    """A label as CloudWatch and reports show it: trimmed, at most 1024 characters, ``unknown`` when empty."""
    v = (v or "").strip()
    return v[:1024] if v else "unknown"
