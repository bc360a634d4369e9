"""Multi-turn conversations replayed turn by turn with the growing context, each turn's figures kept apart."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from spectrn.loadgen.client import RequestParams, build_body

pytestmark = pytest.mark.slow

TURNS = [
    ["Write a haiku about the sea.", "Now one about the mountains.", "And a last one about the city."],
    ["List three prime numbers.", "Add two more."],
    ["Explain what a hash map is.", "Give an example in Python.", "What is its lookup cost?"],
]


def _spec_bench(path: Path) -> Path:
    rows = [{"question_id": i, "category": ["writing", "math", "coding"][i], "turns": t} for i, t in enumerate(TURNS)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_the_body_carries_the_conversation_so_far():
    history = [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}]
    chat = build_body(RequestParams(model="m", api="chat"), "q2", history)
    assert chat["messages"] == [*history, {"role": "user", "content": "q2"}]
    completions = build_body(RequestParams(model="m", api="completions"), "q2", history)
    assert completions["prompt"] == "q1\n\na1\n\nq2"
    assert build_body(RequestParams(model="m", api="chat"), "q")["messages"] == [{"role": "user", "content": "q"}]


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_a_multi_turn_file_is_replayed_and_reported_per_turn(cli: Any, tmp_path: Path, api: str) -> None:
    source = _spec_bench(tmp_path / "question.jsonl")
    out = tmp_path / "out"
    code, _, err = cli("bench", "--local", "--prompts", str(source), "--requests", "6", "--concurrency", "2",
                       "--time-scale", "0.05", "--max-tokens", "24", "--api", api, "--out-dir", str(out),
                       "--run-id", "r", "--no-report")  # fmt: skip
    assert code == 0, err
    records = [json.loads(line) for line in (out / "r" / "requests.jsonl").read_text().splitlines()]
    measured = [r for r in records if not r.get("warmup")]
    # every scheduled conversation sent all its turns, on both endpoints, in order
    by_conv: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in measured:
        by_conv.setdefault((r["variant"], r["index"]), []).append(r)
    for (_variant, _index), recs in by_conv.items():
        recs.sort(key=lambda r: r["turn"])
        n = len(TURNS[int(recs[0]["prompt_id"])])  # Spec-Bench's question_id is the prompt id
        assert [r["turn"] for r in recs] == list(range(1, n + 1))
        first = recs[0]["prompt_class"]
        assert [r["prompt_class"] for r in recs[1:]] == [f"{first}-t{k}" for k in range(2, n + 1)]
        # the context grows: each turn's prompt holds the previous prompt and the server's answer
        for prev, cur in zip(recs, recs[1:], strict=False):
            assert cur["prompt_tokens"] > prev["prompt_tokens"] + prev["completion_tokens"] - 1
        assert all(r["sent_at"] >= p["sent_at"] + p["e2e"] - 1e-3 for p, r in zip(recs, recs[1:], strict=False))
    summary = json.loads((out / "r" / "summary.json").read_text())
    (level,) = summary["levels"]
    assert set(level["by_prompt_class"]) == {"writing", "math", "coding", "writing-t2", "math-t2", "coding-t2",
                                             "writing-t3", "coding-t3"}  # fmt: skip
    total = {v: sum(1 for r in measured if r["variant"] == v) for v in ("baseline", "speculative")}
    assert total["baseline"] == total["speculative"]
    assert level["variants"]["baseline"]["requests"]["planned"] == total["baseline"]
    assert level["variants"]["baseline"]["requests"]["completed"] == total["baseline"]
    assert summary["verdict"]["clean"], summary["findings"]
    eq = level["equivalence"]
    assert eq["compared"] == total["baseline"] and eq["matched"] == eq["compared"]


def test_a_rows_output_length_is_its_requests_max_tokens(cli: Any, tmp_path: Path) -> None:
    """A workload's per-row output length is what its request asks for (capped at bench.max_tokens)."""
    lengths = {"a": 5, "b": 9, "c": 13, "d": 400}
    rows = [{"id": k, "prompt": f"Tell me about topic {k} in detail.", "class": "x", "output_tokens": n}
            for k, n in lengths.items()]  # fmt: skip
    source = tmp_path / "w.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    code, _, err = cli("bench", "--local", "--prompts", str(source), "--requests", "8", "--concurrency", "2",
                       "--time-scale", "0.05", "--max-tokens", "32", "--ignore-eos", "--out-dir", str(out),
                       "--run-id", "r", "--no-report")  # fmt: skip
    assert code == 0, err
    records = [json.loads(line) for line in (out / "r" / "requests.jsonl").read_text().splitlines()]
    assert records and all(r["completion_tokens"] == min(lengths[r["prompt_id"]], 32) for r in records)
