"""/metrics parsing on vLLM's real exposition, and acceptance from counter deltas."""

from __future__ import annotations

import pytest
from lg_support import FIXTURES

from spectrn.loadgen.metrics import (
    SPEC_ACCEPTED,
    SPEC_DRAFTS,
    acceptance_delta,
    parse_metrics,
)

REAL = FIXTURES / "vllm-real"


def test_real_speculative_exposition_with_total_type_lines_and_created_gauges() -> None:
    after = parse_metrics((REAL / "draft_metrics_after.prom").read_text())
    assert not after.problems
    assert after.total(SPEC_DRAFTS) == 324.0
    assert after.total(SPEC_ACCEPTED) == 382.0
    # *_created gauges are not mistaken for counter values
    assert after.total(SPEC_DRAFTS) < 1e6
    assert set(after.by_label("vllm:spec_decode_num_accepted_tokens_per_pos", "position")) == {"0", "1", "2", "3"}


def test_acceptance_from_real_counter_deltas_matches_the_server_log() -> None:
    before = parse_metrics((REAL / "draft_metrics_before.prom").read_text())
    after = parse_metrics((REAL / "draft_metrics_after.prom").read_text())
    acc = acceptance_delta(before, after)
    assert acc is not None
    # server.log: "Mean acceptance length: 2.18 ... Per-position acceptance rate: 0.574, 0.284, 0.207, 0.114,
    # Avg Draft acceptance rate: 29.5%"
    assert acc["rate"] == pytest.approx(382 / 1296)
    assert acc["rate"] == pytest.approx(0.295, abs=0.0005)
    assert acc["mean_accepted_length"] == pytest.approx(2.18, abs=0.005)
    assert acc["per_position"] == pytest.approx([0.574, 0.284, 0.207, 0.114], abs=0.0006)


def test_plain_server_reports_no_acceptance() -> None:
    snap = parse_metrics((REAL / "base_metrics_after.prom").read_text())
    assert not snap.problems
    assert acceptance_delta(snap, snap) is None


@pytest.mark.parametrize("garbage", ["", "this is { not prometheus", "\x00\x01\x02", "# TYPE x counter\nx{a=} 1\n"])
def test_garbled_metrics_never_crash(garbage: str) -> None:
    snap = parse_metrics(garbage)
    assert acceptance_delta(snap, snap) is None


def test_counter_reset_is_flagged_not_negative() -> None:
    after = parse_metrics((REAL / "draft_metrics_before.prom").read_text())
    before = parse_metrics((REAL / "draft_metrics_after.prom").read_text())
    acc = acceptance_delta(before, after)
    assert acc is not None and acc["rate"] is None and "reset" in acc["source"]


def test_v0_gauge_fallback_is_labelled() -> None:
    text = "# TYPE vllm:spec_decode_draft_acceptance_rate gauge\nvllm:spec_decode_draft_acceptance_rate 0.7\n"
    snap = parse_metrics(text)
    acc = acceptance_delta(snap, snap)
    assert acc is not None and acc["rate"] == 0.7 and "v0 gauge" in acc["source"]


def test_missing_snapshot_is_not_reported() -> None:
    assert acceptance_delta(None, None) is None
