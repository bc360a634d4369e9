"""Acceptance from real ``vllm:spec_decode_*`` counters: spectrn's parser and deltas against the tests' own
regex over the raw exposition, both the scrapes spectrn saved and the tests' independent scrapes."""

from __future__ import annotations

import math
from typing import Any

import pytest

from spectrn.loadgen.metrics import (
    SPEC_ACCEPTED,
    SPEC_ACCEPTED_PER_POS,
    SPEC_DRAFT_TOKENS,
    SPEC_DRAFTS,
    acceptance_delta,
    parse_metrics,
)
from spectrn.runtimes.vllm_cpu import VllmCpuPair

from .conftest import MEASURED, WINDOW, BenchRun, get_text, raw_counters

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"


def direct_acceptance(before_text: str, after_text: str) -> dict[str, Any]:
    """Acceptance computed straight from two raw scrapes, without spectrn's code."""
    b, a = raw_counters(before_text), raw_counters(after_text)
    d = {k: a[k] - b.get(k, 0.0) for k in a}
    drafts = d[DRAFTS]
    return {
        "drafts": drafts,
        "draft_tokens": d[DRAFT_TOKENS],
        "accepted_tokens": d[ACCEPTED],
        "rate": d[ACCEPTED] / d[DRAFT_TOKENS],
        "mean_accepted_length": 1 + d[ACCEPTED] / drafts,
        "per_position": [d[f"pos{i}"] / drafts for i in range(WINDOW)],
    }


def assert_same(spectrn_acc: dict[str, Any], direct: dict[str, Any]) -> None:
    for key in ("drafts", "draft_tokens", "accepted_tokens"):
        assert spectrn_acc[key] == direct[key], key
    for key in ("rate", "mean_accepted_length"):
        assert math.isclose(spectrn_acc[key], direct[key], rel_tol=1e-12), key
    assert spectrn_acc["per_position"] == pytest.approx(direct["per_position"], rel=1e-12)


def test_acceptance_equals_direct_computation_from_own_scrapes(completions_run: BenchRun) -> None:
    acc = completions_run.json("acceptance.json")
    spec = acc["speculative@c4"]
    assert spec["source"] == "counter deltas"
    # The tests scraped right before and after the CLI ran (no warm-up, nothing else on the servers).
    direct = direct_acceptance(completions_run.before["speculative"], completions_run.after["speculative"])
    assert_same(spec, direct)
    assert direct["drafts"] > 0
    MEASURED["acceptance_completions"] = {
        k: round(v, 4) if isinstance(v, float) else [round(x, 4) for x in v] for k, v in direct.items()
    }


def test_acceptance_equals_direct_computation_from_saved_scrapes(completions_run: BenchRun, chat_run: BenchRun) -> None:
    for run in (completions_run, chat_run):
        mdir = run.run_dir / "metrics"
        before = (mdir / "speculative.c4.before.prom").read_text(encoding="utf-8")
        after = (mdir / "speculative.c4.after.prom").read_text(encoding="utf-8")
        assert_same(run.json("acceptance.json")["speculative@c4"], direct_acceptance(before, after))
    MEASURED["acceptance_chat"] = {
        k: (round(v, 4) if isinstance(v, float) else v)
        for k, v in chat_run.json("acceptance.json")["speculative@c4"].items()
        if k != "per_position"
    }


def test_acceptance_is_real_and_partial(completions_run: BenchRun) -> None:
    spec = completions_run.json("acceptance.json")["speculative@c4"]
    # Every draft proposes exactly k tokens; acceptance is neither none nor all (the draft shares part of
    # the target's weights), and per-position rates fall with depth as they must.
    assert spec["draft_tokens"] == WINDOW * spec["drafts"]
    assert 0.05 < spec["rate"] < 0.95
    assert 1.0 < spec["mean_accepted_length"] < WINDOW + 1
    per_pos = spec["per_position"]
    assert len(per_pos) == WINDOW
    assert all(per_pos[i] >= per_pos[i + 1] for i in range(WINDOW - 1)), per_pos
    assert sum(per_pos) * spec["drafts"] == pytest.approx(spec["accepted_tokens"])
    # Every output token comes from a target step: drafts + 1 prefill step per request, and each step yields
    # its accepted tokens plus one (vLLM counts a draft per decode step of each request).
    recs = [r for r in completions_run.records() if r["variant"] == "speculative"]
    out_tokens = sum(r["completion_tokens"] for r in recs)
    assert out_tokens <= spec["drafts"] + spec["accepted_tokens"] + len(recs)


def test_baseline_reports_no_acceptance(completions_run: BenchRun) -> None:
    acc = completions_run.json("acceptance.json")
    assert acc["baseline@c4"] is None
    summary = completions_run.json("summary.json")
    lv = summary["levels"][0]
    assert lv["variants"]["baseline"]["acceptance"] is None
    s = lv["variants"]["speculative"]["acceptance"]
    assert s["source"] == "counters"
    spec = acc["speculative@c4"]
    assert s["rate"] == pytest.approx(spec["rate"])
    assert s["mean_accepted_length"] == pytest.approx(spec["mean_accepted_length"])
    assert s["per_position"] == pytest.approx(spec["per_position"])


def test_parser_copes_with_real_exposition(pair: VllmCpuPair, completions_run: BenchRun) -> None:
    text = get_text(f"{pair.endpoints['speculative']}/metrics")
    # The quirks are really there, so this test means something: TYPE lines name the family WITH _total,
    # and every counter has a separate *_created gauge family.
    assert "# TYPE vllm:spec_decode_num_drafts_total counter" in text
    assert "# TYPE vllm:spec_decode_num_drafts_created gauge" in text
    assert "vllm:spec_decode_num_accepted_tokens_per_pos_created{" in text
    snap = parse_metrics(text)
    assert snap.problems == []
    assert not [n for n in snap.samples if n.endswith("_created")]
    raw = raw_counters(text)
    assert snap.total(SPEC_DRAFTS) == raw[DRAFTS]
    assert snap.total(SPEC_DRAFT_TOKENS) == raw[DRAFT_TOKENS]
    assert snap.total(SPEC_ACCEPTED) == raw[ACCEPTED]
    assert snap.by_label(SPEC_ACCEPTED_PER_POS, "position") == {str(i): raw[f"pos{i}"] for i in range(WINDOW)}
    # Other real families parse too (counters, gauges, histograms), and labels are kept.
    assert snap.total("vllm:generation_tokens") is not None
    assert snap.has("vllm:num_requests_running")
    base = parse_metrics(get_text(f"{pair.endpoints['baseline']}/metrics"))
    assert base.problems == [] and not base.has(SPEC_DRAFTS)
    assert acceptance_delta(base, base) is None


def test_generation_counter_matches_records(completions_run: BenchRun) -> None:
    """vllm:generation_tokens over the run equals the tokens spectrn counted, on both servers."""
    for variant in ("baseline", "speculative"):
        before = parse_metrics(completions_run.before[variant]).total("vllm:generation_tokens")
        after = parse_metrics(completions_run.after[variant]).total("vllm:generation_tokens")
        assert before is not None and after is not None
        counted = sum(sum(r["chunk_tokens"]) for r in completions_run.records() if r["variant"] == variant)
        assert after - before == counted, variant
