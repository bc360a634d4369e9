"""Fault injection: errors, mid-stream disconnects, malformed events, stalls; reproducible by seed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from spectrn.sim import FaultSettings, SimSettings
from spectrn.sim.server import SimHandle

from .conftest import OPEN

BODY = {"prompt": OPEN, "max_tokens": 24, "ignore_eos": True, "temperature": 0}


def statuses(h: SimHandle, n: int) -> list[int]:
    with httpx.Client(base_url=h.base_url) as c:
        return [c.post("/v1/completions", json=BODY).status_code for _ in range(n)]


@pytest.mark.parametrize("profile", ["neuron-fork", "upstream"])
def test_error_rate_and_status(start_sim: Callable[..., SimHandle], profile: str) -> None:
    h = start_sim(faults=FaultSettings(error_rate=1.0, error_status=503), profile=profile)
    with httpx.Client(base_url=h.base_url) as c:
        r = c.post("/v1/completions", json={**BODY, "stream": True})
    assert r.status_code == 503 and r.headers["content-type"] == "application/json"
    error = {
        "message": "Simulated server error (fault injection, status 503)",
        "type": "ServiceUnavailableError",
        "param": None,
        "code": 503,
    }
    # The Neuron fork's error body is flat (vLLM 0.9), upstream's nests it under "error".
    assert r.json() == ({"object": "error", **error} if profile == "neuron-fork" else {"error": error})


def test_errors_are_reproducible_by_seed(start_sim: Callable[..., SimHandle]) -> None:
    faults = FaultSettings(error_rate=0.5)
    a = statuses(start_sim(faults=faults, seed=3, time_scale=0.005), 16)
    b = statuses(start_sim(faults=faults, seed=3, time_scale=0.005), 16)
    c = statuses(start_sim(faults=faults, seed=4, time_scale=0.005), 16)
    assert a == b and set(a) == {200, 500} and a != c


def read_stream(h: SimHandle) -> tuple[list[str], bool]:
    """Raw data lines of one stream, and whether the response ended cleanly."""
    lines: list[str] = []
    with httpx.Client(base_url=h.base_url) as c:
        try:
            with c.stream("POST", "/v1/completions", json={**BODY, "stream": True}) as r:
                for line in r.iter_lines():
                    if line:
                        lines.append(line)
        except httpx.RemoteProtocolError:
            return lines, False
    return lines, True


def test_disconnect_cuts_the_stream_and_frees_the_slot(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(faults=FaultSettings(disconnect_rate=1.0))
    lines, clean = read_stream(h)
    assert not clean and 1 <= len(lines) < 24 and "data: [DONE]" not in lines
    with httpx.Client(base_url=h.base_url) as c:
        reqs = c.get("/sim/requests").json()["requests"]
        assert reqs[0]["finish_reason"] == "abort"
        assert 'finished_reason="abort",model_name="Qwen/Qwen3-32B"} 1.0' in c.get("/metrics").text
        # V0 labels (the default neuron-fork profile): model_name only.
        assert 'vllm:num_requests_running{model_name="Qwen/Qwen3-32B"} 0.0' in c.get("/metrics").text
    # The server keeps serving.
    lines, clean = read_stream(h)
    assert not clean


def test_malformed_event(start_sim: Callable[..., SimHandle]) -> None:
    h = start_sim(faults=FaultSettings(malformed_sse_rate=1.0))
    lines, clean = read_stream(h)
    assert clean and lines[-1] == "data: [DONE]"
    bad = []
    for line in lines[:-1]:
        try:
            json.loads(line[6:])
        except json.JSONDecodeError:
            bad.append(line)
    assert len(bad) == 1


def test_stalls_pause_the_engine(start_sim: Callable[..., SimHandle]) -> None:
    kw: dict[str, Any] = dict(time_scale=0.02, faults=FaultSettings(stall_rate=1.0, stall_s=2.0))
    h = start_sim(**kw)
    model = SimSettings(**kw).resolved()
    with httpx.Client(base_url=h.base_url) as c:
        rid = c.post("/v1/completions", json={**BODY, "max_tokens": 5}).json()["id"]
        chunks = c.get("/sim/requests", params={"id": rid}).json()["requests"][0]["chunks"]
    gaps = [b["t"] - a["t"] for a, b in zip(chunks, chunks[1:], strict=False)]
    for g in gaps:
        assert g == pytest.approx(model.step_s(1, 20) + 2.0 * 0.02, abs=0.002)


def test_slow_start_flag_is_validated() -> None:
    from spectrn.errors import SimError
    from spectrn.sim import load_settings

    with pytest.raises(SimError, match="startup_delay_s"):
        load_settings(startup_delay_s=-1)
    with pytest.raises(SimError, match="faults.error_status"):
        load_settings(faults={"error_status": 404})
