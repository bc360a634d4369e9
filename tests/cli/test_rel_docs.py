"""docs/reliability.md names the test behind each line: every named test file and function must exist."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
DOC = TESTS.parent / "docs" / "reliability.md"
REF = re.compile(
    r"`((?:analyze|architecture|bench|cli|collect|configuration|deploy|kube|loadgen|publish|render|report|run|runtimes|sim|spec|sweep)/[\w/]+\.py)?(?:::(\w+))?"
)


def test_every_test_named_in_reliability_md_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    current: Path | None = None
    checked = 0
    for m in REF.finditer(text):
        path, name = m.groups()
        if path:
            current = TESTS / path
            assert current.is_file(), f"docs/reliability.md names a missing file: {path}"
        if name:
            assert current is not None, f"::{name} without a file before it"
            assert re.search(rf"^(?:async )?def {name}\(", current.read_text(), re.M), f"{current.name} has no {name}"
            checked += 1
    assert checked >= 25


def test_every_request_error_class_is_in_reliability_md() -> None:
    from doubles.error_classes import splice

    text = DOC.read_text(encoding="utf-8")
    assert splice(text) == text, (
        "docs/reliability.md's error-class table is stale: run "
        "`.venv/bin/python tests/doubles/error_classes.py --write docs/reliability.md`"
    )
