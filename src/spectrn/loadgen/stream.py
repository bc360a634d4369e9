"""The OpenAI streaming protocol of one response parsed: SSE framing, typed events, tokens per chunk.

No I/O: ``spectrn.loadgen.client`` reads the socket and feeds the bytes here with their arrival times.

Every request asks for ``return_token_ids`` (vLLM >= 0.10.2 and spectrn's simulator put ``token_ids`` on
each event) and for ``stream_options: {"include_usage": true, "continuous_usage_stats": true}`` (the Neuron
V0 fork ignores ``return_token_ids`` but puts the cumulative ``usage`` on every event; see
docs/benchmarks.md, "Counting tokens"). Token accounting per token-bearing event, best source first
(``RequestRecord.token_source``):

1. ``token_ids``: the length of the event's ``token_ids``; under speculative decoding one event carries
   several tokens.
2. ``usage``: the difference of the cumulative ``usage.completion_tokens`` since the previous
   token-bearing event. Tokens announced by an event without text (a finish event, a detokenizer that
   holds text back) are added to the next token-bearing event, or to the last one at the end, so the
   chunks always add up to the server's count.
3. ``text``: neither is available: the final ``usage.completion_tokens`` is split over the events by text
   length (at least one each), or one token per event without any usage. Estimates, and the run says so.

When ``token_ids`` and ``usage`` disagree, ``token_ids`` is counted and the record carries a
``token_warning``. Everything the server sends goes through typed models (strict pydantic): a field of the
wrong type, a negative, fractional or absurd count, a cumulative count that goes down, an event over
``MAX_EVENT_BYTES`` or a response over its byte budget ends that request with a classified error
(``ERROR_CLASSES``), never a traceback and never an unbounded loop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spectrn.run.records import TokenSource
from spectrn.sanitize import valid_text

# Bounds on what one response may make this process hold or compute.
MAX_EVENT_BYTES = 1 << 20  # one SSE event (vLLM's are a few hundred bytes)
MAX_TOKEN_COUNT = 10_000_000  # a usage count above this is not a real count
MAX_TOKEN_ID = (1 << 32) - 1
MAX_FINISH_REASON_CHARS = 40  # vLLM's are stop, length, abort; a longer one is kept only in part


def error_message(raw: bytes) -> str:
    """vLLM's error body is ``{"error": {"message", "type", "code"}}`` (older: ``{"message", ...}``)."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return raw[:300].decode("utf-8", "replace").strip() or "(empty body)"
    if isinstance(obj, dict):
        err = obj.get("error", obj)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("detail") or obj)[:500]
        return str(err)[:500]
    return str(obj)[:500]


# ---- the server's events, typed ----------------------------------------------------------------------

Count = Annotated[int, Field(ge=0, le=MAX_TOKEN_COUNT)]
TokenId = Annotated[int, Field(ge=0, le=MAX_TOKEN_ID)]


class _Model(BaseModel):
    # strict: "12" is not 12, 12.0 is not 12, null is only accepted where declared; unknown fields pass
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True)


class Usage(_Model):
    prompt_tokens: Count | None = None
    completion_tokens: Count | None = None


class Delta(_Model):
    content: str | None = None
    reasoning_content: str | None = None  # Qwen3 with a reasoning parser streams its thinking here


class Choice(_Model):
    index: int = 0
    text: str | None = None  # completions
    delta: Delta | None = None  # chat
    token_ids: list[TokenId] | None = None
    finish_reason: str | None = None


class StreamEvent(_Model):
    choices: list[Choice] | None = None
    usage: Usage | None = None


def _first_problem(e: ValidationError) -> tuple[str, str]:
    """(error class, one line) for the first problem of a validation error."""
    err = e.errors(include_url=False)[0]
    kind = str(err.get("type", ""))
    if kind in ("json_invalid", "json_type") or (kind in ("model_type", "model_attributes_type") and not err["loc"]):
        what = "not JSON" if kind == "json_invalid" else "not a JSON object"
        return "malformed_sse", f"event is {what}"
    loc = ".".join(str(p) for p in err["loc"])
    got = repr(err.get("input"))
    got = got if len(got) <= 60 else got[:57] + "..."
    return "bad_response", f"{loc}: {err['msg']} (got {got})"


# ---- SSE framing ------------------------------------------------------------------------------------


class EventTooLarge(Exception):
    pass


class SseDecoder:
    """Incremental Server-Sent Events decoder: bytes in, the ``data`` of each complete event out.

    Lines may end in CRLF, LF or CR; an event ends at a blank line; its ``data:`` lines are joined with
    newlines; comments (``:``) and other fields are skipped. The pending, incomplete event is held in a
    bytearray (appends are amortised and the separator search resumes where it stopped, so a server that
    drips one byte at a time costs linear time), and it may not grow past ``max_event_bytes``.
    """

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._buf = bytearray()
        self._scan = 0
        self._cr = False
        self._max = max_event_bytes

    def feed(self, data: bytes) -> list[bytes]:
        if self._cr or b"\r" in data:
            if self._cr:
                data = b"\r" + data
            self._cr = data.endswith(b"\r")
            if self._cr:  # its LF may arrive in the next read
                data = data[:-1]
            data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        buf = self._buf
        buf += data
        out: list[bytes] = []
        start = 0
        while True:
            cut = buf.find(b"\n\n", max(self._scan, start))
            if cut < 0:
                break
            payload = _event_data(bytes(buf[start:cut]))
            if payload is not None:
                out.append(payload)
            start = cut + 2
        if start:
            del buf[:start]
        self._scan = max(len(buf) - 1, 0)
        if len(buf) > self._max:
            raise EventTooLarge(f"an event grew past {self._max} bytes without a blank line ending it")
        return out

    def close(self) -> list[bytes]:
        """The data of a last event the server did not end with a blank line (lenient: used, not dropped)."""
        rest, self._buf = bytes(self._buf), bytearray()
        payload = _event_data(rest.strip(b"\n"))
        return [payload] if payload is not None else []


def _event_data(block: bytes) -> bytes | None:
    if block.startswith(b"data:") and b"\n" not in block:  # vLLM: one data line per event
        return block[6:] if block[5:6] == b" " else block[5:]
    lines = [
        (line[6:] if line[5:6] == b" " else line[5:])
        for line in block.split(b"\n")
        if line.startswith(b"data:") or line == b"data"
    ]
    return b"\n".join(lines) if lines else None


# ---- one response ------------------------------------------------------------------------------------


@dataclass
class StreamParser:
    """Turns the events of one response into chunk times and token counts (no I/O)."""

    max_events: int = 1264
    keep_output: bool = True
    times: list[float] = field(default_factory=list)
    ids: list[int | None] = field(default_factory=list)  # len(token_ids) per chunk
    cum: list[int | None] = field(default_factory=list)  # cumulative usage.completion_tokens per chunk
    text_len: list[int] = field(default_factory=list)
    token_ids: list[int] = field(default_factory=list)
    text_parts: list[str] = field(default_factory=list)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None  # the last usage.completion_tokens seen
    finish_reason: str | None = None  # the last one the server sent (stop: EOS, length: max_tokens)
    error: str | None = None
    error_msg: str | None = None
    done: bool = False

    @property
    def fatal(self) -> bool:
        """An error after which reading on is pointless (a malformed event alone is not)."""
        return self.error is not None and self.error != "malformed_sse"

    def fail(self, error: str, msg: str) -> None:
        if self.error is None or self.error == "malformed_sse":
            self.error, self.error_msg = error, valid_text(msg)  # a lone surrogate kept as its escape

    def event(self, payload: bytes, now: float) -> None:
        if self.done or self.fatal:
            return  # nothing after [DONE] or a fatal error counts
        if payload.strip() == b"[DONE]":
            self.done = True
            return
        try:
            ev = StreamEvent.model_validate_json(payload)
        except ValidationError as e:
            if b'"error"' in payload and self._error_event(payload):
                return
            kind, msg = _first_problem(e)
            self.fail(kind, f"{msg}: {payload[:120]!r}" if kind == "malformed_sse" else msg)
            return
        if b'"error"' in payload and self._error_event(payload):
            return
        usage = ev.usage
        if usage is not None:
            if usage.prompt_tokens is not None:
                self.prompt_tokens = usage.prompt_tokens
            if usage.completion_tokens is not None:
                last = self.completion_tokens
                if last is not None and usage.completion_tokens < last:
                    self.fail(
                        "bad_response",
                        f"usage.completion_tokens went down from {last} to {usage.completion_tokens}",
                    )
                    return
                self.completion_tokens = usage.completion_tokens
        if not ev.choices:
            return
        choice = ev.choices[0]
        if choice.finish_reason is not None:  # recorded, never trusted for counting: it may come on a tokenless event
            self.finish_reason = valid_text(choice.finish_reason[:MAX_FINISH_REASON_CHARS])
        if choice.delta is not None:
            text = choice.delta.content or ""
            thinking = choice.delta.reasoning_content or ""
        else:
            text, thinking = choice.text or "", ""
        ids = choice.token_ids
        grew = usage is not None and usage.completion_tokens is not None and usage.completion_tokens > self._counted()
        if not text and not thinking and not ids and not grew:
            return  # a role event, or a finish event that carries no new token
        # An event whose text is empty but whose cumulative usage grew is still a step's tokens: the Neuron fork's
        # incremental detokenizer holds text back and sends the step anyway (docs/neuron.md), so it is a chunk.
        if len(self.times) >= self.max_events:
            self.fail("bad_response", f"more than {self.max_events} token-bearing events: max_tokens is not honoured")
            return
        self.times.append(now)
        self.ids.append(len(ids) if ids is not None else None)
        self.cum.append(usage.completion_tokens if usage is not None else None)
        self.text_len.append(len(text) + len(thinking))
        if self.keep_output:
            if ids:
                self.token_ids.extend(ids)
            self.text_parts.append(valid_text(text))

    def _counted(self) -> int:
        """Tokens the chunks so far account for by cumulative usage (0 before the first)."""
        for c in reversed(self.cum):
            if c is not None:
                return c
        return 0

    def _error_event(self, payload: bytes) -> bool:
        try:
            obj = json.loads(payload)
        except (ValueError, RecursionError):
            return False
        if isinstance(obj, dict) and "error" in obj and obj["error"] is not None:
            self.fail("stream_error", error_message(payload))
            return True
        return False

    def chunk_tokens(self) -> tuple[list[int], TokenSource, str | None]:
        """Tokens per chunk, where they were counted from, and a warning when sources disagree."""
        n = len(self.times)
        total = self.completion_tokens
        if n and all(k is not None for k in self.ids):
            counts = [k for k in self.ids if k is not None]
            warning = None
            if total is not None and sum(counts) != total:
                warning = (
                    f"token_ids count {sum(counts)} differs from usage.completion_tokens {total}; token_ids counted"
                )
            return counts, "token_ids", warning
        if n and all(c is not None for c in self.cum):
            counts, prev = [], 0
            for c in self.cum:
                assert c is not None
                counts.append(c - prev)  # never negative: the parser refuses a count that goes down
                prev = c
            if total is not None and total > prev:
                counts[-1] += total - prev  # tokens announced after the last text
            return counts, "usage", None
        if total is not None and n:
            return _apportion(total, self.text_len), "text", None
        return [1] * n, "text", None


def _apportion(total: int, weights: list[int]) -> list[int]:
    """Split ``total`` tokens over events proportionally to ``weights`` (text length), at least one each.

    Exact integer arithmetic and largest-remainder rounding; the work is bounded by the number of events,
    never by ``total``. With ``total`` below the number of events every event still gets one token (the
    record's sum then exceeds the server's count).
    """
    if isinstance(total, bool) or not isinstance(total, int) or not 0 <= total <= MAX_TOKEN_COUNT:
        raise ValueError(f"token total must be an integer in 0..{MAX_TOKEN_COUNT}, got {total!r}")
    n = len(weights)
    if total <= n:
        return [1] * n
    w = [max(int(x), 0) for x in weights]
    wsum = sum(w)
    if wsum == 0:
        w, wsum = [1] * n, n
    out = [max(1, total * x // wsum) for x in w]
    diff = total - sum(out)
    if diff > 0:  # at most n: every floor lost less than one
        for i in sorted(range(n), key=lambda i: (-(total * w[i] % wsum), i))[:diff]:
            out[i] += 1
    # diff < 0: the events raised to one token took at most n tokens too many; take them back one per event
    # and round from the largest counts (each round removes at least one, and total > n leaves enough)
    order = sorted(range(n), key=lambda i: (-out[i], i))
    while diff < 0:
        for i in order:
            if out[i] > 1 and diff < 0:
                out[i] -= 1
                diff += 1
    return out


def consume(stream: StreamParser, decoder: SseDecoder, data: bytes, now: float) -> bool:
    """Feed one read of the body; True when reading should stop ([DONE], or an error that ends the request)."""
    try:
        payloads = decoder.feed(data)
    except EventTooLarge as e:
        stream.fail("response_too_large", str(e))
        return True
    for payload in payloads:
        stream.event(payload, now)
        if stream.done or stream.fatal:
            return True
    return False


def finish(stream: StreamParser, decoder: SseDecoder, now: float) -> None:
    """The body ended (the server closed it): use a last event left without its blank line."""
    for payload in decoder.close():
        stream.event(payload, now)
