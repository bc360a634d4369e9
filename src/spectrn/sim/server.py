"""The simulator's HTTP face: vLLM's OpenAI-compatible protocol on aiohttp.

Endpoints (as vLLM): ``POST /v1/completions``, ``POST /v1/chat/completions`` (streaming and not),
``GET /v1/models``, ``GET /health`` (503 while "compiling", then 200 with an empty body), ``GET /version``,
``POST /tokenize``, ``GET /metrics``. Simulator-only: ``GET /sim/requests`` (per-request ground truth:
acceptance probability, scheduled chunk times, tokens per chunk) and ``GET /sim/info`` (resolved model).

Response bodies mirror the recorded real transcripts field for field (``tests/fixtures/vllm-real``):
event order (chat opens with a role event), where ``token_ids`` / ``prompt_token_ids`` sit, the usage-only
final event with ``choices: []``, ``data: [DONE]``, error bodies ``{"error": {message, type, param, code}}``
(a bad streaming request gets a 400 JSON body, not SSE). Streaming chunks are written by the engine straight
to the transport with HTTP chunked framing, so every stream's chunk leaves at its scheduled time.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from aiohttp.tcp_helpers import tcp_nodelay

from spectrn.sim.engine import Engine, SimRequest
from spectrn.sim.faults import plan_for
from spectrn.sim.lengths import natural_length
from spectrn.sim.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from spectrn.sim.metrics import SimMetrics
from spectrn.sim.model import predictability
from spectrn.sim.profiles import ErrorStyle
from spectrn.sim.settings import SimSettings
from spectrn.sim.tokens import OutputStream, Token, encode, message_text, render_chat

JSON = "application/json"
SSE = "text/event-stream; charset=utf-8"
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_UNSET: Any = object()


class ApiError(Exception):
    """An error answered with the profile's JSON error body.

    ``v1`` (upstream vLLM, vllm-neuron): ``{"error": {message, type, param, code}}``, and parameter errors
    end with ``(parameter=..., value=...)``. ``v0`` (the Neuron fork, vLLM 0.9): the flat
    ``{"object": "error", message, type, param, code}`` with the plain message.
    """

    TYPES = {400: "BadRequestError", 404: "NotFoundError", 500: "InternalServerError", 503: "ServiceUnavailableError"}

    def __init__(self, status: int, message: str, param: str | None = None, value: Any = _UNSET) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.value = value

    def body(self, style: ErrorStyle) -> dict[str, Any]:
        kind = self.TYPES.get(self.status, "Error")
        if style == "v0":
            return {"object": "error", "message": self.message, "type": kind, "param": None, "code": self.status}
        message = self.message
        if self.value is not _UNSET:
            message = f"{message} (parameter={self.param}, value={self.value})"
        return {"error": {"message": message, "type": kind, "param": self.param, "code": self.status}}

    def response(self, style: ErrorStyle) -> web.Response:
        return _json(self.body(style), status=self.status)


def bad_param(param: str, value: Any, message: str) -> ApiError:
    return ApiError(400, message, param, value)


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=_dumps(body).encode(), status=status, headers={"Content-Type": JSON, **(headers or {})})


# ---- sinks: how one request's tokens become bytes -----------------------------------------------------


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
        text = _dumps(self.release.text(tokens, finish))
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


# ---- request parsing ----------------------------------------------------------------------------------


def _int_param(body: dict[str, Any], name: str) -> int | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ApiError(400, f"{name}: Input should be a valid integer (got {v!r})", name)
    return v


def _bool_param(body: dict[str, Any], name: str, default: bool = False) -> bool:
    v = body.get(name, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise ApiError(400, f"{name}: Input should be a valid boolean (got {v!r})", name)
    return v


class SimServer:
    """Holds the engine, metrics and settings of one app; its methods are the route handlers."""

    def __init__(self, settings: SimSettings) -> None:
        self.settings = settings
        self.profile = settings.server_profile
        self.model = settings.resolved()
        self.model_name = settings.model_name
        self.metrics = SimMetrics(
            self.model_name,
            profile=self.profile,
            speculative=self.model.speculative,
            window=self.model.window,
            max_model_len=settings.context_limit,
        )
        faults = settings.faults
        self.engine = Engine(
            self.model,
            self.metrics,
            max_num_seqs=settings.batch_limit,
            seed=settings.seed,
            spin_s=settings.spin_s,
            stall_rate=faults.stall_rate,
            stall_s=faults.stall_s,
            log_size=settings.request_log_size,
            # KV cache sized for a full batch of full-length sequences (what Neuron compiles for).
            kv_capacity_tokens=settings.batch_limit * settings.context_limit,
            writers=settings.writers,
        )
        self.started = time.time()
        self.ready_at = time.monotonic() + settings.startup_delay_s
        self.fingerprint = settings.fingerprint

    # ---- lifecycle ----
    async def on_startup(self, app: web.Application) -> None:
        self.engine.start()
        self.ready_at = time.monotonic() + self.settings.startup_delay_s

    async def on_cleanup(self, app: web.Application) -> None:
        await self.engine.stop()

    @property
    def ready(self) -> bool:
        return time.monotonic() >= self.ready_at

    # ---- simple endpoints ----
    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.ready else 503)

    async def version(self, request: web.Request) -> web.Response:
        return _json({"version": self.settings.version})

    async def identity(self, request: web.Request) -> web.Response:
        """``GET /sim/identity``: the simulator describes itself (like ``/sim/requests``, a path no real server
        has), so a run against it is labelled with the truth (``spectrn.loadgen.identity``)."""
        m = self.model
        return _json(
            {
                "profile": self.settings.server_profile.name,
                "preset": m.preset.name,
                "draft": m.draft if m.speculative else None,
                "window": m.window if m.speculative else None,
                "window_semantics": m.semantics,
            }
        )

    async def models(self, request: web.Request) -> web.Response:
        created = int(self.started)
        perm = hashlib.blake2b(f"perm{self.settings.seed}".encode(), digest_size=8).hexdigest()
        preset = self.settings.resolved_preset()
        from spectrn.spec.catalog import MODELS

        card = {
            "id": self.model_name,
            "object": "model",
            "created": created,
            "owned_by": "vllm",
            "root": MODELS[preset.target].hf_id,
            "parent": None,
            "max_model_len": self.settings.context_limit,
            "permission": [
                {
                    "id": f"modelperm-{perm}",
                    "object": "model_permission",
                    "created": created,
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
        return _json({"object": "list", "data": [card]})

    async def metrics_endpoint(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": METRICS_CONTENT_TYPE})

    async def tokenize(self, request: web.Request) -> web.Response:
        try:
            body = await self._body(request)
            self._check_model(body)
            if "messages" in body:
                text = self._chat_text(body, default_gen=_bool_param(body, "add_generation_prompt", True))
                ids = encode(text)
            else:
                text, ids = self._prompt_text(body)
        except ApiError as e:
            return e.response(self.profile.errors)
        out: dict[str, Any] = {"count": len(ids), "max_model_len": self.settings.context_limit, "tokens": ids}
        if _bool_param(body, "return_token_strs"):
            from spectrn.sim.tokens import pieces

            out["token_strs"] = pieces(text)
        else:
            out["token_strs"] = None
        return _json(out)

    async def sim_requests(self, request: web.Request) -> web.Response:
        wanted = request.query.get("id")
        log = self.engine.log
        reqs = list(log.values()) if wanted is None else [log[wanted]] if wanted in log else []
        return _json({"clock": "monotonic", "requests": [self.engine.describe(r) for r in reqs]})

    async def sim_info(self, request: web.Request) -> web.Response:
        m = self.model
        return _json(
            {
                "settings": self.settings.model_dump(mode="json"),
                "model_name": self.model_name,
                "preset": m.preset.model_dump(mode="json"),
                "speculative": m.speculative,
                "draft": m.draft if m.speculative else None,
                "window": m.window if m.speculative else None,
                "profile": self.profile.name,
                "window_semantics": m.semantics,
                "proposals_per_step": m.proposals,
                "max_tokens_per_step": m.max_tokens_per_step,
                "draft_params": m.draft_cost.model_dump(mode="json"),
                "time_scale": m.time_scale,
                "max_num_seqs": self.settings.batch_limit,
                "max_model_len": self.settings.context_limit,
                "steps": self.engine.steps,
                # The engine's own schedule error per step (most recent 2000 steps): wake-up - deadline, last
                # write - deadline, CPU seconds spent writing, chunks written.
                "lateness_s": [list(x) for x in self.engine.lateness],
            }
        )

    # ---- generation ----
    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = await request.json(loads=json.loads)
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ApiError(400, f"JSON decode error: {e}") from None
        if not isinstance(body, dict):
            raise ApiError(400, "request body must be a JSON object")
        try:  # a lone surrogate escape (\\ud800) parses but is no text: invalid input, not a server fault
            json.dumps(body, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as e:
            raise ApiError(
                400, f"the request holds text that is not valid Unicode (a lone surrogate at {e.start})"
            ) from None
        return body

    def _check_model(self, body: dict[str, Any]) -> None:
        name = body.get("model")
        if name is not None and name != self.model_name:
            if self.profile.errors == "v0":
                raise ApiError(404, f"The model `{name}` does not exist.")
            raise ApiError(404, f"The model `{name}` does not exist. Valid aliases: {self.model_name}.", "model")

    @staticmethod
    def _is_id_list(v: Any) -> bool:
        return isinstance(v, list) and bool(v) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)

    def _prompt_text(self, body: dict[str, Any]) -> tuple[str, list[int]]:
        prompt = body.get("prompt")
        if prompt is None:
            raise ApiError(400, "prompt: Field required", "prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
            prompt = prompt[0]
        if isinstance(prompt, str):
            if not prompt:
                raise ApiError(400, "Prompt cannot be empty", "prompt")
            return prompt, encode(prompt)
        if self._is_id_list(prompt):
            return " ".join(map(str, prompt)), list(prompt)
        raise ApiError(
            400,
            "prompt must be a string, a list with one string, or a list of token ids (batches are not supported)",
            "prompt",
        )

    def _chat_text(self, body: dict[str, Any], default_gen: bool = True) -> str:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "messages: Field required (a non-empty list)", "messages")
        for i, m in enumerate(messages):
            if not isinstance(m, dict) or not isinstance(m.get("role"), str):
                raise ApiError(400, f"messages[{i}]: each message needs a string 'role'", "messages")
        try:
            return render_chat(messages, add_generation_prompt=default_gen)
        except ValueError as e:
            raise ApiError(400, f"messages: {e}", "messages") from None

    async def _generate(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        try:
            body = await self._body(request)
            if not self.ready:
                raise ApiError(503, "The server is starting up (compiling the model); retry when /health answers 200.")
            self._check_model(body)
            req, sink, stream = self._build(request, body, chat)
        except ApiError as e:
            return e.response(self.profile.errors)
        headers = {
            "x-spectrn-sim-accept-prob": f"{req.probs[0] if req.probs else 0.0:.6f}",
            "x-spectrn-sim-predictability": f"{predictability(req.prompt_text):.6f}",
        }
        if req.fault.error:
            status = self.settings.faults.error_status
            req.done.set_result(None)
            return ApiError(status, f"Simulated server error (fault injection, status {status})").response(
                self.profile.errors
            )
        if stream:
            assert isinstance(sink, StreamSink)
            resp = web.StreamResponse(status=200, headers={"Content-Type": SSE, **headers})
            resp.enable_chunked_encoding()
            writer = await resp.prepare(request)
            send_headers = getattr(writer, "send_headers", None)
            if send_headers is not None:
                send_headers()
            sink.transport = request.transport
            if sink.transport is not None:
                tcp_nodelay(sink.transport, True)  # every chunk leaves at once, never held back by Nagle
                sock = sink.transport.get_extra_info("socket")
                if sock is not None:
                    self.engine.attach(req, sock.fileno())
            self.engine.submit(req)
            try:
                await asyncio.shield(req.done)
            except asyncio.CancelledError:
                self.engine.cancel(req)
                raise
            # If the connection is gone (client left, or an injected disconnect), aiohttp's write_eof raises a
            # ConnectionError that it handles itself.
            return resp
        assert isinstance(sink, CollectSink)
        sink.transport = request.transport
        self.engine.submit(req)
        try:
            await asyncio.shield(req.done)
        except asyncio.CancelledError:
            self.engine.cancel(req)
            raise
        return _json(self._final_body(req, chat, body), headers=headers)

    def _build(self, request: web.Request, body: dict[str, Any], chat: bool) -> tuple[SimRequest, Any, bool]:
        s = self.settings
        if _int_param(body, "n") not in (None, 1):
            raise bad_param("n", body["n"], "n must be 1 (the simulator generates one choice)")
        stream = _bool_param(body, "stream")
        opts = body.get("stream_options")
        if opts is not None:
            if not stream:
                raise ApiError(400, "Stream options can only be defined when `stream=True`.", "stream_options")
            if not isinstance(opts, dict):
                raise ApiError(400, "stream_options must be an object", "stream_options")
        # As vLLM's StreamOptions: include_usage defaults to true once stream_options is present, and
        # continuous_usage_stats only counts with it.
        include_usage = opts is not None and bool(opts.get("include_usage", True))
        opts = opts or {}
        continuous = include_usage and bool(opts.get("continuous_usage_stats")) and self.profile.continuous_usage
        temperature = body.get("temperature")
        if temperature is not None:
            if isinstance(temperature, bool) or not isinstance(temperature, int | float):
                raise ApiError(400, f"temperature: Input should be a valid number (got {temperature!r})", "temperature")
            if temperature < 0:
                raise bad_param("temperature", temperature, f"temperature must be non-negative, got {temperature}.")
        if chat:
            # Token ids come from the rendered template; predictability and output from what the user wrote.
            prompt_ids = encode(self._chat_text(body))
            prompt_text = "\n".join(message_text(m.get("content")) for m in body["messages"])
            max_tokens = _int_param(body, "max_completion_tokens")
            name = "max_completion_tokens"
            if max_tokens is None:
                max_tokens, name = _int_param(body, "max_tokens"), "max_tokens"
        else:
            prompt_text, prompt_ids = self._prompt_text(body)
            max_tokens, name = _int_param(body, "max_tokens"), "max_tokens"
        limit = s.context_limit
        plen = len(prompt_ids)
        if self.profile.errors == "v0":
            # The fork checks the context before the sampling parameters, in these words.
            if max_tokens is None and plen >= limit:
                raise ApiError(
                    400,
                    f"This model's maximum context length is {limit} tokens. However, you requested {plen} tokens "
                    f"in the messages, Please reduce the length of the messages.",
                )
            if max_tokens is not None and plen + max_tokens > limit:
                raise ApiError(
                    400,
                    f"This model's maximum context length is {limit} tokens. However, you requested "
                    f"{max_tokens + plen} tokens ({plen} in the messages, {max_tokens} in the completion). "
                    f"Please reduce the length of the messages or completion.",
                )
        if max_tokens is not None and max_tokens < 1:
            raise bad_param(name, max_tokens, f"max_tokens must be at least 1, got {max_tokens}.")
        if plen > limit:
            raise bad_param(
                "input_tokens",
                plen,
                f"This model's maximum context length is {limit} tokens. However, your prompt contains at least "
                f"{plen} input tokens, which exceeds this limit even without any output tokens. Please reduce the "
                f"length of the input prompt.",
            )
        if max_tokens is None:
            max_tokens = limit - plen
            if max_tokens < 1:
                raise bad_param(
                    "input_tokens",
                    plen,
                    f"This model's maximum context length is {limit} tokens and your prompt fills it.",
                )
        elif plen + max_tokens > limit:
            raise bad_param(
                "input_tokens",
                plen,
                f"This model's maximum context length is {limit} tokens. However, you requested {max_tokens} output "
                f"tokens and your prompt contains at least {plen} input tokens, for a total of at least "
                f"{plen + max_tokens} tokens. Please reduce the length of the input prompt or the number of "
                f"requested output tokens.",
            )
        min_tokens = _int_param(body, "min_tokens") or 0
        if min_tokens < 0:
            raise bad_param(
                "min_tokens", min_tokens, f"min_tokens must be greater than or equal to 0, got {min_tokens}."
            )
        if min_tokens > max_tokens:
            raise bad_param(
                "min_tokens",
                min_tokens,
                f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}.",
            )
        ignore_eos = _bool_param(body, "ignore_eos")
        # The Neuron fork has no return_token_ids: its request model accepts unknown fields and ignores them.
        return_ids = _bool_param(body, "return_token_ids") and self.profile.token_ids
        if ignore_eos:
            target, reason = max_tokens, "length"
        else:
            natural = max(min_tokens, natural_length(prompt_text, s.seed))
            target, reason = (max_tokens, "length") if natural >= max_tokens else (natural, "stop")

        engine = self.engine
        counter = engine.next_counter()
        # Greedy output depends on the prompt only; sampled output (temperature > 0) also on the request's seed
        # (OpenAI's `seed`) or, without one, on the request counter.
        # Like vLLM, a request without `temperature` samples (OpenAI's default is 1.0).
        temperature = 1.0 if temperature is None else float(temperature)
        sampled = temperature > 0
        req_seed = _int_param(body, "seed")
        sample_key = f"seed-{req_seed}" if req_seed is not None else f"request-{counter}"
        sample_seed = int.from_bytes(
            hashlib.blake2b(f"{s.seed}:{sample_key}".encode(), digest_size=4).digest(), "little"
        )
        digest = hashlib.blake2b(f"id\x00{s.seed}\x00{counter}\x00{self.started}".encode(), digest_size=8).hexdigest()
        rid = f"{'chatcmpl' if chat else 'cmpl'}-{digest}"
        obj = "chat.completion.chunk" if chat else "text_completion"
        created = int(time.time())
        head = f'{{"id":"{rid}","object":"{obj}","created":{created},"model":{_dumps(self.model_name)},'
        sink: Any
        if stream:
            sink = StreamSink(
                chat=chat,
                dialect=self.profile.errors,
                head=head,
                return_token_ids=return_ids,
                include_usage=include_usage,
                continuous_usage=continuous,
                prompt_ids_json="[" + ",".join(map(str, prompt_ids)) + "]",
                prompt_len=plen,
                fingerprint=self.fingerprint,
                release=TextRelease(
                    s.holdback_rate,
                    int.from_bytes(
                        hashlib.blake2b(f"text\x00{s.seed}\x00{counter}".encode(), digest_size=8).digest(), "little"
                    ),
                ),
            )
        else:
            sink = CollectSink()
        loop = asyncio.get_running_loop()
        req = SimRequest(
            rid=rid,
            counter=counter,
            prompt_text=prompt_text,
            prompt_ids=prompt_ids,
            target_len=target,
            finish_reason=reason,
            max_tokens=max_tokens,
            sink=sink,
            fault=plan_for(s.faults, s.seed, counter),
            output=OutputStream(prompt_text, s.seed if not sampled else sample_seed),
            rng=engine.request_rng(counter, prompt_text),
            probs=self.model.position_probs(prompt_text, temperature),
            arrival=time.monotonic(),
            done=loop.create_future(),
        )
        req.created = created
        return req, sink, stream

    def _final_body(self, req: SimRequest, chat: bool, body: dict[str, Any]) -> dict[str, Any]:
        text = "".join(req.text_parts)
        if self.profile.errors == "v0":
            return self._final_body_v0(req, chat, text)
        return_ids = _bool_param(body, "return_token_ids") and self.profile.token_ids
        usage = {
            "prompt_tokens": req.prompt_len,
            "total_tokens": req.prompt_len + req.emitted,
            "completion_tokens": req.emitted,
            "prompt_tokens_details": None,
            "completion_tokens_details": None,
        }
        ids = list(req.token_ids) if return_ids else None
        pids = list(req.prompt_ids) if return_ids else None
        created = req.created
        if chat:
            return {
                "id": req.rid,
                "object": "chat.completion",
                "created": created,
                "model": self.model_name,
                "choices": [
                    {
                        "index": 0,
                        "message": {
                            "role": "assistant",
                            "content": text,
                            "refusal": None,
                            "annotations": None,
                            "audio": None,
                            "function_call": None,
                            "reasoning": None,
                        },
                        "logprobs": None,
                        "finish_reason": req.finished,
                        "stop_reason": None,
                        "token_ids": ids,
                        "routed_experts": None,
                    }
                ],
                "service_tier": None,
                "system_fingerprint": self.fingerprint,
                "usage": usage,
                "prompt_logprobs": None,
                "prompt_token_ids": pids,
                "prompt_text": None,
                "kv_transfer_params": None,
                "ec_transfer_params": None,
                "metrics": None,
            }
        return {
            "id": req.rid,
            "object": "text_completion",
            "created": created,
            "model": self.model_name,
            "choices": [
                {
                    "index": 0,
                    "text": text,
                    "logprobs": None,
                    "finish_reason": req.finished,
                    "stop_reason": None,
                    "token_ids": ids,
                    "prompt_logprobs": None,
                    "prompt_token_ids": pids,
                    "routed_experts": None,
                }
            ],
            "service_tier": None,
            "system_fingerprint": self.fingerprint,
            "usage": usage,
            "kv_transfer_params": None,
            "ec_transfer_params": None,
            "metrics": None,
        }

    def _final_body_v0(self, req: SimRequest, chat: bool, text: str) -> dict[str, Any]:
        """The fork's non-streaming bodies (vLLM 0.9 response models, dumped in full)."""
        usage = {
            "prompt_tokens": req.prompt_len,
            "total_tokens": req.prompt_len + req.emitted,
            "completion_tokens": req.emitted,
            "prompt_tokens_details": None,
        }
        head = {"id": req.rid, "object": "chat.completion" if chat else "text_completion", "created": req.created}
        if chat:
            message: dict[str, Any] = {
                "role": "assistant",
                "reasoning_content": None,
                "content": text,
                "tool_calls": [],
            }
            choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None, "finish_reason": req.finished}
            choice["stop_reason"] = None
            return {
                **head,
                "model": self.model_name,
                "choices": [choice],
                "usage": usage,
                "prompt_logprobs": None,
                "kv_transfer_params": None,
            }
        choice = {
            "index": 0,
            "text": text,
            "logprobs": None,
            "finish_reason": req.finished,
            "stop_reason": None,
            "prompt_logprobs": None,
        }
        return {**head, "model": self.model_name, "choices": [choice], "usage": usage, "kv_transfer_params": None}


SIM_KEY = web.AppKey("spectrn_sim", SimServer)


@web.middleware
async def _fastapi_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """Unknown paths and methods answer like vLLM's FastAPI app: ``{"detail": ...}``."""
    try:
        return await handler(request)  # type: ignore[no-any-return]
    except web.HTTPNotFound:
        return _json({"detail": "Not Found"}, status=404)
    except web.HTTPMethodNotAllowed:
        return _json({"detail": "Method Not Allowed"}, status=405)


def make_app(settings: SimSettings) -> web.Application:
    """The aiohttp application of one simulated vLLM server (engine starts with the app)."""
    server = SimServer(settings)
    app = web.Application(client_max_size=16 * 1024 * 1024, middlewares=[_fastapi_errors])
    app[SIM_KEY] = server
    app.on_startup.append(server.on_startup)
    app.on_cleanup.append(server.on_cleanup)
    r = app.router
    r.add_post("/v1/completions", server.completions)
    r.add_post("/v1/chat/completions", server.chat_completions)
    r.add_get("/v1/models", server.models)
    r.add_get("/health", server.health)
    r.add_get("/version", server.version)
    if settings.identity_endpoint:  # off: nothing a real server lacks tells the client what this server is
        r.add_get("/sim/identity", server.identity)
    r.add_post("/tokenize", server.tokenize)
    r.add_get("/metrics", server.metrics_endpoint)
    r.add_get("/sim/requests", server.sim_requests)
    r.add_get("/sim/info", server.sim_info)
    return app


# ---- running ------------------------------------------------------------------------------------------


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop  # optional: faster transport writes

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


class SimHandle:
    """A simulator running on its own event loop in a background thread."""

    def __init__(self, settings: SimSettings, host: str, port: int) -> None:
        self.settings = settings
        self.host = host
        self._port = port
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._main, name="spectrn-sim", daemon=True)
        self.port = 0
        self.app: web.Application | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def server(self) -> SimServer:
        assert self.app is not None
        return self.app[SIM_KEY]

    def start(self) -> SimHandle:
        self._thread.start()
        self._ready.wait(timeout=30)
        if self._error is not None:
            from spectrn.errors import SimError

            raise SimError(
                f"the simulator could not start on {self.host}:{self._port}: {self._error}",
                hint="choose another --port or free the address",
            ) from self._error
        if not self._ready.is_set():
            from spectrn.errors import SimError

            raise SimError("the simulator did not start within 30 s", hint="check the machine's load")
        return self

    def _main(self) -> None:
        loop = _new_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            self.app = make_app(self.settings)
            self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, self.host, self._port, reuse_address=True)
            loop.run_until_complete(site.start())
            self.port = self._runner.addresses[0][1]
        except BaseException as e:  # reported to the starting thread
            self._error = e
            if self._runner is not None:
                loop.run_until_complete(self._runner.cleanup())
            loop.close()
            self._ready.set()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._runner.cleanup())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the simulator's loop and return its result (for tests)."""
        assert self._loop is not None
        done = threading.Event()
        box: list[Any] = []

        def run() -> None:
            box.append(fn(*args))
            done.set()

        self._loop.call_soon_threadsafe(run)
        done.wait(timeout=10)
        return box[0] if box else None

    def stop(self) -> None:
        loop = self._loop
        if loop is not None and self._thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(timeout=30)

    def __enter__(self) -> SimHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_in_thread(settings: SimSettings, host: str = "127.0.0.1", port: int = 0) -> SimHandle:
    """Start a simulator in a background thread; use as a context manager or call ``.stop()``."""
    return SimHandle(settings, host, port).start()


def serve(settings: SimSettings, host: str = "0.0.0.0", port: int = 8000, *, log: Any = None) -> None:
    """Run a simulator in the foreground until SIGINT/SIGTERM (the container entrypoint)."""
    loop = _new_loop()
    asyncio.set_event_loop(loop)
    app = make_app(settings)
    try:
        web.run_app(app, host=host, port=port, print=log, access_log=None, loop=loop, handle_signals=True)
    except OSError as e:  # address in use, or not an address of this machine
        from spectrn.errors import SimError

        raise SimError(
            f"cannot listen on {host}:{port}: {e.strerror or e}",
            hint="choose a free --port and an address of this machine for --host (127.0.0.1, or 0.0.0.0 in a pod)",
        ) from None
