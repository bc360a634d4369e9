"""The simulator's SSE events and non-streaming bodies, field by field, in-process (audit, issue 29).

Expected events are written out by hand in the layout of the recorded vLLM transcripts
(``tests/fixtures/vllm-real``): cumulative ``usage`` on every event with ``continuous_usage_stats``, total =
prompt + completion tokens, ``prompt_token_ids`` on the first event only, a final ``choices: []`` usage event
when ``include_usage`` is asked for, then ``[DONE]``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from spectrn.sim.bodies import final_body
from spectrn.sim.engine import SimRequest
from spectrn.sim.faults import FaultPlan
from spectrn.sim.profiles import get_profile
from spectrn.sim.sinks import StreamSink, TextRelease
from spectrn.sim.tokens import OutputStream

HEAD_CMPL = '{"id":"cmpl-1","object":"text_completion","created":7,"model":"m",'
HEAD_CHAT = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m",'
BASE = {"id": "cmpl-1", "object": "text_completion", "created": 7, "model": "m"}
CHAT_BASE = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 7, "model": "m"}


def _req(loop: asyncio.AbstractEventLoop, emitted: int = 0) -> SimRequest:
    req = SimRequest(
        rid="cmpl-1",
        counter=1,
        prompt_text="p",
        prompt_ids=[1, 2, 3, 4, 5],
        target_len=3,
        finish_reason="length",
        max_tokens=3,
        sink=None,  # type: ignore[arg-type]
        fault=FaultPlan(),
        output=OutputStream("p", 0),
        rng=None,  # type: ignore[arg-type]
        probs=[],
        arrival=0.0,
        done=loop.create_future(),
    )
    req.emitted = emitted
    return req


def _sink(*, chat: bool = False, dialect: str = "v1", continuous: bool = True, usage: bool = True) -> StreamSink:
    return StreamSink(
        chat=chat,
        dialect=dialect,  # type: ignore[arg-type]
        head=HEAD_CHAT if chat else HEAD_CMPL,
        return_token_ids=dialect == "v1",
        include_usage=usage,
        continuous_usage=continuous,
        prompt_ids_json="[1,2,3,4,5]",
        prompt_len=5,
        fingerprint="fp",
        release=TextRelease(0.0, 0),
    )


def _events(chunk: bytes) -> list[Any]:
    """The HTTP chunk's SSE events: JSON objects, and "[DONE]"."""
    size, _, rest = chunk.partition(b"\r\n")
    body = rest[: int(size, 16)]
    assert rest[int(size, 16) :] == b"\r\n"
    out: list[Any] = []
    for block in body.decode().split("\n\n"):
        if block:
            data = block.removeprefix("data: ")
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def _usage(completion: int, **extra: Any) -> dict[str, Any]:
    return {"prompt_tokens": 5, "total_tokens": 5 + completion, "completion_tokens": completion, **extra}


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_v1_completion_events_carry_ids_and_cumulative_usage() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        sink = _sink()
        first = _events(sink.encode(_req(loop, 0), [(11, "a")], None, True))
        last = _events(sink.encode(_req(loop, 1), [(12, "b"), (13, "c")], "length", False))
        choice = {"index": 0, "logprobs": None}
        assert first == [
            {
                **BASE,
                "choices": [
                    {
                        **choice,
                        "text": "a",
                        "finish_reason": None,
                        "stop_reason": None,
                        "prompt_token_ids": [1, 2, 3, 4, 5],
                        "token_ids": [11],
                    }
                ],
                "usage": _usage(1),
            }
        ]
        assert last == [
            {
                **BASE,
                "choices": [
                    {
                        **choice,
                        "text": "bc",
                        "finish_reason": "length",
                        "stop_reason": None,
                        "prompt_token_ids": None,
                        "token_ids": [12, 13],
                    }
                ],
                "usage": _usage(3),
            },
            {**BASE, "choices": [], "usage": _usage(3), "system_fingerprint": "fp"},
            "[DONE]",
        ]

    _run(scenario())


def test_v1_chat_role_event_reports_zero_completion_tokens() -> None:
    async def scenario() -> None:
        sink = _sink(chat=True)
        role, content = _events(sink.encode(_req(asyncio.get_running_loop(), 0), [(11, "a")], None, True))
        assert role == {
            **CHAT_BASE,
            "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            ],
            "prompt_token_ids": [1, 2, 3, 4, 5],
            "prompt_text": None,
            "usage": _usage(0),
        }
        assert content["usage"] == _usage(1) and content["choices"][0]["token_ids"] == [11]

    _run(scenario())


def test_usage_only_at_the_end_without_continuous_stats() -> None:
    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        sink = _sink(continuous=False)
        (mid,) = _events(sink.encode(_req(loop, 0), [(11, "a")], None, True))
        assert "usage" not in mid
        *_, final, done = _events(sink.encode(_req(loop, 1), [(12, "b")], "stop", False))
        assert (final, done) == ({**BASE, "choices": [], "usage": _usage(2), "system_fingerprint": "fp"}, "[DONE]")
        no_usage = _sink(continuous=False, usage=False)
        assert _events(no_usage.encode(_req(loop, 1), [(12, "b")], "stop", False))[1:] == ["[DONE]"]

    _run(scenario())


def test_v0_completion_events_carry_usage_with_prompt_details() -> None:
    async def scenario() -> None:
        sink = _sink(dialect="v0")
        events = _events(sink.encode(_req(asyncio.get_running_loop(), 2), [(12, "b")], "length", False))
        assert events == [
            {
                **BASE,
                "choices": [
                    {"index": 0, "text": "b", "logprobs": None, "finish_reason": "length", "stop_reason": None}
                ],
                "usage": _usage(3, prompt_tokens_details=None),
            },
            {**BASE, "choices": [], "usage": _usage(3)},
            "[DONE]",
        ]

    _run(scenario())


def test_held_back_text_is_released_by_the_last_chunk() -> None:
    release = TextRelease(1.0, 0)  # every token ends mid-character: all text held until the end
    assert release.text([(1, "a")], None) == ""
    assert release.text([(2, "b"), (3, "c")], None) == ""
    assert release.text([(4, "d")], "stop") == "abcd"


def test_non_streaming_usage_counts_prompt_and_output() -> None:
    async def scenario() -> None:
        req = _req(asyncio.get_running_loop(), 3)
        req.finished = "length"
        req.text_parts = ["a", "b", "c"]
        req.token_ids = [11, 12, 13]
        req.created = 7
        body = final_body(
            req,
            False,
            {"return_token_ids": True},
            profile=get_profile("upstream"),
            model_name="m",
            fingerprint="fp",
        )
        assert body["usage"] == _usage(3, prompt_tokens_details=None, completion_tokens_details=None)
        (choice,) = body["choices"]
        assert (choice["text"], choice["finish_reason"], choice["token_ids"]) == ("abc", "length", [11, 12, 13])
        assert choice["prompt_token_ids"] == [1, 2, 3, 4, 5]
        v0 = final_body(req, False, {}, profile=get_profile("neuron-fork"), model_name="m", fingerprint="fp")
        assert v0["usage"] == _usage(3, prompt_tokens_details=None)

    _run(scenario())
