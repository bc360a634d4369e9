"""Every command's --help: readable metavars, one output-folder flag, -o for formats, completion offered."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest
import typer

from spectrn.cli.main import _register, app, main


def _commands() -> list[list[str]]:
    _register()
    root = typer.main.get_command(app)
    out: list[list[str]] = []

    def walk(cmd: Any, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)  # a group (Click's or Typer's vendored Click's)
        if subs is not None:
            for name, sub in subs.items():
                walk(sub, [*path, name])
        else:
            out.append(path)

    walk(root, [])
    return out


COMMANDS = _commands()


def _help(capsys: pytest.CaptureFixture[str], path: list[str]) -> str:
    with pytest.raises(SystemExit) as e:
        main([*path, "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("path", COMMANDS, ids=[" ".join(p) for p in COMMANDS])
def test_help_has_readable_metavars(path: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    text = _help(capsys, path)
    assert text.startswith(f"Usage: spectrn {' '.join(path)}")
    # Typer's type placeholders (<list[str]>, <float range>, <str>) say nothing about the value an option takes
    options = [line for line in text.splitlines() if line.lstrip().startswith("-")]
    assert not [line for line in options if re.search(r"<[A-Za-z][A-Za-z \[\]]*>", line)], text
    assert not [line for line in options if "list[" in line], text  # (arguments keep Typer's type after their name)
    assert "--out " not in text  # the output folder is --out-dir everywhere (--out survives hidden)
    assert "--out-dir" in text or "--output" in text or not re.search(r"\bfolder\b.*\bwrite", text)


def test_output_formats_and_folders_share_their_names(capsys: pytest.CaptureFixture[str]) -> None:
    reporting = [["bench"], ["analyze"], ["compare"], ["status"], ["sweep"], ["publish"], ["sim", "expect"],
                 ["demo"], ["collect"], ["ingest-llmperf"]]  # fmt: skip
    for path in reporting:
        text = _help(capsys, path)
        assert re.search(r"-o, --output table\|json\|yaml", text), (path, text)
    for path in (["bench"], ["demo"], ["sweep"], ["collect"], ["render"], ["report"], ["ingest-llmperf"]):
        assert "--out-dir DIR" in _help(capsys, path), path
    bench = _help(capsys, ["bench"])
    for metavar in (
        "--set KEY=VALUE",
        "--endpoint NAME=URL",
        "--concurrency 1,4,16",
        "--mode simultaneous|interleaved",
    ):
        assert metavar in bench


def test_completion_is_offered_and_works(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    text = _help(capsys, [])
    assert "--install-completion" in text and "--show-completion" in text
    # typer picks the script for the shell it detects above the process (shellingham); the user's shell is
    # bash here whatever shell started pytest (`sh` above pytest made typer refuse: "Shell sh not supported")
    import shellingham

    monkeypatch.setattr(shellingham, "detect_shell", lambda *a, **k: ("bash", "/bin/bash"))
    with pytest.raises(SystemExit) as e:
        main(["--show-completion"])
    assert e.value.code == 0
    assert "_SPECTRN_COMPLETE=complete_bash" in capsys.readouterr().out
    env = {"_SPECTRN_COMPLETE": "complete_bash", "COMP_WORDS": "spectrn bench -o ", "COMP_CWORD": "3"}
    proc = subprocess.run(
        [sys.executable, "-m", "spectrn"], env={**_env(), **env}, capture_output=True, text=True, timeout=120
    )
    assert proc.stdout.split() == ["table", "json", "yaml"], proc.stderr


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("_SPECTRN")}
