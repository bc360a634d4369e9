"""Server profiles over real HTTP: what each imitated server sends on the wire and in /metrics.

neuron-fork follows the Neuron fork of vLLM (aws-neuron/upstreaming-to-vllm, vLLM 0.9, V0 engine) as its code
reads: chat chunks dumped with ``exclude_none``, completion chunks in full, flat error bodies, V0 metric
families, no ``token_ids``. vllm-neuron: V1's protocol with spec-decode counters that stay at 0. upstream: the
recorded transcripts (test_conformance.py). Under every profile the /sim/requests ground truth stays exact.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from spectrn.sim.server import SimHandle

from .conftest import OPEN, STRUCTURED, sse_events

MODEL = "Qwen/Qwen3-32B"
USAGE_OPTS = {"include_usage": True, "continuous_usage_stats": True}


def stream(h: SimHandle, body: dict[str, Any], path: str = "/v1/completions") -> list[Any]:
    with httpx.Client(base_url=h.base_url, timeout=60) as c:
        r = c.post(path, json={**body, "stream": True})
    assert r.status_code == 200, r.text
    return sse_events(r.content)


def truth(h: SimHandle, rid: str) -> dict[str, Any]:
    with httpx.Client(base_url=h.base_url) as c:
        return c.get("/sim/requests", params={"id": rid}).json()["requests"][0]  # type: ignore[no-any-return]


def content_events(events: list[Any]) -> list[dict[str, Any]]:
    return [e for e in events if e != "[DONE]" and e["choices"] and "role" not in e["choices"][0].get("delta", {})]


def usage_deltas(events: list[dict[str, Any]]) -> list[int]:
    counts = [e["usage"]["completion_tokens"] for e in events]
    return [b - a for a, b in zip([0, *counts], counts, strict=False)]


def families(text: str) -> dict[str, str]:
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.M))


def samples(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith((name + "{", name + " "))]


# ---- neuron-fork ----------------------------------------------------------------------------------------


def test_neuron_fork_completion_chunks(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(speculative=True)
    body = {"model": MODEL, "prompt": STRUCTURED, "max_tokens": 40, "ignore_eos": True, "temperature": 0}
    events = stream(h, {**body, "return_token_ids": True, "stream_options": USAGE_OPTS})
    content = content_events(events)
    # vLLM 0.9's CompletionStreamResponse dumped with exclude_unset=False: every field, no token_ids.
    for e in content:
        assert list(e) == ["id", "object", "created", "model", "choices", "usage"]
        assert list(e["choices"][0]) == ["index", "text", "logprobs", "finish_reason", "stop_reason"]
        assert list(e["usage"]) == ["prompt_tokens", "total_tokens", "completion_tokens", "prompt_tokens_details"]
    assert [e["choices"][0]["finish_reason"] for e in content] == [None] * (len(content) - 1) + ["length"]
    final = events[-2]
    assert final["choices"] == [] and list(final) == ["id", "object", "created", "model", "choices", "usage"]
    plen = content[0]["usage"]["prompt_tokens"]
    assert final["usage"] == {"prompt_tokens": plen, "total_tokens": plen + 40, "completion_tokens": 40}
    assert events[-1] == "[DONE]"
    # Per-chunk tokens from the cumulative usage equal the engine's record, chunk for chunk.
    t = truth(h, content[0]["id"])
    assert usage_deltas(content) == [c["n"] for c in t["chunks"]]
    # Without continuous_usage_stats the chunks carry "usage": null and only the final event counts.
    plain = stream(h, {**body, "stream_options": {"include_usage": True}})
    assert all(e["usage"] is None for e in content_events(plain))
    assert plain[-2]["usage"]["completion_tokens"] == 40
    # include_usage defaults to true once stream_options is present (vLLM's StreamOptions).
    assert stream(h, {**body, "stream_options": {"continuous_usage_stats": True}})[-2]["choices"] == []
    assert all(e["choices"] for e in stream(h, body)[:-1])


def test_neuron_fork_chat_chunks(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(speculative=True)
    body = {
        "messages": [{"role": "user", "content": "List numbers from one to twenty"}],
        "max_completion_tokens": 30,
        "ignore_eos": True,
        "temperature": 0,
        "return_token_ids": True,
        "stream_options": USAGE_OPTS,
    }
    events = stream(h, body, "/v1/chat/completions")
    role = events[0]
    # The role chunk is dumped with exclude_unset, content chunks with exclude_none (tool_calls: [] stays).
    assert role["choices"] == [
        {"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
    ]
    assert role["usage"]["completion_tokens"] == 0 and list(role)[-1] == "usage"
    content = content_events(events)
    for e in content[:-1]:
        assert list(e) == ["id", "object", "created", "model", "choices", "usage"]
        assert list(e["choices"][0]) == ["index", "delta"]
        assert (
            list(e["choices"][0]["delta"]) == ["content", "tool_calls"] and e["choices"][0]["delta"]["tool_calls"] == []
        )
        assert list(e["usage"]) == ["prompt_tokens", "total_tokens", "completion_tokens"]
    assert list(content[-1]["choices"][0]) == ["index", "delta", "finish_reason"]
    assert content[-1]["choices"][0]["finish_reason"] == "length"
    assert events[-2]["choices"] == [] and "system_fingerprint" not in events[-2]
    t = truth(h, content[0]["id"])
    assert usage_deltas(content) == [c["n"] for c in t["chunks"]] and sum(usage_deltas(content)) == 30


def test_neuron_fork_text_is_held_back_and_released_later(start_sim: Callable[..., SimHandle]) -> None:
    body = {"prompt": OPEN, "max_tokens": 200, "ignore_eos": True, "temperature": 0, "stream_options": USAGE_OPTS}

    def texts(h: SimHandle) -> tuple[list[str], list[int], str]:
        content = content_events(stream(h, body))
        full = "".join(e["choices"][0]["text"] for e in content)
        return [e["choices"][0]["text"] for e in content], usage_deltas(content), full

    fork_texts, fork_counts, fork_full = texts(start_sim(time_scale=0.002))
    up_texts, up_counts, up_full = texts(start_sim(time_scale=0.002, profile="upstream"))
    # One token per chunk without speculation on both; the same text in the end.
    assert fork_counts == up_counts == [1] * 200 and fork_full == up_full
    # Upstream: each chunk carries its token's text. The fork's detokenizer holds some back: empty chunks, and
    # chunks with several tokens' text, so text length says little about tokens.
    assert all(up_texts)
    empty = sum(1 for x in fork_texts if not x)
    assert 5 <= empty <= 45  # about 10% of 200 tokens
    multi = [i for i, (a, b) in enumerate(zip(fork_texts, up_texts, strict=True)) if len(a) > len(b)]
    assert len(multi) >= 5
    # A chunk that follows held-back text releases it: the texts realign at every non-empty chunk boundary.
    held = ""
    for mine, theirs in zip(fork_texts, up_texts, strict=True):
        held += theirs
        if mine:
            assert held.startswith(mine) or mine == held
            held = held[len(mine) :]
    assert held == ""
    # The rate is a setting: 0 turns the hold-back off.
    off_texts, _, _ = texts(start_sim(time_scale=0.002, text_holdback_rate=0.0))
    assert off_texts == up_texts


def test_neuron_fork_errors_and_version(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim()
    with httpx.Client(base_url=h.base_url) as c:
        assert c.get("/version").json() == {"version": "0.9.1"}
        r = c.post("/v1/completions", json={"model": "nope", "prompt": "hi", "max_tokens": 4})
        assert r.status_code == 404
        assert r.json() == {
            "object": "error",
            "message": "The model `nope` does not exist.",
            "type": "NotFoundError",
            "param": None,
            "code": 404,
        }
        r = c.post("/v1/completions", json={"prompt": "hi", "max_tokens": -1, "stream": True})
        assert r.status_code == 400 and r.headers["content-type"] == "application/json"
        assert r.json() == {
            "object": "error",
            "message": "max_tokens must be at least 1, got -1.",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
        r = c.post("/v1/completions", json={"prompt": "word " * 100, "max_tokens": 1000})
        msg = r.json()["message"]
        assert r.status_code == 400 and msg.startswith("This model's maximum context length is 1024 tokens. However, ")
        assert msg.endswith("in the completion). Please reduce the length of the messages or completion.")
        body = c.post("/v1/completions", json={"prompt": "hi", "max_tokens": 3, "return_token_ids": True}).json()
        assert list(body) == ["id", "object", "created", "model", "choices", "usage", "kv_transfer_params"]
        assert list(body["choices"][0]) == [
            "index",
            "text",
            "logprobs",
            "finish_reason",
            "stop_reason",
            "prompt_logprobs",
        ]
        chat = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
        choice = chat.json()["choices"][0]
        message = choice["message"]
        assert message == {
            "role": "assistant",
            "reasoning_content": None,
            "content": message["content"],
            "tool_calls": [],
        }


def test_neuron_fork_metrics_are_v0_and_spec_families_never_get_samples(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(speculative=True, time_scale=0.01)
    body = {"prompt": STRUCTURED, "max_tokens": 50, "ignore_eos": True, "stream_options": USAGE_OPTS}
    rid = content_events(stream(h, body))[0]["id"]
    steps = len(truth(h, rid)["chunks"]) - 1
    with httpx.Client(base_url=h.base_url) as c:
        text = c.get("/metrics").text
    fams = families(text)
    spec = {
        "vllm:spec_decode_draft_acceptance_rate": "gauge",
        "vllm:spec_decode_efficiency": "gauge",
        "vllm:spec_decode_num_accepted_tokens_total": "counter",
        "vllm:spec_decode_num_draft_tokens_total": "counter",
        "vllm:spec_decode_num_emitted_tokens_total": "counter",
    }
    for name, kind in spec.items():
        assert fams[name] == kind
        assert not [s for s in text.splitlines() if s.startswith(name) and not s.startswith("#")], name
    assert "vllm:spec_decode_num_drafts_total" not in fams  # a V1 family
    assert fams["vllm:time_per_output_token_seconds"] == "histogram"
    assert "vllm:inter_token_latency_seconds" not in fams and "vllm:request_time_per_output_token_seconds" not in fams
    assert 'vllm:time_per_output_token_seconds_count{model_name="Qwen/Qwen3-32B"} ' + f"{float(steps)}" in text
    assert 'vllm:generation_tokens_total{model_name="Qwen/Qwen3-32B"} 50.0' in text
    assert fams["vllm:gpu_cache_usage_perc"] == "gauge" and "vllm:kv_cache_usage_perc" not in fams
    assert 'engine="' not in text and "_created" not in text
    assert samples(text, "vllm:request_success_total") == [
        'vllm:request_success_total{finished_reason="length",model_name="Qwen/Qwen3-32B"} 1.0'
    ]
    # V0's token histograms use build_1_2_5_buckets(max_model_len).
    les = re.findall(r'^vllm:request_prompt_tokens_bucket\{le="([^"]+)"', text, flags=re.M)
    assert les == ["1.0", "2.0", "5.0", "10.0", "20.0", "50.0", "100.0", "200.0", "500.0", "1000.0", "+Inf"]


# ---- vllm-neuron ------------------------------------------------------------------------------------------


def test_vllm_neuron_registers_v1_spec_counters_and_leaves_them_at_zero(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(speculative=True, time_scale=0.01, profile="vllm-neuron")
    body = {"prompt": STRUCTURED, "max_tokens": 60, "ignore_eos": True, "return_token_ids": True, "temperature": 0}
    content = content_events(stream(h, {**body, "stream_options": USAGE_OPTS}))
    ids = [len(e["choices"][0]["token_ids"]) for e in content]
    assert ids == usage_deltas(content) == [c["n"] for c in truth(h, content[0]["id"])["chunks"]]
    assert max(ids) > 1
    with httpx.Client(base_url=h.base_url) as c:
        text = c.get("/metrics").text
        assert c.get("/version").json() == {"version": "0.11.0"}
        err = c.post("/v1/completions", json={"model": "nope", "prompt": "x"}).json()
    lbl = '{engine="0",model_name="Qwen/Qwen3-32B"}'
    for name in ("drafts", "draft_tokens", "accepted_tokens"):
        assert f"vllm:spec_decode_num_{name}_total{lbl} 0.0" in text
    per_pos = samples(text, "vllm:spec_decode_num_accepted_tokens_per_pos_total")
    assert len(per_pos) == 7 and all(s.endswith(" 0.0") for s in per_pos)
    assert "vllm:generation_tokens_total" + lbl + " 60.0" in text
    assert err["error"]["type"] == "NotFoundError"


# ---- every profile -------------------------------------------------------------------------------------------

MAX_PER_STEP = {"neuron-fork": 7, "vllm-neuron": 7, "upstream": 8}


@pytest.mark.parametrize("profile", ["neuron-fork", "vllm-neuron", "upstream"])
def test_window_semantics_and_exact_ground_truth(start_sim: Callable[..., SimHandle], profile: str) -> None:
    """Window 7: at most 7 tokens per step on NxDI profiles (6 proposals + 1), 8 upstream; the stream's per-chunk
    counts (token_ids or cumulative usage) equal /sim/requests, and the chunk times are the model's schedule."""
    h = start_sim(speculative=True, time_scale=0.003, profile=profile, max_model_len=4096)
    body = {
        "prompt": STRUCTURED,
        "max_tokens": 1500,
        "ignore_eos": True,
        "temperature": 0,
        "stream_options": USAGE_OPTS,
    }
    content = content_events(stream(h, body))
    t = truth(h, content[0]["id"])
    counts = usage_deltas(content)
    assert counts == [c["n"] for c in t["chunks"]] and sum(counts) == 1500
    assert len(content) == len(t["chunks"])
    decode = t["chunks"][1:]
    assert max(c["n"] for c in decode) == MAX_PER_STEP[profile]
    assert all(c["n"] == c["accepted"] + 1 for c in decode[:-1])
    assert max(c["accepted"] for c in decode) == MAX_PER_STEP[profile] - 1
    with httpx.Client(base_url=h.base_url) as c:
        info = c.get("/sim/info").json()
    assert info["profile"] == profile and info["max_tokens_per_step"] == MAX_PER_STEP[profile]
    assert len(t["position_probs"]) == MAX_PER_STEP[profile] - 1
