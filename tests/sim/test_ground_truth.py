"""Ground truth: what clients measure matches what the engine model says, and the counters match the output."""

from __future__ import annotations

import concurrent.futures as cf
import json
import re
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from spectrn.sim import SimSettings
from spectrn.sim.server import SimHandle

from .conftest import OPEN, STRUCTURED


def stream_timed(
    h: SimHandle, body: dict[str, Any], path: str = "/v1/completions"
) -> tuple[str, list[tuple[float, Any]]]:
    """POST a streaming request; return its id and (arrival time.monotonic(), payload) per data event."""
    out: list[tuple[float, Any]] = []
    with (
        httpx.Client(base_url=h.base_url, timeout=120) as c,
        c.stream("POST", path, json={**body, "stream": True}) as r,
    ):
        assert r.status_code == 200
        for line in r.iter_lines():
            if line.startswith("data: "):
                data = line[6:]
                out.append((time.monotonic(), data if data == "[DONE]" else json.loads(data)))
    return out[0][1]["id"], out


def truth(h: SimHandle, rid: str) -> dict[str, Any]:
    with httpx.Client(base_url=h.base_url) as c:
        reqs = c.get("/sim/requests", params={"id": rid}).json()["requests"]
    assert len(reqs) == 1
    return reqs[0]  # type: ignore[no-any-return]


def metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    found = False
    for m in re.finditer(rf"^{re.escape(name)}\{{([^}}]*)\}} (\S+)$", text, flags=re.M):
        got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if all(got.get(k) == v for k, v in labels.items()):
            total += float(m.group(2))
            found = True
    assert found, name
    return total


def test_measured_chunk_times_follow_the_engine_model(start_sim: Callable[..., SimHandle]) -> None:
    settings = dict(speculative=True, time_scale=0.3)
    h = start_sim(**settings)
    model = SimSettings(**settings).resolved()  # type: ignore[arg-type]
    body = {"prompt": STRUCTURED, "max_tokens": 80, "ignore_eos": True, "temperature": 0}
    t_sent = time.monotonic()
    rid, events = stream_timed(h, body)
    t = truth(h, rid)
    chunks = t["chunks"]
    content = [(ts, e) for ts, e in events if e != "[DONE]" and e["choices"]]
    assert len(content) == len(chunks)
    # Scheduled times are exactly the cost model: prefill, then one step per chunk for a batch of one.
    plen = t["prompt_tokens"]
    assert chunks[0]["t"] - t["admitted"] == pytest.approx(model.prefill_s(plen), abs=1e-9)
    emitted = 1
    for prev, cur in zip(chunks, chunks[1:], strict=False):
        assert cur["t"] - prev["t"] == pytest.approx(model.step_s(1, plen + emitted), abs=1e-9)
        emitted += cur["n"]
    # Measured arrivals follow the schedule: each chunk within a few ms (busy 2-core machine) of its time.
    deviations = [ts - c["t"] for (ts, _), c in zip(content, chunks, strict=True)]
    assert min(deviations) > -0.001  # never early
    assert sorted(deviations)[len(deviations) // 2] < 0.015
    measured_gaps = [b[0] - a[0] for a, b in zip(content, content[1:], strict=False)]
    scheduled_gaps = [b["t"] - a["t"] for a, b in zip(chunks, chunks[1:], strict=False)]
    assert sum(measured_gaps) == pytest.approx(sum(scheduled_gaps), rel=0.1)
    # TTFT: request received -> first token at the client, the prefill time of an idle server.
    assert t_sent < t["arrival"] < content[0][0]
    assert content[0][0] - t["arrival"] == pytest.approx(model.prefill_s(plen), abs=0.03)


def test_spec_counters_match_what_was_emitted(start_sim: Callable[..., SimHandle]) -> None:
    # Upstream vLLM: token_ids per chunk, counters that move, k proposals and up to k + 1 tokens per step.
    h = start_sim(speculative=True, time_scale=0.02, profile="upstream")
    bodies = [
        {"prompt": p, "max_tokens": n, "ignore_eos": True, "temperature": 0, "return_token_ids": True}
        for p, n in ((STRUCTURED, 120), (OPEN, 90), (STRUCTURED + " 7", 60), (OPEN + "?", 33))
    ]
    with cf.ThreadPoolExecutor(4) as ex:
        results = list(ex.map(lambda b: stream_timed(h, b), bodies))
    with httpx.Client(base_url=h.base_url) as c:
        text = c.get("/metrics").text
    steps = [ch for rid, _ in results for ch in truth(h, rid)["chunks"][1:]]  # decode steps (not prefill)
    accepted = [ch["accepted"] for ch in steps]
    k = 7
    lbl = {"model_name": "Qwen/Qwen3-32B", "engine": "0"}
    assert metric(text, "vllm:spec_decode_num_drafts_total", **lbl) == len(steps)
    assert metric(text, "vllm:spec_decode_num_draft_tokens_total", **lbl) == k * len(steps)
    assert metric(text, "vllm:spec_decode_num_accepted_tokens_total", **lbl) == sum(accepted)
    for pos in range(k):
        per_pos = metric(text, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position=str(pos))
        assert per_pos == sum(1 for a in accepted if a > pos)
    # Tokens per chunk: the accepted prefix plus the bonus token, cut only by the request's length.
    for rid, events in results:
        t = truth(h, rid)
        ids = [e["choices"][0]["token_ids"] for _, e in events if e != "[DONE]" and e["choices"]]
        assert [len(x) for x in ids] == [c["n"] for c in t["chunks"]]
        assert all(c["n"] == c["accepted"] + 1 for c in t["chunks"][1:-1])
        assert t["chunks"][-1]["n"] <= t["chunks"][-1]["accepted"] + 1
    emitted = sum(b["max_tokens"] for b in bodies)
    assert metric(text, "vllm:generation_tokens_total") == emitted
    assert metric(text, "vllm:inter_token_latency_seconds_count") == len(steps)
    assert metric(text, "vllm:time_to_first_token_seconds_count") == 4
    assert metric(text, "vllm:request_success_total", finished_reason="length") == 4
    # Several tokens per chunk under speculation.
    structured = truth(h, results[0][0])["chunks"]
    assert sum(c["n"] for c in structured) / len(structured) > 2.5


def test_mean_tokens_per_step_matches_expectation(start_sim: Callable[..., SimHandle]) -> None:
    settings = dict(speculative=True, time_scale=0.005, max_model_len=4096)
    h = start_sim(**settings)
    model = SimSettings(**settings).resolved()  # type: ignore[arg-type]
    for prompt in (STRUCTURED, OPEN):
        rid, _ = stream_timed(h, {"prompt": prompt, "max_tokens": 3000, "ignore_eos": True, "temperature": 0})
        steps = truth(h, rid)["chunks"][1:-1]
        measured = sum(c["n"] for c in steps) / len(steps)
        assert measured == pytest.approx(model.expected_tokens_per_step(prompt), rel=0.08), prompt


def test_greedy_output_is_identical_with_and_without_speculation(start_sim: Callable[..., SimHandle]) -> None:
    base = start_sim(time_scale=0.01, profile="upstream")  # token ids to compare
    spec = start_sim(speculative=True, time_scale=0.01, seed=0, profile="upstream")
    chat = {"messages": [{"role": "user", "content": "Write a simple Python function skeleton"}]}
    for path, body in (
        ("/v1/completions", {"prompt": STRUCTURED}),
        ("/v1/completions", {"prompt": OPEN}),
        ("/v1/chat/completions", chat),
    ):
        req = {**body, "max_tokens": 150, "ignore_eos": True, "temperature": 0, "return_token_ids": True}
        outs = []
        for h in (base, spec):
            _, events = stream_timed(h, req, path)
            content = [e["choices"][0] for _, e in events if e != "[DONE]" and e["choices"]]
            text = "".join(c.get("text") or c.get("delta", {}).get("content") or "" for c in content)
            ids = [i for c in content if c.get("token_ids") for i in c["token_ids"]]
            outs.append((text, ids, len(content)))
        assert outs[0][0] == outs[1][0] and outs[0][1] == outs[1][1] and len(outs[0][1]) == 150
        assert outs[1][2] < outs[0][2]  # same tokens, fewer chunks


def test_continuous_batching_queues_beyond_max_num_seqs(start_sim: Callable[..., SimHandle]) -> None:
    kw: dict[str, Any] = dict(max_num_seqs=2, time_scale=0.2)
    h = start_sim(**kw)
    model = SimSettings(**kw).resolved()
    body = {"prompt": OPEN, "max_tokens": 30, "ignore_eos": True, "temperature": 0}
    waiting_seen = []

    def poll() -> None:
        with httpx.Client(base_url=h.base_url) as c:
            for _ in range(60):
                waiting_seen.append(metric(c.get("/metrics").text, "vllm:num_requests_waiting"))
                time.sleep(0.01)

    with cf.ThreadPoolExecutor(5) as ex:
        futs = [ex.submit(stream_timed, h, body) for _ in range(4)]
        ex.submit(poll).result()
        ids = [f.result()[0] for f in futs]
    ts = sorted((truth(h, rid) for rid in ids), key=lambda t: t["admitted"])
    assert max(waiting_seen) >= 1
    # Never more than max_num_seqs requests between admission and their last chunk.
    for t in sorted({c["t"] for x in ts for c in x["chunks"]}):
        running = [x for x in ts if x["admitted"] < t <= x["chunks"][-1]["t"]]
        assert len(running) <= 2
    # Decode steps shared by two requests cost what the model says for a batch of two (plus prefills between).
    pairs = [(a, b) for i, a in enumerate(ts) for b in ts[i + 1 :]]
    shared = max((sorted({c["t"] for c in a["chunks"]} & {c["t"] for c in b["chunks"]}) for a, b in pairs), key=len)
    assert len(shared) > 10
    gaps = [y - x for x, y in zip(shared, shared[1:], strict=False)]
    lo = model.step_s(2, 2 * 20)
    hi = model.step_s(2, 2 * (20 + 30)) + model.prefill_s(40)
    assert all(lo - 1e-9 <= g <= hi + 1e-9 for g in gaps)


def test_acceptance_draws_are_seeded(start_sim: Callable[..., SimHandle]) -> None:
    body = {"prompt": OPEN, "max_tokens": 60, "ignore_eos": True, "temperature": 0}

    def chunking(seed: int) -> list[int]:
        h = start_sim(speculative=True, time_scale=0.01, seed=seed)
        rid, _ = stream_timed(h, body)
        return [c["n"] for c in truth(h, rid)["chunks"]]

    assert chunking(1) == chunking(1)
    assert chunking(1) != chunking(2)


def test_prefill_grows_with_prompt_length(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(time_scale=0.1)
    firsts = []
    for words in (10, 400):
        rid, _ = stream_timed(h, {"prompt": "word " * words, "max_tokens": 2, "temperature": 0})
        t = truth(h, rid)
        firsts.append(t["chunks"][0]["t"] - t["admitted"])
    assert firsts[1] - firsts[0] == pytest.approx(390 * 0.00025 * 0.1, rel=1e-6)


def test_sampling_varies_output_and_lowers_acceptance(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(speculative=True, time_scale=0.005)
    body = {"prompt": OPEN, "max_tokens": 20, "ignore_eos": True}
    with httpx.Client(base_url=h.base_url) as c:
        greedy = [c.post("/v1/completions", json={**body, "temperature": 0}) for _ in range(2)]
        sampled = [c.post("/v1/completions", json={**body, "temperature": 1.0}) for _ in range(2)]
        seeded = [c.post("/v1/completions", json={**body, "temperature": 1.0, "seed": 7}) for _ in range(2)]
        default = c.post("/v1/completions", json=body)  # no temperature: samples, as vLLM does
    text = lambda r: r.json()["choices"][0]["text"]  # noqa: E731
    assert text(greedy[0]) == text(greedy[1])
    assert text(sampled[0]) != text(sampled[1]) and text(sampled[0]) != text(greedy[0])
    assert text(seeded[0]) == text(seeded[1])
    accept = lambda r: float(r.headers["x-spectrn-sim-accept-prob"])  # noqa: E731
    assert accept(sampled[0]) == pytest.approx(accept(greedy[0]) / 1.3)
    assert accept(default) == pytest.approx(accept(sampled[0]))


def test_cancelled_requests_leave_the_batch(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(time_scale=0.05, max_num_seqs=2)
    engine = h.server.engine
    with (
        httpx.Client(base_url=h.base_url) as c,
        c.stream(
            "POST", "/v1/completions", json={"prompt": OPEN, "max_tokens": 200, "ignore_eos": True, "stream": True}
        ) as r,
    ):
        next(r.iter_lines())
        req = next(iter(engine.log.values()))
        h.call(engine.cancel, req)
        deadline = time.monotonic() + 5
        while h.call(lambda: len(engine.running)) and time.monotonic() < deadline:
            time.sleep(0.01)
    assert h.call(lambda: len(engine.running)) == 0 and req.finished == "abort"
    # The engine keeps serving.
    with httpx.Client(base_url=h.base_url) as c:
        assert (
            c.post("/v1/completions", json={"prompt": OPEN, "max_tokens": 3}).json()["usage"]["completion_tokens"] == 3
        )
