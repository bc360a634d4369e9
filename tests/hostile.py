"""A hostile or broken OpenAI-compatible server, one misbehaviour per mode, on a free loopback port.

``with HostileServer("usage_list") as s: s.url`` serves ``/health``, ``/v1/models``, ``/tokenize``,
``/metrics`` and streaming ``/v1/completions`` + ``/v1/chat/completions`` in a background thread. Every
mode is a real HTTP behaviour (bytes on a socket), and ``MODES`` says what the load generator must make of
it: the record's error class (``None``: a successful record) and, for the counting modes, the token
source. ``s.requests`` keeps each request's headers and JSON body, so tests can check what was asked for.

The modes cover the classes of server the load generator must survive (docs/reliability.md):
counting (which source counts tokens), hostile JSON (types, NaN, negatives, huge numbers, counts going
down), protocol (``[DONE]``, compression, redirects, framing, drip-feeding, oversized bodies), plain
failures (status, disconnect, error events) and secrets echoed back by the server.
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from doubles.loopserver import LoopServer

MODEL = "hostile-model"
TOKENS = 12  # tokens per response in the well-formed modes (max_tokens used by the tests is 12)
PLANTED = "s3cr3t-Passw0rd"  # a credential a server echoes back in an error message


@dataclass(frozen=True)
class Mode:
    error: str | None  # the error class the record must carry; None = success
    what: str
    token_source: str | None = None  # for successful modes


# What a hostile error message may hold to take over a terminal: clear screen, set the window title, an OSC 8
# hyperlink, a bell, and Rich markup that would crash or restyle a console that interprets it.
TERMINAL_ESCAPES = "\x1b[2J\x1b]0;owned\x07\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\ [/] [bold red]x"

MODES: dict[str, Mode] = {
    # ---- A: counting tokens
    "token_ids": Mode(None, "token_ids on every event, 3 per event after the first", "token_ids"),
    "continuous_usage": Mode(
        None,
        "Neuron V0 fork: no token_ids, cumulative usage on every event, a usage bump on a finish event without text",
        "usage",
    ),
    "final_usage_only": Mode(None, "no token_ids, usage only in the final chunk: split by text length", "text"),
    "no_usage": Mode(None, "neither token_ids nor usage: one token per event, marked text", "text"),
    "ids_disagree": Mode(None, "token_ids sum to 12 while usage says 13: a token_warning", "token_ids"),
    # ---- B: hostile JSON
    "usage_list": Mode("bad_response", "usage is a list"),
    "tokens_string": Mode("bad_response", "usage.completion_tokens is the string '12'"),
    "tokens_nan": Mode("bad_response", "usage.completion_tokens is NaN"),
    "tokens_float": Mode("bad_response", "usage.completion_tokens is 12.5"),
    "tokens_negative": Mode("bad_response", "usage.completion_tokens is -3"),
    "tokens_huge": Mode("bad_response", "usage.completion_tokens is 10**30"),
    "tokens_going_down": Mode("bad_response", "cumulative usage goes 6 then 3"),
    "ids_wrong_type": Mode("bad_response", "token_ids holds strings"),
    "event_not_object": Mode("malformed_sse", "an event that is a JSON list"),
    "event_not_json": Mode("malformed_sse", "an event that is not JSON"),
    # ---- C: protocol
    "tokens_after_done": Mode(None, "events after [DONE], then the connection stays open 5 s", "token_ids"),
    "crlf": Mode(None, "CRLF line endings and a comment line", "token_ids"),
    "gzip": Mode("bad_response", "a gzip-compressed stream although identity was asked for"),
    "redirect_other_host": Mode("redirect", "307 to another host, with credentials in the Location"),
    "no_separators": Mode("response_too_large", "data without a blank line, 4 MiB in 64 KiB writes"),
    "endless_events": Mode("bad_response", "valid one-token events that never stop"),
    "drip": Mode("timeout", "one byte every 50 ms, never a whole event"),
    "huge_error_body": Mode("http_500", "HTTP 500 with a 20 MiB body"),
    "bad_http": Mode("client_error", "a response that is not HTTP"),
    # ---- plain failures
    "status_503": Mode("http_503", "HTTP 503 with vLLM's JSON error body"),
    "cut_mid_stream": Mode("disconnect", "the connection closes before [DONE]"),
    "error_event": Mode("stream_error", "a vLLM error event mid-stream"),
    "json_not_sse": Mode("not_streaming", "HTTP 200 application/json"),
    "done_without_tokens": Mode("no_tokens", "[DONE] with no token-bearing event"),
    "refused": Mode("connect", "nothing listens on the port"),
    # ---- D: secrets the server echoes back
    "error_echoes_credentials": Mode("http_400", "an error message echoing a URL with user:password@"),
    "bidi_error": Mode("http_500", "an error message holding right-to-left override and isolate characters"),
    "terminal_escapes": Mode(
        "http_500", "an error message holding terminal escapes (clear screen, window title, hyperlink) and markup"
    ),
    # ---- E: text that is not valid Unicode
    "error_surrogate": Mode("http_400", "an error message holding a lone surrogate escape (\\ud800)"),
    # pydantic's JSON parser refuses a lone surrogate escape (RFC 8259 section 8.2 leaves its meaning open)
    "text_surrogate": Mode("malformed_sse", "streamed text holding a lone surrogate escape"),
    # ---- side endpoints (the stream itself is well-formed)
    "models_not_object": Mode(None, "/v1/models answers a JSON list", "token_ids"),
    "tokenize_not_object": Mode(None, "/tokenize answers a JSON string", "token_ids"),
    "metrics_declared_charset": Mode(
        None, "/metrics in UTF-8 declared as charset=utf-16 (window 4, half the drafts accepted)", "token_ids"
    ),
    "metrics_many_positions": Mode(None, "/metrics with 2,000 per-position acceptance series", "token_ids"),
    "metrics_overflow": Mode(
        None, "/metrics counters whose ratio overflows (1e300 accepted / 1e-300 drafts)", "token_ids"
    ),
    "long_model_id": Mode(None, "/v1/models serves a 300-character model id", "token_ids"),
    "draft_markdown": Mode(
        None, "/sim/identity: a draft holding a Markdown image, a link, HTML and a pipe", "token_ids"
    ),
    "metrics_flood": Mode(None, "/metrics of 40,000 lines, under the byte cap", "token_ids"),
    "version_endless": Mode(None, "/version and /sim/identity stream 64 KiB every 10 ms, never ending", "token_ids"),
    "version_surrogate": Mode(None, "/version holding a lone surrogate escape", "token_ids"),
    "draft_controls": Mode(None, "/sim/identity: a draft with escapes, bidi overrides and 300 chars", "token_ids"),
}
SIDE_MODES = ("models_not_object", "tokenize_not_object", "metrics_declared_charset", "metrics_many_positions",
              "long_model_id", "draft_markdown",
              "metrics_overflow",
              "metrics_flood", "version_endless", "version_surrogate", "draft_controls")  # fmt: skip
SURROGATE_JSON = '"bad \\ud800 input"'  # JSON text whose string decodes to a lone surrogate
LONG_MODEL = "org/" + "m" * 296  # 300 characters: a file name holding it passes 255 bytes
MARKDOWN_DRAFT = "![t](http://evil.example/t.png) <img src=x> [click](http://evil.example) `x` | y"
BIDI = "user\u202egnp.exe\u2066x\u2069"  # shows as "userexe.png" on a terminal that honours the override
DRAFT_CONTROLS = "d\x1b[31m\u202eevil\u00e9" + "x" * 300


def event(
    *, text: str | None = None, ids: list[Any] | None = None, usage: Any = None, chat: bool, finish: str | None = None
) -> bytes:
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish}
    if chat:
        choice["delta"] = {"content": text} if text is not None else {}
    else:
        choice["text"] = text if text is not None else ""
    if ids is not None:
        choice["token_ids"] = ids
    obj: dict[str, Any] = {"id": "x", "choices": [choice]}
    if usage is not None:
        obj["usage"] = usage
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def final_usage(n: Any) -> bytes:
    return (
        b"data: "
        + json.dumps({"id": "x", "choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": n}}).encode()
        + b"\n\n"
    )


DONE = b"data: [DONE]\n\n"


def well_formed(chat: bool, *, ids: bool = True, usage: str = "final") -> list[bytes]:
    """TOKENS tokens: one, then events of three (``usage``: final, continuous or none)."""
    out: list[bytes] = []
    sizes = [1] + [3] * ((TOKENS - 1) // 3) + ([(TOKENS - 1) % 3] if (TOKENS - 1) % 3 else [])
    nxt, cum = 100, 0
    for k in sizes:
        cum += k
        toks = list(range(nxt, nxt + k))
        nxt += k
        u = {"prompt_tokens": 5, "completion_tokens": cum} if usage == "continuous" else None
        out.append(event(text="".join(f" t{i}" for i in toks), ids=toks if ids else None, usage=u, chat=chat))
    if usage in ("final", "continuous"):
        out.append(final_usage(TOKENS))
    return [*out, DONE]


class HostileServer(LoopServer):
    def __init__(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}")
        super().__init__()
        self.mode = mode
        self.requests: list[dict[str, Any]] = []
        self.served = 0  # well-formed streams served (the counters /metrics reports move with it)
        self.side_bytes = 0  # bytes an endless side endpoint managed to send before the client hung up

    # ---- the streaming handler, per mode
    async def _stream(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        self.requests.append({"path": request.path, "headers": dict(request.headers), "body": body})
        chat = request.path.endswith("/chat/completions")
        m = self.mode

        if m == "status_503":
            return web.json_response({"error": {"message": "overloaded", "code": 503}}, status=503)
        if m == "error_echoes_credentials":
            msg = f"cannot reach upstream http://admin:{PLANTED}@10.0.0.1:9000/v1"
            return web.json_response({"error": {"message": msg, "code": 400}}, status=400)
        if m == "error_surrogate":
            body_text = '{"error": {"message": ' + SURROGATE_JSON + ', "code": 400}}'
            return web.Response(text=body_text, status=400, content_type="application/json")
        if m == "bidi_error":
            return web.json_response({"error": {"message": BIDI, "code": 500}}, status=500)
        if m == "terminal_escapes":
            return web.json_response({"error": {"message": TERMINAL_ESCAPES, "code": 500}}, status=500)
        if m == "json_not_sse":
            return web.json_response({"choices": [{"text": "not streamed"}]})
        if m == "redirect_other_host":
            raise web.HTTPTemporaryRedirect(f"http://admin:{PLANTED}@elsewhere.invalid:8000/v1/completions")
        if m == "huge_error_body":
            resp = web.StreamResponse(status=500, headers={"Content-Type": "text/plain"})
            await resp.prepare(request)
            chunk = b"x" * (1 << 20)
            try:
                for _ in range(20):
                    await resp.write(chunk)
            except (ConnectionError, RuntimeError):
                pass  # the client stopped reading: that is the point
            return resp
        if m == "bad_http":
            transport = request.transport
            assert transport is not None
            transport.write(b"HTTP/1.1 2xx WHAT\r\nContent-Length: banana\r\n\r\n")
            await asyncio.sleep(0.05)
            transport.close()  # request.transport is None once the client has gone; keep our own reference
            await asyncio.sleep(3600)  # never answers properly; cancelled when the server stops
            raise AssertionError("unreachable")
        if m == "gzip":
            payload = gzip.compress(b"".join(well_formed(chat)))
            headers = {"Content-Type": "text/event-stream", "Content-Encoding": "gzip"}
            return web.Response(body=payload, headers=headers)

        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await resp.prepare(request)
        try:
            for chunk in self._events(m, chat):
                if chunk is None:
                    await asyncio.sleep(5)  # hold the connection open (after [DONE])
                    continue
                if isinstance(chunk, float):
                    await asyncio.sleep(chunk)
                    continue
                await resp.write(chunk)
            await resp.write_eof()
        except (ConnectionError, RuntimeError, asyncio.CancelledError):
            pass  # the client hung up (as it should in several modes)
        return resp

    def _events(self, m: str, chat: bool) -> Any:
        def u(n: Any) -> dict[str, Any]:
            return {"prompt_tokens": 5, "completion_tokens": n}

        one = event(text=" a", ids=[1], chat=chat)
        if m == "token_ids" or m in SIDE_MODES:
            self.served += 1
            yield from well_formed(chat)
        elif m == "text_surrogate":
            yield event(text=" a", ids=[1], chat=chat).replace(b'" a"', SURROGATE_JSON.encode())
            yield from well_formed(chat)[1:]
        elif m == "continuous_usage":
            if chat:  # the fork's role event carries usage 0
                yield (
                    b"data: "
                    + json.dumps(
                        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}], "usage": u(0)}
                    ).encode()
                    + b"\n\n"
                )
            yield event(text=" a", usage=u(1), chat=chat)
            yield event(text=" b c d", usage=u(4), chat=chat)
            yield event(text="", usage=u(5), chat=chat)  # a token without text: counted with the next chunk
            yield event(text=" f g", usage=u(8), chat=chat)
            yield event(text=" h i j", usage=u(11), chat=chat)
            yield event(text="", usage=u(12), chat=chat, finish="length")  # the last token, without text
            yield final_usage(12)
            yield DONE
        elif m == "final_usage_only":
            yield from well_formed(chat, ids=False, usage="final")
        elif m == "no_usage":
            yield from well_formed(chat, ids=False, usage="none")
        elif m == "ids_disagree":
            yield from well_formed(chat)[:-2]
            yield final_usage(TOKENS + 1)
            yield DONE
        elif m == "usage_list":
            yield one
            yield b'data: {"choices": [], "usage": []}\n\n'
            yield DONE
        elif m in ("tokens_string", "tokens_nan", "tokens_float", "tokens_negative", "tokens_huge"):
            bad = {"tokens_string": '"12"', "tokens_nan": "NaN", "tokens_float": "12.5", "tokens_negative": "-3",
                   "tokens_huge": "1" + "0" * 30}[m]  # fmt: skip
            yield one
            yield (
                b'data: {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": ' + bad.encode() + b"}}\n\n"
            )
            yield DONE
        elif m == "tokens_going_down":
            yield event(text=" a b c d e f", usage=u(6), chat=chat)
            yield event(text=" g", usage=u(3), chat=chat)
            yield DONE
        elif m == "ids_wrong_type":
            yield event(text=" a", ids=["1"], chat=chat)
            yield DONE
        elif m == "event_not_object":
            yield one
            yield b"data: [1, 2, 3]\n\n"
            yield DONE
        elif m == "event_not_json":
            yield one
            yield b'data: {"choices": [{"text": \n\n'
            yield DONE
        elif m == "tokens_after_done":
            yield from well_formed(chat)
            yield event(text=" late", ids=[7, 8, 9], chat=chat)
            yield None  # keep the connection open: e2e must end at [DONE], not at the close
        elif m == "crlf":
            yield b": keep-alive comment\r\n\r\n"
            for chunk in well_formed(chat):
                yield chunk.replace(b"\n", b"\r\n")
        elif m == "no_separators":
            yield b"data: "
            for _ in range(64):
                yield b"x" * (64 << 10)
        elif m == "endless_events":
            for _ in range(100_000):
                yield one
        elif m == "drip":
            for _ in range(10_000):
                yield b"d"
                yield 0.05
        elif m == "cut_mid_stream":
            yield one
            return
        elif m == "error_event":
            yield one
            yield b'data: {"error": {"message": "engine dead", "type": "InternalServerError", "code": 500}}\n\n'
        elif m == "done_without_tokens":
            yield final_usage(0)
            yield DONE
        else:  # pragma: no cover - every mode is handled above
            raise AssertionError(m)

    # ---- side endpoints
    async def _models(self, _r: web.Request) -> web.Response:
        if self.mode == "models_not_object":
            return web.json_response([{"id": MODEL}])
        model = LONG_MODEL if self.mode == "long_model_id" else MODEL
        return web.json_response({"object": "list", "data": [{"id": model, "object": "model"}]})

    async def _tokenize(self, request: web.Request) -> web.Response:
        body = await request.json()
        if self.mode == "tokenize_not_object":
            return web.json_response("forty-two")
        n = len(str(body.get("prompt", "")).split())
        return web.json_response({"count": n, "tokens": list(range(n))})

    def _app(self) -> web.Application:
        async def health(_r: web.Request) -> web.Response:
            return web.Response(status=200)

        async def metrics(request: web.Request) -> web.StreamResponse:
            if self.mode == "metrics_declared_charset":
                headers = {"Content-Type": "text/plain; version=0.0.4; charset=utf-16"}
                return web.Response(body=self._counters(4).encode(), headers=headers)
            if self.mode == "metrics_overflow":
                return web.Response(text=self._counters(0, scale=(1e-300, 1e300)), content_type="text/plain")
            if self.mode == "metrics_many_positions":
                return web.Response(text=self._counters(2000), content_type="text/plain")
            if self.mode == "metrics_flood":
                lines = "".join(f'vllm:flood_total{{n="{i}"}} 1\n' for i in range(40_000))
                return web.Response(text="# TYPE vllm:flood_total counter\n" + lines, content_type="text/plain")
            if self.mode == "version_endless":
                return await self._endless(request)
            return web.Response(status=404)

        async def version(request: web.Request) -> web.StreamResponse:
            if self.mode == "version_endless":
                return await self._endless(request)
            if self.mode == "version_surrogate":
                return web.Response(text='{"version": ' + SURROGATE_JSON + "}", content_type="application/json")
            return web.json_response({"version": "0.10.1"})

        async def sim_identity(request: web.Request) -> web.StreamResponse:
            if self.mode == "version_endless":
                return await self._endless(request)
            if self.mode == "draft_controls":
                return web.json_response({"draft": DRAFT_CONTROLS})
            if self.mode == "draft_markdown":
                return web.json_response({"draft": MARKDOWN_DRAFT})
            return web.Response(status=404)

        app = web.Application()
        handlers: list[tuple[str, str, Callable[[web.Request], Awaitable[web.StreamResponse]]]] = [
            ("GET", "/health", health),
            ("GET", "/v1/models", self._models),
            ("GET", "/metrics", metrics),
            ("GET", "/version", version),
            ("GET", "/sim/identity", sim_identity),
            ("POST", "/tokenize", self._tokenize),
            ("POST", "/v1/completions", self._stream),
            ("POST", "/v1/chat/completions", self._stream),
        ]
        for method, path, h in handlers:
            app.router.add_route(method, path, h)
        return app

    def _counters(self, positions: int, scale: tuple[float, float] = (1, 1)) -> str:
        """vLLM V1's spec-decode counters after ``served`` responses: 4 drafts of 4 tokens each, half accepted,
        the accepted tokens spread over ``positions`` per-position series; ``scale``: factors for the drafts
        and for the token counts (finite numbers whose ratio is not)."""
        n, (d, t) = self.served, scale
        out = ["# TYPE vllm:spec_decode_num_drafts counter", f"vllm:spec_decode_num_drafts_total {4 * n * d}",
               "# TYPE vllm:spec_decode_num_draft_tokens counter",
               f"vllm:spec_decode_num_draft_tokens_total {16 * n * t}",
               "# TYPE vllm:spec_decode_num_accepted_tokens counter",
               f"vllm:spec_decode_num_accepted_tokens_total {8 * n * t}",
               "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter"]  # fmt: skip
        per = [3, 2, 2, 1] if positions == 4 else [8 / positions] * positions if positions else []
        series = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
        out += [f'{series}{{position="{i}"}} {p * n}' for i, p in enumerate(per)]
        return "\n".join(out) + "\n"

    async def _endless(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        try:
            await resp.write(b'{"version": "')
            for _ in range(100_000):
                await resp.write(b"9" * (64 << 10))
                self.side_bytes += 64 << 10
                await asyncio.sleep(0.01)
        except (ConnectionError, RuntimeError, asyncio.CancelledError):
            pass  # the client stopped reading: that is the point
        return resp

    def __enter__(self) -> HostileServer:
        if self.mode == "refused":
            from spectrn.runtimes.launch import free_port

            self.url = f"http://127.0.0.1:{free_port()}"
            return self
        return super().__enter__()
