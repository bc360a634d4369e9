"""Where a run's results go and what refuses them: the record sink, write failures as ``BenchError``, the file budget.

Every finished request is appended to ``requests.jsonl`` at once and then dropped from memory, so an
interrupted or killed run keeps everything that finished and memory stays flat for long runs. A disk that
refuses a write or a client out of file descriptors is a ``BenchError``, not a server's error.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from pathlib import Path

from spectrn.errors import BenchError
from spectrn.loadgen.plan import RunPlan
from spectrn.run.folder import REQUESTS, RunFolder
from spectrn.run.records import RequestRecord

OnRecord = Callable[[RequestRecord], None]


def fd_budget(plan: RunPlan) -> int:
    """File descriptors a closed-loop run holds at its peak: a connection per stream and endpoint, plus
    the results files, the event loop and the interpreter's own."""
    streams = max((lv.concurrency or 1 for lv in plan.levels if not lv.open_loop), default=0)
    return -(-streams // plan.shards) * len(plan.endpoints) + 64


def ensure_fd_budget(plan: RunPlan) -> None:
    """Raise the soft open-file limit towards the hard one when the run needs it; refuse a closed-loop run
    that cannot fit, before anything is sent, rather than fail mid-run."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return
    need = fd_budget(plan)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= need:
        return
    target = need if hard == resource.RLIM_INFINITY else min(hard, need)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        soft = target
    except (ValueError, OSError):
        pass
    if soft < need:
        raise BenchError(
            f"this run needs about {need} open files (a connection per stream and endpoint, plus 64) but the "
            f"open-file limit is {soft} (hard limit {hard})",
            hint=f"raise it (`ulimit -n {2 * need}`) or lower --concurrency",
        )


def write_error(path: Path, e: OSError) -> BenchError:
    """A results file that cannot be written (disk full, read-only, no permission), as a BenchError."""
    if e.errno in (errno.EMFILE, errno.ENFILE):
        return BenchError(
            f"out of file descriptors while writing {path} ({e.strerror}); the run was stopped",
            hint="raise the open-file limit (`ulimit -n 65536`) or lower --concurrency / --rate",
        )
    fixes = {
        errno.ENOSPC: "free space on that disk, or pass --out-dir on another disk",
        errno.EDQUOT: "free space within your quota, or pass --out-dir on another disk",
        errno.EFBIG: "the file passed a size limit (`ulimit -f`); raise it or pass --out-dir elsewhere",
        errno.EROFS: "the disk is read-only: pass --out-dir on a writable disk",
        errno.EACCES: "no permission to write there: pass --out-dir on a folder you can write",
        errno.EPERM: "no permission to write there: pass --out-dir on a folder you can write",
    }
    return BenchError(
        f"cannot write {path}: {e.strerror or e}; records written before this point are kept",
        hint=fixes.get(e.errno or 0, "check the disk and the folder's permissions, or pass another --out-dir"),
    )


def _as_bench_error(path: Path, write: Callable[[], object]) -> None:
    """One write through the run folder (``RunFolder``), its OSError a BenchError naming ``path``."""
    try:
        write()
    except OSError as e:
        raise write_error(path, e) from None


class RecordSink:
    """Appends each record as one JSON line and flushes, so a killed process loses at most one line."""

    def __init__(self, folder: RunFolder, on_record: OnRecord | None) -> None:
        self.path = path = folder.file(REQUESTS)
        try:
            self._f = folder.append_records()
        except OSError as e:
            raise write_error(path, e) from None
        self._on_record = on_record
        self._broken = False
        self.counts: dict[str, dict[str, int]] = {}
        self.token_sources: dict[str, dict[str, int]] = {}
        self.token_warnings: dict[str, int] = {}
        self.warm_e2e: list[float] = []

    def add(self, rec: RequestRecord) -> None:
        try:
            self._f.write(rec.model_dump_json(exclude_none=True) + "\n")
            self._f.flush()
        except OSError as e:
            self._broken = True
            raise write_error(self.path, e) from None
        c = self.counts.setdefault(rec.variant, {"completed": 0, "errors": 0, "warmup": 0})
        if rec.warmup:
            c["warmup"] += 1
            if rec.ok and rec.e2e is not None:
                self.warm_e2e.append(rec.e2e)
        elif rec.ok:
            c["completed"] += 1
        else:
            c["errors"] += 1
        if rec.chunk_times:
            src = self.token_sources.setdefault(rec.variant, {})
            src[rec.token_source] = src.get(rec.token_source, 0) + 1
        if rec.token_warning:
            self.token_warnings[rec.variant] = self.token_warnings.get(rec.variant, 0) + 1
        if self._on_record:
            self._on_record(rec)

    def close(self) -> None:
        try:
            self._f.close()
        except OSError as e:
            if not self._broken:  # the first failure was already reported
                raise write_error(self.path, e) from None

    def token_notes(self) -> list[str]:
        notes = []
        for name, sources in sorted(self.token_sources.items()):
            n = sum(sources.values())
            parts = ", ".join(f"{k} {v}" for k, v in sorted(sources.items()))
            notes.append(f"{name}: tokens per chunk counted from {parts} (records with tokens: {n})")
            if sources.get("text"):
                notes.append(
                    f"{name}: {sources['text']} of {n} records counted tokens from text length (the server sent "
                    "neither token_ids nor per-event usage): per-chunk counts and per-token latencies are estimates"
                )
        for name, k in sorted(self.token_warnings.items()):
            notes.append(
                f"{name}: {k} record(s) where token_ids and usage.completion_tokens disagree (token_ids counted; "
                "see token_warning in requests.jsonl)"
            )
        return notes
