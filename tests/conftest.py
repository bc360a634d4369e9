"""Fixtures shared by every test folder. ``tests/`` is on ``sys.path`` (pyproject's pytest ``pythonpath``), so
test modules import the shared doubles and helpers by name (``from doubles.kube_fake import FakeKube``,
``from support import run_cli``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from doubles import kubehelp
from hostile import HostileServer
from require_tiers import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401 (strict-mode hooks)
from spectrn.configuration.config import SpectrnConfig
from spectrn.configuration.sources import build_config
from spectrn.sim import FaultSettings, SimSettings, run_in_thread
from spectrn.sim.server import SimHandle
from support import run_cli


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every test runs in its own folder, without the user's config or credentials leaking in."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "250")  # rich wraps at the terminal width; keep message lines whole
    for var in ("SPECTRN_CONFIG", "AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """``cli("render", "--window", "5")`` -> (exit code, stdout, stderr) of the real CLI, in-process, with no
    ``SPECTRN_*`` variable of the caller's environment."""
    import os

    for name in list(os.environ):
        if name.startswith("SPECTRN_"):
            monkeypatch.delenv(name)
    return lambda *argv: run_cli(argv, capsys)


@pytest.fixture
def make_cfg() -> Callable[..., SpectrnConfig]:
    """``make_cfg({"bench": {...}}, num_speculative_tokens=5)`` -> a validated config (no file, no environment)."""

    def make(data: dict[str, Any] | None = None, **overrides: Any) -> SpectrnConfig:
        dotted = {k.replace("__", "."): v for k, v in overrides.items()}
        return build_config(data or {}, dotted, environ={})

    return make


@pytest.fixture
def start_sim(request: pytest.FixtureRequest) -> Iterator[Callable[..., SimHandle]]:
    """``start_sim(speculative=True, faults=dict(error_rate=0.3))`` -> a simulator on a free loopback port, stopped
    after the test. Time scale: the test module's ``SIM_TIME_SCALE`` (default 0.05) unless given."""
    handles: list[SimHandle] = []
    scale = getattr(request.module, "SIM_TIME_SCALE", 0.05)

    def start(*, faults: dict[str, Any] | FaultSettings | None = None, **kwargs: Any) -> SimHandle:
        kwargs.setdefault("time_scale", scale)
        if faults:
            kwargs["faults"] = faults if isinstance(faults, FaultSettings) else FaultSettings(**faults)
        h = run_in_thread(SimSettings(**kwargs))
        handles.append(h)
        return h

    yield start
    for h in handles:
        h.stop()


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


# ---- clusters (the fake API server) ----------------------------------------------------------------------


@pytest.fixture
def sim_cfg() -> SpectrnConfig:
    """The kind smoke configuration: simulator image, device-plugin extended resources."""
    return kubehelp.make_cfg(runtime="sim", resources_mode="device-plugin")


@pytest.fixture
def neuron_cfg() -> SpectrnConfig:
    """The published experiment: real vLLM, DRA resource.k8s.io/v1, S3 model volume."""
    return kubehelp.make_cfg()


@pytest.fixture
def fake() -> Any:
    from doubles.kube_fake import FakeKube

    f = FakeKube()
    kubehelp.add_slices(f)
    return f
