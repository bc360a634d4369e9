"""The benchmark scripts still run against today's code: each starts, and the accuracy benchmark measures one
tiny level end to end (a refactor once changed a launcher's signature and every benchmark that started the
reference server failed at its first call, unseen until someone ran it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.mark.parametrize("script", sorted(p.name for p in BENCHMARKS.glob("*.py") if p.name != "reference.py"))
def test_every_benchmark_script_starts(script: str, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage" in proc.stdout.lower()


@pytest.mark.slow
def test_the_accuracy_benchmark_measures_a_level_against_the_reference_server(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "loadgen_accuracy.py"), "--levels", "2", "--tokens", "4",
         "--gap", "0.01", "--ttft", "0.02", "--conditions", "quiet"],
        cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    (written,) = (tmp_path / "benchmarks" / "results").glob("loadgen_accuracy_*.json")
    (row,) = json.loads(written.read_text())
    assert row["condition"] == "quiet" and row["concurrency"] == 2 and row["errors"] == 0
    # 4 tokens a request, one per event, 32 requests (the script's minimum per level)
    assert row["tokens"] == 4 * 32 and row["requests"] == 32
    # the reference server's schedule is exact: the client's TPOT is the 10 ms gap, to within the machine's noise
    assert row["true_tpot_p50_ms"] == pytest.approx(10.0, rel=0.2)
