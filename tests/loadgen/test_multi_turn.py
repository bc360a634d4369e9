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


def test_the_server_sees_the_system_prompt_and_the_growing_conversation(tmp_path: Path) -> None:
    """Real HTTP to the reference server, which logs each body: turn N carries the system message, every earlier
    user turn and the server's own answers, in order."""
    import asyncio

    from doubles.reference_server import Schedule, serve_in_thread
    from spectrn.loadgen.arrivals import Level
    from spectrn.loadgen.plan import RunPlan
    from spectrn.loadgen.prompts import Prompt, PromptSet, build_schedule
    from spectrn.loadgen.runner import run_bench
    from spectrn.run.records import read_records

    turns = ["first question", "second question", "third question"]
    ps = PromptSet(name="t", prompts=[Prompt(id="c", prompt_class="chat", text=turns[0], turns=turns)],
                   system_prompt="You are terse.")  # fmt: skip
    with serve_in_thread(Schedule(ttft_s=0.002, gap_s=0.001, pattern=(1,))) as (url, log):
        plan = RunPlan(run_id="r", out_dir=tmp_path / "r", endpoints={"baseline": url},
                       schedule=build_schedule(ps, requests=1, warmup=0, seed=0),
                       params=RequestParams(model="ref-model", api="chat", max_tokens=3), levels=[Level("c1", 1)],
                       seed=0)  # fmt: skip
        asyncio.run(run_bench(plan))
        seen = [r["messages"] for r in log.requests]
    recs = sorted(read_records(tmp_path / "r" / "requests.jsonl"), key=lambda r: r.turn or 0)
    assert [r.turn for r in recs] == [1, 2, 3] and all(r.ok for r in recs)
    answers = [r.output_text for r in recs]
    assert all(answers)
    system = {"role": "system", "content": "You are terse."}
    assert seen[0] == [system, {"role": "user", "content": turns[0]}]
    assert seen[1] == [system, {"role": "user", "content": turns[0]}, {"role": "assistant", "content": answers[0]},
                       {"role": "user", "content": turns[1]}]  # fmt: skip
    assert seen[2] == [*seen[1], {"role": "assistant", "content": answers[1]}, {"role": "user", "content": turns[2]}]


def test_a_failed_turn_ends_its_conversation_and_the_rest_count_as_failed(tmp_path: Path) -> None:
    import asyncio

    from doubles.reference_server import Schedule, serve_in_thread
    from spectrn.analyze.summary import summarize
    from spectrn.loadgen.arrivals import Level
    from spectrn.loadgen.plan import RunPlan
    from spectrn.loadgen.prompts import Prompt, PromptSet, build_schedule
    from spectrn.loadgen.runner import run_bench
    from spectrn.run.folder import RunFolder

    turns = ["q1", "q2 fails", "q3"]
    ps = PromptSet(name="t", prompts=[Prompt(id="c", prompt_class="chat", text=turns[0], turns=turns)])
    with serve_in_thread(Schedule(ttft_s=0.002, gap_s=0.001, fail_prompts=("q2 fails",))) as (url, log):
        plan = RunPlan(run_id="r", out_dir=tmp_path / "r", endpoints={"baseline": url},
                       schedule=build_schedule(ps, requests=2, warmup=0, seed=0),
                       params=RequestParams(model="ref-model", api="chat", max_tokens=3), levels=[Level("c1", 1)],
                       seed=0)  # fmt: skip
        asyncio.run(run_bench(plan))
        sent = [r["messages"][-1]["content"] for r in log.requests]
    assert sent == ["q1", "q2 fails"] * 2  # turn 3 is never sent: it has no answer to turn 2 to follow
    folder = RunFolder.open(tmp_path / "r")
    recs = sorted(folder.records(), key=lambda r: (r.index, r.turn or 0))
    assert [(r.turn, r.error) for r in recs] == [(1, None), (2, "http_500"), (3, "conversation_ended")] * 2
    assert recs[2].error_msg == "turn 2 failed: http_500" and recs[2].prompt_class == "chat-t3"
    summary = summarize(folder.records(), folder.meta)
    rq = summary.levels[0].variants["baseline"].requests
    assert (rq.planned, rq.completed, rq.errors) == (6, 2, 4)  # every planned turn accounted for


def test_a_class_too_long_for_its_turn_suffix_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    from spectrn.errors import ConfigError
    from spectrn.loadgen.workloads import load_workload

    long = "c" * 62  # a safe name; "<long>-t2" is not
    source = tmp_path / "question.jsonl"
    source.write_text(json.dumps({"question_id": 1, "category": long, "turns": ["a question", "a follow-up"]}) + "\n")
    with pytest.raises(ConfigError) as e:
        load_workload(str(source))
    assert "leaves no room for the turn suffix" in e.value.message and "line 1" in e.value.message
    single = tmp_path / "single.jsonl"
    single.write_text(json.dumps({"question_id": 1, "category": long, "turns": ["a question"]}) + "\n")
    assert load_workload(str(single))[0].prompts[0].prompt_class == long  # one turn: no suffix, no limit
