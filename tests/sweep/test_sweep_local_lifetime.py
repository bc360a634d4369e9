"""``spectrn sweep --local`` ended by a signal leaves no simulator behind: SIGKILL (no clean-up runs at all, the
servers must die with their parent) and SIGTERM (the sweep stops and stops them), each sent once the sweep's
baseline and speculative servers are serving, to the sweep run as a real process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

pytestmark = pytest.mark.slow
T = TypeVar("T")

# A long sweep (time scale 1: seconds per request), so it is surely still running when the signal comes.
ARGS = ["sweep", "--local", "--quiet", "--no-report", "--drafts", "qwen3-1.7b", "--windows", "5",
        "--concurrency", "2", "--requests", "400", "--max-tokens", "200", "--time-scale", "1",
        "--sweep-id", "life"]  # fmt: skip


def proc_stat(pid: int) -> list[str] | None:
    """The fields after ``(comm)`` of /proc/<pid>/stat (state, ppid, pgrp, ...), or None when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat[stat.rfind(")") + 2 :].split()


def live_in_groups(pgids: set[int]) -> list[int]:
    """Live (not zombie) processes whose process group is one of ``pgids``: a server or anything it started."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            fields = proc_stat(int(entry.name))
            if fields is not None and fields[0] != "Z" and int(fields[2]) in pgids:
                out.append(int(entry.name))
    return out


def sim_children(parent: int) -> dict[int, str]:
    """``{pid: port}`` of the simulators ``parent`` started (``spectrn sim serve`` children)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        fields = proc_stat(int(entry.name))
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if fields is not None and int(fields[1]) == parent and "serve" in argv and "--port" in argv:
            out[int(entry.name)] = argv[argv.index("--port") + 1]
    return out


def healthy(port: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def wait_for(what: str, check: Callable[[], T], timeout_s: float) -> T:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"{what} within {timeout_s:g}s")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_a_signalled_local_sweep_leaves_no_server(tmp_path: Path, sig: signal.Signals) -> None:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    sweep = subprocess.Popen(
        [sys.executable, "-m", "spectrn", *ARGS, "--out-dir", str(tmp_path)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,  # its own group: the signal goes to the sweep alone, as `kill <pid>` would
    )
    servers: dict[int, str] = {}
    try:
        # Both servers up and serving: the sweep is inside its first cell.
        def both_serving() -> dict[int, str]:
            found = sim_children(sweep.pid)
            return found if len(found) == 2 and all(healthy(p) for p in found.values()) else {}

        servers = wait_for("the sweep's baseline and speculative simulators serving", both_serving, 120)
        sweep.send_signal(sig)
        _, err = sweep.communicate(timeout=60)
        if sig == signal.SIGTERM:
            assert sweep.returncode in (130, 143), err.decode(errors="replace")
            assert b"stopped" in err
        else:
            assert sweep.returncode == -signal.SIGKILL
        # Each server ran in its own session (its pid is its group's id); nothing of any group may survive.
        deadline = time.monotonic() + 30
        while live_in_groups(set(servers)) and time.monotonic() < deadline:
            time.sleep(0.2)
        left = live_in_groups(set(servers))
        assert left == [], f"left running after {sig.name}: {left}"
        assert not any(healthy(p) for p in servers.values())
    finally:
        if sweep.poll() is None:
            sweep.kill()
            sweep.wait()
        for pgid in servers:  # never leak servers into the rest of the suite, even when the test fails
            try:
                os.killpg(pgid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
