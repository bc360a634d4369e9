"""The simulator's HTTP face: vLLM's OpenAI-compatible routes on aiohttp, and running them (thread or foreground).

Endpoints (as vLLM): ``POST /v1/completions``, ``POST /v1/chat/completions`` (streaming and not),
``GET /v1/models``, ``GET /health`` (503 while "compiling", then 200 with an empty body), ``GET /version``,
``POST /tokenize``, ``GET /metrics``. Simulator-only: ``GET /sim/requests`` (per-request ground truth:
acceptance probability, scheduled chunk times, tokens per chunk) and ``GET /sim/info`` (resolved model).

Response bodies mirror the recorded real transcripts field for field (``tests/fixtures/vllm-real``):
event order (chat opens with a role event), where ``token_ids`` / ``prompt_token_ids`` sit, the usage-only
final event with ``choices: []``, ``data: [DONE]``, error bodies ``{"error": {message, type, param, code}}``
(a bad streaming request gets a 400 JSON body, not SSE). Streaming chunks are written by the engine straight
to the transport with HTTP chunked framing, so every stream's chunk leaves at its scheduled time.

The handlers here route; the rest has its own module: ``parse`` (a body -> a validated engine request),
``sinks`` (streamed tokens -> SSE bytes), ``bodies`` (non-streaming bodies), ``api_errors`` (error bodies).
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from typing import Any

from aiohttp import web
from aiohttp.tcp_helpers import tcp_nodelay

from spectrn.sim.api_errors import ApiError, json_response
from spectrn.sim.bodies import final_body
from spectrn.sim.engine import Engine
from spectrn.sim.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from spectrn.sim.metrics import SimMetrics
from spectrn.sim.model import predictability
from spectrn.sim.parse import bool_param, build_request, chat_text, check_model, completion_prompt, read_body
from spectrn.sim.settings import SimSettings
from spectrn.sim.sinks import CollectSink, StreamSink
from spectrn.sim.tokens import encode

SSE = "text/event-stream; charset=utf-8"


class SimServer:
    """Holds the engine, metrics and settings of one app; its methods are the route handlers."""

    def __init__(self, settings: SimSettings) -> None:
        self.settings = settings
        self.profile = settings.server_profile
        self.model = settings.resolved()
        self.model_name = settings.model_name
        self.metrics = SimMetrics(
            self.model_name,
            profile=self.profile,
            speculative=self.model.speculative,
            window=self.model.window,
            max_model_len=settings.context_limit,
        )
        faults = settings.faults
        self.engine = Engine(
            self.model,
            self.metrics,
            max_num_seqs=settings.batch_limit,
            seed=settings.seed,
            spin_s=settings.spin_s,
            stall_rate=faults.stall_rate,
            stall_s=faults.stall_s,
            log_size=settings.request_log_size,
            # KV cache sized for a full batch of full-length sequences (what Neuron compiles for).
            kv_capacity_tokens=settings.batch_limit * settings.context_limit,
            writers=settings.writers,
        )
        self.started = time.time()
        self.ready_at = time.monotonic() + settings.startup_delay_s
        self.fingerprint = settings.fingerprint

    # ---- lifecycle ----
    async def on_startup(self, app: web.Application) -> None:
        self.engine.start()
        self.ready_at = time.monotonic() + self.settings.startup_delay_s

    async def on_cleanup(self, app: web.Application) -> None:
        await self.engine.stop()

    @property
    def ready(self) -> bool:
        return time.monotonic() >= self.ready_at

    # ---- simple endpoints ----
    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=200 if self.ready else 503)

    async def version(self, request: web.Request) -> web.Response:
        return json_response({"version": self.settings.version})

    async def identity(self, request: web.Request) -> web.Response:
        """``GET /sim/identity``: the simulator describes itself (like ``/sim/requests``, a path no real server
        has), so a run against it is labelled with the truth (``spectrn.loadgen.identity``)."""
        m = self.model
        return json_response(
            {
                "profile": self.settings.server_profile.name,
                "preset": m.preset.name,
                "draft": m.draft if m.speculative else None,
                "window": m.window if m.speculative else None,
                "window_semantics": m.semantics,
            }
        )

    async def models(self, request: web.Request) -> web.Response:
        created = int(self.started)
        perm = hashlib.blake2b(f"perm{self.settings.seed}".encode(), digest_size=8).hexdigest()
        preset = self.settings.resolved_preset()
        from spectrn.configuration.catalog import MODELS

        card = {
            "id": self.model_name,
            "object": "model",
            "created": created,
            "owned_by": "vllm",
            "root": MODELS[preset.target].hf_id,
            "parent": None,
            "max_model_len": self.settings.context_limit,
            "permission": [
                {
                    "id": f"modelperm-{perm}",
                    "object": "model_permission",
                    "created": created,
                    "allow_create_engine": False,
                    "allow_sampling": True,
                    "allow_logprobs": True,
                    "allow_search_indices": False,
                    "allow_view": True,
                    "allow_fine_tuning": False,
                    "organization": "*",
                    "group": None,
                    "is_blocking": False,
                }
            ],
        }
        return json_response({"object": "list", "data": [card]})

    async def metrics_endpoint(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": METRICS_CONTENT_TYPE})

    async def tokenize(self, request: web.Request) -> web.Response:
        try:
            body = await read_body(request)
            check_model(body, self.model_name, self.profile.errors)
            if "messages" in body:
                text = chat_text(body, default_gen=bool_param(body, "add_generation_prompt", True))
                ids = encode(text)
            else:
                text, ids = completion_prompt(body)
        except ApiError as e:
            return e.response(self.profile.errors)
        out: dict[str, Any] = {"count": len(ids), "max_model_len": self.settings.context_limit, "tokens": ids}
        if bool_param(body, "return_token_strs"):
            from spectrn.sim.tokens import pieces

            out["token_strs"] = pieces(text)
        else:
            out["token_strs"] = None
        return json_response(out)

    async def sim_requests(self, request: web.Request) -> web.Response:
        wanted = request.query.get("id")
        log = self.engine.log
        reqs = list(log.values()) if wanted is None else [log[wanted]] if wanted in log else []
        return json_response({"clock": "monotonic", "requests": [self.engine.describe(r) for r in reqs]})

    async def sim_info(self, request: web.Request) -> web.Response:
        m = self.model
        return json_response(
            {
                "settings": self.settings.model_dump(mode="json"),
                "model_name": self.model_name,
                "preset": m.preset.model_dump(mode="json"),
                "speculative": m.speculative,
                "draft": m.draft if m.speculative else None,
                "window": m.window if m.speculative else None,
                "profile": self.profile.name,
                "window_semantics": m.semantics,
                "proposals_per_step": m.proposals,
                "max_tokens_per_step": m.max_tokens_per_step,
                "draft_params": m.draft_cost.model_dump(mode="json"),
                "time_scale": m.time_scale,
                "max_num_seqs": self.settings.batch_limit,
                "max_model_len": self.settings.context_limit,
                "steps": self.engine.steps,
                # The engine's own schedule error per step (most recent 2000 steps): wake-up - deadline, last
                # write - deadline, CPU seconds spent writing, chunks written.
                "lateness_s": [list(x) for x in self.engine.lateness],
            }
        )

    # ---- generation ----
    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _generate(self, request: web.Request, *, chat: bool) -> web.StreamResponse:
        try:
            body = await read_body(request)
            if not self.ready:
                raise ApiError(503, "The server is starting up (compiling the model); retry when /health answers 200.")
            check_model(body, self.model_name, self.profile.errors)
            req, sink, stream = build_request(self, body, chat)
        except ApiError as e:
            return e.response(self.profile.errors)
        headers = {
            "x-spectrn-sim-accept-prob": f"{req.probs[0] if req.probs else 0.0:.6f}",
            "x-spectrn-sim-predictability": f"{predictability(req.prompt_text):.6f}",
        }
        if req.fault.error:
            status = self.settings.faults.error_status
            req.done.set_result(None)
            return ApiError(status, f"Simulated server error (fault injection, status {status})").response(
                self.profile.errors
            )
        if stream:
            assert isinstance(sink, StreamSink)
            resp = web.StreamResponse(status=200, headers={"Content-Type": SSE, **headers})
            resp.enable_chunked_encoding()
            writer = await resp.prepare(request)
            send_headers = getattr(writer, "send_headers", None)
            if send_headers is not None:
                send_headers()
            sink.transport = request.transport
            if sink.transport is not None:
                tcp_nodelay(sink.transport, True)  # every chunk leaves at once, never held back by Nagle
                sock = sink.transport.get_extra_info("socket")
                if sock is not None:
                    self.engine.attach(req, sock.fileno())
            self.engine.submit(req)
            try:
                await asyncio.shield(req.done)
            except asyncio.CancelledError:
                self.engine.cancel(req)
                raise
            # If the connection is gone (client left, or an injected disconnect), aiohttp's write_eof raises a
            # ConnectionError that it handles itself.
            return resp
        assert isinstance(sink, CollectSink)
        sink.transport = request.transport
        self.engine.submit(req)
        try:
            await asyncio.shield(req.done)
        except asyncio.CancelledError:
            self.engine.cancel(req)
            raise
        final = final_body(
            req, chat, body, profile=self.profile, model_name=self.model_name, fingerprint=self.fingerprint
        )
        return json_response(final, headers=headers)


SIM_KEY = web.AppKey("spectrn_sim", SimServer)


@web.middleware
async def _fastapi_errors(request: web.Request, handler: Any) -> web.StreamResponse:
    """Unknown paths and methods answer like vLLM's FastAPI app: ``{"detail": ...}``."""
    try:
        return await handler(request)  # type: ignore[no-any-return]
    except web.HTTPNotFound:
        return json_response({"detail": "Not Found"}, status=404)
    except web.HTTPMethodNotAllowed:
        return json_response({"detail": "Method Not Allowed"}, status=405)


def make_app(settings: SimSettings) -> web.Application:
    """The aiohttp application of one simulated vLLM server (engine starts with the app)."""
    server = SimServer(settings)
    app = web.Application(client_max_size=16 * 1024 * 1024, middlewares=[_fastapi_errors])
    app[SIM_KEY] = server
    app.on_startup.append(server.on_startup)
    app.on_cleanup.append(server.on_cleanup)
    r = app.router
    r.add_post("/v1/completions", server.completions)
    r.add_post("/v1/chat/completions", server.chat_completions)
    r.add_get("/v1/models", server.models)
    r.add_get("/health", server.health)
    r.add_get("/version", server.version)
    if settings.identity_endpoint:  # off: nothing a real server lacks tells the client what this server is
        r.add_get("/sim/identity", server.identity)
    r.add_post("/tokenize", server.tokenize)
    r.add_get("/metrics", server.metrics_endpoint)
    r.add_get("/sim/requests", server.sim_requests)
    r.add_get("/sim/info", server.sim_info)
    return app


# ---- running ------------------------------------------------------------------------------------------


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop  # optional: faster transport writes

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


class SimHandle:
    """A simulator running on its own event loop in a background thread."""

    def __init__(self, settings: SimSettings, host: str, port: int) -> None:
        self.settings = settings
        self.host = host
        self._port = port
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._main, name="spectrn-sim", daemon=True)
        self.port = 0
        self.app: web.Application | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def server(self) -> SimServer:
        assert self.app is not None
        return self.app[SIM_KEY]

    def start(self) -> SimHandle:
        self._thread.start()
        self._ready.wait(timeout=30)
        if self._error is not None:
            from spectrn.errors import SimError

            raise SimError(
                f"the simulator could not start on {self.host}:{self._port}: {self._error}",
                hint="choose another --port or free the address",
            ) from self._error
        if not self._ready.is_set():
            from spectrn.errors import SimError

            raise SimError("the simulator did not start within 30 s", hint="check the machine's load")
        return self

    def _main(self) -> None:
        loop = _new_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            self.app = make_app(self.settings)
            self._runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
            loop.run_until_complete(self._runner.setup())
            site = web.TCPSite(self._runner, self.host, self._port, reuse_address=True)
            loop.run_until_complete(site.start())
            self.port = self._runner.addresses[0][1]
        except BaseException as e:  # reported to the starting thread
            self._error = e
            if self._runner is not None:
                loop.run_until_complete(self._runner.cleanup())
            loop.close()
            self._ready.set()
            return
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(self._runner.cleanup())
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def call(self, fn: Any, *args: Any) -> Any:
        """Run ``fn(*args)`` on the simulator's loop and return its result (for tests)."""
        assert self._loop is not None
        done = threading.Event()
        box: list[Any] = []

        def run() -> None:
            box.append(fn(*args))
            done.set()

        self._loop.call_soon_threadsafe(run)
        done.wait(timeout=10)
        return box[0] if box else None

    def stop(self) -> None:
        loop = self._loop
        if loop is not None and self._thread.is_alive():
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(timeout=30)

    def __enter__(self) -> SimHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run_in_thread(settings: SimSettings, host: str = "127.0.0.1", port: int = 0) -> SimHandle:
    """Start a simulator in a background thread; use as a context manager or call ``.stop()``."""
    return SimHandle(settings, host, port).start()


def serve(settings: SimSettings, host: str = "0.0.0.0", port: int = 8000, *, log: Any = None) -> None:
    """Run a simulator in the foreground until SIGINT/SIGTERM (the container entrypoint)."""
    loop = _new_loop()
    asyncio.set_event_loop(loop)
    app = make_app(settings)
    try:
        web.run_app(app, host=host, port=port, print=log, access_log=None, loop=loop, handle_signals=True)
    except OSError as e:  # address in use, or not an address of this machine
        from spectrn.errors import SimError

        raise SimError(
            f"cannot listen on {host}:{port}: {e.strerror or e}",
            hint="choose a free --port and an address of this machine for --host (127.0.0.1, or 0.0.0.0 in a pod)",
        ) from None
