"""Every module spectrn imports at run time is declared in pyproject.toml, for the extra that needs it.

deptry reads the imports of ``src/`` and the declared dependencies: an import of an undeclared or only
transitively installed package (click through typer, botocore through boto3) fails here, in CI, and in
``make lint``, rather than on a user's clean install."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEPTRY = Path(sys.executable).with_name("deptry")


def deptry(project: Path) -> subprocess.CompletedProcess[str]:
    if not DEPTRY.exists():
        pytest.fail(
            f"deptry is not installed beside {sys.executable}: it is a dev dependency (pip install -e '.[dev]')"
        )
    return subprocess.run(
        [str(DEPTRY), "src", "--no-ansi"], cwd=project, capture_output=True, text=True, timeout=300, check=False
    )


def test_every_import_is_declared():
    done = deptry(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def test_an_undeclared_import_fails_the_check(tmp_path):
    """The check can fail: the same code with botocore (imported by publish/aws.py) left undeclared."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    lines = [line for line in pyproject.splitlines() if not line.strip().startswith('"botocore')]
    assert len(lines) == len(pyproject.splitlines()) - 1
    (tmp_path / "pyproject.toml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("__pycache__"))
    done = deptry(tmp_path)
    assert done.returncode != 0
    assert "DEP003 'botocore' imported but it is a transitive dependency" in done.stdout + done.stderr
