"""llmperf ingestion on golden result folders (the sample's --engine llmperf pod layout)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from lg_support import FIXTURES

from spectrn.analyze.llmperf import ingest
from spectrn.cli.main import main
from spectrn.errors import AnalysisError


def test_ingest_golden_llmperf_folders() -> None:
    s = ingest(FIXTURES / "llmperf", run_id="llm")
    assert s["engine"] == "llmperf" and set(s["variants"]) == {"baseline", "speculative"}
    b, sd = s["variants"]["baseline"], s["variants"]["speculative"]
    assert b["requests"]["completed"] == 4 and sd["requests"]["completed"] == 3
    assert sd["requests"]["errors"] == 1 and sd["requests"]["error_classes"] == {"http_500": 1}
    # TPOT = (e2e - ttft) / (n - 1): the fixture was built with exact per-token times
    assert b["tpot_s"]["p50"] == pytest.approx(0.045)
    assert sd["tpot_s"]["p50"] == pytest.approx(0.015)
    assert s["speedup"]["tpot_p50"]["value"] == pytest.approx(3.0)
    assert s["speedup"]["tpot_p50"]["paired"] is False
    assert b["itl_s"] is None  # llmperf has no per-event times
    # llmperf's own ITL (e2e / events) is kept, labelled
    assert sd["llmperf_itl_s"]["p50"] == pytest.approx((0.050 + 599 * 0.015) / 200)


def test_ingest_cli_writes_summary(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "llmperf", tmp_path / "run")
    with pytest.raises(SystemExit) as e:
        main(["ingest-llmperf", str(tmp_path / "run")])
    assert e.value.code == 0
    assert (tmp_path / "run" / "summary.json").exists()


def test_ingest_rejects_folders_without_results(tmp_path: Path) -> None:
    with pytest.raises(AnalysisError, match="no llmperf result folders"):
        ingest(tmp_path)
