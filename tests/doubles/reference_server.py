"""A reference server with an exact, known token schedule, to check the load generator against.

Every streaming request gets its first token ``ttft_s`` after arrival, then one event every ``gap_s``,
event j carrying ``pattern[j % len(pattern)]`` tokens (the first event always 1, as vLLM's prefill),
until ``max_tokens``. Events are sent at absolute deadlines (no drift), and the server keeps the
scheduled time of every event so tests and benchmarks can compare what the client measured with what
was sent. It speaks just enough of vLLM's OpenAI protocol: completions and chat, ``token_ids``, the
usage chunk, ``[DONE]``, ``/v1/models``, ``/health``, ``/tokenize`` and spec-decode ``/metrics``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Schedule:
    ttft_s: float = 0.05
    gap_s: float = 0.02
    pattern: tuple[int, ...] = (1,)
    model: str = "ref-model"
    window: int = 4
    token_ids: bool = True  # vLLM >= 0.10.2 with return_token_ids; False: the Neuron fork, which ignores it
    continuous_usage: bool = False  # cumulative usage on every event (continuous_usage_stats)
    fail_prompts: tuple[str, ...] = ()  # a request whose last user message is one of these gets HTTP 500


@dataclass
class ServerLog:
    # per request: {"arrival": perf_counter, "offsets": scheduled event offsets from arrival, "sizes": tokens per
    # event, "sent": perf_counter after each event's write, "done": perf_counter after [DONE]'s write}; the
    # server runs in the test's process, so these times share the client's clock
    requests: list[dict[str, Any]] = field(default_factory=list)
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: dict[int, int] = field(default_factory=dict)


def make_app(schedule: Schedule, log: ServerLog) -> Any:
    from aiohttp import web

    async def models(_req: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": schedule.model, "object": "model"}]})

    async def health(_req: web.Request) -> web.Response:
        return web.Response(status=200)

    async def tokenize(req: web.Request) -> web.Response:
        body = await req.json()
        n = len(str(body.get("prompt", "")).split())
        return web.json_response({"count": n, "tokens": list(range(n)), "max_model_len": 4096})

    async def metrics(_req: web.Request) -> web.Response:
        lines = [
            "# TYPE vllm:spec_decode_num_drafts_total counter",
            f'vllm:spec_decode_num_drafts_total{{engine="0",model_name="{schedule.model}"}} {float(log.drafts)}',
            "# TYPE vllm:spec_decode_num_draft_tokens_total counter",
            f'vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="{schedule.model}"}} '
            f"{float(log.draft_tokens)}",
            "# TYPE vllm:spec_decode_num_accepted_tokens_total counter",
            f'vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="{schedule.model}"}} '
            f"{float(log.accepted)}",
            "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter",
        ]
        for pos in range(schedule.window):
            lines.append(
                f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="{schedule.model}",'
                f'position="{pos}"}} {float(log.per_pos.get(pos, 0))}'
            )
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def generate(req: web.Request) -> web.StreamResponse:
        arrival = time.perf_counter()
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        body = await req.json()
        chat = req.path.endswith("/chat/completions")
        last = body.get("prompt") or (body.get("messages") or [{}])[-1].get("content", "")
        if last in schedule.fail_prompts:
            log.requests.append({"arrival": arrival, "prompt": last, "messages": body.get("messages"), "failed": True})
            return web.json_response({"error": {"message": "planned failure", "code": 500}}, status=500)
        n = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream; charset=utf-8"})
        await resp.prepare(req)
        sizes: list[int] = []
        remaining = n
        j = 0
        while remaining > 0:
            k = 1 if j == 0 else min(schedule.pattern[(j - 1) % len(schedule.pattern)], remaining)
            sizes.append(k)
            remaining -= k
            j += 1
        offsets = [schedule.ttft_s + i * schedule.gap_s for i in range(len(sizes))]
        sent: list[float] = []
        prompt = body.get("prompt") or (body.get("messages") or [{}])[-1].get("content", "")
        entry = {"arrival": arrival, "offsets": offsets, "sizes": sizes, "sent": sent, "prompt": prompt,
                 "messages": body.get("messages")}  # fmt: skip
        log.requests.append(entry)
        next_id = 100
        for off, k in zip(offsets, sizes, strict=True):
            delay = t0 + off - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            ids = list(range(next_id, next_id + k))
            next_id += k
            text = "".join(f" t{i}" for i in ids)
            if chat:
                choice: dict[str, Any] = {"index": 0, "delta": {"content": text}, "finish_reason": None}
            else:
                choice = {"index": 0, "text": text, "finish_reason": None}
            if schedule.token_ids:
                choice["token_ids"] = ids
            event: dict[str, Any] = {"id": "x", "choices": [choice]}
            if schedule.continuous_usage:
                done_so_far = next_id - 100
                event["usage"] = {"prompt_tokens": 8, "completion_tokens": done_so_far, "total_tokens": done_so_far + 8}
            await resp.write(b"data: " + json.dumps(event).encode() + b"\n\n")
            sent.append(time.perf_counter())
            if len(sent) == 1:
                entry["first_wall"] = time.time()
            if off != offsets[0]:
                log.drafts += 1
                log.draft_tokens += schedule.window
                log.accepted += k - 1
                for pos in range(k - 1):
                    log.per_pos[pos] = log.per_pos.get(pos, 0) + 1
        usage = {"prompt_tokens": 8, "completion_tokens": n, "total_tokens": n + 8}
        await resp.write(b"data: " + json.dumps({"id": "x", "choices": [], "usage": usage}).encode() + b"\n\n")
        # the client may read [DONE] and send its next request before this handler runs again: "ending" is
        # stamped before the write, so no later arrival can precede it (what an in-flight count needs)
        entry["ending"] = time.perf_counter()
        await resp.write(b"data: [DONE]\n\n")
        entry["done"] = time.perf_counter()
        await resp.write_eof()
        return resp

    async def request_log(_req: web.Request) -> web.Response:
        return web.json_response(log.requests)

    app = web.Application()
    app.router.add_get("/log", request_log)
    app.router.add_get("/v1/models", models)
    app.router.add_get("/health", health)
    app.router.add_get("/metrics", metrics)
    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/v1/completions", generate)
    app.router.add_post("/v1/chat/completions", generate)
    return app


@contextmanager
def serve_app_in_thread(app: Any) -> Iterator[str]:
    """Run an aiohttp application on its own event loop in a background thread; yields its base URL."""
    from aiohttp import web

    loop = asyncio.new_event_loop()
    started = threading.Event()
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
        started.set()
        loop.run_forever()
        loop.run_until_complete(holder["runner"].cleanup())
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not started.wait(10):
        raise RuntimeError("reference server did not start within 10 s")
    try:
        yield f"http://127.0.0.1:{holder['port']}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


@contextmanager
def serve_in_thread(schedule: Schedule) -> Iterator[tuple[str, ServerLog]]:
    """Run the reference server in a background thread; yields (base_url, log)."""
    log = ServerLog()
    with serve_app_in_thread(make_app(schedule, log)) as base:
        yield base, log


def main(argv: list[str] | None = None) -> None:
    """``python -m doubles.reference_server --port P --ttft 0.05 --gap 0.02 --pattern 1``."""
    import argparse

    from aiohttp import web

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--ttft", type=float, default=0.05)
    ap.add_argument("--gap", type=float, default=0.02)
    ap.add_argument("--pattern", default="1", help="tokens per event after the first, cycled, e.g. 3,1,4")
    ap.add_argument("--model", default="ref-model")
    a = ap.parse_args(argv)
    sched = Schedule(a.ttft, a.gap, tuple(int(x) for x in a.pattern.split(",")), a.model)
    web.run_app(make_app(sched, ServerLog()), host=a.host, port=a.port, access_log=None, print=None)


if __name__ == "__main__":
    main()
