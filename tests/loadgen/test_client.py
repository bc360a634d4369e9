"""The streaming client on real vLLM bytes, on failures, and against an exact schedule."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import aiohttp
import pytest
from aiohttp import web

from doubles.reference_server import Schedule, serve_in_thread
from doubles.replay import FIXTURES, replay_app, serve_app
from spectrn.analyze.metrics import request_metrics
from spectrn.loadgen.client import RequestParams, build_body, endpoint_url, run_request
from spectrn.loadgen.stream import _apportion

REAL = FIXTURES / "vllm-real"


def sse_handler(raw: bytes, status: int = 200, content_type: str = "text/event-stream", split: int = 0):
    async def handler(req: web.Request) -> web.StreamResponse:
        await req.read()
        if content_type != "text/event-stream":
            return web.Response(status=status, body=raw, content_type=content_type)
        resp = web.StreamResponse(status=status, headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await resp.prepare(req)
        if split:
            for i in range(0, len(raw), split):
                await resp.write(raw[i : i + split])
        else:
            await resp.write(raw)
        await resp.write_eof()
        return resp

    return handler


async def one(base: str, api: str = "completions", timeout: float = 10.0, max_tokens: int = 64):
    params = RequestParams(model="m", api=api, max_tokens=max_tokens, timeout_s=timeout)  # type: ignore[arg-type]
    async with aiohttp.ClientSession() as s:
        return await run_request(
            s,
            endpoint_url(base, api),
            params,
            "hello",
            variant="v",
            index=0,
            prompt_id="p",
            prompt_class="c",
            level="c1",
            warmup=False,
        )


@pytest.mark.parametrize("split", [0, 7, 1000])
async def test_real_speculative_completions_token_ids(split: int) -> None:
    raw = (REAL / "completions_stream_token_ids.sse").read_bytes()
    with serve_app(replay_app(sse_handler(raw, split=split))) as base:
        rec = await one(base)
    assert rec.ok, rec.error_msg
    assert rec.token_source == "token_ids"
    assert sum(rec.chunk_tokens) == rec.completion_tokens == 64
    # the recorded stream's tokens-per-event histogram (shared/vllm-real/README.md)
    assert Counter(rec.chunk_tokens) == {1: 15, 2: 10, 3: 1, 4: 4, 5: 2}
    assert rec.chunk_tokens[0] == 1
    assert rec.output_token_ids is not None and len(rec.output_token_ids) == 64


async def test_real_chat_role_event_is_not_a_token() -> None:
    raw = (REAL / "chat_stream_token_ids.sse").read_bytes()
    with serve_app(replay_app(sse_handler(raw))) as base:
        rec = await one(base, api="chat")
    assert rec.ok
    assert sum(rec.chunk_tokens) == rec.completion_tokens == 64
    assert len(rec.chunk_times) == len(rec.chunk_tokens) < 64
    assert rec.prompt_tokens is not None


async def test_real_stream_without_token_ids_reconciles_with_usage() -> None:
    """Real vLLM bytes without token_ids or per-event usage: the final usage is split by text length, and
    the record says the counts are estimates (``text``), not exact (``usage``)."""
    raw = (REAL / "completions_stream.sse").read_bytes()
    with serve_app(replay_app(sse_handler(raw))) as base:
        rec = await one(base)
    assert rec.ok
    assert rec.token_source == "text"
    assert sum(rec.chunk_tokens) == 64
    assert all(k >= 1 for k in rec.chunk_tokens)


async def test_stream_without_any_count_falls_back_to_one_per_event_and_says_so() -> None:
    events = [{"choices": [{"index": 0, "text": f"w{i}"}]} for i in range(5)]
    raw = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events) + b"data: [DONE]\n\n"
    with serve_app(replay_app(sse_handler(raw))) as base:
        rec = await one(base)
    assert rec.ok and rec.token_source == "text" and rec.chunk_tokens == [1] * 5


async def test_real_400_json_body_for_a_streaming_request() -> None:
    raw = (REAL / "error_chat_max_tokens_negative_stream.body").read_bytes()
    with serve_app(replay_app(sse_handler(raw, status=400, content_type="application/json"))) as base:
        rec = await one(base, api="chat")
    assert rec.error == "http_400" and rec.status == 400
    assert "max_tokens must be at least 1" in (rec.error_msg or "")
    assert request_metrics(rec) is None


async def test_error_event_mid_stream() -> None:
    raw = (
        b'data: {"choices": [{"index": 0, "text": "a", "token_ids": [1]}]}\n\n'
        b'data: {"error": {"message": "engine died", "type": "InternalServerError", "code": 500}}\n\n'
    )
    with serve_app(replay_app(sse_handler(raw))) as base:
        rec = await one(base)
    assert rec.error == "stream_error" and "engine died" in (rec.error_msg or "")


async def test_stream_cut_before_done_is_a_disconnect() -> None:
    raw = b'data: {"choices": [{"index": 0, "text": "a", "token_ids": [1]}]}\n\n'
    with serve_app(replay_app(sse_handler(raw))) as base:
        rec = await one(base)
    assert rec.error == "disconnect"
    assert rec.chunk_tokens == [1]  # what arrived is still recorded


async def test_malformed_event() -> None:
    raw = b"data: {not json\n\ndata: [DONE]\n\n"
    with serve_app(replay_app(sse_handler(raw))) as base:
        rec = await one(base)
    assert rec.error == "malformed_sse"


async def test_a_malformed_event_is_recorded_and_reading_goes_on() -> None:
    """A malformed event alone does not end the request: the events after it still count, and a later error
    that ends the request replaces it as the request's error."""
    tok = b'data: {"choices": [{"index": 0, "text": "a", "token_ids": [1]}]}\n\n'
    raw = tok + b"data: {not json\n\n" + tok + tok + b"data: [DONE]\n\n"
    with serve_app(replay_app(sse_handler(raw))) as base:
        rec = await one(base)
    assert rec.error == "malformed_sse" and rec.chunk_tokens == [1, 1, 1] and len(rec.chunk_times) == 3
    died = b'data: {"error": {"message": "engine died", "type": "InternalServerError", "code": 500}}\n\n'
    with serve_app(replay_app(sse_handler(tok + b"data: {not json\n\n" + tok + died))) as base:
        rec = await one(base)
    assert rec.error == "stream_error" and "engine died" in (rec.error_msg or "") and rec.chunk_tokens == [1, 1]


async def test_stall_past_timeout() -> None:
    async def stall(req: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(req)
        await resp.write(b'data: {"choices": [{"index": 0, "text": "a", "token_ids": [1]}]}\n\n')
        await asyncio.sleep(5)
        return resp

    with serve_app(replay_app(stall)) as base:
        rec = await one(base, timeout=0.5)
    assert rec.error == "timeout" and rec.e2e is None


async def test_unreachable_endpoint() -> None:
    rec = await one("http://127.0.0.1:1")
    assert rec.error == "connect" and rec.status is None


def test_request_body_always_sends_temperature_and_fixed_length() -> None:
    chat = build_body(RequestParams(model="m", api="chat", max_tokens=600), "x")
    assert chat["temperature"] == 0.0 and chat["max_completion_tokens"] == 600 and chat["min_tokens"] == 600
    assert chat["ignore_eos"] is True
    assert chat["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert chat["messages"] == [{"role": "user", "content": "x"}] and chat["return_token_ids"] is True
    comp = build_body(RequestParams(model="m", api="completions", max_tokens=5, temperature=0.7), "x")
    assert comp["prompt"] == "x" and comp["max_tokens"] == 5 and comp["temperature"] == 0.7
    assert endpoint_url("http://h:8000", "chat") == "http://h:8000/v1/chat/completions"
    assert endpoint_url("http://h:8000/v1/", "completions") == "http://h:8000/v1/completions"


def test_apportion_keeps_the_total_and_at_least_one_per_event() -> None:
    assert _apportion(10, [1, 1, 8]) == [1, 1, 8]
    out = _apportion(64, [4, 7, 3, 20, 1])
    assert sum(out) == 64 and min(out) >= 1
    assert _apportion(2, [5, 5, 5]) == [1, 1, 1]


@pytest.mark.parametrize("source", ["token_ids", "usage"])
@pytest.mark.parametrize("api", ["chat", "completions"])
async def test_measurements_match_an_exact_schedule(api: str, source: str) -> None:
    """TTFT, TPOT, per-token ITL and tokens per event against a server whose every event is known: its log holds
    the tokens of each event and the moment each was written (the server runs in this process, so on the same
    clock). Counted from ``token_ids`` (upstream vLLM) or from cumulative usage alone (the Neuron fork).

    Tolerances: the expected TPOT is the server's own span from the first event to ``[DONE]`` over n - 1 = 19
    tokens; dividing by n = 20 instead is 5% off, which the test tells apart directly (the nearer of the two).
    Event times may lag the server's writes by the scheduling delay of a busy machine (the server is a thread
    of this process): 30 ms here, under a load average of 6 on 2 cores, against events 100 ms apart, so an
    event counted in the wrong gap (100 ms off) still fails. Within the client's own times the checks are exact."""
    sched = Schedule(
        ttft_s=0.08,
        gap_s=0.1,
        pattern=(3, 1, 4),
        token_ids=source == "token_ids",
        continuous_usage=source == "usage",
    )
    with serve_in_thread(sched) as (base, log):
        rec = await one(base, api=api, max_tokens=20)
    assert rec.ok and rec.token_source == source and rec.token_warning is None
    entry = log.requests[0]
    sizes, sent, done = entry["sizes"], entry["sent"], entry["done"]
    # 20 tokens: the prefill's 1, then 3 1 4 3 1 4 and the 3 that are left
    assert sizes == [1, 3, 1, 4, 3, 1, 4, 3]
    assert rec.chunk_tokens == sizes
    assert rec.completion_tokens == 20 == rec.output_tokens
    assert len(rec.chunk_times) == 8
    lag = 0.03
    for i in range(1, 8):  # each event arrives when it was sent (event gaps of 100 ms)
        assert rec.chunk_times[i] - rec.chunk_times[0] == pytest.approx(sent[i] - sent[0], abs=lag)

    m = request_metrics(rec)
    assert m is not None
    assert m.ttft == pytest.approx(0.08, abs=lag)
    assert m.ttft == pytest.approx(rec.chunk_times[0], abs=1e-6)  # the first event (records keep microseconds)
    truth_tpot = (done - sent[0]) / (20 - 1)
    assert truth_tpot == pytest.approx(0.7 / 19, rel=0.05)  # the schedule's 7 gaps of 100 ms over 19 tokens
    assert m.tpot == pytest.approx(truth_tpot, abs=lag / 19)
    assert m.tpot == pytest.approx((m.e2e - m.ttft) / 19)  # exact: the client's own span over n - 1
    assert abs(m.tpot - truth_tpot) < abs(m.tpot - (done - sent[0]) / 20)  # n - 1, not n
    # a k-token event after a gap g counts as k samples of g / k: 19 samples in 7 groups
    assert len(m.itls) == 20 - 1
    start = 0
    for i, k in enumerate(sizes[1:], 1):
        group = m.itls[start : start + k]
        assert group == [group[0]] * k
        assert group[0] * k == pytest.approx(rec.chunk_times[i] - rec.chunk_times[i - 1])  # exact: its own gap
        assert group[0] * k == pytest.approx(sent[i] - sent[i - 1], abs=lag)
        start += k
    assert sum(m.itls) == pytest.approx(done - sent[0], abs=lag)
    assert m.tokens_per_decode_chunk == pytest.approx(19 / 7)
    # llmperf's definition divides by events and includes TTFT: it overstates under multi-token events
    assert m.llmperf_itl == pytest.approx(rec.chunk_times[-1] / 8)
    assert m.llmperf_itl > m.tpot * 1.5
