"""Helpers for load generator tests: serve an aiohttp app in a thread, replay recorded vLLM bytes."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

FIXTURES = Path(__file__).parent / "fixtures"


@contextmanager
def serve_app(app: web.Application) -> Iterator[str]:
    """Run an aiohttp app on a background loop; yields its base URL."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        holder["runner"] = runner
        holder["port"] = runner.addresses[0][1]

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()
        loop.run_until_complete(holder["runner"].cleanup())
        loop.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    assert ready.wait(10)
    try:
        yield f"http://127.0.0.1:{holder['port']}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        t.join(10)


def replay_app(handler: Callable[[web.Request], Any], model: str = "m") -> web.Application:
    async def models(_r: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": model}]})

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", handler)
    app.router.add_post("/v1/chat/completions", handler)
    return app
