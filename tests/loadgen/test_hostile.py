"""The streaming client against every mode of the hostile server, through real HTTP.

Each mode must end in exactly the record ``hostile.MODES`` names: a classified error (never a traceback,
never a hang) or a success whose tokens were counted from the named source.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import pytest

from hostile import MODES, PLANTED, TOKENS, HostileServer
from spectrn.loadgen.client import ERROR_CLASSES, RequestParams, endpoint_url, request_trace_config, run_request
from spectrn.run.records import RequestRecord

STREAM_MODES = [m for m in MODES if m not in ("models_not_object", "tokenize_not_object")]


async def send(base: str, api: str = "completions", timeout: float = 10.0) -> RequestRecord:
    params = RequestParams(model="m", api=api, max_tokens=TOKENS, timeout_s=timeout)  # type: ignore[arg-type]
    async with aiohttp.ClientSession(trace_configs=[request_trace_config()], auto_decompress=False) as s:
        return await run_request(
            s,
            endpoint_url(base, params.api),
            params,
            "hello",
            variant="v",
            index=0,
            prompt_id="p",
            prompt_class="c",
            level="c1",
            warmup=False,
        )


@pytest.mark.parametrize("api", ["completions", "chat"])
@pytest.mark.parametrize("mode", STREAM_MODES)
async def test_every_mode_gives_its_classified_record(hostile, mode: str, api: str) -> None:
    expected = MODES[mode]
    server = hostile(mode)
    t0 = time.monotonic()
    rec = await send(server.url, api, timeout=1.0 if mode == "drip" else 10.0)
    elapsed = time.monotonic() - t0
    assert rec.error == expected.error, (rec.error, rec.error_msg)
    if expected.error is None:
        assert rec.e2e is not None and rec.token_source == expected.token_source
        assert rec.ttft is not None and len(rec.chunk_times) == len(rec.chunk_tokens)
        assert all(k >= 0 for k in rec.chunk_tokens)
    else:
        assert rec.e2e is None and rec.error_msg  # the why, and no invented end-to-end time
    assert elapsed < 8.0, f"{mode} took {elapsed:.1f}s"  # bounded: timeouts and caps fire, nothing hangs


async def test_continuous_usage_counts_exactly_with_usage_only_events(hostile) -> None:
    """Neuron V0 fork style: the counts come from cumulative usage; an event whose usage grew but whose text is
    empty (the fork's detokenizer held the text back) is still a step's tokens, so it is a chunk of its own."""
    for api in ("completions", "chat"):
        rec = await send(hostile("continuous_usage").url, api)
        assert rec.ok and rec.token_source == "usage"
        assert rec.chunk_tokens == [1, 3, 1, 3, 3, 1]  # 1 | 3 | 1 without text | 3 | 3 | the last, without text
        assert sum(rec.chunk_tokens) == rec.completion_tokens == 12
        assert rec.token_warning is None


async def test_token_ids_are_counted_and_usage_checked(hostile) -> None:
    rec = await send(hostile("token_ids").url)
    assert rec.chunk_tokens == [1, 3, 3, 3, 2] and rec.token_warning is None
    bad = await send(hostile("ids_disagree").url)
    assert bad.ok and bad.chunk_tokens == [1, 3, 3, 3, 2]
    assert bad.token_warning and "12 differs from usage.completion_tokens 13" in bad.token_warning


async def test_estimates_say_so(hostile) -> None:
    final = await send(hostile("final_usage_only").url)
    assert final.token_source == "text" and sum(final.chunk_tokens) == TOKENS  # split by text length
    none = await send(hostile("no_usage").url)
    assert none.token_source == "text" and none.chunk_tokens == [1] * 5


async def test_request_asks_for_continuous_usage_token_ids_and_no_compression(hostile) -> None:
    server = hostile("token_ids")
    await send(server.url)
    seen = server.requests[0]
    assert seen["body"]["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    assert seen["body"]["return_token_ids"] is True
    assert seen["headers"]["Accept-Encoding"] == "identity"


async def test_end_to_end_ends_at_done_and_later_tokens_are_ignored(hostile) -> None:
    """The server sends more tokens after [DONE] and keeps the connection open 5 s: the record ends at
    [DONE] (not at the close) and the late tokens are not counted."""
    t0 = time.monotonic()
    rec = await send(hostile("tokens_after_done").url)
    assert rec.ok and sum(rec.chunk_tokens) == TOKENS and rec.output_token_ids and 7 not in rec.output_token_ids
    assert rec.e2e is not None and rec.e2e < 2.5
    assert time.monotonic() - t0 < 4.0  # did not wait for the server to close


async def test_redirect_to_another_host_is_not_followed_and_its_credentials_are_masked(hostile) -> None:
    server = hostile("redirect_other_host")
    rec = await send(server.url)
    assert rec.error == "redirect" and rec.status == 307
    assert "elsewhere.invalid" in (rec.error_msg or "") and PLANTED not in (rec.error_msg or "")
    assert len(server.requests) == 1


async def test_credentials_echoed_by_the_server_are_masked_in_the_record(hostile) -> None:
    rec = await send(hostile("error_echoes_credentials").url)
    assert rec.error == "http_400" and "cannot reach upstream" in (rec.error_msg or "")
    assert PLANTED not in rec.model_dump_json()


async def test_huge_bodies_are_read_only_up_to_their_cap(hostile) -> None:
    rec = await send(hostile("huge_error_body").url)
    assert rec.error == "http_500" and len(rec.error_msg or "") <= 500


async def test_a_stream_without_separators_is_capped(hostile) -> None:
    rec = await send(hostile("no_separators").url)
    assert rec.error == "response_too_large" and "1048576 bytes" in (rec.error_msg or "")


async def test_the_request_timeout_fires_on_a_drip_fed_stream(hostile) -> None:
    rec = await send(hostile("drip").url, timeout=0.5)
    assert rec.error == "timeout" and "0.5s" in (rec.error_msg or "")


async def test_every_error_class_has_a_hostile_mode() -> None:
    produced = {m.error for m in MODES.values() if m.error}
    produced = {"http_<status>" if e.startswith("http_") else e for e in produced}
    assert produced == set(ERROR_CLASSES), set(ERROR_CLASSES) ^ produced


def test_hostile_server_stops_cleanly() -> None:
    with HostileServer("token_ids") as s:
        rec = asyncio.run(send(s.url))
    assert rec.ok
