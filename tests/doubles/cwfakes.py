"""CloudWatch doubles that refuse what CloudWatch refuses (importable by test modules, unlike conftest.py).

``put_metric_data_fault`` holds PutMetricData's service-side limits, each with its source (the botocore model
``botocore/data/cloudwatch/2010-08-01/service-2.json``, the AWS API reference, and error bodies observed from the
real service; the project's research notes list them). botocore checks none of them on the client: its
``validate.py`` range check reads only ``min``. Every call is all or nothing, as on the service.

* ``FakeSink``: the ``MetricsSink`` spectrn's publisher talks to, in memory; enforces the limits and raises the
  ``PublishError`` ``Boto3Sink`` raises for a refusal.
* ``CloudWatchDouble``: a small aiohttp server speaking botocore's JSON protocol (awsJson1_0, what botocore picks
  for CloudWatch today): it enforces the limits on the wire bodies (gzip included), answers refusals the way the
  service does (JSON ``__type`` + ``x-amzn-query-error``, 413 for size), and otherwise either answers itself with
  a request id or forwards to an upstream (moto's server: a checking proxy). ``answer`` can make it answer a 2xx
  that is not CloudWatch's (an HTML page, no request id, a body that is not JSON).
"""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import math
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from spectrn.errors import PublishError

REGION = "us-east-1"

# ---- the limits --------------------------------------------------------------------------------------------

MAX_DATUMS = 1000  # model: "no more than 1000 different metrics" (MetricData + EntityMetricData; 20 before 2022)
MAX_REQUEST_BYTES = 1_000_000  # "1 MB for HTTP POST"; measured here on the uncompressed body (the safe reading)
MAX_VALUES = 150  # model: "up to 150 unique values in each PutMetricData action that specifies a Values array"
MAX_DIMENSIONS = 30  # model Dimensions "max": 30 (10 before 2022)
MAX_PAST_S = 14 * 86400  # model: timestamps "no more than two weeks in the past"
MAX_FUTURE_S = 2 * 3600  # ... "and no more than two hours in the future"
# Values: today's docs say -2^360..2^360; the older "8.515920e-109 to 1.174271e+108 (Base 10)" (2^-359..2^359 in
# magnitude) is the guard one can defend; NaN and +-Infinity are not supported.
MAX_ABS = 1.174271e108
MIN_ABS = 8.515920e-109
# StandardUnit: the 27 values of the model's enum
UNITS = (
    "Seconds Microseconds Milliseconds Bytes Kilobytes Megabytes Gigabytes Terabytes Bits Kilobits Megabits "
    "Gigabits Terabits Percent Count Bytes/Second Kilobytes/Second Megabytes/Second Gigabytes/Second "
    "Terabytes/Second Bits/Second Kilobits/Second Megabits/Second Gigabits/Second Terabits/Second Count/Second None"
).split()


@dataclass
class Fault:
    """A refusal as the service sends it: HTTP status, error code (botocore's ``Error.Code``), message."""

    status: int
    code: str
    message: str


def _ascii_text(value: Any, low: int, high: int) -> bool:
    """1..high characters, ASCII without control characters, at least one non-whitespace character."""
    return (
        isinstance(value, str)
        and low <= len(value) <= high
        and all(32 <= ord(c) < 127 for c in value)
        and bool(value.strip())
    )


def _bad_number(v: Any) -> bool:
    if not isinstance(v, int | float) or isinstance(v, bool):
        return True
    return not math.isfinite(v) or abs(v) > MAX_ABS or (v != 0 and abs(v) < MIN_ABS)


def _number_text(v: Any) -> str:
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, float) and math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return repr(v)


def put_metric_data_fault(
    namespace: Any, metric_data: list[dict[str, Any]], *, now: float, request_bytes: int
) -> Fault | None:
    """The first limit a PutMetricData call breaks (None: CloudWatch accepts it)."""

    def invalid(message: str) -> Fault:
        return Fault(400, "InvalidParameterValue", message)

    if request_bytes > MAX_REQUEST_BYTES:
        # observed (old 40 KB limit): "Request size 47947 exceeded 40960 bytes (Status Code: 413; Error Code:
        # RequestEntityTooLarge)"
        return Fault(413, "RequestEntityTooLarge", f"Request size {request_bytes} exceeded {MAX_REQUEST_BYTES} bytes")
    if not namespace:
        return Fault(400, "MissingParameter", "The parameter Namespace is required.")  # real XML, AWSSDK.jl#2
    if str(namespace).startswith("AWS/"):
        # reserved ("You cannot specify a namespace that begins with "AWS/""); wording from an AWS-compatible
        # implementation's conformance test
        return invalid("The value AWS/ for parameter Namespace is invalid.")
    if not _ascii_text(namespace, 1, 255) or str(namespace).startswith(":"):  # model: max 255, pattern [^:].*
        return invalid(f"The value {namespace} for parameter Namespace is invalid.")
    if len(metric_data) > MAX_DATUMS:
        return invalid(f"The collection MetricData must not have a size greater than {MAX_DATUMS}.")
    past: list[str] = []
    for i, d in enumerate(metric_data, 1):
        p = f"MetricData.member.{i}"
        if not _ascii_text(d.get("MetricName"), 1, 255):  # model MetricName 1..255
            return invalid(f"The value {d.get('MetricName')} for parameter {p}.MetricName is invalid.")
        has_value, has_values, has_stats = "Value" in d, "Values" in d, "StatisticValues" in d
        if has_value and has_values:
            # LocalStack snapshot recorded against AWS, all three protocols
            return Fault(
                400,
                "InvalidParameterCombination",
                f"The parameters {p}.Value and {p}.Values are mutually exclusive and you have specified both.",
            )
        if has_value and has_stats:
            return Fault(
                400,
                "InvalidParameterCombination",
                f"The parameters {p}.Value and {p}.StatisticValues are mutually exclusive and you have specified both.",
            )
        if not (has_value or has_values or has_stats):
            return Fault(
                400,
                "InvalidParameterCombination",
                f"At least one of the parameters {p}.Value and {p}.StatisticValues must be specified.",
            )
        values = d.get("Values") or []
        counts = d.get("Counts")
        if len(values) > MAX_VALUES:
            return invalid(f"The collection {p}.Values must not have a size greater than {MAX_VALUES}.")
        if counts is not None and len(counts) != len(values):
            return invalid(f"The parameters {p}.Values and {p}.Counts must be of the same size.")
        numbers = [(f"{p}.Value", d["Value"])] if has_value else []
        numbers += [(f"{p}.Values.member.{j}", v) for j, v in enumerate(values, 1)]
        numbers += [(f"{p}.Counts.member.{j}", c) for j, c in enumerate(counts or [], 1)]
        numbers += [(f"{p}.StatisticValues.{k}", v) for k, v in (d.get("StatisticValues") or {}).items()]
        for where, v in numbers:
            if _bad_number(v):
                # observed: "The value NaN for parameter MetricData.member.11.Value is invalid."
                return invalid(f"The value {_number_text(v)} for parameter {where} is invalid.")
        dims = d.get("Dimensions") or []
        if len(dims) > MAX_DIMENSIONS:
            return invalid(f"The collection {p}.Dimensions must not have a size greater than {MAX_DIMENSIONS}.")
        for j, dim in enumerate(dims, 1):
            name, value = dim.get("Name"), dim.get("Value")
            if not _ascii_text(name, 1, 255) or str(name).startswith(":"):  # model DimensionName max 255
                return invalid(f"The value {name} for parameter {p}.Dimensions.member.{j}.Name is invalid.")
            if not _ascii_text(value, 1, 1024):  # model DimensionValue max 1024
                return invalid(f"The value {value} for parameter {p}.Dimensions.member.{j}.Value is invalid.")
        unit = d.get("Unit")
        if unit is not None and unit not in UNITS:
            # real XML (collectd-cloudwatch #46): "The parameter MetricData.member.1.Unit must be a value in the set"
            return invalid(f"The parameter {p}.Unit must be a value in the set [ {', '.join(UNITS)} ].")
        resolution = d.get("StorageResolution")
        if resolution is not None and resolution not in (1, 60):  # model doc: "Valid values are 1 and 60"
            return invalid(f"The value {resolution} for parameter {p}.StorageResolution is invalid.")
        stamp = d.get("Timestamp")
        if stamp is not None:
            ts = stamp.timestamp() if isinstance(stamp, datetime) else float(stamp)
            if now - ts > MAX_PAST_S:
                past.append(f"The parameter {p}.Timestamp must specify a time within the past two weeks.")
            elif ts - now > MAX_FUTURE_S:  # exact wording of the future case not seen
                past.append(f"The parameter {p}.Timestamp must specify a time no more than two hours in the future.")
    if past:
        return invalid("\n".join(past))  # one line per bad member, joined by newlines (real XML, Diamond#372)
    return None


def json_body_bytes(namespace: str, metric_data: list[dict[str, Any]]) -> int:
    """The size of botocore's JSON-protocol body for this call (timestamps as epoch seconds), uncompressed."""

    def plain(v: Any) -> Any:
        return v.timestamp() if isinstance(v, datetime) else v

    data = [{k: plain(v) for k, v in d.items()} for d in metric_data]
    return len(json.dumps({"Namespace": namespace, "MetricData": data}).encode())


# ---- the in-memory sink --------------------------------------------------------------------------------------


class FakeSink:
    """Records every accepted call; refuses calls that break a CloudWatch limit (``faults`` keeps them), and
    fails the PutMetricData calls whose 1-based number is in ``fail_calls`` (a simulated outage)."""

    def __init__(
        self,
        fail_calls: set[int] | None = None,
        region: str = REGION,
        *,
        now: float | None = None,
        enforce: bool = True,
    ) -> None:
        self.target = f"{region}@fake"
        self.region = region
        self.fail_calls = fail_calls or set()
        self.calls: list[tuple[str, list[dict[str, Any]]]] = []
        self.attempts = 0
        self.dashboards: dict[str, str] = {}
        self.faults: list[Fault] = []
        self.now = now
        self.enforce = enforce

    def put_metric_data(self, namespace: str, metric_data: list[dict[str, Any]]) -> None:
        self.attempts += 1
        if self.attempts in self.fail_calls:
            raise PublishError("PutMetricData failed: InternalFailure: simulated outage")
        if self.enforce:
            fault = put_metric_data_fault(
                namespace,
                metric_data,
                now=time.time() if self.now is None else self.now,
                request_bytes=json_body_bytes(namespace, metric_data),
            )
            if fault is not None:
                self.faults.append(fault)
                raise PublishError(f"PutMetricData failed: {fault.code}: {fault.message}")  # as Boto3Sink words it
        self.calls.append((namespace, metric_data))

    def put_dashboard(self, name: str, body: str) -> list[str]:
        self.dashboards[name] = body
        return []


# ---- the wire double -----------------------------------------------------------------------------------------

TARGET_PREFIX = "GraniteServiceVersion20100801."


@dataclass
class Seen:
    operation: str
    body: dict[str, Any]
    status: int


@dataclass
class CloudWatchDouble:
    """See the module docstring. ``answer``: ``ok`` (a well-formed answer), ``html`` (200 text/html, as a proxy's
    error page), ``no-request-id`` (200 JSON without x-amzn-RequestId), ``not-json`` (200 with a request id and
    a body that is not JSON)."""

    upstream: str | None = None
    answer: str = "ok"
    max_request_bytes: int = MAX_REQUEST_BYTES
    now: float | None = None
    seen: list[Seen] = field(default_factory=list)
    accepted: list[dict[str, Any]] = field(default_factory=list)  # PutMetricData bodies answered 2xx
    body_sizes: list[int] = field(default_factory=list)  # uncompressed PutMetricData bodies, as received
    url: str = ""

    def __post_init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: Any = None

    def __enter__(self) -> CloudWatchDouble:
        from aiohttp import web

        self._thread.start()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/{tail:.*}", self._handle)

        async def start() -> str:
            self._runner = web.AppRunner(app, access_log=None)
            await self._runner.setup()
            site = web.TCPSite(self._runner, "127.0.0.1", 0)
            await site.start()
            port = self._runner.addresses[0][1]
            return f"http://127.0.0.1:{port}"

        self.url = asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def metric_calls(self) -> list[dict[str, Any]]:
        return [s.body for s in self.seen if s.operation == "PutMetricData"]

    async def _handle(self, request: Any) -> Any:
        from aiohttp import web

        raw = await request.read()  # aiohttp undoes Content-Encoding: gzip itself
        body = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        operation = request.headers.get("X-Amz-Target", "").removeprefix(TARGET_PREFIX)
        try:
            payload = json.loads(body) if body else {}
        except ValueError:
            payload = {}
        if operation == "PutMetricData":
            self.body_sizes.append(len(body))
            if len(body) > self.max_request_bytes:  # the uncompressed body, whatever the transfer encoding
                fault: Fault | None = Fault(
                    413, "RequestEntityTooLarge", f"Request size {len(body)} exceeded {self.max_request_bytes} bytes"
                )
            else:
                fault = put_metric_data_fault(
                    payload.get("Namespace"),
                    list(payload.get("MetricData") or []),
                    now=time.time() if self.now is None else self.now,
                    request_bytes=0,
                )
            if fault is not None:
                self.seen.append(Seen(operation, payload, fault.status))
                # json/cbor error shape: {"__type": "...#<Code>Exception", "message"} plus x-amzn-query-error, which
                # botocore maps back to the query code (Error.Code)
                error = {"__type": f"com.amazonaws.cloudwatch#{fault.code}Exception", "message": fault.message}
                return web.json_response(
                    error,
                    status=fault.status,
                    content_type="application/x-amz-json-1.0",
                    headers={"x-amzn-query-error": f"{fault.code};Sender", "x-amzn-RequestId": str(uuid.uuid4())},
                )
        if self.answer != "ok":
            self.seen.append(Seen(operation, payload, 200))
            if self.answer == "html":
                page = "<html><body>Welcome to nginx</body></html>"
                return web.Response(status=200, text=page, content_type="text/html")
            if self.answer == "no-request-id":
                return web.Response(status=200, body=b"{}", content_type="application/x-amz-json-1.0")
            return web.Response(
                status=200,
                body=b"OK",
                content_type="application/x-amz-json-1.0",
                headers={"x-amzn-RequestId": str(uuid.uuid4())},
            )
        if self.upstream is not None:
            status, headers, data = await self._forward(request, body)
        else:
            status, data = 200, (b'{"DashboardValidationMessages":[]}' if operation == "PutDashboard" else b"{}")
            headers = {"Content-Type": "application/x-amz-json-1.0", "x-amzn-RequestId": str(uuid.uuid4())}
        self.seen.append(Seen(operation, payload, status))
        if operation == "PutMetricData" and 200 <= status < 300:
            self.accepted.append(payload)
        return web.Response(status=status, body=data, headers=headers)

    async def _forward(self, request: Any, body: bytes) -> tuple[int, dict[str, str], bytes]:
        import aiohttp

        skip = {"host", "content-length", "transfer-encoding", "connection", "content-encoding"}
        headers = {k: v for k, v in request.headers.items() if k.lower() not in skip}
        async with aiohttp.ClientSession() as session:
            async with session.post(self.upstream + request.path_qs, data=body, headers=headers) as resp:
                data = await resp.read()
                keep = {k: v for k, v in resp.headers.items() if k.lower() not in skip | {"server", "date"}}
                return resp.status, keep, data


# decide(n) for the n-th PutMetricData call (0-based): None forwards it, (status, code, message) refuses it.
Decide = Callable[[int], tuple[int, str, str] | None]


class CloudWatchProxy:
    """A real local CloudWatch (moto) behind a proxy that refuses the PutMetricData calls ``decide`` picks and
    records a digest of every call it forwards and CloudWatch accepted."""

    def __init__(self, upstream: str, decide: Decide) -> None:
        self.upstream, self.decide = upstream, decide
        self.calls = 0
        self.refused = 0
        self.forwarded = 0
        self.batches: list[str] = []  # digest of every PutMetricData body CloudWatch accepted, in order
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:
                declared = int(self.headers.get("Content-Length", 0))
                body = self.rfile.read(declared)
                if len(body) < declared:  # the client died mid-body: a real endpoint never processes a torn request
                    self.close_connection = True
                    return
                raw = gzip.decompress(body) if self.headers.get("Content-Encoding") == "gzip" else body
                is_put = "PutMetricData" in self.path + str(self.headers.get("X-Amz-Target")) or b"PutMetricData" in raw
                if is_put:
                    n, proxy.calls = proxy.calls, proxy.calls + 1
                    refusal = proxy.decide(n)
                    if refusal is not None:
                        proxy.refused += 1
                        status, code, message = refusal
                        payload = json.dumps({"__type": code, "message": message}).encode()
                        self._send(status, {"Content-Type": "application/json"}, payload)
                        return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                req = urllib.request.Request(proxy.upstream + self.path, data=body, headers=headers, method="POST")
                try:
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        status, rheaders, data = resp.status, resp.headers, resp.read()
                except urllib.error.HTTPError as e:
                    status, rheaders, data = e.code, e.headers, e.read()
                if is_put and status == 200:
                    proxy.forwarded += 1
                    proxy.batches.append(hashlib.sha256(raw).hexdigest())  # gzip's header varies, its content not
                skip = ("content-length", "transfer-encoding", "connection", "server", "date")
                self._send(status, {k: v for k, v in rheaders.items() if k.lower() not in skip}, data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> CloudWatchProxy:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)
