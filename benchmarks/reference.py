"""The exact-schedule reference server (a test double under tests/doubles) as the benchmarks start it: through
spectrn's one launcher (its own session, dying with the benchmark), waited for, and stopped."""

from __future__ import annotations

import sys
from pathlib import Path

from spectrn.errors import SimError
from spectrn.runtimes.launch import LocalServer, free_port, start_server, stop_servers, wait_healthy

REFERENCE_SERVER = Path(__file__).resolve().parent.parent / "tests" / "doubles" / "reference_server.py"


def start_reference(log: Path, *, ttft_s: float, gap_s: float, pattern: str) -> LocalServer:
    """Start the reference server on a free loopback port (first event after ``ttft_s``, then one every
    ``gap_s``, ``pattern`` tokens per event) and wait until it answers ``/health``."""
    port = free_port()
    cmd = [sys.executable, str(REFERENCE_SERVER), "--port", str(port), "--ttft", str(ttft_s), "--gap", str(gap_s),
           "--pattern", pattern]  # fmt: skip
    server = start_server("reference", cmd, port, log)
    try:
        wait_healthy([server], 30, error=SimError, exited_hint=lambda s: f"see {s.log}", slow_hint="a loaded machine")
    except BaseException:
        stop(server)
        raise
    return server


def stop(server: LocalServer) -> None:
    stop_servers([server], grace_s=10)
