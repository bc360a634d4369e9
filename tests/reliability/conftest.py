"""Fixtures for the reliability tests: simulators with fault flags, a clean working folder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from spectrn.sim import FaultSettings, SimSettings, run_in_thread
from spectrn.sim.server import SimHandle


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every test runs in its own folder, without the user's config or credentials leaking in."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps at the terminal width; keep message lines whole
    for var in ("SPECTRN_CONFIG", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def start_sim() -> Iterator[Callable[..., SimHandle]]:
    """``start_sim(speculative=True, faults=dict(error_rate=0.3))`` -> a simulator on a free loopback port."""
    handles: list[SimHandle] = []

    def start(*, faults: dict[str, Any] | None = None, **kwargs: Any) -> SimHandle:
        kwargs.setdefault("time_scale", 0.02)
        if faults:
            kwargs["faults"] = FaultSettings(**faults)
        h = run_in_thread(SimSettings(**kwargs))
        handles.append(h)
        return h

    yield start
    for h in handles:
        h.stop()
