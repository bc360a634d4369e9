"""One streaming request against an OpenAI-compatible vLLM endpoint, measured per chunk.

The events are parsed by ``spectrn.loadgen.stream`` (token accounting per chunk, every protocol check).

Protocol rules: the end-to-end time is the arrival of ``data: [DONE]`` (not the connection's close) and
anything after ``[DONE]`` is ignored; redirects are never followed (a measured request is one exchange with
the endpoint the user named; a redirect to another host would also carry the request, and any credentials,
elsewhere); responses must not be compressed (see ``REQUEST_HEADERS``).

Arrival times are taken when a read returns from the socket, before parsing, with
``time.perf_counter``; events that arrive in the same read share that time, which is what the client
observed. The clock of a request starts when its headers leave the client (aiohttp's
``on_request_headers_sent``, through ``request_trace_config``), not when the coroutine asks for a
connection: when C closed-loop requests start in the same millisecond, the load generator's own launch
queue must not be charged to the server's TTFT. Without that trace hook (a bare session) the clock starts
just before the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from spectrn.errors import BenchError, redact, redact_url
from spectrn.loadgen.clock import wall_now
from spectrn.loadgen.stream import (
    SseDecoder,
    StreamParser,
    consume,
    error_message,
    finish,
)
from spectrn.run.records import RequestRecord

Api = Literal["chat", "completions"]
Message = Mapping[str, str]  # {"role": "user" | "assistant", "content": ...}

# Bounds on what one response may make this process hold or compute.
MAX_ERROR_BODY_BYTES = 64 << 10  # an error or non-streaming body: only its start is kept
DRAIN_AFTER_DONE_BYTES = 64 << 10  # read past [DONE] only to let the connection be reused
DRAIN_AFTER_DONE_S = 0.5

# Compression is not advertised: a compressing server (or proxy) emits bytes when its compressor flushes,
# not when a token is ready, so chunk arrival times would measure the compressor. Decoding gzip would
# give the right bytes with the wrong times; asking for ``identity`` keeps the times honest, and a
# server that compresses anyway is a ``bad_response``.
REQUEST_HEADERS = {"Accept-Encoding": "identity", "Accept": "text/event-stream"}

# Every error class a request record can carry (besides ``http_<status>``), and what it means.
ERROR_CLASSES: dict[str, str] = {
    "http_<status>": "the server answered with an HTTP error status; its own message is kept",
    "connect": "no connection to the endpoint (refused, unreachable, DNS)",
    "disconnect": "the connection closed before `data: [DONE]`; chunks received so far are kept",
    "timeout": "no complete response within `bench.timeout_s`; chunks received so far are kept",
    "malformed_sse": "an event that is not JSON or not a JSON object",
    "bad_response": "JSON of the wrong shape: a field of the wrong type, a negative, fractional or absurd "
    "count, a cumulative count going down, a compressed stream, more events than `max_tokens` allows",
    "response_too_large": "an event without a separator over 1 MiB, or a response over its byte budget",
    "redirect": "the server answered with a redirect (3xx), which is never followed",
    "stream_error": "the server sent an error event mid-stream",
    "not_streaming": "HTTP 200 but not `text/event-stream`",
    "no_tokens": "the stream ended properly but carried no tokens",
    "client_error": "any other HTTP client failure",
}


@dataclass(frozen=True)
class RequestParams:
    """What every request of a run asks for. ``ignore_eos``: exactly ``max_tokens`` tokens (``ignore_eos`` with
    ``min_tokens``); off, the server ends each answer at its end-of-sequence token and ``max_tokens`` is a cap,
    which is why the bounds below are computed from it (they hold for any length up to the cap)."""

    model: str
    api: Api = "chat"
    max_tokens: int = 600
    temperature: float = 0.0
    ignore_eos: bool = True
    timeout_s: float = 1200.0
    keep_output: bool = True

    @property
    def max_events(self) -> int:
        """Token-bearing events one response may have: each carries at least one of ``max_tokens``
        tokens; the slack covers servers that send a text-only event now and then."""
        return 2 * self.max_tokens + 64

    @property
    def max_response_bytes(self) -> int:
        return (4 << 20) + self.max_tokens * (16 << 10)


async def _on_headers_sent(_session: Any, ctx: Any, _params: Any) -> None:
    clock = ctx.trace_request_ctx
    if isinstance(clock, list) and clock:
        clock[0] = time.perf_counter()


def request_trace_config() -> aiohttp.TraceConfig:
    """The session hook that starts each request's clock when its headers are sent."""
    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(_on_headers_sent)
    return trace


def build_body(params: RequestParams, text: str, history: Sequence[Message] = ()) -> dict[str, Any]:
    """The request body; ``history``: the conversation so far (earlier user turns and the server's answers),
    sent before ``text`` as chat messages, or for the completions API as one transcript, turns separated by a
    blank line."""
    body: dict[str, Any] = {
        "model": params.model,
        "stream": True,
        # continuous usage needs include_usage (vLLM: include_continuous_usage = include_usage and
        # stream_options.continuous_usage_stats)
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "temperature": params.temperature,
        "return_token_ids": True,
    }
    if params.ignore_eos:
        body["ignore_eos"] = True
        body["min_tokens"] = params.max_tokens
    if params.api == "chat":
        body["messages"] = [*(dict(m) for m in history), {"role": "user", "content": text}]
        body["max_completion_tokens"] = params.max_tokens
    else:
        body["prompt"] = "".join(f"{m['content']}\n\n" for m in history) + text
        body["max_tokens"] = params.max_tokens
    return body


def endpoint_url(base_url: str, api: Api) -> str:
    base = base_url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    return f"{base}/chat/completions" if api == "chat" else f"{base}/completions"


# ---- the request --------------------------------------------------------------------------------------


def _out_of_fds(e: BaseException) -> bool:
    return getattr(e, "errno", None) in (errno.EMFILE, errno.ENFILE)


def _fd_error(url: str, e: BaseException) -> BenchError:
    return BenchError(
        f"out of file descriptors while connecting to {redact_url(url)} ({e}); the run was stopped because "
        "further requests would fail on this client, not on the server",
        hint="raise the open-file limit (`ulimit -n 65536`) or lower --concurrency / --rate",
    )


async def _read_capped(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    buf = bytearray()
    while len(buf) < limit:
        chunk = await resp.content.read(limit - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


async def _drain(resp: aiohttp.ClientResponse) -> None:
    """After [DONE], read what little may follow (the chunked body's end) so the connection can be reused."""
    with contextlib.suppress(TimeoutError, aiohttp.ClientError):
        async with asyncio.timeout(DRAIN_AFTER_DONE_S):
            seen = 0
            while seen <= DRAIN_AFTER_DONE_BYTES:
                data = await resp.content.read(DRAIN_AFTER_DONE_BYTES)
                if not data:
                    return
                seen += len(data)


async def _read_stream(resp: aiohttp.ClientResponse, stream: StreamParser, t0: float, params: RequestParams) -> float:
    """Read the SSE body into ``stream``; returns the end time (the read that carried [DONE])."""
    decoder = SseDecoder()
    received = 0
    budget = params.max_response_bytes
    end = 0.0
    async for data in resp.content.iter_any():
        now = time.perf_counter() - t0
        end = now
        received += len(data)
        if received > budget:
            stream.fail("response_too_large", f"the response passed {budget} bytes for max_tokens={params.max_tokens}")
            return end
        if consume(stream, decoder, data, now):
            if stream.done:
                await _drain(resp)
            return end
    end = time.perf_counter() - t0
    finish(stream, decoder, end)
    return end


async def run_request(
    session: aiohttp.ClientSession,
    url: str,
    params: RequestParams,
    text: str,
    *,
    variant: str,
    index: int,
    prompt_id: str,
    prompt_class: str,
    level: str,
    warmup: bool,
    shard: int = 0,
    history: Sequence[Message] = (),
    turn: int | None = None,
) -> RequestRecord:
    """Send one streaming request and return its record; failures become records with ``error`` set.

    Raises ``BenchError`` only for a failure of this client that would fail every further request too
    (out of file descriptors); everything the server does becomes a record.
    """
    body = build_body(params, text, history)
    stream = StreamParser(max_events=params.max_events, keep_output=params.keep_output)
    status: int | None = None
    sent_at = wall_now()  # the monotonic clock's wall time: a step of the system clock cannot move it
    t_call = time.perf_counter()
    clock = [t_call]  # moved to the moment the headers are sent, when the session has the trace hook
    end: float | None = None
    try:
        async with asyncio.timeout(params.timeout_s):
            async with session.post(
                url, json=body, headers=REQUEST_HEADERS, allow_redirects=False, trace_request_ctx=clock
            ) as resp:
                t0 = clock[0]
                sent_at += t0 - t_call
                status = resp.status
                encoding = resp.headers.get("Content-Encoding", "identity").strip().lower()
                if 300 <= status < 400:
                    target = resp.headers.get("Location", "(no Location header)")
                    stream.fail(
                        "redirect",
                        f"HTTP {status} redirect to {redact_url(target)} not followed: a measured request goes "
                        "only to the endpoint given (point --endpoint at the final URL)",
                    )
                elif status != 200:
                    raw = await _read_capped(resp, MAX_ERROR_BODY_BYTES)
                    stream.fail(f"http_{status}", error_message(raw))
                elif not resp.content_type.startswith("text/event-stream"):
                    raw = await _read_capped(resp, MAX_ERROR_BODY_BYTES)
                    stream.fail("not_streaming", error_message(raw))
                elif encoding not in ("", "identity"):
                    stream.fail(
                        "bad_response",
                        f"the stream is Content-Encoding: {encoding[:40]} although identity was asked for; "
                        "chunk times would be the compressor's",
                    )
                else:
                    end = await _read_stream(resp, stream, t0, params)
                    if stream.error is None and not stream.done:
                        stream.fail("disconnect", "stream ended without data: [DONE]")
    except TimeoutError:
        if not (stream.done and stream.error is None):
            stream.fail("timeout", f"no complete response within {params.timeout_s:g}s")
    except aiohttp.ClientPayloadError as e:
        stream.fail("disconnect", f"connection closed mid-stream: {e}")
    except aiohttp.ClientConnectorError as e:
        if _out_of_fds(e) or _out_of_fds(e.os_error):
            raise _fd_error(url, e) from None
        stream.fail("connect", f"cannot connect to {redact_url(url)}: {e.os_error or e}")
    except aiohttp.ServerDisconnectedError as e:
        stream.fail("disconnect", f"server disconnected: {e}")
    except aiohttp.ClientError as e:
        if _out_of_fds(e):
            raise _fd_error(url, e) from None
        stream.fail("client_error", f"{type(e).__name__}: {e}")
    except OSError as e:
        if _out_of_fds(e):
            raise _fd_error(url, e) from None
        stream.fail("client_error", f"{type(e).__name__}: {e}")

    chunk_tokens, source, warning = stream.chunk_tokens()
    if stream.error is None and not stream.times:
        stream.fail("no_tokens", "the response carried no tokens")
    return RequestRecord(
        variant=variant,
        index=index,
        prompt_id=prompt_id,
        prompt_class=prompt_class,
        turn=turn,
        level=level,
        warmup=warmup,
        shard=shard,
        sent_at=sent_at,
        ttft=stream.times[0] if stream.times else None,
        e2e=end if stream.error is None else None,
        chunk_times=[round(t, 7) for t in stream.times],
        chunk_tokens=chunk_tokens,
        token_source=source,
        token_warning=warning,
        prompt_tokens=stream.prompt_tokens,
        completion_tokens=stream.completion_tokens,
        finish_reason=stream.finish_reason,
        status=status,
        error=stream.error,
        error_msg=redact(stream.error_msg) if stream.error_msg else None,
        output_text="".join(stream.text_parts) if params.keep_output else None,
        output_token_ids=(stream.token_ids or None) if params.keep_output else None,
    )
