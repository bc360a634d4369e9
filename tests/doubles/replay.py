"""Replaying recorded vLLM bytes: an aiohttp app served in a thread, and the recorded fixtures."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from doubles.reference_server import serve_app_in_thread

FIXTURES = Path(__file__).resolve().parents[1] / "loadgen" / "fixtures"


serve_app = serve_app_in_thread


def replay_app(handler: Callable[[web.Request], Any], model: str = "m") -> web.Application:
    async def models(_r: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": model}]})

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", handler)
    app.router.add_post("/v1/chat/completions", handler)
    return app
