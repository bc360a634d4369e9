"""The mutation catalogue still fits the code: every hand-made mutant's text occurs exactly once in its file, and
every test file a target or a mutant names exists. A refactor that moves the text a mutant changes would otherwise
break ``make mutation`` only when someone runs it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "hack"))

import mutation  # noqa: E402  (hack/ holds the catalogue, not a package)


@pytest.mark.parametrize("m", mutation.MANUAL, ids=lambda m: m.id)
def test_each_hand_made_mutant_changes_text_that_occurs_once_in_its_file(m: mutation.Manual) -> None:
    text = (ROOT / m.file).read_text(encoding="utf-8")
    assert text.count(m.old) == 1, f"{m.id}: its old text occurs {text.count(m.old)} times in {m.file}"
    assert m.new != m.old
    for test in m.tests:
        assert (ROOT / test.split("::")[0]).is_file(), f"{m.id}: {test} does not exist"


def test_hand_made_mutant_ids_are_unique() -> None:
    ids = [m.id for m in mutation.MANUAL]
    assert sorted({i for i in ids if ids.count(i) > 1}) == []


@pytest.mark.parametrize("target", mutation.TARGETS, ids=lambda t: t.name)
def test_each_target_names_its_module_and_existing_test_files(target: mutation.Target) -> None:
    assert (ROOT / target.file).is_file()
    missing = [t for t in target.tests if not (ROOT / t.split("::")[0]).is_file()]
    assert missing == []
