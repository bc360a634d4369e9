"""An aiohttp app served on a free loopback port from its own thread and event loop (the test doubles'
servers: ``tests/hostile.py``, ``doubles/relhelp.FaultyServer``). Subclasses build the app in ``_app()``."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Self


class LoopServer:
    """``with Server(...) as s: s.url``. On exit the server stops, and handlers still holding a connection open
    (modes that never finish) are cancelled."""

    def __init__(self) -> None:
        self.url = ""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None

    def _app(self) -> Any:
        raise NotImplementedError

    def _serve(self) -> None:
        from aiohttp import web

        async def main() -> None:
            self._stop = asyncio.Event()
            runner = web.AppRunner(self._app(), access_log=None, shutdown_timeout=0.2)
            await runner.setup()
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            self.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
            self._ready.set()
            await self._stop.wait()
            await runner.cleanup()
            rest = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in rest:
                t.cancel()
            await asyncio.gather(*rest, return_exceptions=True)

        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(main())
        self._loop.close()

    def __enter__(self) -> Self:
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        assert self._ready.wait(10), f"{type(self).__name__} did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop and self._stop:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread:
            self._thread.join(10)
