"""A request body -> a validated engine request: parameters, context limits and seeds, checked as vLLM checks
them, each refusal an ``ApiError`` in the profile's words."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from typing import Any, Protocol

from aiohttp import web

from spectrn.sim.api_errors import ApiError, bad_param, dumps
from spectrn.sim.engine import Engine, SimRequest
from spectrn.sim.faults import plan_for
from spectrn.sim.lengths import natural_length
from spectrn.sim.model import Resolved
from spectrn.sim.profiles import ErrorStyle, ServerProfile
from spectrn.sim.settings import SimSettings
from spectrn.sim.sinks import CollectSink, StreamSink, TextRelease
from spectrn.sim.tokens import OutputStream, encode, message_text, render_chat


class ServerState(Protocol):
    """What building a request reads of its server (``SimServer``)."""

    settings: SimSettings
    profile: ServerProfile
    model: Resolved
    model_name: str
    engine: Engine
    started: float
    fingerprint: str


def int_param(body: dict[str, Any], name: str) -> int | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        raise ApiError(400, f"{name}: Input should be a valid integer (got {v!r})", name)
    return v


def bool_param(body: dict[str, Any], name: str, default: bool = False) -> bool:
    v = body.get(name, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise ApiError(400, f"{name}: Input should be a valid boolean (got {v!r})", name)
    return v


async def read_body(request: web.Request) -> dict[str, Any]:
    """The request's JSON object, or a 400 as vLLM answers a body that is not one."""
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


def check_model(body: dict[str, Any], model_name: str, style: ErrorStyle) -> None:
    """A request for another model than the served one: vLLM's 404."""
    name = body.get("model")
    if name is not None and name != model_name:
        if style == "v0":
            raise ApiError(404, f"The model `{name}` does not exist.")
        raise ApiError(404, f"The model `{name}` does not exist. Valid aliases: {model_name}.", "model")


def is_id_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, int) and not isinstance(x, bool) for x in v)


def completion_prompt(body: dict[str, Any]) -> tuple[str, list[int]]:
    """A completion's prompt: its text and token ids (a string, a one-string list, or token ids)."""
    prompt = body.get("prompt")
    if prompt is None:
        raise ApiError(400, "prompt: Field required", "prompt")
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str | list):
        prompt = prompt[0]
    if isinstance(prompt, str):
        if not prompt:
            raise ApiError(400, "Prompt cannot be empty", "prompt")
        return prompt, encode(prompt)
    if is_id_list(prompt):
        return " ".join(map(str, prompt)), list(prompt)
    raise ApiError(
        400,
        "prompt must be a string, a list with one string, or a list of token ids (batches are not supported)",
        "prompt",
    )


def chat_text(body: dict[str, Any], default_gen: bool = True) -> str:
    """A chat request's messages rendered with the chat template (checked as vLLM checks them)."""
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


def build_request(server: ServerState, body: dict[str, Any], chat: bool) -> tuple[SimRequest, Any, bool]:
    """A generation request -> the engine's ``SimRequest``, its sink and whether it streams; an ``ApiError``
    (with vLLM's words for each profile) for every parameter vLLM refuses."""
    s = server.settings
    if int_param(body, "n") not in (None, 1):
        raise bad_param("n", body["n"], "n must be 1 (the simulator generates one choice)")
    stream = bool_param(body, "stream")
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
    continuous = include_usage and bool(opts.get("continuous_usage_stats")) and server.profile.continuous_usage
    temperature = body.get("temperature")
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, int | float):
            raise ApiError(400, f"temperature: Input should be a valid number (got {temperature!r})", "temperature")
        if temperature < 0:
            raise bad_param("temperature", temperature, f"temperature must be non-negative, got {temperature}.")
    if chat:
        # Token ids come from the rendered template; predictability and output from what the user wrote.
        prompt_ids = encode(chat_text(body))
        prompt_text = "\n".join(message_text(m.get("content")) for m in body["messages"])
        max_tokens = int_param(body, "max_completion_tokens")
        name = "max_completion_tokens"
        if max_tokens is None:
            max_tokens, name = int_param(body, "max_tokens"), "max_tokens"
    else:
        prompt_text, prompt_ids = completion_prompt(body)
        max_tokens, name = int_param(body, "max_tokens"), "max_tokens"
    limit = s.context_limit
    plen = len(prompt_ids)
    if server.profile.errors == "v0":
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
    min_tokens = int_param(body, "min_tokens") or 0
    if min_tokens < 0:
        raise bad_param("min_tokens", min_tokens, f"min_tokens must be greater than or equal to 0, got {min_tokens}.")
    if min_tokens > max_tokens:
        raise bad_param(
            "min_tokens",
            min_tokens,
            f"min_tokens must be less than or equal to max_tokens={max_tokens}, got {min_tokens}.",
        )
    ignore_eos = bool_param(body, "ignore_eos")
    # The Neuron fork has no return_token_ids: its request model accepts unknown fields and ignores them.
    return_ids = bool_param(body, "return_token_ids") and server.profile.token_ids
    if ignore_eos:
        target, reason = max_tokens, "length"
    else:
        natural = max(min_tokens, natural_length(prompt_text, s.seed))
        target, reason = (max_tokens, "length") if natural >= max_tokens else (natural, "stop")

    engine = server.engine
    counter = engine.next_counter()
    # Greedy output depends on the prompt only; sampled output (temperature > 0) also on the request's seed
    # (OpenAI's `seed`) or, without one, on the request counter.
    # Like vLLM, a request without `temperature` samples (OpenAI's default is 1.0).
    temperature = 1.0 if temperature is None else float(temperature)
    sampled = temperature > 0
    req_seed = int_param(body, "seed")
    sample_key = f"seed-{req_seed}" if req_seed is not None else f"request-{counter}"
    sample_seed = int.from_bytes(hashlib.blake2b(f"{s.seed}:{sample_key}".encode(), digest_size=4).digest(), "little")
    digest = hashlib.blake2b(f"id\x00{s.seed}\x00{counter}\x00{server.started}".encode(), digest_size=8).hexdigest()
    rid = f"{'chatcmpl' if chat else 'cmpl'}-{digest}"
    obj = "chat.completion.chunk" if chat else "text_completion"
    created = int(time.time())
    head = f'{{"id":"{rid}","object":"{obj}","created":{created},"model":{dumps(server.model_name)},'
    sink: Any
    if stream:
        sink = StreamSink(
            chat=chat,
            dialect=server.profile.errors,
            head=head,
            return_token_ids=return_ids,
            include_usage=include_usage,
            continuous_usage=continuous,
            prompt_ids_json="[" + ",".join(map(str, prompt_ids)) + "]",
            prompt_len=plen,
            fingerprint=server.fingerprint,
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
        probs=server.model.position_probs(prompt_text, temperature),
        arrival=time.monotonic(),
        done=loop.create_future(),
    )
    req.created = created
    return req, sink, stream
