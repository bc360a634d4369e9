"""Simulator vs real vLLM, field by field, on the recorded transcripts in tests/fixtures/vllm-real.

Each recorded request is replayed against a simulator configured like the recorded server (profile
``upstream``, model name ``tiny-qwen3``, max_model_len 2048, draft-model speculation with 4 tokens) and the
answers are compared by *shape*: status, content type, event order, the keys of every object in order, and
where values are null, lists, strings or numbers. Token values differ (different tokenizer and weights); the
protocol must not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from spectrn.sim.server import SimHandle

from .conftest import FIXTURES, fixture_headers, fixture_request, sse_events

STREAMS = [
    "completions_stream",
    "completions_stream_token_ids",
    "completions_stream_continuous_usage",
    "chat_stream",
    "chat_stream_token_ids",
]
BODIES = ["completions_nonstream", "chat_nonstream", "models", "version", "tokenize_completion", "tokenize_chat"]
ERRORS = [
    "error_max_tokens_negative",
    "error_unknown_model",
    "error_prompt_too_long",
    "error_chat_max_tokens_negative_stream",
]


def shape(v: Any) -> Any:
    """Keys in order and value kinds, recursively (lists by their first element)."""
    if isinstance(v, dict):
        return [(k, shape(x)) for k, x in v.items()]
    if isinstance(v, list):
        return ["list", shape(v[0])] if v else ["list"]
    if v is None:
        return "null"
    return type(v).__name__


def kind(event: Any) -> str:
    if event == "[DONE]":
        return "D"
    if not event["choices"]:
        return "U"
    if event["choices"][0].get("delta", {}).get("role") == "assistant":
        return "R"
    return "C"


@pytest.fixture(scope="module")
def sims() -> Iterator[dict[str, SimHandle]]:
    from spectrn.sim import SimSettings, run_in_thread

    # The transcripts come from upstream vLLM: the upstream profile must reproduce them (the Neuron profiles are
    # checked against the fork's own code in test_profiles.py).
    common: dict[str, Any] = dict(
        served_model_name="tiny-qwen3", max_model_len=2048, time_scale=0.02, profile="upstream"
    )
    handles = {
        "draft": run_in_thread(SimSettings(speculative=True, window=4, **common)),
        "base": run_in_thread(SimSettings(**common)),
    }
    yield handles
    for h in handles.values():
        h.stop()


def replay(h: SimHandle, variant: str, name: str) -> httpx.Response:
    req = fixture_request(variant, name)
    with httpx.Client(base_url=h.base_url, timeout=60) as c:
        return c.request(req["method"], req["path"], json=req["body"])


@pytest.mark.parametrize("name", STREAMS)
def test_streams_match_real_event_by_event(sims: dict[str, SimHandle], name: str) -> None:
    real = sse_events((FIXTURES / "draft" / f"{name}.sse").read_bytes())
    resp = replay(sims["draft"], "draft", name)
    assert resp.status_code == 200
    assert resp.headers["content-type"] == fixture_headers("draft", name)["content-type"]
    ours = sse_events(resp.content)
    # Event order: (role) content+ usage [DONE].
    pattern = lambda evs: re.sub(r"C+", "C+", "".join(kind(e) for e in evs))  # noqa: E731
    assert pattern(ours) == pattern(real)
    real_content = [e for e in real if kind(e) == "C"]
    our_content = [e for e in ours if kind(e) == "C"]
    # First, middle and last content events, the role event and the usage event: identical shapes.
    for mine, theirs in ((our_content[0], real_content[0]), (our_content[1], real_content[1])):
        assert shape(mine) == shape(theirs)
    assert shape(our_content[-1]) == shape(real_content[-1])
    for k in ("R", "U"):
        mine = [e for e in ours if kind(e) == k]
        theirs = [e for e in real if kind(e) == k]
        assert [shape(e) for e in mine] == [shape(e) for e in theirs]
    # Values the protocol fixes.
    prefix = "chatcmpl-" if name.startswith("chat") else "cmpl-"
    assert all(e["id"].startswith(prefix) and e["object"] == real[0]["object"] for e in ours[:-1])
    assert our_content[-1]["choices"][0]["finish_reason"] == real_content[-1]["choices"][0]["finish_reason"]
    assert [e["usage"] for e in ours if kind(e) == "U"] == [e["usage"] for e in real if kind(e) == "U"] or (
        ours[-2]["usage"]["completion_tokens"] == real[-2]["usage"]["completion_tokens"]
    )
    if name.endswith("continuous_usage"):
        counts = [e["usage"]["completion_tokens"] for e in our_content]
        ids = [len(e["choices"][0]["token_ids"]) for e in our_content]
        assert counts == [sum(ids[: i + 1]) for i in range(len(ids))]


def test_base_streams_carry_one_token_per_event(sims: dict[str, SimHandle]) -> None:
    for name in ("completions_stream", "chat_stream"):
        real = sse_events((FIXTURES / "base" / f"{name}.sse").read_bytes())
        req = fixture_request("base", name)
        with httpx.Client(base_url=sims["base"].base_url, timeout=60) as c:
            ours = sse_events(c.post(req["path"], json={**req["body"], "return_token_ids": True}).content)
        assert len([e for e in ours if kind(e) == "C"]) == len([e for e in real if kind(e) == "C"]) == 64
        assert all(len(e["choices"][0]["token_ids"]) == 1 for e in ours if kind(e) == "C")


@pytest.mark.parametrize("name", BODIES)
def test_json_bodies_match_real_shape(sims: dict[str, SimHandle], name: str) -> None:
    real = (FIXTURES / "draft" / f"{name}.body").read_text()
    import json

    resp = replay(sims["draft"], "draft", name)
    assert resp.status_code == 200
    assert resp.headers["content-type"] == fixture_headers("draft", name)["content-type"]
    assert shape(resp.json()) == shape(json.loads(real))
    if name.endswith("nonstream"):
        body = resp.json()
        assert body["id"].startswith("chatcmpl-" if name.startswith("chat") else "cmpl-")
        assert body["usage"]["completion_tokens"] == json.loads(real)["usage"]["completion_tokens"]


@pytest.mark.parametrize("name", ERRORS)
def test_errors_match_real(sims: dict[str, SimHandle], name: str) -> None:
    import json

    real = json.loads((FIXTURES / "draft" / f"{name}.body").read_text())
    real_status = int((FIXTURES / "draft" / f"{name}.headers.txt").read_text().split()[1])
    resp = replay(sims["draft"], "draft", name)
    assert resp.status_code == real_status
    assert resp.headers["content-type"] == "application/json"  # JSON even for a streaming request
    ours = resp.json()
    assert shape(ours) == shape(real)
    for key in ("type", "param", "code"):
        assert ours["error"][key] == real["error"][key]
    # Messages match up to the token counts (different tokenizer).
    digits = lambda s: re.sub(r"\d+", "N", s)  # noqa: E731
    assert digits(ours["error"]["message"]) == digits(real["error"]["message"])


def test_health_matches_real(sims: dict[str, SimHandle]) -> None:
    with httpx.Client(base_url=sims["draft"].base_url) as c:
        r = c.get("/health")
    assert r.status_code == 200 and r.content == b"" == (FIXTURES / "draft" / "health.body").read_bytes()


def _families(text: str) -> dict[str, str]:
    return dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, flags=re.M))


def _helps(text: str) -> dict[str, str]:
    return dict(re.findall(r"^# HELP (\S+) (.*)$", text, flags=re.M))


def _buckets(text: str, family: str) -> list[str]:
    return re.findall(rf'^{re.escape(family)}_bucket\{{.*?le="([^"]+)"', text, flags=re.M)


@pytest.mark.parametrize("variant", ["draft", "base"])
def test_metrics_names_types_and_buckets_match_real(sims: dict[str, SimHandle], variant: str) -> None:
    # Generate some traffic first, so every family has samples.
    replay(sims[variant], "draft", "completions_stream")
    with httpx.Client(base_url=sims[variant].base_url) as c:
        r = c.get("/metrics")
    real_text = (FIXTURES / variant / "metrics_after.body").read_text()
    assert r.headers["content-type"] == fixture_headers("draft", "metrics_after")["content-type"]
    ours, real = _families(r.text), _families(real_text)
    vllm_ours = {k: v for k, v in ours.items() if k.startswith("vllm:")}
    assert vllm_ours, "no vllm: families"
    for name, typ in vllm_ours.items():
        assert real.get(name) == typ, f"{name}: ours {typ}, real {real.get(name)}"
    required = [
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:generation_tokens_total",
        "vllm:generation_tokens_created",
        "vllm:prompt_tokens_total",
        "vllm:request_success_total",
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_time_per_output_token_seconds",
    ]
    spec = [
        f"vllm:spec_decode_num_{n}_{suffix}"
        for n in ("drafts", "draft_tokens", "accepted_tokens", "accepted_tokens_per_pos")
        for suffix in ("total", "created")
    ]
    for name in required + (spec if variant == "draft" else []):
        assert name in ours, name
        assert ours[name] == real[name]
    if variant == "base":
        assert not [n for n in ours if "spec_decode" in n] and not [n for n in real if "spec_decode" in n]
    helps_ours, helps_real = _helps(r.text), _helps(real_text)
    for name in vllm_ours:
        assert helps_ours[name] == helps_real[name], name
        if ours[name] == "histogram":
            assert _buckets(r.text, name) == _buckets(real_text, name), name
    # Labels as vLLM: model_name and engine (and position on the per-position counter).
    assert 'vllm:num_requests_running{engine="0",model_name="tiny-qwen3"}' in r.text
    if variant == "draft":
        assert re.search(r'vllm:spec_decode_num_accepted_tokens_per_pos_total\{engine="0",model_name="tiny-qwen3",'
                         r'position="3"\}', r.text)  # fmt: skip


def test_fixture_files_are_present() -> None:
    # The comparison above is only as good as its fixtures: make sure none went missing.
    for name in STREAMS:
        assert (FIXTURES / "draft" / f"{name}.sse").stat().st_size > 1000
    for name in BODIES + ERRORS:
        assert (FIXTURES / "draft" / f"{name}.body").exists()


_ = Callable  # keep the import for type checkers of fixtures in this module
