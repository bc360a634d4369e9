"""Hostile llmperf result files through ``spectrn ingest-llmperf``: text that is not valid Unicode is kept as
data, and rows whose numbers contradict each other become classified records, never a traceback or a figure."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from doubles.relhelp import records, run_cli, summary

FIXTURES = Path(__file__).resolve().parents[1] / "loadgen" / "fixtures" / "llmperf"


def _ingest(capsys: Any, tmp_path: Path, damage: Any) -> tuple[int, str, Path]:
    src = tmp_path / "src"
    shutil.copytree(FIXTURES, src)
    for variant in ("base", "sd"):
        f = next((src / variant).glob("*_individual_responses.json"))
        rows = json.loads(f.read_text(encoding="utf-8"))
        damage(rows, variant)
        # json.dumps writes a lone surrogate as the escape \ud800 and infinity as Infinity, as a hostile file would
        f.write_text(json.dumps(rows), encoding="utf-8")
    out = tmp_path / "results" / "llm"
    code, _, err = run_cli(["ingest-llmperf", str(src), "--out", str(out)], capsys)
    assert "Traceback" not in err, err
    return code, err, out


def test_a_lone_surrogate_in_an_error_message_is_kept_escaped(capsys, tmp_path) -> None:
    def damage(rows: list[dict[str, Any]], variant: str) -> None:
        if variant == "base":
            rows[0].update(error_code=500, error_msg="engine \ud800 died")

    code, err, out = _ingest(capsys, tmp_path, damage)
    assert code == 0, err
    (bad,) = [r for r in records(out) if r.get("error") and r["variant"] == "baseline"]
    assert (bad["error"], bad["error_msg"]) == ("http_500", "engine \\ud800 died")


def test_rows_with_impossible_numbers_are_classified_not_measured(capsys, tmp_path) -> None:
    """TTFT after the end (a negative TPOT), a negative time, an absurd token count, an infinite input count."""
    reasons = {
        ("speculative", 0): "ttft_s 12.0 is after the end (end_to_end_latency_s 9.035)",
        ("speculative", 1): "a negative time (ttft_s -0.05",
        ("baseline", 0): "number_output_tokens 1e+300 is not a count in 1..10000000",
        ("baseline", 1): "number_input_tokens inf is not a count in 0..10000000",
    }

    def damage(rows: list[dict[str, Any]], variant: str) -> None:
        if variant == "sd":
            rows[0]["ttft_s"] = 12.0
            rows[1]["ttft_s"] = -0.05
        else:
            rows[0]["number_output_tokens"] = 1e300
            rows[1]["number_input_tokens"] = float("inf")

    code, err, out = _ingest(capsys, tmp_path, damage)
    assert code == 0, err
    recs = {(r["variant"], r["index"]): r for r in records(out)}
    for key, why in reasons.items():
        assert recs[key]["error"] == "bad_response" and why in recs[key]["error_msg"], recs[key]
    lv = summary(out).levels[0]
    assert lv.variants["speculative"].requests.error_classes == {"bad_response": 2, "http_500": 1}
    assert lv.variants["baseline"].requests.error_classes == {"bad_response": 2}
    assert all(r["ttft"] <= r["e2e"] for r in recs.values() if not r.get("error"))
