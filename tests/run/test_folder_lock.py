"""The run-folder lock (``spectrn.paths.folder_lock``): exclusive, refused at once when held, released on exit.

"Another process" is a child Python process holding the lock; a bounded wait (``timeout``) makes a lock that
blocks instead of refusing fail the test rather than hang it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spectrn.errors import BenchError
from spectrn.paths import folder_lock

HOLD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from spectrn.errors import BenchError
    from spectrn.paths import folder_lock
    with folder_lock(Path(sys.argv[1]), lambda: BenchError("busy")):
        print("held", flush=True)
        sys.stdin.readline()
    print("released", flush=True)
    """
)


def busy() -> BenchError:
    return BenchError("the run folder is in use by another process", hint="wait for it to finish")


def _holder(folder: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def _try_lock_in_child(folder: Path) -> str:
    """Another process tries the lock: 'busy' (refused at once), 'got it', or a timeout (it waited)."""
    code = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from spectrn.errors import BenchError
        from spectrn.paths import folder_lock
        try:
            with folder_lock(Path(sys.argv[1]), lambda: BenchError("busy")):
                print("got it")
        except BenchError as e:
            print(e)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(folder)], capture_output=True, text=True, env=env, timeout=20, check=True
    )
    return out.stdout.strip()


def _alarm(_signum: int, _frame: object) -> None:
    raise TimeoutError("folder_lock waited for the lock instead of refusing it at once")


def test_a_held_lock_is_refused_at_once_with_the_callers_error(tmp_path: Path) -> None:
    holder = _holder(tmp_path)
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(20)  # a lock that waits would hang here: fail instead
    try:
        with pytest.raises(BenchError, match="in use by another process") as e:
            with folder_lock(tmp_path, busy):
                pytest.fail("entered a folder another process holds")
        signal.alarm(0)
        assert e.value.hint == "wait for it to finish"
        assert e.value.__cause__ is None and e.value.__suppress_context__  # raised `from None`
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=30)
    assert holder.stdout is not None
    with holder.stdout:
        assert holder.stdout.read().strip() == "released"
    with folder_lock(tmp_path, busy):  # free again once the holder is gone
        pass


def test_the_lock_is_exclusive_and_released_when_the_block_ends(tmp_path: Path) -> None:
    with folder_lock(tmp_path, busy):
        assert _try_lock_in_child(tmp_path) == "busy"  # a second holder is refused, not shared
    assert _try_lock_in_child(tmp_path) == "got it"


def test_the_lock_is_released_when_the_block_raises(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"):
        with folder_lock(tmp_path, busy):
            raise RuntimeError("boom")
    assert _try_lock_in_child(tmp_path) == "got it"


def test_the_lock_leaves_no_file_and_no_descriptor(tmp_path: Path) -> None:
    fds = set(os.listdir("/proc/self/fd"))
    for _ in range(3):
        with folder_lock(tmp_path, busy):
            pass
    assert set(os.listdir("/proc/self/fd")) == fds
    assert list(tmp_path.iterdir()) == []


def test_a_missing_folder_is_an_os_error_not_a_busy_folder(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        with folder_lock(tmp_path / "missing", busy):
            pass
