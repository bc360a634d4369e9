"""``spectrn sweep --local --runtime vllm-cpu``: a window sweep on real vLLM, the speculative server restarted
per window while the baseline keeps running."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support import spectrn

from .conftest import require_tier


@pytest.mark.own_servers
def test_window_sweep_on_real_vllm(tmp_path: Path) -> None:
    require_tier()
    proc = spectrn(
        "sweep",
        "--local",
        "--runtime",
        "vllm-cpu",
        "--drafts",
        "qwen3-1.7b",
        "--windows",
        "2,4",
        "--requests",
        "4",
        "--max-tokens",
        "24",
        "--prompts",
        "structured",
        "--sweep-id",
        "vs",
        "--out-dir",
        str(tmp_path),
        "--quiet",
        "--no-report",
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    manifest = json.loads((tmp_path / "vs" / "sweep.json").read_text(encoding="utf-8"))
    assert len(manifest["cells"]) == 2
    analysis = json.loads((tmp_path / "vs" / "analysis.json").read_text(encoding="utf-8"))
    eq = analysis["equivalence"]
    assert eq["compared"] == 8 and eq["matched"] == 8
    # each window's cell saw real acceptance counters of a server running that window
    for run in (tmp_path / "vs" / "cells").rglob("summary.json"):
        acc = json.loads(run.read_text(encoding="utf-8"))["levels"][0]["variants"]["speculative"]["acceptance"]
        assert acc["per_position"] is not None and len(acc["per_position"]) in (2, 4)


def test_vllm_cpu_sweep_refuses_several_drafts(tmp_path: Path) -> None:
    proc = spectrn(
        "sweep",
        "--local",
        "--runtime",
        "vllm-cpu",
        "--drafts",
        "qwen3-0.6b,qwen3-1.7b",
        "--windows",
        "2",
        "--out-dir",
        str(tmp_path),
    )
    assert proc.returncode == 2 and "one tiny draft model" in proc.stderr
