"""Token accounting and output equivalence on real vLLM streams, through ``spectrn bench``'s files."""

from __future__ import annotations

from collections import Counter
from typing import Any

from .conftest import MAX_TOKENS, MEASURED, WINDOW, BenchRun


def _check_accounting(run: BenchRun, expected_per_variant: int) -> dict[str, Counter[int]]:
    recs = run.records()
    by_variant: dict[str, list[dict[str, Any]]] = {}
    for r in recs:
        by_variant.setdefault(r["variant"], []).append(r)
    assert {v: len(rs) for v, rs in by_variant.items()} == {
        "baseline": expected_per_variant,
        "speculative": expected_per_variant,
    }
    sizes: dict[str, Counter[int]] = {}
    for variant, rs in by_variant.items():
        for r in rs:
            where = f"{variant} #{r['index']} ({r['prompt_id']})"
            assert r.get("error") is None, f"{where}: {r.get('error')}: {r.get('error_msg')}"
            assert r["status"] == 200
            assert r["token_source"] == "token_ids", where
            # The count from token_ids, event by event, equals the server's own usage for every request.
            assert sum(r["chunk_tokens"]) == r["completion_tokens"] == MAX_TOKENS, where
            assert len(r["output_token_ids"]) == MAX_TOKENS, where
            assert len(r["chunk_tokens"]) == len(r["chunk_times"]), where
            assert all(n >= 1 for n in r["chunk_tokens"]), where
            assert r["chunk_times"] == sorted(r["chunk_times"]), where
            assert r["prompt_tokens"] and r["prompt_tokens"] > 0, where
        sizes[variant] = Counter(n for r in rs for n in r["chunk_tokens"])
    # Speculation puts several tokens in one event (accepted drafts + bonus, up to k + 1): counting events
    # would undercount, so this run must contain such events for the check above to mean anything.
    multi = sum(c for n, c in sizes["speculative"].items() if n > 1)
    assert multi > 0, sizes
    assert any(1 < n <= WINDOW + 1 for n in sizes["speculative"]), sizes
    return sizes


def test_completions_token_counts_match_usage(completions_run: BenchRun) -> None:
    sizes = _check_accounting(completions_run, 32)
    MEASURED["tokens_per_event_completions"] = {v: dict(sorted(c.items())) for v, c in sizes.items()}


def test_chat_token_counts_match_usage(chat_run: BenchRun) -> None:
    sizes = _check_accounting(chat_run, 12)
    MEASURED["tokens_per_event_chat"] = {v: dict(sorted(c.items())) for v, c in sizes.items()}


def test_greedy_outputs_identical(completions_run: BenchRun, chat_run: BenchRun) -> None:
    """Speculative decoding is lossless: at temperature 0 both servers give the same tokens per prompt."""
    for run in (completions_run, chat_run):
        recs = run.records()
        base = {r["index"]: r for r in recs if r["variant"] == "baseline"}
        spec = {r["index"]: r for r in recs if r["variant"] == "speculative"}
        assert base.keys() == spec.keys()
        for i in base:
            assert base[i]["prompt_id"] == spec[i]["prompt_id"]
            assert base[i]["output_token_ids"] == spec[i]["output_token_ids"], f"index {i} diverges"
            assert base[i]["output_text"] == spec[i]["output_text"]
        summary = run.json("summary.json")
        eq = summary["levels"][0]["equivalence"]
        assert eq["matched"] == eq["compared"] == len(base), eq
        assert not [f for f in summary["findings"] if f["code"] == "divergence"]
    out = completions_run.proc.stdout + completions_run.proc.stderr
    assert "32/32 greedy outputs identical" in out


def test_same_prompt_same_output_across_requests(completions_run: BenchRun) -> None:
    """Greedy decoding of one prompt is reproducible on each server, whatever the batch it ran in."""
    recs = completions_run.records()
    for variant in ("baseline", "speculative"):
        outputs: dict[str, set[tuple[int, ...]]] = {}
        for r in recs:
            if r["variant"] == variant:
                outputs.setdefault(r["prompt_id"], set()).add(tuple(r["output_token_ids"]))
        assert all(len(o) == 1 for o in outputs.values()), variant
        assert len(outputs) > 1  # several distinct prompts were exercised
