"""Fixtures for the render tests: configs, a fixed prompt set, offline Kubernetes 1.34 schema validation,
and an isolated environment for in-process CLI runs."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from spectrn.spec.config import SpectrnConfig, build_config


@pytest.fixture
def make_cfg() -> Callable[..., SpectrnConfig]:
    def make(data: dict[str, Any] | None = None, **overrides: Any) -> SpectrnConfig:
        dotted = {k.replace("__", "."): v for k, v in overrides.items()}
        return build_config(data or {}, dotted, environ={})

    return make


@pytest.fixture
def cli(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> Iterator[Callable[..., tuple[int, str, str]]]:
    """Run the real CLI entry point in-process: returns (exit code, stdout, stderr)."""
    from spectrn.cli.main import main

    for name in list(__import__("os").environ):
        if name.startswith("SPECTRN_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)

    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            main(list(argv))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        out, err = capsys.readouterr()
        return code, out, err

    yield run
    sys.stdout.flush()
