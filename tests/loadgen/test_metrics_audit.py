"""Acceptance from /metrics counter deltas, every field worked out by hand (audit, issue 29).

Definitions (``spectrn.loadgen.metrics``): d, t, a = deltas of drafts, draft tokens, accepted tokens (summed
over every label set); rate = a / t; mean accepted length = 1 + a / d; per-position rate i = delta
accepted_per_pos{position=i} / d.
"""

from __future__ import annotations

import pytest

from spectrn.loadgen.metrics import acceptance_delta, parse_metrics


def _exposition(
    drafts: tuple[int, int], tokens: tuple[int, int], accepted: tuple[int, int], per_pos: list[tuple[int, int]]
) -> str:
    """Upstream vLLM's text for two engines (0 and 1), with _created samples as vLLM sends them."""
    lines = []
    for fam, values in (
        ("vllm:spec_decode_num_drafts", drafts),
        ("vllm:spec_decode_num_draft_tokens", tokens),
        ("vllm:spec_decode_num_accepted_tokens", accepted),
    ):
        lines.append(f"# TYPE {fam} counter")
        for engine, v in enumerate(values):
            lines.append(f'{fam}_total{{engine="{engine}",model_name="m"}} {v}.0')
            lines.append(f'{fam}_created{{engine="{engine}",model_name="m"}} 1.7e+09')
    fam = "vllm:spec_decode_num_accepted_tokens_per_pos"
    lines.append(f"# TYPE {fam} counter")
    for pos, values in enumerate(per_pos):
        for engine, v in enumerate(values):
            lines.append(f'{fam}_total{{engine="{engine}",model_name="m",position="{pos}"}} {v}.0')
    return "\n".join(lines) + "\n"


def test_deltas_sum_engines_and_give_every_rate() -> None:
    before = parse_metrics(_exposition((6, 4), (18, 12), (7, 5), [(4, 2), (2, 2), (1, 1)]))
    after = parse_metrics(_exposition((16, 14), (48, 42), (22, 20), [(14, 12), (6, 5), (2, 3)]))
    # drafts 30 - 10 = 20; draft tokens 90 - 30 = 60; accepted 42 - 12 = 30
    # per position: (26 - 6) / 20 = 1.0, (11 - 4) / 20 = 0.35, (5 - 2) / 20 = 0.15
    assert acceptance_delta(before, after) == {
        "source": "counter deltas",
        "drafts": 20.0,
        "draft_tokens": 60.0,
        "accepted_tokens": 30.0,
        "rate": 0.5,
        "mean_accepted_length": 2.5,
        "per_position": pytest.approx([1.0, 0.35, 0.15]),
    }


def test_every_draft_token_accepted_is_a_rate_of_one() -> None:
    before = parse_metrics(_exposition((0, 0), (0, 0), (0, 0), [(0, 0), (0, 0)]))
    after = parse_metrics(_exposition((5, 0), (10, 0), (10, 0), [(5, 0), (5, 0)]))
    got = acceptance_delta(before, after)
    assert got is not None
    assert (got["rate"], got["mean_accepted_length"], got["per_position"]) == (1.0, 3.0, [1.0, 1.0])


def test_thirty_two_positions_are_a_real_window() -> None:
    before = parse_metrics(_exposition((0, 0), (0, 0), (0, 0), [(0, 0)] * 32))
    after = parse_metrics(_exposition((4, 0), (128, 0), (4, 0), [(1, 0)] * 4 + [(0, 0)] * 28))
    got = acceptance_delta(before, after)
    assert got is not None and got["source"] == "counter deltas"
    assert got["per_position"] == [0.25] * 4 + [0.0] * 28


def test_draft_tokens_without_drafts_are_unusable() -> None:
    zero = parse_metrics(_exposition((0, 0), (0, 0), (0, 0), []))
    after = parse_metrics(_exposition((0, 0), (8, 0), (0, 0), []))
    assert acceptance_delta(zero, after) == {
        "source": "counters unusable: 8 draft tokens but no drafts",
        "problem": "8 draft tokens but no drafts",
        "rate": None,
        "mean_accepted_length": None,
        "per_position": None,
    }


def test_v0_gauges_report_the_cumulative_rate_and_efficiency() -> None:
    text = (
        "# TYPE vllm:spec_decode_draft_acceptance_rate gauge\n"
        'vllm:spec_decode_draft_acceptance_rate{model_name="m"} 0.625\n'
        "# TYPE vllm:spec_decode_efficiency gauge\n"
        'vllm:spec_decode_efficiency{model_name="m"} 0.75\n'
    )
    assert acceptance_delta(parse_metrics(text), parse_metrics(text)) == {
        "source": "v0 gauge (cumulative since server start, not this run)",
        "rate": 0.625,
        "mean_accepted_length": None,
        "per_position": None,
        "efficiency": 0.75,
    }
