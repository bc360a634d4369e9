"""Where spectrn's packaged data lives, and safe file writes.

Templates (``manifests/``) and prompt sets (``prompts/``) sit at the repository root and are shipped
inside the wheel as ``spectrn/manifests`` and ``spectrn/prompts``; this module finds them either way.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from spectrn.errors import ConfigError, SpectrnError

_PKG = Path(__file__).resolve().parent
NAME_MAX = 255  # bytes in one path component (Linux NAME_MAX, and most file systems' limit)


def data_dir(name: str) -> Path:
    """The packaged ``manifests`` or ``prompts`` folder (wheel install or source checkout)."""
    for candidate in (_PKG / name, _PKG.parent.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"spectrn data folder {name!r} is missing from the installation")


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the whole new one, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def safe_output_dir(path: Path, *, what: str = "output folder") -> Path:
    """Refuse output paths that climb out through '..' or point at a file; create the folder."""
    if ".." in path.parts:
        raise ConfigError(f"{what} {path} contains '..'", hint="give a plain path without '..' components")
    for part in path.parts:
        size = len(os.fsencode(part))
        if size > NAME_MAX:  # the OS would refuse it (ENAMETOOLONG) and the error would name no part
            raise ConfigError(
                f"{what}: the folder name {part[:40]!r}... is {size} bytes, over the {NAME_MAX} bytes a file name "
                "may hold",
                hint=f"choose a shorter {what}",
            )
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{what} {path} exists and is not a folder", hint="choose another path")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"{what} {path} cannot be created: {e.strerror}", hint="check permissions") from None
    return path


@contextmanager
def folder_lock(folder: Path, busy: Callable[[], SpectrnError]) -> Iterator[None]:
    """An exclusive advisory lock on ``folder`` itself (no extra file appears in it), released however the
    process ends; raises ``busy()`` at once when another process holds it. Not POSIX: no locking."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise busy() from None
        yield
    finally:
        os.close(fd)  # closing releases the lock
