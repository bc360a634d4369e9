"""Property tests of the SSE framing and token accounting: whatever bytes a server sends, in whatever read
sizes, the parser gives chunks with counts or one classified error, in bounded time and memory.

Budget: 300 examples per property, derandomized (the same examples every run, no example database) and with a
deadline, so the file runs in seconds (run with
``--hypothesis-show-statistics`` to see the counts)."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spectrn.loadgen.client import ERROR_CLASSES
from spectrn.loadgen.stream import (
    MAX_EVENT_BYTES,
    MAX_TOKEN_COUNT,
    SseDecoder,
    StreamParser,
    _apportion,
    consume,
    finish,
)

PROPS = settings(
    max_examples=300, deadline=1000, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)
CLASSES = set(ERROR_CLASSES) - {"http_<status>"}


def run(chunks: list[bytes], max_events: int = 200) -> tuple[StreamParser, list[int], str, str | None]:
    stream = StreamParser(max_events=max_events)
    decoder = SseDecoder()
    stopped = False
    for i, data in enumerate(chunks):
        if consume(stream, decoder, data, float(i)):
            stopped = True
            break
    if not stopped:
        finish(stream, decoder, float(len(chunks)))
    counts, source, warning = stream.chunk_tokens()
    return stream, counts, source, warning


def check(stream: StreamParser, counts: list[int], source: str) -> None:
    assert stream.error is None or stream.error in CLASSES, stream.error
    assert stream.error is None or stream.error_msg
    assert len(counts) == len(stream.times) <= stream.max_events
    assert all(isinstance(k, int) and 0 <= k <= MAX_TOKEN_COUNT for k in counts)
    assert source in ("token_ids", "usage", "text")
    assert stream.times == sorted(stream.times)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, prev = [], 0
    for p in [*points, len(data)]:
        out.append(data[prev:p])
        prev = p
    return [c for c in out if c]


@PROPS
@given(st.binary(max_size=4096), st.lists(st.integers(min_value=0), max_size=20))
def test_any_bytes_give_chunks_or_a_classified_error(data: bytes, cuts: list[int]) -> None:
    stream, counts, source, _ = run(split(data, cuts))
    check(stream, counts, source)


# JSON values of every type, for the fields a server fills in
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
anything = st.recursive(
    scalars,
    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
    max_leaves=6,
)
counts_ = st.one_of(st.integers(min_value=0, max_value=40), anything)
usage = st.one_of(
    st.none(), anything, st.fixed_dictionaries({}, optional={"completion_tokens": counts_, "prompt_tokens": counts_})
)
choice = st.fixed_dictionaries(
    {"index": st.just(0)},
    optional={
        "text": st.one_of(st.text(max_size=6), anything),
        "delta": st.one_of(st.fixed_dictionaries({}, optional={"content": st.text(max_size=6)}), anything),
        "token_ids": st.one_of(st.lists(st.integers(min_value=0, max_value=50_000), max_size=5), anything),
    },
)
event_obj = st.fixed_dictionaries(
    {}, optional={"choices": st.one_of(st.lists(choice, max_size=2), anything), "usage": usage}
)


def frame(obj: Any, garble: int) -> bytes:
    body = json.dumps(obj, allow_nan=True).encode()
    if garble == 1:
        body = body[: len(body) // 2]  # a torn event
    return b"data: " + body + (b"\r\n\r\n" if garble == 2 else b"\n\n")


@PROPS
@given(
    st.lists(st.tuples(event_obj, st.integers(min_value=0, max_value=6)), max_size=25),
    st.booleans(),
    st.lists(st.integers(min_value=0), max_size=10),
)
def test_events_of_any_shape_give_consistent_counts_or_a_classified_error(
    events: list[tuple[dict[str, Any], int]], done: bool, cuts: list[int]
) -> None:
    body = b"".join(frame(obj, garble) for obj, garble in events) + (b"data: [DONE]\n\n" if done else b"")
    stream, counts, source, warning = run(split(body, cuts))
    check(stream, counts, source)
    if stream.error is None and stream.done:
        if source == "token_ids" and stream.completion_tokens is not None and warning is None:
            assert sum(counts) == stream.completion_tokens
        if source == "usage":  # exact: the chunks add up to the server's last cumulative count
            assert sum(counts) == stream.completion_tokens


@PROPS
@given(
    st.integers(min_value=0, max_value=MAX_TOKEN_COUNT),
    st.lists(st.integers(min_value=0, max_value=10**6), max_size=300),
)
def test_apportion_keeps_the_total_at_least_one_each(total: int, weights: list[int]) -> None:
    out = _apportion(total, weights)
    assert len(out) == len(weights) and all(k >= 1 for k in out)
    if total > len(weights) > 0:
        assert sum(out) == total
    else:
        assert out == [1] * len(weights)


@PROPS
@given(
    st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(min_value=MAX_TOKEN_COUNT + 1),
        st.integers(max_value=-1),
        st.booleans(),
        st.text(max_size=3),
    )
)
def test_apportion_refuses_what_is_not_a_count_at_once(total: Any) -> None:
    try:
        _apportion(total, [1, 2, 3])
    except ValueError:
        return
    raise AssertionError(f"{total!r} was accepted as a token total")


def test_memory_stays_bounded_on_a_stream_without_separators() -> None:
    """8 MiB without a blank line, drip-fed in 4 KiB reads: the decoder stops at its 1 MiB cap."""
    tracemalloc.start()
    try:
        stream, counts, _, _ = run([b"data: "] + [b"x" * 4096] * 2048)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert stream.error == "response_too_large" and counts == []
    assert peak < 4 * MAX_EVENT_BYTES
