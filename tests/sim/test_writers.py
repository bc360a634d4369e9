"""Writer processes: streams handed to them arrive intact, on schedule, with exact ground truth."""

from __future__ import annotations

import concurrent.futures as cf
import json
from collections.abc import Callable
from typing import Any

import httpx

from spectrn.sim import FaultSettings
from spectrn.sim.server import SimHandle

from .conftest import OPEN, STRUCTURED, sse_events

USAGE = {"include_usage": True, "continuous_usage_stats": True}


def run_stream(base: str, body: dict[str, Any], client: httpx.Client | None = None) -> list[Any]:
    c = client or httpx.Client(base_url=base, timeout=60)
    try:
        r = c.post("/v1/completions", json={**body, "stream": True})
        assert r.status_code == 200 and r.headers["transfer-encoding"] == "chunked"
        return sse_events(r.content)
    finally:
        if client is None:
            c.close()


def test_streams_written_by_writer_processes_are_intact_and_exact(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(speculative=True, time_scale=0.05, max_num_seqs=16, write_workers=2)
    assert h.server.engine.pool is not None and h.server.engine.pool.count == 2
    bodies = [
        {"prompt": (STRUCTURED if i % 2 else OPEN) + f" {i}", "max_tokens": 100 + i, "ignore_eos": True,
         "temperature": 0, "stream_options": USAGE}
        for i in range(12)
    ]  # fmt: skip
    with cf.ThreadPoolExecutor(12) as ex:
        results = list(ex.map(lambda b: run_stream(h.base_url, b), bodies))
    with httpx.Client(base_url=h.base_url) as c:
        truth = {t["id"]: t for t in c.get("/sim/requests").json()["requests"]}
    for body, events in zip(bodies, results, strict=True):
        assert events[-1] == "[DONE]" and events[-2]["choices"] == []
        content = [e for e in events[:-2]]
        counts = [e["usage"]["completion_tokens"] for e in content]
        deltas = [b - a for a, b in zip([0, *counts], counts, strict=False)]
        t = truth[content[0]["id"]]
        assert deltas == [c["n"] for c in t["chunks"]] and counts[-1] == body["max_tokens"]
        # Every chunk's write time is known, and none left before its scheduled time.
        assert all(c["written"] >= c["t"] for c in t["chunks"])
    # All three processes wrote some of the streams (two writers and the engine itself), and every stream was
    # given back.
    pool = h.server.engine.pool
    assert all(n >= 2 for n in pool.opened) and sum(pool.opened) == 12
    assert h.call(lambda: list(pool._load)) == [0, 0, 0]


def test_keep_alive_and_disconnect_faults_with_writers(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(time_scale=0.01, max_num_seqs=8, write_workers=1)
    body = {"prompt": OPEN, "max_tokens": 20, "ignore_eos": True, "temperature": 0}
    with httpx.Client(base_url=h.base_url, timeout=30) as c:
        for _ in range(4):  # one connection, several streams: the writer's descriptor is closed each time
            events = run_stream(h.base_url, body, c)
            assert len(events) == 21 and events[-1] == "[DONE]"
        full = c.post("/v1/completions", json=body).json()
        assert full["usage"]["completion_tokens"] == 20
    faulty = start_sim(time_scale=0.01, max_num_seqs=8, write_workers=1, faults=FaultSettings(disconnect_rate=1.0))
    lines: list[str] = []
    with httpx.Client(base_url=faulty.base_url) as c:
        try:
            with c.stream("POST", "/v1/completions", json={**body, "stream": True}) as r:
                lines.extend(line for line in r.iter_lines() if line)
        except httpx.RemoteProtocolError:
            pass
        reqs = c.get("/sim/requests").json()["requests"]
    assert "data: [DONE]" not in lines and reqs[0]["finish_reason"] == "abort"
    json.dumps(reqs)


def test_a_reader_that_leaves_mid_stream_frees_its_slot(start_sim: Callable[..., SimHandle]) -> None:
    import time

    h = start_sim(time_scale=0.02, max_num_seqs=8, write_workers=1)
    engine = h.server.engine
    body = {"prompt": OPEN, "max_tokens": 400, "ignore_eos": True, "temperature": 0, "stream": True}
    # Two streams open at once: one for the writer, one for the engine's own process; both readers leave.
    with (
        httpx.Client(base_url=h.base_url) as c1,
        c1.stream("POST", "/v1/completions", json=body) as r1,
        httpx.Client(base_url=h.base_url) as c2,
        c2.stream("POST", "/v1/completions", json=body) as r2,
    ):
        next(r1.iter_lines())
        next(r2.iter_lines())
    deadline = time.monotonic() + 10
    while h.call(lambda: len(engine.running)) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert h.call(lambda: len(engine.running)) == 0
    assert [r.finished for r in engine.log.values()] == ["abort", "abort"]
    assert engine.pool is not None and engine.pool.opened == [1, 1]
    events = run_stream(h.base_url, {**body, "max_tokens": 5})
    assert len(events) == 6 and events[-1] == "[DONE]"
