"""One streaming request against an OpenAI-compatible vLLM endpoint, measured per chunk.

Token accounting, best source first:
1. ``return_token_ids``: each event carries ``token_ids`` (vLLM >= 0.10.2, and spectrn's simulator);
   under speculative decoding one event carries several tokens.
2. cumulative ``usage.completion_tokens`` on every event (``continuous_usage_stats``).
3. text deltas reconciled with the final ``usage``: events are weighted by their text length so that the
   total equals ``usage.completion_tokens``; without any usage, one token per event (marked ``text``).

Arrival times are taken when a read returns from the socket, before parsing, with
``time.perf_counter``; events that arrive in the same read share that time, which is what the client
observed. Parsing does the minimum: one ``json.loads`` per event.

The clock of a request starts when its headers leave the client (aiohttp's ``on_request_headers_sent``,
through ``request_trace_config``), not when the coroutine asks for a connection: when C closed-loop
requests start in the same millisecond, the load generator's own launch queue must not be charged to the
server's TTFT. Without that trace hook (a bare session) the clock starts just before the request.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp

from spectrn.records import RequestRecord, TokenSource

Api = Literal["chat", "completions"]


@dataclass(frozen=True)
class RequestParams:
    model: str
    api: Api = "chat"
    max_tokens: int = 600
    temperature: float = 0.0
    ignore_eos: bool = True
    timeout_s: float = 1200.0
    keep_output: bool = True


async def _on_headers_sent(_session: Any, ctx: Any, _params: Any) -> None:
    clock = ctx.trace_request_ctx
    if isinstance(clock, list) and clock:
        clock[0] = time.perf_counter()


def request_trace_config() -> aiohttp.TraceConfig:
    """The session hook that starts each request's clock when its headers are sent."""
    trace = aiohttp.TraceConfig()
    trace.on_request_headers_sent.append(_on_headers_sent)
    return trace


def build_body(params: RequestParams, text: str) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": params.model,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
        "temperature": params.temperature,
        "return_token_ids": True,
    }
    if params.ignore_eos:
        body["ignore_eos"] = True
        body["min_tokens"] = params.max_tokens
    if params.api == "chat":
        body["messages"] = [{"role": "user", "content": text}]
        body["max_completion_tokens"] = params.max_tokens
    else:
        body["prompt"] = text
        body["max_tokens"] = params.max_tokens
    return body


def endpoint_url(base_url: str, api: Api) -> str:
    base = base_url.rstrip("/")
    if not base.endswith("/v1"):
        base += "/v1"
    return f"{base}/chat/completions" if api == "chat" else f"{base}/completions"


def _error_message(raw: bytes) -> str:
    """vLLM's error body is ``{"error": {"message", "type", "code"}}`` (older: ``{"message", ...}``)."""
    try:
        obj = json.loads(raw)
    except ValueError:
        return raw[:300].decode("utf-8", "replace").strip() or "(empty body)"
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("detail") or obj)[:500]
        return str(err)[:500]
    return str(obj)[:500]


@dataclass
class _Stream:
    """Accumulates events of one response."""

    keep_output: bool
    times: list[float] = field(default_factory=list)
    tokens: list[int | None] = field(default_factory=list)
    texts: list[int] = field(default_factory=list)  # text length per event, for reconciliation
    cum_usage: list[int | None] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    text_parts: list[str] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    error: str | None = None
    error_msg: str | None = None
    done: bool = False

    def event(self, payload: bytes, now: float) -> None:
        if payload == b"[DONE]":
            self.done = True
            return
        try:
            obj = json.loads(payload)
        except ValueError:
            self.error, self.error_msg = "malformed_sse", f"undecodable event: {payload[:120]!r}"
            return
        if not isinstance(obj, dict):
            self.error, self.error_msg = "malformed_sse", f"event is not an object: {payload[:120]!r}"
            return
        if "error" in obj:
            self.error, self.error_msg = "stream_error", _error_message(payload)
            return
        usage = obj.get("usage")
        choices = obj.get("choices") or []
        if usage:
            self.prompt_tokens = usage.get("prompt_tokens", self.prompt_tokens)
        if not choices:
            if usage:
                self.completion_tokens = usage.get("completion_tokens")
            return
        choice = choices[0]
        delta = choice.get("delta")
        text = (delta.get("content") if delta is not None else choice.get("text")) or ""
        ids = choice.get("token_ids")
        if not text and not ids:
            return  # role event, or a finish event without content
        self.times.append(now)
        self.tokens.append(len(ids) if ids is not None else None)
        self.texts.append(len(text))
        self.cum_usage.append(usage.get("completion_tokens") if usage else None)
        if self.keep_output:
            if ids:
                self.token_ids.extend(ids)
            self.text_parts.append(text)

    def chunk_tokens(self) -> tuple[list[int], TokenSource]:
        if self.tokens and all(t is not None for t in self.tokens):
            return [t for t in self.tokens if t is not None], "token_ids"
        if self.cum_usage and all(u is not None for u in self.cum_usage):
            out, prev = [], 0
            for u in self.cum_usage:
                assert u is not None
                out.append(max(u - prev, 0))
                prev = u
            return out, "usage"
        n = len(self.times)
        if self.completion_tokens is not None and n:
            return _apportion(self.completion_tokens, self.texts), "usage"
        return [1] * n, "text"


def _apportion(total: int, weights: list[int]) -> list[int]:
    """Split ``total`` tokens over events proportionally to text length, at least one token each."""
    n = len(weights)
    if total <= n:
        return [1] * n
    wsum = sum(weights)
    ideal = [total * w / wsum for w in weights] if wsum else [total / n] * n
    out = [max(1, int(x)) for x in ideal]
    diff = total - sum(out)
    order = sorted(range(n), key=lambda i: ideal[i] - int(ideal[i]), reverse=diff > 0)
    i = 0
    while diff != 0:
        j = order[i % n]
        if diff > 0:
            out[j] += 1
            diff -= 1
        elif out[j] > 1:
            out[j] -= 1
            diff += 1
        i += 1
    return out


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
) -> RequestRecord:
    """Send one streaming request and return its record; failures become records with ``error`` set."""
    body = build_body(params, text)
    stream = _Stream(params.keep_output)
    status: int | None = None
    sent_at = time.time()
    t_call = time.perf_counter()
    clock = [t_call]  # moved to the moment the headers are sent, when the session has the trace hook
    end: float | None = None
    try:
        async with asyncio.timeout(params.timeout_s):
            async with session.post(url, json=body, trace_request_ctx=clock) as resp:
                t0 = clock[0]
                sent_at += t0 - t_call
                status = resp.status
                if status != 200:
                    raw = await resp.read()
                    stream.error, stream.error_msg = f"http_{status}", _error_message(raw)
                elif not resp.content_type.startswith("text/event-stream"):
                    raw = await resp.read()
                    stream.error, stream.error_msg = "not_streaming", _error_message(raw)
                else:
                    buf = b""
                    async for data in resp.content.iter_any():
                        now = time.perf_counter() - t0
                        buf += data
                        while True:
                            cut = buf.find(b"\n\n")
                            if cut < 0:
                                break
                            block, buf = buf[:cut], buf[cut + 2 :]
                            for line in block.split(b"\n"):
                                if line.startswith(b"data:"):
                                    stream.event(line[5:].strip(), now)
                        if stream.error and stream.error != "malformed_sse":
                            break
                    end = time.perf_counter() - t0
                    if buf.strip():
                        for line in buf.split(b"\n"):
                            if line.startswith(b"data:"):
                                stream.event(line[5:].strip(), end)
                    if stream.error is None and not stream.done:
                        stream.error, stream.error_msg = "disconnect", "stream ended without data: [DONE]"
    except TimeoutError:
        stream.error, stream.error_msg = "timeout", f"no complete response within {params.timeout_s:g}s"
    except aiohttp.ClientPayloadError as e:
        stream.error, stream.error_msg = "disconnect", f"connection closed mid-stream: {e}"
    except aiohttp.ClientConnectorError as e:
        stream.error, stream.error_msg = "connect", f"cannot connect to {url}: {e.os_error or e}"
    except aiohttp.ServerDisconnectedError as e:
        stream.error, stream.error_msg = "disconnect", f"server disconnected: {e}"
    except aiohttp.ClientError as e:
        stream.error, stream.error_msg = "client_error", f"{type(e).__name__}: {e}"

    chunk_tokens, source = stream.chunk_tokens()
    if stream.error is None and not stream.times:
        stream.error, stream.error_msg = "no_tokens", "the response carried no tokens"
    rec = RequestRecord(
        variant=variant,
        index=index,
        prompt_id=prompt_id,
        prompt_class=prompt_class,
        level=level,
        warmup=warmup,
        shard=shard,
        sent_at=sent_at,
        ttft=stream.times[0] if stream.times else None,
        e2e=end if stream.error is None else None,
        chunk_times=[round(t, 7) for t in stream.times],
        chunk_tokens=chunk_tokens,
        token_source=source,
        prompt_tokens=stream.prompt_tokens,
        completion_tokens=stream.completion_tokens,
        status=status,
        error=stream.error,
        error_msg=stream.error_msg,
        output_text="".join(stream.text_parts) if params.keep_output else None,
        output_token_ids=(stream.token_ids or None) if params.keep_output else None,
    )
    return rec
