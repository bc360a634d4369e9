"""How one request's tokens become bytes: SSE chunks in the profile's layout (streaming), or nothing until the
end (non-streaming, the body is built from the collected tokens)."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field

from spectrn.sim.api_errors import dumps
from spectrn.sim.engine import SimRequest
from spectrn.sim.profiles import ErrorStyle
from spectrn.sim.tokens import Token


class TextRelease:
    """Which text a chunk carries: all of its tokens' text, or (``rate`` > 0) what an incremental detokenizer
    releases.

    V0's detokenizer decodes token by token and returns no text while the decoded bytes end in an incomplete
    character; that text comes out with a later token. Here each token ends mid-character with probability
    ``rate`` (a seeded draw per token), and a chunk carries the text up to its last complete token, so
    chunks can carry several tokens' worth of text, or none. The last chunk releases everything.
    """

    __slots__ = ("rate", "rng", "held")

    def __init__(self, rate: float, seed: int) -> None:
        self.rate = rate
        self.rng = random.Random(seed)
        self.held: list[str] = []

    def text(self, tokens: list[Token], finish: str | None) -> str:
        if not self.rate:
            return "".join(t[1] for t in tokens)
        held, draw, rate = self.held, self.rng.random, self.rate
        out: list[str] = []
        for _, piece in tokens:
            held.append(piece)
            if draw() >= rate:
                out.extend(held)
                held.clear()
        if finish:
            out.extend(held)
            held.clear()
        return "".join(out)


@dataclass(slots=True)
class StreamSink:
    """Encodes SSE events for one streaming request (in the profile's dialect) and writes them as HTTP chunks."""

    chat: bool
    dialect: ErrorStyle  # v0: the Neuron fork's chunk layout; v1: upstream's
    head: str  # '{"id":...,"object":...,"created":...,"model":...,'
    return_token_ids: bool
    include_usage: bool
    continuous_usage: bool
    prompt_ids_json: str
    prompt_len: int
    fingerprint: str
    release: TextRelease
    transport: asyncio.Transport | None = None
    closed: bool = False

    def _usage(self, completion: int, details: bool = False) -> str:
        tail = ',"prompt_tokens_details":null' if details else ""
        return (
            f'{{"prompt_tokens":{self.prompt_len},"total_tokens":{self.prompt_len + completion},'
            f'"completion_tokens":{completion}{tail}}}'
        )

    def encode(self, req: SimRequest, tokens: list[Token], finish: str | None, first: bool) -> bytes:
        text = dumps(self.release.text(tokens, finish))
        done = req.emitted + len(tokens)
        events = (
            self._v0(text, done, finish, first) if self.dialect == "v0" else self._v1(tokens, text, done, finish, first)
        )
        if req.fault.malformed_event is not None and req.events + 1 == req.fault.malformed_event:
            events[-1] = events[-1][: max(8, len(events[-1]) // 2)] + "\n\n"
        if finish:
            if self.include_usage:
                events.append(self._final_usage(done))
            events.append("data: [DONE]\n\n")
        data = "".join(events).encode()
        return b"%x\r\n%b\r\n" % (len(data), data)

    def _v1(self, tokens: list[Token], text: str, done: int, finish: str | None, first: bool) -> list[str]:
        ids = "[" + ",".join(str(t[0]) for t in tokens) + "]" if self.return_token_ids else "null"
        fin = f'"finish_reason":"{finish}","stop_reason":null' if finish else '"finish_reason":null'
        usage = f',"usage":{self._usage(done)}' if self.continuous_usage else ""
        events = []
        if self.chat:
            if first:
                pids = self.prompt_ids_json if self.return_token_ids else "null"
                role_usage = f',"usage":{self._usage(0)}' if self.continuous_usage else ""
                events.append(
                    f'data: {self.head}"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},'
                    f'"logprobs":null,"finish_reason":null}}],"prompt_token_ids":{pids},"prompt_text":null{role_usage}}}\n\n'
                )
            events.append(
                f'data: {self.head}"choices":[{{"index":0,"delta":{{"content":{text}}},"logprobs":null,{fin},'
                f'"token_ids":{ids}}}]{usage}}}\n\n'
            )
        else:
            if not finish:
                fin = '"finish_reason":null,"stop_reason":null'
            pids = self.prompt_ids_json if (first and self.return_token_ids) else "null"
            events.append(
                f'data: {self.head}"choices":[{{"index":0,"text":{text},"logprobs":null,{fin},'
                f'"prompt_token_ids":{pids},"token_ids":{ids}}}]{usage}}}\n\n'
            )
        return events

    def _v0(self, text: str, done: int, finish: str | None, first: bool) -> list[str]:
        # The fork dumps chat content chunks with exclude_none (null fields vanish, the empty tool_calls list
        # stays), the role chunk with exclude_unset, and completion chunks with every field (usage: null).
        events = []
        if self.chat:
            usage = f',"usage":{self._usage(done)}' if self.continuous_usage else ""
            if first:
                role_usage = f',"usage":{self._usage(0)}' if self.continuous_usage else ""
                events.append(
                    f'data: {self.head}"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},'
                    f'"logprobs":null,"finish_reason":null}}]{role_usage}}}\n\n'
                )
            fin = f',"finish_reason":"{finish}"' if finish else ""
            events.append(
                f'data: {self.head}"choices":[{{"index":0,"delta":{{"content":{text},"tool_calls":[]}}{fin}}}]'
                f"{usage}}}\n\n"
            )
        else:
            usage = self._usage(done, details=True) if self.continuous_usage else "null"
            fin = f'"{finish}"' if finish else "null"
            events.append(
                f'data: {self.head}"choices":[{{"index":0,"text":{text},"logprobs":null,"finish_reason":{fin},'
                f'"stop_reason":null}}],"usage":{usage}}}\n\n'
            )
        return events

    def _final_usage(self, done: int) -> str:
        if self.dialect == "v0":
            return f'data: {self.head}"choices":[],"usage":{self._usage(done)}}}\n\n'
        return (
            f'data: {self.head}"choices":[],"usage":{self._usage(done)},"system_fingerprint":"{self.fingerprint}"}}\n\n'
        )

    def write(self, req: SimRequest, data: bytes | None, finish: str | None) -> bool:
        tr = self.transport
        if tr is None or tr.is_closing() or self.closed:
            return False
        if data:
            tr.write(data)
        cut = req.fault.disconnect_after_events
        if cut is not None and req.events + 1 >= cut and not finish:
            self.closed = True
            tr.close()  # flushes what was written, then drops the connection mid-response
            return False
        return True


@dataclass(slots=True)
class CollectSink:
    """Non-streaming: tokens are collected by the engine; the handler builds the body at the end."""

    closed: bool = False
    transport: asyncio.Transport | None = field(default=None)

    def encode(self, req: SimRequest, tokens: list[Token], finish: str | None, first: bool) -> None:
        return None

    def write(self, req: SimRequest, data: bytes | None, finish: str | None) -> bool:
        tr = self.transport
        return not (tr is None or tr.is_closing())
