"""Strict mode (tests/require_tiers.py): under SPECTRN_REQUIRE_VLLM=1 or SPECTRN_REQUIRE_CHECKOV=1 no test may skip,
except one marked ``kind``; without the flags skips stay skips. Checked on a throwaway test folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]

CASES = """
import os
import pytest
from require_tiers import tier_missing

def test_plain_skip():
    pytest.skip("a tool is missing")

@pytest.mark.skipif(True, reason="a skipif")
def test_skipif():
    pass

@pytest.fixture
def tier():
    tier_missing("the tier is not installed", "SPECTRN_REQUIRE_VLLM")

def test_fixture_skip(tier):
    pass

@pytest.mark.kind
def test_kind_may_skip():
    pytest.skip("needs docker")

@pytest.mark.xfail(reason="known", strict=True)
def test_xfail():
    assert False

def test_passes():
    pass
"""


def _run(tmp_path: Path, **flags: str) -> tuple[int, str]:
    (tmp_path / "test_cases.py").write_text(CASES)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    kind: kind\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SPECTRN_REQUIRE_")}
    env.update(flags)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "require_tiers", "-p", "no:cacheprovider", "-rA", "-q", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.returncode, proc.stdout


def test_without_flags_skips_stay_skips(tmp_path: Path) -> None:
    code, out = _run(tmp_path)
    assert code == 0, out
    assert "1 passed, 4 skipped, 1 xfailed" in out


@pytest.mark.parametrize("flag", ["SPECTRN_REQUIRE_VLLM", "SPECTRN_REQUIRE_CHECKOV"])
def test_under_a_require_flag_every_skip_fails_but_kind(tmp_path: Path, flag: str) -> None:
    code, out = _run(tmp_path, **{flag: "1"})
    assert code == 1, out
    assert "FAILED test_cases.py::test_plain_skip - skipped under " + flag in out
    assert "ERROR test_cases.py::test_skipif - skipped under " + flag in out
    assert "ERROR test_cases.py::test_fixture_skip - " in out
    assert "SKIPPED [1] test_cases.py:22: needs docker" in out  # the kind test, and only it, still skips
    assert out.rstrip().splitlines()[-1].startswith("1 failed, 1 passed, 1 skipped, 1 xfailed, 2 errors in ")
