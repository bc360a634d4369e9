"""The bad-input matrix through the real CLI (cases in ``bad_input_cases.py``; table in ``docs/bad-input.md``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bad_input_cases import CASES, Case, make_inputs, render_doc

from doubles.kube_fake import FakeKube
from doubles.relhelp import run_cli
from spectrn.errors import EXIT_CODES

DOC = Path(__file__).resolve().parents[2] / "docs" / "bad-input.md"
ERROR_LINE = re.compile(r"^(?P<type>[A-Z][A-Za-z]*Error|Interrupted|Usage error): \S")


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()}


@pytest.fixture
def inputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    make_inputs(tmp_path)
    monkeypatch.setattr("spectrn.kube.client.connect", lambda **kw: FakeKube(context="fake"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    return tmp_path


@pytest.mark.parametrize("case", CASES, ids=[f"{c.command}: {c.what}" for c in CASES])
def test_bad_input(case: Case, inputs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _files(inputs)
    code, out, err = run_cli(list(case.argv), capsys)

    assert code == case.code, f"exit {code}, expected {case.code}\n{err}"
    errors = [line for line in err.splitlines() if ERROR_LINE.match(line)]
    assert len(errors) == 1, f"expected exactly one error line:\n{err}"
    line = errors[0]
    assert case.expect in line, line
    kind = ERROR_LINE.match(line)["type"]  # type: ignore[index]
    if kind == "Usage error":
        assert code == 2 and "--help" in err.splitlines()[-1]
    else:
        assert EXIT_CODES[kind] == code, line  # the documented code for this error type
        assert "(fix: " in line and line.rstrip().endswith(")"), f"no fix on the error line: {line}"
        assert err.rstrip().endswith(line.rstrip()), f"the error line is not the last line:\n{err}"
    assert "Traceback" not in err
    assert _files(inputs) == before, f"left files behind: {_files(inputs) - before}"
    for arg in case.argv:  # nothing written where a '..' path points, outside the case's folder
        if ".." in Path(arg).parts:
            assert not (inputs / arg).exists(), f"wrote through {arg}"


def test_every_command_has_bad_input_cases() -> None:
    from spectrn.cli.main import _register, app

    _register()
    import typer.main

    group = typer.main.get_command(app)
    commands = set()
    for name, cmd in group.commands.items():  # type: ignore[attr-defined]
        subs = getattr(cmd, "commands", None)
        commands |= {f"{name} {s}" for s in subs} if subs else {name}
    covered = {c.command for c in CASES}
    # read-only listings without inputs to get wrong
    missing = commands - covered - {"sim presets"}
    assert not missing, f"commands without bad-input cases: {sorted(missing)}"


def test_the_document_matches_the_cases() -> None:
    assert DOC.read_text(encoding="utf-8") == render_doc(), (
        "docs/bad-input.md is stale: run `.venv/bin/python tests/cli/bad_input_cases.py > docs/bad-input.md`"
    )
