"""Fixtures shared by every test folder. This file also puts ``tests/`` on ``sys.path``, so test modules
import the shared doubles by name (``from hostile import HostileServer``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from hostile import HostileServer
from require_tiers import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401 (strict-mode hooks)


@pytest.fixture
def hostile() -> Iterator[Callable[[str], HostileServer]]:
    """``hostile("usage_list")`` -> a running ``HostileServer`` in that mode (stopped after the test)."""
    servers: list[HostileServer] = []

    def start(mode: str) -> HostileServer:
        server = HostileServer(mode).__enter__()
        servers.append(server)
        return server

    yield start
    for s in servers:
        s.__exit__(None, None, None)
