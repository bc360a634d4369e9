"""Helpers every test folder shares (the doubles are in ``doubles/``)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence

import pytest


def run_cli(argv: Sequence[object], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``spectrn ARGV`` in-process through the real entry point; return (exit code, stdout, stderr)."""
    from spectrn.cli.main import main

    capsys.readouterr()
    try:
        main([str(a) for a in argv])
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err


def spectrn(*args: str, timeout: float = 600, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the installed ``spectrn`` in a child process (for what needs a real process: signals, start-up).

    Wide, plain output (no colour, no terminal), no stdin; ``env`` replaces the inherited environment.
    """
    base = dict(os.environ if env is None else env)
    base.update({"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"})
    return subprocess.run(
        [sys.executable, "-m", "spectrn", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=base,
        stdin=subprocess.DEVNULL,
        check=False,
    )


def minimal_record(variant: str, index: int) -> dict[str, object]:
    """One valid ``requests.jsonl`` line (a record of 10 tokens in 4 chunks), for folders built by hand."""
    return {
        "variant": variant,
        "index": index,
        "prompt_id": f"p{index}",
        "prompt_class": "structured",
        "level": "c4",
        "sent_at": 1_800_000_000.0 + index,
        "ttft": 0.05,
        "e2e": 0.5,
        "chunk_times": [0.05, 0.2, 0.35, 0.5],
        "chunk_tokens": [1, 3, 3, 3],
        "completion_tokens": 10,
        "prompt_tokens": 8,
        "status": 200,
    }
