"""/metrics parsing on vLLM's real exposition, and acceptance from counter deltas."""

from __future__ import annotations

import pytest

from doubles.replay import FIXTURES
from spectrn.loadgen.metrics import (
    SPEC_ACCEPTED,
    SPEC_DRAFTS,
    MetricsSnapshot,
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


def test_per_position_subtracts_a_nonzero_before_snapshot() -> None:
    """A server that served requests before the run: every counter, per position too, is a difference."""
    # window 2; before: 10 drafts, 20 draft tokens, 12 accepted (8 at position 0, 4 at position 1)
    before = parse_metrics(_snap(10, 20, 12, [8, 4]))
    # after: 30 drafts, 60 draft tokens, 29 accepted (20, 9): the run's own 20 drafts accepted 12 and 5
    after = parse_metrics(_snap(30, 60, 29, [20, 9]))
    acc = acceptance_delta(before, after)
    assert acc is not None and acc["source"] == "counter deltas"
    assert (acc["drafts"], acc["draft_tokens"], acc["accepted_tokens"]) == (20, 40, 17)
    assert acc["rate"] == pytest.approx(17 / 40)
    assert acc["mean_accepted_length"] == pytest.approx(1 + 17 / 20)
    assert acc["per_position"] == pytest.approx([12 / 20, 5 / 20])


def test_per_position_labels_are_summed_per_position_and_ordered_numerically() -> None:
    """Positions 0..11 from two engines: summed per position, ordered 0, 1, 2, ..., 10, 11 (not as text)."""

    def text(drafts: int, per_pos: dict[int, int]) -> str:
        lines = (
            [f'vllm:spec_decode_num_drafts_total{{engine="{e}"}} {drafts / 2}' for e in (0, 1)]
            + [f'vllm:spec_decode_num_draft_tokens_total{{engine="{e}"}} {drafts * 6}' for e in (0, 1)]
            + [
                f'vllm:spec_decode_num_accepted_tokens_total{{engine="{e}"}} {sum(per_pos.values()) / 2}'
                for e in (0, 1)
            ]
        )
        for p, v in per_pos.items():
            lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="{e}",position="{p}"}} {v / 2}'
                      for e in (0, 1)]  # fmt: skip
        return "\n".join(lines) + "\n"

    before = parse_metrics(text(100, {p: 50 - 4 * p for p in range(12)}))
    after = parse_metrics(text(200, {p: 2 * (50 - 4 * p) for p in range(12)}))
    acc = acceptance_delta(before, after)
    assert acc is not None
    assert acc["per_position"] == pytest.approx([(50 - 4 * p) / 100 for p in range(12)])


def test_counters_from_a_reference_server_that_served_requests_before_the_run() -> None:
    """The reference server counts one draft per decode event and one accepted token per token beyond the
    first: its own log is the truth. Requests before the first scrape must not count."""
    import asyncio
    import urllib.request

    import aiohttp

    from doubles.reference_server import Schedule, serve_in_thread
    from spectrn.loadgen.client import RequestParams, endpoint_url, run_request

    async def requests(base: str, n: int) -> None:
        params = RequestParams(model="ref-model", api="completions", max_tokens=17, timeout_s=30)
        async with aiohttp.ClientSession() as s:
            for i in range(n):
                rec = await run_request(s, endpoint_url(base, "completions"), params, "x", variant="v", index=i,
                                        prompt_id="p", prompt_class="c", level="c1", warmup=False)  # fmt: skip
                assert rec.ok, rec.error_msg

    def scrape(base: str) -> str:
        with urllib.request.urlopen(f"{base}/metrics", timeout=10) as resp:
            return str(resp.read().decode())

    with serve_in_thread(Schedule(ttft_s=0.001, gap_s=0.001, pattern=(3, 1, 4, 2), window=4)) as (base, log):
        asyncio.run(requests(base, 2))
        before = parse_metrics(scrape(base))
        asyncio.run(requests(base, 3))
        after = parse_metrics(scrape(base))
    # 17 tokens: 1 | 3 1 4 2 | 3 1 2 (the last cut to what is left): 7 decode events per request
    measured = [r["sizes"][1:] for r in log.requests[2:]]
    assert measured == [[3, 1, 4, 2, 3, 1, 2]] * 3
    events = [k for sizes in measured for k in sizes]
    acc = acceptance_delta(before, after)
    assert acc is not None and acc["drafts"] == len(events) == 21
    assert acc["accepted_tokens"] == sum(k - 1 for k in events) == 27
    assert acc["per_position"] == pytest.approx([sum(k > p + 1 for k in events) / 21 for p in range(4)])
    assert acc["per_position"] == pytest.approx([15 / 21, 9 / 21, 3 / 21, 0.0])


def _text(lines: list[str]) -> MetricsSnapshot:
    return parse_metrics("\n".join(lines) + "\n")


def test_one_snapshot_missing_is_not_reported() -> None:
    snap = parse_metrics(_snap(10, 40, 20))
    assert acceptance_delta(None, snap) is None and acceptance_delta(snap, None) is None


def test_counters_missing_one_family_are_not_reported() -> None:
    no_tokens = _text(["vllm:spec_decode_num_drafts_total 10", "vllm:spec_decode_num_accepted_tokens_total 5"])
    assert acceptance_delta(no_tokens, no_tokens) is None
    no_drafts = _text(["vllm:spec_decode_num_draft_tokens_total 10", "vllm:spec_decode_num_accepted_tokens_total 5"])
    assert acceptance_delta(no_drafts, no_drafts) is None


def test_v0_gauges_exactly() -> None:
    both = _text(["vllm:spec_decode_draft_acceptance_rate 0.7", "vllm:spec_decode_efficiency 0.9"])
    assert acceptance_delta(both, both) == {
        "source": "v0 gauge (cumulative since server start, not this run)",
        "rate": 0.7,
        "mean_accepted_length": None,
        "per_position": None,
        "efficiency": 0.9,
    }
    nan_eff = _text(["vllm:spec_decode_draft_acceptance_rate 0.7", "vllm:spec_decode_efficiency NaN"])
    assert (acceptance_delta(nan_eff, nan_eff) or {})["efficiency"] is None
    rate_only = _text(["vllm:spec_decode_draft_acceptance_rate 0.7"])
    assert (acceptance_delta(rate_only, rate_only) or {})["efficiency"] is None
    for edge in ("0.0", "1.0"):
        g = _text([f"vllm:spec_decode_draft_acceptance_rate {edge}"])
        assert (acceptance_delta(g, g) or {})["rate"] == float(edge)
    bad = _text(["vllm:spec_decode_draft_acceptance_rate 1.7"])
    assert acceptance_delta(bad, bad) == {
        "source": "counters unusable: vllm:spec_decode_draft_acceptance_rate is 1.7, not a rate in 0..1",
        "problem": "vllm:spec_decode_draft_acceptance_rate is 1.7, not a rate in 0..1",
        "rate": None,
        "mean_accepted_length": None,
        "per_position": None,
    }


@pytest.mark.parametrize(
    ("before", "after", "why"),
    [
        ((10, 70, 30), (5, 70, 30), "a counter went down during the run (counters reset: server restarted?)"),
        ((10, 70, 30), (10, 60, 30), "a counter went down during the run (counters reset: server restarted?)"),
        ((10, 70, 30), (10, 70, 20), "a counter went down during the run (counters reset: server restarted?)"),
        ((0, 0, 0), (0, 1, 1), "1 accepted tokens but no drafts"),
        ((0, 0, 0), (0, 1, 0), "1 draft tokens but no drafts"),
    ],
)
def test_each_impossible_delta_names_its_cause(before, after, why) -> None:
    acc = acceptance_delta(parse_metrics(_snap(*before)), parse_metrics(_snap(*after)))
    assert acc is not None and acc["source"] == f"counters unusable: {why}" and acc["problem"] == why


def test_a_run_without_any_draft() -> None:
    snap = parse_metrics(_snap(10, 40, 20, [12, 8]))
    assert acceptance_delta(snap, snap) == {
        "source": "counter deltas",
        "drafts": 0.0,
        "draft_tokens": 0.0,
        "accepted_tokens": 0.0,
        "rate": None,
        "mean_accepted_length": None,
        "per_position": None,
    }


def test_one_draft_every_token_accepted() -> None:
    acc = acceptance_delta(parse_metrics(_snap(0, 0, 0, [0, 0])), parse_metrics(_snap(1, 2, 2, [1, 1])))
    assert acc is not None and acc["source"] == "counter deltas"
    assert (acc["rate"], acc["mean_accepted_length"], acc["per_position"]) == (1.0, 3.0, [1.0, 1.0])
    no_pos = acceptance_delta(parse_metrics(_snap(0, 0, 0)), parse_metrics(_snap(1, 2, 2)))
    assert no_pos is not None and no_pos["per_position"] is None


def test_a_position_rate_between_one_and_two_is_unusable() -> None:
    acc = acceptance_delta(parse_metrics(_snap(0, 0, 0, [0])), parse_metrics(_snap(10, 20, 15, [15])))
    assert acc is not None and acc["rate"] is None and "per-position acceptance rate outside 0..1" in acc["source"]


def test_positions_new_since_the_before_snapshot_count_from_zero() -> None:
    acc = acceptance_delta(parse_metrics(_snap(10, 20, 10)), parse_metrics(_snap(20, 40, 20, [7, 3])))
    assert acc is not None and acc["per_position"] == pytest.approx([0.7, 0.3])


def test_positions_ordered_by_number_whatever_the_exposition_order() -> None:
    lines = ["vllm:spec_decode_num_drafts_total 10", "vllm:spec_decode_num_draft_tokens_total 40",
             "vllm:spec_decode_num_accepted_tokens_total 10"]  # fmt: skip
    order = [(3, 1), (1, 3), (0, 4), (2, 2)]
    after = _text(
        lines + [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{p}"}} {v}' for p, v in order]
    )
    acc = acceptance_delta(_text([]), after)
    assert acc is not None and acc["per_position"] == pytest.approx([0.4, 0.3, 0.2, 0.1])
    # labels that are not the positions 0..k-1 (a word, a gap, a number written twice) have no known order
    for odd in ([("1", 3), ("x", 5), ("0", 4)], [("0", 4), ("2", 3)], [("0", 4), ("01", 3)]):
        after2 = _text(
            lines + [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{position="{p}"}} {v}' for p, v in odd]
        )
        acc2 = acceptance_delta(_text([]), after2)
        assert acc2 is not None and acc2["rate"] is None and acc2["per_position"] is None
        assert acc2["source"] == (
            "counters unusable: vllm:spec_decode_num_accepted_tokens_per_pos position labels are not the numbers "
            f"0..{len(odd) - 1}"
        )


def test_a_declared_window_of_up_to_32_positions_is_used_and_more_is_not() -> None:
    """32 per-position series (the most speculative tokens spectrn accepts) are read; 33 are no window."""
    for n in (32, 33):
        per = [0.5 * 10] * n  # 10 drafts, half of them accepted at every position
        acc = acceptance_delta(parse_metrics(_snap(0, 0, 0)), parse_metrics(_snap(10, 10 * n, 5 * n, per)))
        assert acc is not None
        if n == 32:
            assert acc["per_position"] == pytest.approx([0.5] * 32) and acc["rate"] == pytest.approx(0.5)
        else:
            assert acc["rate"] is None and acc["source"] == (
                "counters unusable: 33 vllm:spec_decode_num_accepted_tokens_per_pos positions, more than the 32 "
                "speculative tokens spectrn accepts"
            )


def test_finite_counters_whose_ratio_overflows_are_unusable() -> None:
    """1e300 accepted over 1e-300 drafts: each counter finite, their ratio infinite."""
    acc = acceptance_delta(parse_metrics(_snap(0, 0, 0)), parse_metrics(_snap(1e-300, 1e300, 1e300)))
    assert acc is not None and acc["rate"] is None and acc["mean_accepted_length"] is None
    assert acc["source"] == "counters unusable: mean_accepted_length overflow (the counters are not counts of one run)"
    # differences of finite counters can overflow too: every field that did is named
    both = acceptance_delta(parse_metrics(_snap(0, -1e308, -1e308)), parse_metrics(_snap(1, 1e308, 1e308)))
    assert both is not None and both["rate"] is None
    assert both["source"] == (
        "counters unusable: draft_tokens, accepted_tokens, rate, mean_accepted_length overflow (the counters are not "
        "counts of one run)"
    )


def test_a_single_draft_token() -> None:
    acc = acceptance_delta(parse_metrics(_snap(0, 0, 0)), parse_metrics(_snap(1, 1, 1)))
    assert acc is not None and (acc["rate"], acc["mean_accepted_length"]) == (1.0, 2.0)
