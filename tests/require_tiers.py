"""Strict mode for CI: with ``SPECTRN_REQUIRE_VLLM=1`` or ``SPECTRN_REQUIRE_CHECKOV=1`` (``.ci/run`` sets both), a
test that would skip fails instead, so a tier that did not install is a red run, never a quietly smaller one.

The one exception is a test marked ``kind``: it needs a container engine and a kind cluster, which CI does not
have (the kind-smoke workflow runs those tests with ``pytest -m kind`` on a machine that does).

``tier_missing(msg, flag)`` is the explicit form for a tier's own fixtures: fail under ``flag``, skip otherwise.
The report hook below is the safety net for every other skip (a ``skipif``, a missing tool, a future test).
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any, NoReturn

import pytest

FLAGS = ("SPECTRN_REQUIRE_VLLM", "SPECTRN_REQUIRE_CHECKOV")
ALLOWED_MARKER = "kind"


def strict() -> str | None:
    """The require flag that is set, if any."""
    return next((f for f in FLAGS if os.environ.get(f) == "1"), None)


def tier_missing(msg: str, flag: str) -> NoReturn:
    if os.environ.get(flag) == "1":
        pytest.fail(f"{msg} ({flag}=1: a missing tier fails the run)", pytrace=False)
    pytest.skip(msg)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[Any]) -> Generator[None, Any, None]:
    outcome = yield
    rep = outcome.get_result()
    flag = strict()
    if flag and rep.skipped and not hasattr(rep, "wasxfail") and item.get_closest_marker(ALLOWED_MARKER) is None:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"skipped under {flag}=1, where no test may skip (only tests marked kind): {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, Any, None]:
    outcome = yield
    rep = outcome.get_result()
    flag = strict()
    if flag and rep.skipped:
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"module skipped under {flag}=1, where no test may skip: {reason}"
