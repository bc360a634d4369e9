"""How a request's body becomes the simulator's request: length, finish reason, limits, sampling (audit, issue 29).

Driven in-process (``build_request`` on an unstarted server). The rules, from vLLM: the context limit is
prompt + max_tokens <= max_model_len (1024 in the preset), max_tokens defaults to what the context leaves,
min_tokens may equal max_tokens, a request without ``temperature`` samples at 1.0, and a stream ends at EOS
(finish ``stop``) unless max_tokens cuts it first (finish ``length``, also when both fall on the same token).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from spectrn.sim import SimSettings
from spectrn.sim.api_errors import ApiError
from spectrn.sim.engine import SimRequest
from spectrn.sim.lengths import natural_length
from spectrn.sim.parse import build_request
from spectrn.sim.server import SimServer

PROMPT_IDS = [7] * 24  # a 24-token prompt given as token ids


def _build(body: dict[str, Any], *, chat: bool = False) -> tuple[SimRequest, Any]:
    server = SimServer(SimSettings(profile="upstream", speculative=True, seed=3))

    async def make() -> tuple[SimRequest, Any]:
        req, sink, _ = build_request(server, {"model": server.model_name, **body}, chat)
        return req, sink

    return asyncio.run(make())


def _natural(prompt_ids: list[int]) -> int:
    return natural_length(" ".join(map(str, prompt_ids)), 3)


def test_max_tokens_on_the_eos_token_finishes_by_length() -> None:
    n = _natural(PROMPT_IDS)
    req, _ = _build({"prompt": PROMPT_IDS, "max_tokens": n})
    assert (req.target_len, req.finish_reason) == (n, "length")
    req, _ = _build({"prompt": PROMPT_IDS, "max_tokens": n + 1})
    assert (req.target_len, req.finish_reason) == (n, "stop")


def test_min_tokens_lengthens_the_natural_output() -> None:
    n = _natural(PROMPT_IDS)
    req, _ = _build({"prompt": PROMPT_IDS, "max_tokens": n + 10, "min_tokens": n + 5})
    assert (req.target_len, req.finish_reason) == (n + 5, "stop")
    req, _ = _build({"prompt": PROMPT_IDS, "max_tokens": n + 10, "min_tokens": n + 10})  # equal is allowed
    assert (req.target_len, req.finish_reason) == (n + 10, "length")


def test_the_context_limit_includes_its_last_token() -> None:
    req, _ = _build({"prompt": PROMPT_IDS, "max_tokens": 1000, "ignore_eos": True})  # 24 + 1000 = 1024
    assert (req.target_len, req.max_tokens, req.finish_reason) == (1000, 1000, "length")
    with pytest.raises(ApiError) as err:
        _build({"prompt": PROMPT_IDS, "max_tokens": 1001})
    assert err.value.status == 400


def test_max_tokens_defaults_to_what_the_context_leaves() -> None:
    req, _ = _build({"prompt": PROMPT_IDS, "ignore_eos": True})
    assert (req.max_tokens, req.target_len) == (1000, 1000)  # 1024 - 24


def test_a_request_without_temperature_samples_at_one() -> None:
    # "hello there": alpha_open 0.32, divided by 1 + 0.3 * T
    req, _ = _build({"prompt": "hello there", "max_tokens": 8})
    assert req.probs[0] == pytest.approx(0.32 / 1.3, rel=1e-12)
    greedy, _ = _build({"prompt": "hello there", "max_tokens": 8, "temperature": 0})
    assert greedy.probs[0] == pytest.approx(0.32, rel=1e-12)


def test_stream_options_include_usage_by_default() -> None:
    _, sink = _build({"prompt": "hello there", "max_tokens": 8, "stream": True, "stream_options": {}})
    assert (sink.include_usage, sink.continuous_usage) == (True, False)
    _, sink = _build(
        {"prompt": "hi", "max_tokens": 8, "stream": True, "stream_options": {"continuous_usage_stats": True}}
    )
    assert (sink.include_usage, sink.continuous_usage) == (True, True)
    _, sink = _build({"prompt": "hi", "max_tokens": 8, "stream": True})
    assert (sink.include_usage, sink.continuous_usage) == (False, False)
