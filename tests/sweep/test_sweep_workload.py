"""A local sweep sends the user's workload: classes (and later turns) from the file, in every cell."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow


def test_a_sweep_over_a_spec_bench_file_recommends_per_class(cli: Any, tmp_path: Path) -> None:
    rows = [
        {"question_id": 1, "category": "math", "turns": ["What is 2+2? Explain.", "And 3+3?"]},
        {"question_id": 2, "category": "writing", "turns": ["Write a short poem about rain."]},
        {"question_id": 3, "category": "math", "turns": ["What is the square root of 81?"]},
    ]
    source = tmp_path / "question.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "sw"
    code, _, err = cli("sweep", "--local", "--prompts", str(source), "--windows", "5", "--requests", "4",
                       "--concurrency", "2", "--time-scale", "0.05", "--max-tokens", "16", "--out-dir", str(out),
                       "--no-report")  # fmt: skip
    assert code == 0, err
    (sweep,) = out.iterdir()
    analysis = json.loads((sweep / "analysis.json").read_text())
    assert {"math", "writing", "math-t2"} <= set(analysis["classes"])
    assert {r["prompt_class"] for r in analysis["rows"]} >= {"math", "writing", "math-t2"}
