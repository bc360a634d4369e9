"""A small Kubernetes API server double on 127.0.0.1 (stdlib only), to drive ``RealKube`` over real HTTP.

It keeps objects by URL path, pages lists two items at a time (so ``continue`` tokens are exercised),
answers Status bodies for errors as the real API server does, streams watch events line by line, and
records every request so tests can check methods, paths, query strings, headers and bodies.

``pods/<name>/exec`` speaks the WebSocket channel protocol (``v4.channel.k8s.io``): ``exec_handler``
maps the command to (stdout, stderr, exit code); stdout goes out in several frames, the exit status as a
Status on channel 3, as the kubelet does.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit


@dataclass
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class MockApiServer:
    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.requests: list[Seen] = []
        self.forbidden: set[str] = set()
        self.watch_events: list[dict[str, Any]] = []
        # the watch stream as raw bytes instead of one line per event, cut into HTTP chunks of this size
        self.watch_body: bytes | None = None
        self.watch_chunk = 0
        self.watch_cut = False  # the connection drops in the middle of a chunk
        # (code, reason, message) instead of the upgrade: a Status, or with a message of bytes that raw body
        self.exec_refusal: tuple[int, str, str | bytes] | None = None
        self.exec_hold: threading.Event | None = None  # when set, the command runs on until the event (or 10 s)
        self.logs: dict[str, str | bytes] = {}
        self.events: list[dict[str, Any]] = []
        self.rv = 10
        self.exec_handler: Any = lambda command: (b"", b"", 0)
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> MockApiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        mock = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, payload: Any, ctype: str = "application/json") -> None:
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _record(self) -> tuple[str, dict[str, list[str]], Any]:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body: Any = json.loads(raw) if raw else None
                headers = {k.lower(): v for k, v in self.headers.items()}
                mock.requests.append(Seen(self.command, parts.path, parse_qs(parts.query), headers, body))
                return parts.path, parse_qs(parts.query), body

            def _exec(self, query: dict[str, list[str]]) -> None:
                key = self.headers["Sec-WebSocket-Key"]
                accept = base64.b64encode(
                    hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()
                ).decode()
                self.wfile.write(
                    b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                    + f"Sec-WebSocket-Accept: {accept}\r\nSec-WebSocket-Protocol: v4.channel.k8s.io\r\n\r\n".encode()
                )
                out, err, rc = mock.exec_handler(query.get("command", []))
                for i in range(0, len(out), 1000):  # several frames, as long output arrives
                    self._frame(0x2, b"\x01" + out[i : i + 1000])
                if err:
                    self._frame(0x2, b"\x02" + err)
                if mock.exec_hold is not None:
                    self.wfile.flush()
                    mock.exec_hold.wait(10)
                if rc == 0:
                    status: dict[str, Any] = {"metadata": {}, "status": "Success"}
                else:
                    status = {
                        "metadata": {},
                        "status": "Failure",
                        "reason": "NonZeroExitCode",
                        "details": {"causes": [{"reason": "ExitCode", "message": str(rc)}]},
                    }
                self._frame(0x2, b"\x03" + json.dumps(status).encode())
                self._frame(0x8, struct.pack("!H", 1000))
                self.wfile.flush()
                self.close_connection = True

            def _frame(self, opcode: int, payload: bytes) -> None:
                n = len(payload)
                if n < 126:
                    head = struct.pack("!BB", 0x80 | opcode, n)
                elif n < 65536:
                    head = struct.pack("!BBH", 0x80 | opcode, 126, n)
                else:
                    head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
                self.wfile.write(head + payload)

            def do_GET(self) -> None:  # noqa: N802
                path, query, _ = self._record()
                if path.endswith("/exec") and self.headers.get("Upgrade", "").lower() == "websocket":
                    if mock.exec_refusal:
                        code, reason, message = mock.exec_refusal
                        self.close_connection = True
                        if isinstance(message, bytes):
                            return self._send(code, message, "text/plain")
                        return self._send(code, status_body(code, reason, message))
                    return self._exec(query)
                if path == "/api":
                    return self._send(200, {"kind": "APIVersions", "versions": ["v1"]})
                if path == "/apis":
                    groups = [
                        {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}]},
                        {"name": "resource.k8s.io", "versions": [{"groupVersion": "resource.k8s.io/v1beta1"}]},
                    ]
                    return self._send(200, {"kind": "APIGroupList", "groups": groups})
                if path == "/apis/example.com/v1":
                    return self._send(
                        200,
                        {
                            "resources": [
                                {"name": "widgets", "kind": "Widget", "namespaced": True},
                                {"name": "widgets/status", "kind": "Widget", "namespaced": True},
                            ]
                        },
                    )
                if path.endswith("/log"):
                    text = mock.logs.get(path, "")
                    if isinstance(text, bytes):  # raw bytes, as the kubelet streams them
                        return self._send(200, text, "text/plain")
                    if "tailLines" in query:
                        text = "\n".join(text.splitlines()[-int(query["tailLines"][0]) :]) + "\n"
                    return self._send(200, text.encode(), "text/plain")
                if query.get("watch") == ["true"]:
                    return self._watch()
                if path.endswith("/events") and "fieldSelector" in query:
                    return self._send(200, {"kind": "EventList", "items": mock.events, "metadata": {}})
                if path in mock.objects:
                    return self._send(200, mock.objects[path])
                prefix = path.rstrip("/") + "/"
                items = [
                    o for p, o in sorted(mock.objects.items()) if p.startswith(prefix) and "/" not in p[len(prefix) :]
                ]
                if items or path.endswith("s"):
                    sel = (query.get("labelSelector") or [""])[0]
                    if sel:
                        k, _, v = sel.partition("=")
                        items = [o for o in items if (o["metadata"].get("labels") or {}).get(k) == v]
                    start = int((query.get("continue") or ["0"])[0])
                    page = items[start : start + 2]
                    meta: dict[str, Any] = {"resourceVersion": str(mock.rv)}
                    if start + 2 < len(items):
                        meta["continue"] = str(start + 2)
                    # list items carry neither apiVersion nor kind, as on a real server
                    page = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in page]
                    return self._send(200, {"kind": "List", "items": page, "metadata": meta})
                name = path.rsplit("/", 1)[-1]
                return self._send(404, status_body(404, "NotFound", f'the object "{name}" was not found'))

            def _watch(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                if mock.watch_body is None:
                    chunks = [json.dumps(ev).encode() + b"\n" for ev in mock.watch_events]
                else:
                    size = mock.watch_chunk or len(mock.watch_body)
                    chunks = [mock.watch_body[i : i + size] for i in range(0, len(mock.watch_body), size)]
                for chunk in chunks:
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                if mock.watch_cut:
                    self.wfile.write(b'100\r\n{"type": ')
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(b"0\r\n\r\n")

            def do_PATCH(self) -> None:  # noqa: N802
                path, query, body = self._record()
                name = path.rsplit("/", 1)[-1]
                if path.endswith("/status"):
                    node = mock.objects.setdefault(path.removesuffix("/status"), {"metadata": {"name": name}})
                    return self._send(200, node)
                if name in mock.forbidden:
                    msg = f'deployments.apps "{name}" is forbidden: User "dev" cannot patch resource "deployments"'
                    return self._send(403, status_body(403, "Forbidden", msg))
                mock.rv += 1
                stored = dict(body)
                stored["metadata"] = dict(body["metadata"], resourceVersion=str(mock.rv))
                mock.objects[path] = stored
                return self._send(200, stored)

            def do_DELETE(self) -> None:  # noqa: N802
                path, _, _ = self._record()
                if mock.objects.pop(path, None) is None:
                    return self._send(404, status_body(404, "NotFound", "not found"))
                return self._send(200, {"kind": "Status", "status": "Success"})

            def do_POST(self) -> None:  # noqa: N802
                path, _, body = self._record()
                if path.endswith("selfsubjectaccessreviews"):
                    attrs = body["spec"]["resourceAttributes"]
                    allowed = attrs["verb"] != "delete"
                    return self._send(201, dict(body, status={"allowed": allowed}))
                return self._send(405, status_body(405, "MethodNotAllowed", "no"))

        return Handler
