"""The simulator over real HTTP: a request whose JSON holds a lone surrogate escape is invalid input (400 with
the reason), as any other unparseable text would be, never a 500 from deep inside generation."""

from __future__ import annotations

import httpx
import pytest


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/completions", '{"model": "m", "prompt": "hello \\ud800 world", "max_tokens": 4}'),
        ("/v1/chat/completions", '{"model": "m", "messages": [{"role": "user", "content": "\\udfff"}]}'),
    ],
)
def test_a_lone_surrogate_in_a_request_is_a_400(path: str, body: str) -> None:
    from spectrn.sim import SimSettings, run_in_thread

    h = run_in_thread(SimSettings(served_model_name="m", time_scale=0.02))
    try:
        with httpx.Client(base_url=h.base_url, timeout=30) as c:
            r = c.post(path, content=body.encode(), headers={"Content-Type": "application/json"})
            ok = c.post(path, content=body.replace("\\ud800", "x").replace("\\udfff", "x").encode(),
                        headers={"Content-Type": "application/json"})  # fmt: skip
    finally:
        h.stop()
    assert r.status_code == 400, r.text
    assert "not valid Unicode (a lone surrogate" in r.text
    assert ok.status_code == 200  # the same request with valid text is served
