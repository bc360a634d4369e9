"""A streaming server whose latency follows a known law of the requests in flight, for capacity searches.

With ``n`` the requests this server has open (the new one included):

    TTFT = ttft_s + ttft_per_request_s * n          (n when the request arrives)
    gap between token events = gap_s + gap_per_request_s * n     (n when each gap starts)

every event after the first carrying ``tokens_per_event`` tokens (the first carries one, as a prefill). Events
are sent at absolute deadlines (no drift). So in a closed loop at concurrency c, TPOT = (gap_s +
gap_per_request_s * c) / tokens_per_event whenever (max_tokens - 1) is a multiple of ``tokens_per_event``, and
TTFT = ttft_s + ttft_per_request_s * c: a test derives the highest concurrency meeting an SLO from the law alone.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from doubles.loopserver import LoopServer


@dataclass(frozen=True)
class Law:
    gap_s: float
    gap_per_request_s: float
    ttft_s: float
    ttft_per_request_s: float
    tokens_per_event: int = 1
    model: str = "law-model"

    def tpot(self, c: int) -> float:
        return (self.gap_s + self.gap_per_request_s * c) / self.tokens_per_event

    def ttft(self, c: int) -> float:
        return self.ttft_s + self.ttft_per_request_s * c


class LawServer(LoopServer):
    """``with LawServer(Law(...)) as s: s.url``; ``s.peak``: the most requests it ever had open."""

    def __init__(self, law: Law) -> None:
        super().__init__()
        self.law = law
        self.open = 0
        self.peak = 0

    def _app(self) -> Any:
        from aiohttp import web

        law = self.law

        async def models(_req: web.Request) -> web.Response:
            return web.json_response({"object": "list", "data": [{"id": law.model, "object": "model"}]})

        async def health(_req: web.Request) -> web.Response:
            return web.Response(status=200)

        async def metrics(_req: web.Request) -> web.Response:
            return web.Response(text="# no metrics\n", content_type="text/plain")

        async def generate(req: web.Request) -> web.StreamResponse:
            loop = asyncio.get_running_loop()
            self.open += 1
            self.peak = max(self.peak, self.open)
            try:
                body = await req.json()
                chat = req.path.endswith("/chat/completions")
                n = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
                resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
                await resp.prepare(req)
                deadline = loop.time() + law.ttft_s + law.ttft_per_request_s * self.open
                sent = 0
                while sent < n:
                    delay = deadline - loop.time()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    k = 1 if sent == 0 else min(law.tokens_per_event, n - sent)
                    ids = list(range(100 + sent, 100 + sent + k))
                    sent += k
                    text = "".join(f" t{i}" for i in ids)
                    choice: dict[str, Any] = (
                        {"index": 0, "delta": {"content": text}, "finish_reason": None}
                        if chat
                        else {"index": 0, "text": text, "finish_reason": None}
                    )
                    choice["token_ids"] = ids
                    await resp.write(b"data: " + json.dumps({"id": "x", "choices": [choice]}).encode() + b"\n\n")
                    deadline += law.gap_s + law.gap_per_request_s * self.open
                usage = {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": n + 8}
                await resp.write(b"data: " + json.dumps({"id": "x", "choices": [], "usage": usage}).encode() + b"\n\n")
                await resp.write(b"data: [DONE]\n\n")
                await resp.write_eof()
                return resp
            finally:
                self.open -= 1

        app = web.Application()
        app.router.add_get("/v1/models", models)
        app.router.add_get("/health", health)
        app.router.add_get("/metrics", metrics)
        app.router.add_post("/v1/completions", generate)
        app.router.add_post("/v1/chat/completions", generate)
        return app
