"""Before the first request: each endpoint checked (``/health``, ``/v1/models``), prompts shaped to input lengths.

Shaping pads or trims prompts with the server's ``/tokenize`` (estimated at 4 characters per token when it has
none), to ``bench.input_tokens`` or to a trace's per-row ``input_tokens``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from spectrn.errors import EndpointError, one_line, redact, redact_url
from spectrn.loadgen.plan import RunPlan, _trace_row
from spectrn.loadgen.prompts import ScheduledRequest
from spectrn.loadgen.stream import MAX_TOKEN_COUNT

MAX_JSON_BODY_BYTES = 1 << 20  # /v1/models and /tokenize answers


# ---- what the server says outside the stream, typed ----------------------------------------------------


class _ModelCard(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    id: str = Field(min_length=1, max_length=1000)


class _ModelList(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    data: list[_ModelCard] = Field(default_factory=list, max_length=10_000)


class _Tokenized(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    count: int | None = Field(default=None, ge=0, le=MAX_TOKEN_COUNT)
    tokens: list[int] | None = Field(default=None, max_length=MAX_TOKEN_COUNT)


async def _get_body(resp: Any, limit: int) -> bytes:
    buf = bytearray()
    while len(buf) <= limit:
        chunk = await resp.content.read(limit + 1 - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


async def _check_endpoint(session: Any, name: str, base_url: str, model: str | None) -> str:
    """Confirm the endpoint answers /v1/models; return the model to use."""
    import aiohttp

    root = base_url.rstrip("/").removesuffix("/v1")
    url = root + "/v1/models"
    shown = redact_url(base_url)
    fix = "check the URL points at a vLLM OpenAI server (`curl <url>/v1/models`)"
    try:
        # vLLM answers /v1/models while its engine is still loading or compiling; /health tells the truth.
        # A server without /health (404, other OpenAI-compatible servers) is judged by /v1/models alone.
        async with session.get(
            root + "/health", timeout=aiohttp.ClientTimeout(total=15), allow_redirects=False
        ) as resp:
            if resp.status >= 500:
                raise EndpointError(
                    f"endpoint {name} ({shown}) is not ready: /health answered HTTP {resp.status}",
                    hint="wait until `curl <url>/health` answers 200 (a Neuron server may still be compiling; "
                    "`spectrn status` shows progress)",
                )
        async with session.get(url, timeout=aiohttp.ClientTimeout(total=15), allow_redirects=False) as resp:
            if 300 <= resp.status < 400:
                target = redact_url(resp.headers.get("Location", "(no Location header)"))
                raise EndpointError(
                    f"endpoint {name} ({shown}) redirects /v1/models to {target} (HTTP {resp.status}); "
                    "redirects are not followed",
                    hint="give --endpoint the final URL",
                )
            if resp.status != 200:
                raise EndpointError(
                    f"endpoint {name} ({shown}) answered HTTP {resp.status} on /v1/models",
                    hint="check the URL points at a vLLM OpenAI server and that it has finished starting",
                )
            raw = await _get_body(resp, MAX_JSON_BODY_BYTES)
    except (aiohttp.ClientError, TimeoutError, OSError) as e:
        raise EndpointError(
            f"endpoint {name} ({shown}) is unreachable: {type(e).__name__}: {redact(str(e))}",
            hint="check the URL and that the server is running (`spectrn status`, or `curl <url>/health`)",
        ) from None
    if len(raw) > MAX_JSON_BODY_BYTES:
        raise EndpointError(f"endpoint {name} ({shown}) sent over {MAX_JSON_BODY_BYTES} bytes on /v1/models", hint=fix)
    try:
        listing = _ModelList.model_validate_json(raw)
    except ValidationError as e:
        raise EndpointError(
            f"endpoint {name} ({shown}) answered /v1/models with something that is not a model list: {one_line(e)}",
            hint=fix,
        ) from None
    served = [m.id for m in listing.data]
    if model:
        if served and model not in served:
            raise EndpointError(
                f"endpoint {name} serves {', '.join(served[:20])}, not model {model!r}",
                hint="pass --model with one of those names",
            )
        return model
    if not served:
        raise EndpointError(f"endpoint {name} lists no models on /v1/models", hint="pass --model explicitly")
    return served[0]


async def shape_input_lengths(
    session: Any, base_url: str, model: str, schedule: Sequence[ScheduledRequest], target: int
) -> tuple[list[ScheduledRequest], str]:
    """Pad or trim each distinct prompt to ``target`` tokens using the server's /tokenize.

    Padding repeats the prompt's own text (it keeps its structure); trimming drops trailing words. When
    /tokenize is unavailable or answers something that is not a count, the length is estimated at 4
    characters per token, and the note says so and why.
    """
    import aiohttp

    root = base_url.rstrip("/").removesuffix("/v1")
    cache: dict[str, str] = {}
    why: list[str] = []

    async def count(text: str) -> int | None:
        try:
            async with session.post(
                f"{root}/tokenize",
                json={"model": model, "prompt": text, "add_special_tokens": False},
                timeout=aiohttp.ClientTimeout(total=15),
                allow_redirects=False,
            ) as resp:
                if resp.status != 200:
                    why.append(f"/tokenize answered HTTP {resp.status}")
                    return None
                raw = await _get_body(resp, MAX_JSON_BODY_BYTES)
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            why.append(f"/tokenize failed: {type(e).__name__}")
            return None
        try:
            got = _Tokenized.model_validate_json(raw)
        except ValidationError as e:
            why.append(f"/tokenize answer unusable: {one_line(e)}")
            return None
        if got.count is not None:
            return got.count
        if got.tokens is not None:
            return len(got.tokens)
        why.append("/tokenize answer has neither count nor tokens")
        return None

    def estimate(pool: list[str]) -> str:
        return " ".join(pool)[: 4 * target]

    async def fit(text: str) -> str:
        words = text.split(" ")
        pool = list(words)
        while len(pool) < 8 * target + 8:
            pool.extend(words)
        lo, hi = 1, len(pool)
        if why or await count(" ".join(pool[: min(hi, 4 * target)])) is None:
            return estimate(pool)
        while lo < hi:  # smallest word count whose token count >= target
            mid = (lo + hi) // 2
            n = await count(" ".join(pool[:mid]))
            if n is None:
                return estimate(pool)
            if n >= target:
                hi = mid
            else:
                lo = mid + 1
        return " ".join(pool[:lo])

    out = []
    for req in schedule:
        if req.text not in cache:
            cache[req.text] = await fit(req.text)
        turns = (cache[req.text], *req.turns[1:]) if req.turns else None  # later turns keep their own text
        out.append(replace(req, text=cache[req.text], turns=turns))
    note = (
        f"input length {target} tokens ESTIMATED at 4 characters/token: the server has no usable /tokenize "
        f"({redact(why[0])})"
        if why
        else f"input length shaped to {target} tokens with the server's /tokenize"
    )
    return out, note


async def _shape_to_trace(
    session: Any, plan: RunPlan, measured: Sequence[ScheduledRequest], notes: list[str]
) -> list[ScheduledRequest]:
    """Each measured request shaped to its trace row's ``input_tokens`` (rows without one keep their prompt),
    one /tokenize pass per distinct length; the first endpoint's tokenizer speaks for all, as for input_tokens."""
    out = list(measured)
    targets: dict[int, list[int]] = {}
    for k, req in enumerate(out):
        row = _trace_row(plan, req)
        if row is not None and row.input_tokens:
            targets.setdefault(row.input_tokens, []).append(k)
    first = next(iter(plan.endpoints.values()))
    for target, where in sorted(targets.items()):
        shaped, note = await shape_input_lengths(session, first, plan.params.model, [out[k] for k in where], target)
        for k, req in zip(where, shaped, strict=True):
            out[k] = req
        if "ESTIMATED" in note and note not in notes:
            notes.append(note)
    notes.append(f"trace input_tokens: prompts shaped to {len(targets)} distinct length(s)")
    return out
