"""Helpers for the reliability tests (imported by name; other folders' ``conftest`` modules share that name).

* ``run_cli``: the real CLI (``spectrn.cli.main.main``) with its exit code, stdout and stderr.
* ``FaultyServer``: a tiny OpenAI-compatible streaming server in a background thread whose misbehaviour is
  chosen per test (hangs, missing or garbled ``/metrics``, a body that is not SSE, ...). The simulator's own
  fault flags cover errors, disconnects, stalls and malformed events; this covers the rest.
* ``records`` / ``summary``: read a run folder back.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doubles.loopserver import LoopServer
from spectrn.run.summary import Summary
from support import run_cli  # noqa: F401  (re-exported: the reliability tests' entry point)

MODEL = "Qwen/Qwen3-32B"


def last_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def records(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "requests.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def summary(run_dir: Path) -> Summary:
    return Summary.model_validate_json((run_dir / "summary.json").read_text(encoding="utf-8"))


def measured_error_classes(recs: list[dict[str, Any]], variant: str) -> dict[str, int]:
    return dict(Counter(r["error"] for r in recs if r["variant"] == variant and not r.get("warmup") and r.get("error")))


def assert_summary_matches_records(run_dir: Path) -> Summary:
    """summary.json's request counts and error classes equal what requests.jsonl holds, per variant."""
    recs = records(run_dir)
    s = summary(run_dir)
    for variant, v in s.levels[0].variants.items():
        mine = [r for r in recs if r["variant"] == variant and not r.get("warmup")]
        ok = [r for r in mine if not r.get("error")]
        rq = v.requests
        assert rq.completed == len(ok), (variant, rq)
        assert rq.errors == len(mine) - len(ok), (variant, rq)
        assert rq.error_classes == measured_error_classes(recs, variant), (variant, rq)
    return s


@dataclass
class Behaviour:
    """What ``FaultyServer`` does; every field defaults to a well-behaved vLLM server."""

    tokens: int = 8
    token_delay_s: float = 0.002
    health_status: int = 200
    metrics: str = "ok"  # ok | missing (404) | garbled | error (500)
    hang_every: int = 0  # every Nth completion request stops sending after its first event (never finishes)
    not_sse_every: int = 0  # every Nth request answers 200 application/json instead of a stream
    error_event_every: int = 0  # every Nth stream carries a vLLM error event mid-way
    status_every: int = 0  # every Nth request is answered with HTTP ``status`` and vLLM's JSON error body
    status: int = 503
    counter: int = 0
    seen: list[str] = field(default_factory=list)


_METRICS_OK = """# HELP vllm:spec_decode_num_drafts_total Number of drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{{model_name="{m}",engine="0"}} {n}
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{{model_name="{m}",engine="0"}} {t}
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{{model_name="{m}",engine="0"}} {a}
"""


class FaultyServer(LoopServer):
    """``with FaultyServer(Behaviour(...)) as s: s.url``: an aiohttp server on a free loopback port."""

    def __init__(self, behaviour: Behaviour | None = None) -> None:
        super().__init__()
        self.b = behaviour or Behaviour()

    def _app(self) -> Any:
        from aiohttp import web

        b = self.b

        async def health(_: web.Request) -> web.Response:
            return web.Response(status=b.health_status)

        async def models(_: web.Request) -> web.Response:
            return web.json_response({"object": "list", "data": [{"id": MODEL, "object": "model"}]})

        async def metrics(_: web.Request) -> web.Response:
            if b.metrics == "missing":
                return web.Response(status=404, text="Not Found")
            if b.metrics == "error":
                return web.Response(status=500, text="boom")
            if b.metrics == "garbled":
                return web.Response(text='vllm:spec_decode_num_drafts_total{model_name="x" 12 13 14\n{{{{ garbage\n')
            n = b.counter
            return web.Response(text=_METRICS_OK.format(m=MODEL, n=n * 3, t=n * 9, a=n * 6))

        async def complete(request: web.Request) -> web.StreamResponse:
            await request.read()
            b.counter += 1
            k = b.counter
            b.seen.append(request.path)
            if b.status_every and k % b.status_every == 0:
                body = {"error": {"message": "overloaded", "type": "ServiceUnavailableError", "code": b.status}}
                return web.json_response(body, status=b.status)
            if b.not_sse_every and k % b.not_sse_every == 0:
                return web.json_response({"choices": [{"text": "not streamed"}]})
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            chat = request.path.endswith("/chat/completions")
            for i in range(b.tokens):
                if b.error_event_every and k % b.error_event_every == 0 and i == b.tokens // 2:
                    err = {"error": {"message": "engine dead", "type": "InternalServerError", "code": 500}}
                    await resp.write(f"data: {json.dumps(err)}\n\n".encode())
                    break
                choice: dict[str, Any] = {"index": 0, "token_ids": [100 + i]}
                if chat:
                    choice["delta"] = {"content": f"t{i} "}
                else:
                    choice["text"] = f"t{i} "
                await resp.write(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
                if b.hang_every and k % b.hang_every == 0:
                    await asyncio.sleep(3600)
                await asyncio.sleep(b.token_delay_s)
            usage = {"prompt_tokens": 5, "completion_tokens": b.tokens}
            await resp.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return resp

        app = web.Application()
        app.router.add_get("/health", health)
        app.router.add_get("/v1/models", models)
        app.router.add_get("/metrics", metrics)
        app.router.add_post("/v1/completions", complete)
        app.router.add_post("/v1/chat/completions", complete)
        return app


def bench_argv(endpoints: dict[str, str], out_dir: Path, run_id: str, *extra: str) -> list[str]:
    argv = ["bench", "--out-dir", str(out_dir), "--run-id", run_id, "--no-report"]
    for name, url in endpoints.items():
        argv += ["--endpoint", f"{name}={url}"]
    return argv + list(extra)


SimStarter = Callable[..., Any]
