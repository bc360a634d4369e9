"""/metrics parsing on vLLM's real exposition, and acceptance from counter deltas."""

from __future__ import annotations

import pytest

from doubles.replay import FIXTURES
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


def _snap(drafts: float, draft_tokens: float, accepted: float, per_pos: list[float] | None = None) -> str:
    lines = [
        "# TYPE vllm:spec_decode_num_drafts counter",
        f"vllm:spec_decode_num_drafts_total {drafts}",
        "# TYPE vllm:spec_decode_num_draft_tokens counter",
        f"vllm:spec_decode_num_draft_tokens_total {draft_tokens}",
        "# TYPE vllm:spec_decode_num_accepted_tokens counter",
        f"vllm:spec_decode_num_accepted_tokens_total {accepted}",
    ]
    if per_pos is not None:
        lines.append("# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter")
        lines += [
            f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{i}"}} {v}' for i, v in enumerate(per_pos)
        ]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("before", "after", "why"),
    [
        ((0, 0, 0), (10, 70, 80), "80 accepted tokens but only 70 draft tokens"),
        ((0, 0, 0), (0, 9, 5), "5 accepted tokens but no drafts"),
        ((0, 0, 0), (0, 7, 0), "7 draft tokens but no drafts"),
        ((10, 70, 30), (5, 35, 10), "a counter went down"),
        ((0, 0, 0), ("NaN", 70, 30), "vllm:spec_decode_num_drafts is nan"),
        ((0, 0, 0), (10, "+Inf", 30), "vllm:spec_decode_num_draft_tokens is inf"),
    ],
    ids=["accepted>drafted", "accepted-without-drafts", "draft-tokens-without-drafts", "reset", "nan", "inf"],
)
def test_impossible_counters_are_unusable_never_an_impossible_rate(before, after, why) -> None:
    import json

    acc = acceptance_delta(parse_metrics(_snap(*before)), parse_metrics(_snap(*after)))
    assert acc is not None and acc["source"].startswith("counters unusable: ") and why in acc["source"]
    assert acc["rate"] is None and acc["mean_accepted_length"] is None and acc["per_position"] is None
    json.dumps(acc, allow_nan=False)  # no NaN or infinity can reach acceptance.json


def test_per_position_rates_outside_0_1_are_unusable() -> None:
    before = parse_metrics(_snap(0, 0, 0, [0, 0]))
    after = parse_metrics(_snap(10, 70, 30, [25, 5]))  # 25 accepted at position 0 out of 10 drafts
    acc = acceptance_delta(before, after)
    assert acc is not None and acc["rate"] is None and "per-position" in acc["source"]


def test_v0_gauge_outside_0_1_is_unusable() -> None:
    for value in ("1.7", "NaN", "-0.1"):
        text = f"# TYPE vllm:spec_decode_draft_acceptance_rate gauge\nvllm:spec_decode_draft_acceptance_rate {value}\n"
        acc = acceptance_delta(parse_metrics(text), parse_metrics(text))
        assert acc is not None and acc["rate"] is None and acc["source"].startswith("counters unusable")


def test_sane_counters_still_give_rates() -> None:
    acc = acceptance_delta(parse_metrics(_snap(0, 0, 0, [0, 0])), parse_metrics(_snap(10, 70, 30, [8, 4])))
    assert acc is not None and acc["rate"] == pytest.approx(30 / 70) and acc["mean_accepted_length"] == 4.0
    assert acc["per_position"] == [0.8, 0.4]
