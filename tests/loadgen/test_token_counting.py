"""Tokens per chunk, exactly, from each source (``StreamParser.chunk_tokens``, ``_apportion``).

Expected counts are written out by hand from the events each test sends; the cumulative-usage tests use
counts whose running totals differ from their per-event sizes, so reading the cumulative value as the event's
size cannot pass.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from spectrn.loadgen.stream import MAX_TOKEN_COUNT, StreamParser, _apportion


def ev(text: str | None = None, ids: list[int] | None = None, cum: int | None = None, chat: bool = False) -> bytes:
    choice: dict[str, Any] = {"index": 0}
    if chat:
        choice["delta"] = {"content": text}
    else:
        choice["text"] = text
    if ids is not None:
        choice["token_ids"] = ids
    obj: dict[str, Any] = {"choices": [choice]}
    if cum is not None:
        obj["usage"] = {"prompt_tokens": 7, "completion_tokens": cum}
    return json.dumps(obj).encode()


def final_usage(total: int) -> bytes:
    return json.dumps({"choices": [], "usage": {"prompt_tokens": 7, "completion_tokens": total}}).encode()


def parse(*payloads: bytes) -> StreamParser:
    p = StreamParser()
    for i, payload in enumerate(payloads):
        p.event(payload, float(i))
    p.event(b"[DONE]", float(len(payloads)))
    return p


# ---- cumulative usage ----------------------------------------------------------------------------


def test_cumulative_usage_gives_each_events_difference_not_the_running_total() -> None:
    # sizes 1, 3, 1, 4, 2: running totals 1, 4, 5, 9, 11 (never equal to the sizes after the first)
    p = parse(ev("a", cum=1), ev("bcd", cum=4), ev("e", cum=5), ev("fghi", cum=9), ev("jk", cum=11))
    counts, source, warning = p.chunk_tokens()
    assert (counts, source, warning) == ([1, 3, 1, 4, 2], "usage", None)
    assert sum(counts) == p.completion_tokens == 11


def test_cumulative_usage_starting_above_one() -> None:
    # a first event of 2 tokens: its difference from 0 is 2
    p = parse(ev("ab", cum=2), ev("cde", cum=5), ev("f", cum=6))
    assert p.chunk_tokens()[0] == [2, 3, 1]


def test_tokens_announced_after_the_last_text_go_to_the_last_chunk() -> None:
    # the finish event carries usage 12 without text: 12 - 9 = 3 more tokens on the last chunk
    p = parse(ev("a", cum=1), ev("bcd", cum=4), ev("efghi", cum=9), final_usage(12))
    counts, source, _ = p.chunk_tokens()
    assert (counts, source) == ([1, 3, 8], "usage")


def test_usage_without_text_is_a_chunk_of_its_own() -> None:
    # the Neuron fork's detokenizer holds text back: usage grew by 2 with no text, and it is a step
    p = parse(ev("a", cum=1), ev("", cum=3), ev("bcd", cum=6))
    assert p.chunk_tokens()[0] == [1, 2, 3]
    assert p.times == [0.0, 1.0, 2.0]


def test_chat_role_event_and_finish_event_are_not_chunks() -> None:
    role = json.dumps({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}).encode()
    p = parse(role, ev("a", cum=1, chat=True), ev("bc", cum=3, chat=True), final_usage(3))
    assert p.chunk_tokens() == ([1, 2], "usage", None)
    assert p.times == [1.0, 2.0]


def test_usage_going_down_is_refused() -> None:
    p = parse(ev("a", cum=4), ev("b", cum=3))
    assert p.error == "bad_response" and "went down from 4 to 3" in (p.error_msg or "")


# ---- token ids --------------------------------------------------------------------------------------


def test_token_ids_count_per_event_and_win_over_usage_with_a_warning() -> None:
    p = parse(ev("a", ids=[5], cum=1), ev("bcd", ids=[6, 7, 8], cum=4), ev("ef", ids=[9, 10], cum=7))
    counts, source, warning = p.chunk_tokens()
    assert (counts, source) == ([1, 3, 2], "token_ids")
    assert warning == "token_ids count 6 differs from usage.completion_tokens 7; token_ids counted"
    agree = parse(ev("a", ids=[5], cum=1), ev("bcd", ids=[6, 7, 8], cum=4))
    assert agree.chunk_tokens() == ([1, 3], "token_ids", None)


def test_token_ids_without_usage_have_no_warning() -> None:
    p = parse(ev("a", ids=[1]), ev("bc", ids=[2, 3]))
    assert p.chunk_tokens() == ([1, 2], "token_ids", None)


def test_one_event_without_token_ids_falls_back_to_usage() -> None:
    p = parse(ev("a", ids=[1], cum=1), ev("bcd", cum=4), ev("e", ids=[9], cum=5))
    assert p.chunk_tokens() == ([1, 3, 1], "usage", None)


# ---- text estimates -----------------------------------------------------------------------------


def test_final_usage_only_is_split_by_text_length() -> None:
    p = parse(ev("a"), ev("bbbb"), ev("cc"), ev("ddd"), final_usage(20))
    counts, source, warning = p.chunk_tokens()
    # weights 1, 4, 2, 3 of 10: 20 tokens -> 2, 8, 4, 6 exactly
    assert (counts, source, warning) == ([2, 8, 4, 6], "text", None)


def test_no_count_at_all_is_one_token_per_event() -> None:
    assert parse(ev("a"), ev("bb"), ev("c")).chunk_tokens() == ([1, 1, 1], "text", None)


def test_no_events_no_counts() -> None:
    assert parse(final_usage(5)).chunk_tokens() == ([], "text", None)
    assert parse().chunk_tokens() == ([], "text", None)


# ---- _apportion ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("total", "weights", "expected"),
    [
        (10, [1, 1, 8], [1, 1, 8]),
        (20, [1, 4, 2, 3], [2, 8, 4, 6]),
        # largest remainders: 10 * [1, 1, 1] / 3 = 3.33 each -> the first gets the spare token (ties by position)
        (10, [1, 1, 1], [4, 3, 3]),
        # 7 * [5, 3] / 8 = 4.375, 2.625 -> floors 4, 2; the larger remainder (0.625) takes the spare
        (7, [5, 3], [4, 3]),
        # 9 * [1, 2] / 3 = 3, 6 exactly
        (9, [1, 2], [3, 6]),
        # zero-length texts count as nothing; all zero: split evenly
        (6, [0, 0, 0], [2, 2, 2]),
        (5, [0, 4], [1, 4]),
        # negative weights are read as zero
        (5, [-3, 4], [1, 4]),
        # total at or below the number of events: one each
        (3, [5, 5, 5], [1, 1, 1]),
        (2, [5, 5, 5], [1, 1, 1]),
        (0, [1], [1]),
        # raising a zero-weight event to one token takes it back from the largest: 10 * [0, 1, 9] / 10
        (10, [0, 1, 9], [1, 1, 8]),
        (10, [0, 0, 10], [1, 1, 8]),
        # several events raised to one: 4 x 1 taken back from the largest counts
        (12, [0, 0, 0, 0, 100], [1, 1, 1, 1, 8]),
        # the take-back goes round the largest counts one token at a time: 4, 4 -> 3, 3 -> 2, 2 -> 1, 2
        (8, [0, 0, 0, 0, 0, 5, 5], [1, 1, 1, 1, 1, 1, 2]),
        # a zero-weight event gets one token, not a share: 20 x [0, 1] -> 1, 20, then one taken back -> 1, 19
        (20, [0, 1], [1, 19]),
        # all weights zero: an even split, the spare tokens to the first events (7 / 3 = 2, remainder 1)
        (7, [0, 0, 0], [3, 2, 2]),
        # largest remainders by total x weight mod sum: 10 x [1, 2, 4] / 7 -> floors 1, 2, 5 (sum 8);
        # remainders 3, 6, 5 -> the spare two go to the second and the third
        (10, [1, 2, 4], [1, 3, 6]),
        # taking back starts at the largest count: [1, 3, 7] (one too many) -> [1, 3, 6]
        (10, [0, 3, 7], [1, 3, 6]),
    ],
)
def test_apportion_by_hand(total: int, weights: list[int], expected: list[int]) -> None:
    assert _apportion(total, weights) == expected


def test_apportion_empty() -> None:
    assert _apportion(0, []) == []
    assert _apportion(5, []) == []


@pytest.mark.parametrize("total", [-1, MAX_TOKEN_COUNT + 1, 2.0, True, "3", None])
def test_apportion_refuses_what_is_not_a_count(total: Any) -> None:
    with pytest.raises(ValueError, match="token total must be an integer in 0..10000000"):
        _apportion(total, [1, 2])


def test_apportion_at_the_largest_count() -> None:
    out = _apportion(MAX_TOKEN_COUNT, [1, 1])
    assert out == [MAX_TOKEN_COUNT // 2, MAX_TOKEN_COUNT // 2]
