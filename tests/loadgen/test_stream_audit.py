"""Stream parsing edge cases a user's token counts depend on, with counts worked out by hand (audit, issue 29)."""

from __future__ import annotations

import json
from typing import Any

from spectrn.loadgen.stream import SseDecoder, StreamParser, consume, error_message


def _chat(content: str | None = None, thinking: str | None = None, **extra: Any) -> bytes:
    delta: dict[str, Any] = {}
    if content is not None:
        delta["content"] = content
    if thinking is not None:
        delta["reasoning_content"] = thinking
    return json.dumps({"choices": [{"index": 0, "delta": delta, **extra}]}).encode()


def _text(text: str, ids: list[int] | None = None, cum: int | None = None, finish: str | None = None) -> bytes:
    choice: dict[str, Any] = {"index": 0, "text": text, "finish_reason": finish}
    if ids is not None:
        choice["token_ids"] = ids
    obj: dict[str, Any] = {"choices": [choice]}
    if cum is not None:
        obj["usage"] = {"prompt_tokens": 3, "completion_tokens": cum}
    return json.dumps(obj).encode()


def _usage(total: int) -> bytes:
    return json.dumps({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": total}}).encode()


def _parse(*payloads: bytes, max_events: int = 1264) -> StreamParser:
    p = StreamParser(max_events=max_events)
    for i, payload in enumerate(payloads):
        p.event(payload, float(i))
    return p


def test_an_empty_token_ids_list_counts_zero_tokens_from_token_ids() -> None:
    p = _parse(_text("a", ids=[11]), _text("b", ids=[]), _text("c", ids=[12, 13]))
    assert p.chunk_tokens() == ([1, 0, 2], "token_ids", None)


def test_token_ids_on_only_some_events_fall_back_to_cumulative_usage() -> None:
    # usage 2, 3, 7: differences 2, 1, 4 (the first event's 2 token_ids are not enough to count by)
    p = _parse(_text("a", ids=[1, 2], cum=2), _text("b", cum=3), _text("cd", cum=7))
    assert p.chunk_tokens() == ([2, 1, 4], "usage", None)


def test_reasoning_text_is_a_chunk_and_weighs_in_the_text_estimate() -> None:
    # no token_ids, no per-event usage: the final 6 tokens split by text length, thinking included: 4 : 2
    p = _parse(_chat(thinking="abcd"), _chat(content="ef"), _usage(6))
    assert p.times == [0.0, 1.0]
    assert p.chunk_tokens() == ([4, 2], "text", None)
    assert p.text_parts == ["", "ef"]  # the answer's text only


def test_text_estimate_rounds_by_largest_remainder() -> None:
    # 10 tokens over lengths 1, 1, 1: 10/3 each, floors 3, 3, 3, one left for the first largest remainder
    p = _parse(_text("a"), _text("b"), _text("c"), _usage(10))
    assert p.chunk_tokens() == ([4, 3, 3], "text", None)
    # 5 tokens over lengths 1, 2, 2: 1, 2, 2 exactly
    q = _parse(_text("a"), _text("bc"), _text("de"), _usage(5))
    assert q.chunk_tokens() == ([1, 2, 2], "text", None)
    # 7 tokens over lengths 3, 3, 1: 21/7 = 3, 3, 1 exactly; 8 over the same: 24/7, 24/7, 8/7 -> 3, 3, 1 + one
    # more to the largest remainder (3/7, 3/7, 1/7): the first
    assert _parse(_text("abc"), _text("def"), _text("g"), _usage(8)).chunk_tokens()[0] == [4, 3, 1]
    # 5 tokens over lengths 3, 3, 4: exact shares 1.5, 1.5, 2 floor to 1, 1, 2; the one left goes to the first
    # largest remainder (0.5, 0.5, 0): the first event (rounding 1.5 up twice would give a token too many)
    assert _parse(_text("abc"), _text("def"), _text("ghij"), _usage(5)).chunk_tokens()[0] == [2, 1, 2]


def test_the_event_limit_allows_exactly_max_events_token_events() -> None:
    p = _parse(_text("a"), _text("b"), _text("c"), max_events=3)
    assert p.error is None and len(p.times) == 3
    q = _parse(_text("a"), _text("b"), _text("c"), _text("d"), max_events=3)
    assert (q.error, q.error_msg) == ("bad_response", "more than 3 token-bearing events: max_tokens is not honoured")
    assert len(q.times) == 3


def test_an_unchanged_cumulative_count_is_no_error_and_no_chunk() -> None:
    # a finish event repeating the count: not a new chunk, not a count going down
    p = _parse(_text("ab", cum=2), _text("", cum=2, finish="length"))
    assert p.error is None and p.chunk_tokens() == ([2], "usage", None)
    assert p.finish_reason == "length"


def test_the_last_finish_reason_sent_is_kept() -> None:
    p = _parse(_text("a", finish="length"), _text("b", finish="stop"))
    assert p.finish_reason == "stop"


def test_error_message_prefers_message_then_detail() -> None:
    assert error_message(b'{"error": {"message": "too long", "detail": "d", "code": 400}}') == "too long"
    assert error_message(b'{"detail": "bad field"}') == "bad field"
    assert error_message(b'{"message": "old style"}') == "old style"


def test_sse_framing_across_reads_with_crlf() -> None:
    p, d = StreamParser(), SseDecoder()
    body = b'data: {"choices":[{"index":0,"text":"ab","token_ids":[1,2]}]}\r\n\r\ndata: [DONE]\r\n\r\n'
    stopped = [consume(p, d, body[i : i + 7], float(i)) for i in range(0, len(body), 7)]
    assert stopped[-1] is True and not any(stopped[:-1])
    assert p.done and p.chunk_tokens() == ([2], "token_ids", None)
