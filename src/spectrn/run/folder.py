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
streamed, never loaded whole: a run of a million requests is read in bounded memory. Every writer asks it too
(``write_*``, ``append_records``, ``copy_in``): no other module names these files when writing, which
``tests/architecture/test_run_folder_writes.py`` checks. Whole files are replaced atomically (readers see the old
file or the new one); ``requests.jsonl`` is appended a line at a time while a run goes.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterable, Iterator, Mapping
from functools import cached_property, lru_cache
from pathlib import Path, PurePosixPath
from typing import IO, Any

from spectrn.errors import AnalysisError, one_line
from spectrn.run.json_doc import load_json
from spectrn.run.publish_ledger import PublishLedger, read_publish_ledger
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
REPORT_MARKDOWN = "summary.md"
REPORT_HTML = "index.html"


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
            raw = load_json(path, error=AnalysisError)
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
        skipped: list[str] = []
        for rec in iter_records(self.file(REQUESTS), skipped):
            if measured and rec.warmup:
                continue
            yield rec
        notes = self.meta._read_notes  # what reading left out reaches the summary with the run's other notes
        notes += [n for n in skipped if n not in notes]

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

    def publish_ledger(self) -> PublishLedger:
        """``publish.json`` as a ``PublishLedger`` (empty when the run was never published); PublishError when
        it cannot be read, since publishing over an unreadable ledger would send its calls twice."""
        from spectrn.errors import PublishError

        path = self.file(PUBLISH_STATE)
        if not path.exists():
            return PublishLedger()
        try:
            raw = load_json(path, error=PublishError)
        except (OSError, ValueError) as e:
            raise PublishError(
                f"{path} is not valid JSON: {e}",
                hint="restore it, or delete it and publish with --force knowing that already sent data is counted "
                "twice",
            ) from None
        return read_publish_ledger(raw, str(path))

    def _json(self, name: str) -> Any:
        path = self.file(name)
        if not path.exists():
            return None
        try:
            return load_json(path, error=AnalysisError)
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

    def write_publish_ledger(self, ledger: PublishLedger) -> Path:
        from spectrn.paths import atomic_write_text

        path = self.file(PUBLISH_STATE)
        atomic_write_text(path, json.dumps(ledger.model_dump(mode="json"), indent=2, sort_keys=True) + "\n")
        return path

    def write_meta(self, meta: RunMeta) -> Path:
        from spectrn.paths import atomic_write_text

        path = self.file(RUN_JSON)
        atomic_write_text(path, meta.model_dump_json(indent=2) + "\n")
        vars(self).pop("meta", None)  # the cached_property reads the new file next time
        return path

    def write_acceptance(self, deltas: Mapping[str, Any]) -> Path:
        """``acceptance.json``: {``variant@level``: counter delta or null}."""
        from spectrn.paths import atomic_write_text

        path = self.file(ACCEPTANCE)
        atomic_write_text(path, json.dumps(dict(deltas), indent=2, allow_nan=False))
        return path

    def write_scrape(self, name: str, text: str) -> Path:
        """One raw ``/metrics`` scrape, ``metrics/<variant>.<level>.before|after.prom``."""
        from spectrn.paths import atomic_write_text

        if not name.endswith((".before.prom", ".after.prom")) or "/" in name or name.startswith("."):
            raise ValueError(f"{name!r} is not a scrape file name (<variant>.<level>.before|after.prom)")
        path = self.file(METRICS) / name
        atomic_write_text(path, text)
        return path

    def append_records(self) -> IO[str]:
        """``requests.jsonl`` opened for appending (one ``RequestRecord`` JSON line per finished request); the
        caller flushes each line, so a killed writer loses at most the line it was writing."""
        return self.file(REQUESTS).open("a", encoding="utf-8")

    def write_records(self, records: Iterable[RequestRecord]) -> Path:
        """Replace ``requests.jsonl`` with ``records`` (a merge or an ingest), atomically: a reader sees the old
        file or the whole new one."""
        return self._write_lines(REQUESTS, (r.model_dump_json(exclude_none=True) for r in records))

    def write_emf(self, lines: Iterable[str]) -> Path:
        """``metrics.emf.jsonl``: one CloudWatch Embedded Metric Format document per line, written as each line
        comes (``lines`` may be a generator: a million requests' lines are never held at once), into a
        temporary file renamed over: a reader sees the old file or the whole new one."""
        return self._write_lines(EMF, lines)

    def _write_lines(self, name: str, lines: Iterable[str]) -> Path:
        """``name`` replaced by ``lines``, each ended by a newline, written as they come into a temporary file
        beside it (``.<name>.*.tmp``) renamed over it: a reader sees the old file or the whole new one."""
        import os
        import tempfile

        path = self.file(name)
        self.path.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path, prefix=f".{name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                for ln in lines:
                    f.write(ln)
                    f.write("\n")
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        return path

    def open_llmperf_responses(self, variant: str) -> tuple[IO[str], Path]:
        """A temporary file in ``<variant>/`` to stream llmperf's individual responses to, and its path (then
        ``write_llmperf`` moves it into place: a reader never sees half a file)."""
        folder = self.file(variant)
        folder.mkdir(exist_ok=True)
        tmp = folder / ".individual_responses.json.tmp"
        return tmp.open("w", encoding="utf-8"), tmp

    def write_llmperf(self, variant: str, stem: str, summary: Mapping[str, Any], responses: Path) -> list[Path]:
        """``<variant>/<stem>_summary.json`` and ``<variant>/<stem>_individual_responses.json`` (the latter
        streamed by the caller to ``responses``, a temporary file in that folder, and moved into place here)."""
        from spectrn.paths import atomic_write_text

        folder = self.file(variant)
        if responses.parent.resolve() != folder.resolve():
            raise ValueError(f"{responses} is not in {folder}")
        p1, p2 = folder / f"{stem}_summary.json", folder / f"{stem}_individual_responses.json"
        atomic_write_text(p1, json.dumps(dict(summary), indent=2))
        responses.replace(p2)
        return [p1, p2]

    def write_report(self, out: Path, markdown: str, page: str) -> Path:
        """The report's ``summary.md`` and ``index.html`` in ``out`` (the run's ``report/`` unless the user named
        another folder), readable by everyone (a report is meant to be shared); returns the HTML path."""
        from spectrn.paths import atomic_write_text

        index = out / REPORT_HTML
        atomic_write_text(out / REPORT_MARKDOWN, markdown)
        atomic_write_text(index, page)
        for f in (index, out / REPORT_MARKDOWN):
            f.chmod(0o644)  # atomic writes create 0600 files
        return index

    def copy_in(self, rel: str, src: IO[bytes]) -> Path:
        """Copy one file from outside (a load pod's results) to ``rel`` below this folder; a path that is absolute
        or climbs out with '..' is refused (ValueError)."""
        parts = PurePosixPath(rel)
        if parts.is_absolute() or ".." in parts.parts:
            raise ValueError(f"{rel!r} is not a path inside the run folder")
        target = self.path.joinpath(*parts.parts)  # PurePosixPath has already dropped "." parts
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("wb") as f:
            shutil.copyfileobj(src, f)
        return target


@lru_cache(maxsize=4096)  # called per record by the datums and the EMF file; labels repeat
def dim_value(v: str | None) -> str:
    """A label as a CloudWatch dimension value, the one way the datums, the EMF file and the dashboard make it:
    trimmed, then ``sanitize.cw_dimension`` (printable ASCII, others escaped; at most 1024 characters),
    ``unknown`` when empty. A label can hold a server's words (the draft it declared, read back from run.json)."""
    from spectrn.sanitize import cw_dimension

    return cw_dimension((v or "").strip())
