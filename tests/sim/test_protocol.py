"""The simulator through real clients: the openai SDK (streaming and not) and raw HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import httpx
import openai
import pytest

from spectrn.sim.lengths import natural_length
from spectrn.sim.server import SimHandle

from .conftest import OPEN, STRUCTURED, sse_events

MODEL = "Qwen/Qwen3-32B"


@pytest.fixture
def start_sim(start_sim: Callable[..., SimHandle]) -> Callable[..., SimHandle]:
    """This module checks upstream vLLM's protocol (token_ids, nested errors): the upstream profile unless a test
    says otherwise. The Neuron profiles' wire format is checked in test_profiles.py."""

    def start(**kwargs: Any) -> SimHandle:
        kwargs.setdefault("profile", "upstream")
        return start_sim(**kwargs)

    return start


def client(h: SimHandle) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{h.base_url}/v1", api_key="dummy", max_retries=0)


def test_openai_completions_stream_counts_tokens_by_token_ids(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(speculative=True)
    stream = client(h).completions.create(
        model=MODEL,
        prompt=STRUCTURED,
        max_tokens=64,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True, "return_token_ids": True},
    )
    chunks = list(stream)
    content = [c for c in chunks if c.choices]
    usage = chunks[-1].usage
    assert not chunks[-1].choices and usage is not None
    ids = [tid for c in content for tid in c.choices[0].token_ids]  # type: ignore[attr-defined]
    assert len(ids) == usage.completion_tokens == 64
    assert len(content[0].choices[0].token_ids) == 1  # type: ignore[attr-defined]  # prefill emits one token
    assert max(len(c.choices[0].token_ids) for c in content) > 1  # type: ignore[attr-defined]
    assert content[-1].choices[0].finish_reason == "length"
    assert all(c.choices[0].finish_reason is None for c in content[:-1])
    assert {c.id for c in chunks} == {chunks[0].id} and chunks[0].id.startswith("cmpl-")


def test_openai_chat_stream_and_nonstream_agree(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(speculative=True)
    messages = [{"role": "user", "content": "List numbers from one to twenty"}]
    c = client(h)
    stream = c.chat.completions.create(
        model=MODEL,
        messages=messages,  # type: ignore[arg-type]
        max_completion_tokens=40,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 40
    full = c.chat.completions.create(
        model=MODEL,
        messages=messages,
        max_tokens=40,
        temperature=0,
        extra_body={"ignore_eos": True},  # type: ignore[arg-type]
    )
    assert full.id.startswith("chatcmpl-") and full.object == "chat.completion"
    assert full.choices[0].message.content == text
    assert full.choices[0].finish_reason == "length"
    assert full.usage is not None and full.usage.completion_tokens == 40
    assert full.system_fingerprint and full.system_fingerprint.startswith("vllm-")


def test_openai_errors(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim()
    c = client(h)
    with pytest.raises(openai.BadRequestError, match="max_tokens must be at least 1"):
        c.completions.create(model=MODEL, prompt="hi", max_tokens=-1, temperature=0)
    with pytest.raises(openai.NotFoundError, match="The model `nope` does not exist"):
        c.completions.create(model="nope", prompt="hi", max_tokens=4, temperature=0)
    with pytest.raises(openai.BadRequestError, match="maximum context length is 1024 tokens"):
        c.completions.create(model=MODEL, prompt="word " * 1100, max_tokens=4, temperature=0)
    with pytest.raises(openai.BadRequestError, match="you requested 1000 output tokens"):
        c.completions.create(model=MODEL, prompt="word " * 100, max_tokens=1000, temperature=0)
    with pytest.raises(openai.BadRequestError, match="temperature must be non-negative"):
        c.completions.create(model=MODEL, prompt="hi", max_tokens=4, temperature=-1)
    with pytest.raises(openai.BadRequestError, match="min_tokens must be less than or equal to max_tokens"):
        c.completions.create(model=MODEL, prompt="hi", max_tokens=4, temperature=0, extra_body={"min_tokens": 9})
    models = c.models.list()
    assert [m.id for m in models.data] == [MODEL]


def test_raw_http_stream_framing_and_headers(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim()
    body = {"prompt": OPEN, "max_tokens": 8, "temperature": 0, "ignore_eos": True, "stream": True}
    with httpx.Client(base_url=h.base_url) as c:
        r = c.post("/v1/completions", json=body)
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
        assert r.headers["transfer-encoding"] == "chunked"
        events = sse_events(r.content)
        assert events[-1] == "[DONE]"
        assert len(events) == 9  # 8 one-token events without speculation, no usage event unless asked
        assert all(len(e["choices"]) == 1 for e in events[:-1])
        # Keep-alive: the same connection serves the next request.
        r2 = c.post("/v1/completions", json={**body, "stream": False})
        assert r2.headers["content-type"] == "application/json"
        assert r2.json()["choices"][0]["text"] == "".join(e["choices"][0]["text"] for e in events[:-1])


def test_raw_http_bad_requests(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim()
    with httpx.Client(base_url=h.base_url) as c:
        r = c.post("/v1/completions", content=b"{not json", headers={"content-type": "application/json"})
        assert r.status_code == 400 and r.json()["error"]["type"] == "BadRequestError"
        r = c.post("/v1/completions", json={"max_tokens": 4})
        assert r.status_code == 400 and r.json()["error"]["param"] == "prompt"
        r = c.post("/v1/chat/completions", json={"messages": [], "max_tokens": 4})
        assert r.status_code == 400 and r.json()["error"]["param"] == "messages"
        r = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 4, "stream_options": {"include_usage": True}})
        assert r.status_code == 400 and "stream=True" in r.json()["error"]["message"]
        r = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 4, "n": 2})
        assert r.status_code == 400 and r.json()["error"]["param"] == "n"
        r = c.post("/v1/completions", json={"prompt": "x", "max_tokens": "many"})
        assert r.status_code == 400 and r.json()["error"]["param"] == "max_tokens"
        r = c.get("/no/such/path")
        assert r.status_code == 404 and r.json() == {"detail": "Not Found"}
        r = c.get("/v1/completions")
        assert r.status_code == 405 and r.json() == {"detail": "Method Not Allowed"}


def test_min_tokens_and_natural_stop(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(time_scale=0.01)
    with httpx.Client(base_url=h.base_url) as c:
        natural = c.post("/v1/completions", json={"prompt": OPEN, "max_tokens": 1000 - 30, "temperature": 0}).json()
        n = natural["usage"]["completion_tokens"]
        assert natural["choices"][0]["finish_reason"] == "stop" and n == natural_length(OPEN, 0)  # the default seed
        longer = c.post(
            "/v1/completions", json={"prompt": OPEN, "max_tokens": 900, "min_tokens": n + 50, "temperature": 0}
        ).json()
        assert longer["usage"]["completion_tokens"] == n + 50
        capped = c.post("/v1/completions", json={"prompt": OPEN, "max_tokens": 5, "temperature": 0}).json()
        assert capped["choices"][0]["finish_reason"] == "length" and capped["usage"]["completion_tokens"] == 5


def test_default_max_tokens_fills_the_context(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(time_scale=0.001, max_model_len=128)
    with httpx.Client(base_url=h.base_url) as c:
        r = c.post("/v1/completions", json={"prompt": "word " * 20, "temperature": 0, "ignore_eos": True}).json()
        assert r["usage"]["total_tokens"] == 128


def test_health_compiling_then_ready_and_tokenize(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(startup_delay_s=0.6)
    with httpx.Client(base_url=h.base_url) as c:
        assert c.get("/health").status_code == 503
        r = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 2})
        assert r.status_code == 503 and r.json()["error"]["type"] == "ServiceUnavailableError"
        deadline = time.monotonic() + 10
        while c.get("/health").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        r = c.get("/health")
        assert r.content == b""
        assert c.get("/version").json() == {"version": "0.32.0"}
        tok = c.post("/tokenize", json={"model": MODEL, "prompt": "hello world hello world"}).json()
        assert tok["count"] == 4 and tok["tokens"][1] == tok["tokens"][3] and tok["max_model_len"] == 1024
        chat = c.post(
            "/tokenize", json={"messages": [{"role": "user", "content": "hi"}], "add_generation_prompt": True}
        ).json()
        assert chat["tokens"][0] == 151644  # <|im_start|>
        strs = c.post("/tokenize", json={"prompt": "a b", "return_token_strs": True}).json()["token_strs"]
        assert strs == ["a", " b"]
        gen = c.post("/v1/completions", json={"prompt": "hello world hello world", "max_tokens": 3}).json()
        assert gen["usage"]["prompt_tokens"] == tok["count"]


def test_debug_headers_and_sim_requests(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(speculative=True)
    with httpx.Client(base_url=h.base_url) as c:
        r = c.post("/v1/completions", json={"prompt": STRUCTURED, "max_tokens": 16, "ignore_eos": True})
        accept = float(r.headers["x-spectrn-sim-accept-prob"])
        truth = c.get("/sim/requests", params={"id": r.json()["id"]}).json()["requests"]
        assert len(truth) == 1 and truth[0]["accept_prob"] == pytest.approx(accept, abs=1e-6)
        assert sum(ch["n"] for ch in truth[0]["chunks"]) == 16
        info = c.get("/sim/info").json()
        assert info["window"] == 7 and info["draft"] == "qwen3-1.7b" and info["max_num_seqs"] == 4
        json.dumps(info)
