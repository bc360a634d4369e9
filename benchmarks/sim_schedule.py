"""Does the simulator keep its schedule under load? Chunk arrival time minus scheduled emission time.

The simulator runs in its own process (``python -m spectrn sim serve``, time scale 1, max_num_seqs >= the
number of streams); this process opens N streaming requests at once with a small raw-socket client
(non-blocking sockets + epoll, no HTTP library), timestamps every SSE content event on arrival with
``time.monotonic()`` (the same clock the simulator schedules on), then fetches the simulator's own record of
each chunk's scheduled and actual write time from ``GET /sim/requests`` and reports deviations from the
scheduled time, p50 / p99 / max per concurrency level:

- ``arrival``: kernel receive timestamp of the bytes (SO_TIMESTAMPNS), free of this client's own delays;
- ``read``: when this client's ``recvmsg`` returned (includes its scheduling on a busy machine);
- ``written``: when the simulator handed the chunk to its socket (the simulator's own lateness).

"steady state" leaves out the chunks scheduled before every stream had its first token (the burst of
simultaneous connections is accepted and parsed on the simulator's event loop, which delays the first steps).

What to expect. Every chunk costs ~10-12 us of CPU to write on loopback (the sender also pays for the
receiver's TCP processing), so at 256 streams a step's chunks are 2.6-3 ms of CPU. From a batch limit of 192 the
simulator spreads them over two writer processes plus its own (``--write-workers``). Measured on the 2-CPU
shared development VM (other jobs kept ~1.3 CPUs busy), 128 tokens per stream, speculative, steady state,
median of 5 runs, deviation of the write time p50 / p99: 1 stream 0.26 / 2.45 ms (25 chunks: p99 is the worst
one), 64 streams 0.92 / 2.24 ms, 256 streams 1.94 / 6.16 ms (2.78 / 6.45 ms before the writer processes). See
docs/simulator.md, "Keeping time at 256 streams".

    .venv/bin/python benchmarks/sim_schedule.py                  # 1, 64, 256 streams, speculative
    .venv/bin/python benchmarks/sim_schedule.py --streams 256 --max-tokens 128 --baseline --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Stream:
    sock: socket.socket
    reads: list[tuple[float, float, bytes]] = field(default_factory=list)  # (read time, kernel time, bytes)
    rid: str | None = None
    arrivals: list[tuple[float, float]] = field(default_factory=list)  # (read, kernel) per content event


SO_TIMESTAMPNS = 35  # Linux SO_TIMESTAMPNS(_OLD): CLOCK_REALTIME receive time as (sec, nsec)


def _realtime_offset() -> float:
    """CLOCK_REALTIME - CLOCK_MONOTONIC, from the tightest of several paired readings."""
    best = (float("inf"), 0.0)
    for _ in range(50):
        a = time.monotonic()
        r = time.time()
        b = time.monotonic()
        best = min(best, (b - a, r - (a + b) / 2))
    return best[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get_json(url: str) -> object:
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.loads(r.read())


def _wait_healthy(base: str, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"simulator exited with code {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("simulator did not become healthy")


def _parse(s: Stream) -> None:
    """After the run: split the recorded reads into HTTP chunks and SSE events; time each content event.

    An event's arrival time is that of the read that completed it. Parsing happens after the run so the
    receive loop does nothing but recv and timestamp.
    """
    buf = bytearray()
    body = bytearray()
    headers_done = False
    for t_read, t_kernel, data in s.reads:
        buf += data
        if not headers_done:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                continue
            status = bytes(buf[: buf.find(b"\r\n")])
            if b" 200 " not in status:
                raise SystemExit(f"unexpected response: {bytes(buf[:300])!r}")
            del buf[: end + 4]
            headers_done = True
        while True:
            nl = buf.find(b"\r\n")
            if nl < 0:
                break
            size = int(bytes(buf[:nl]), 16)
            if len(buf) < nl + 2 + size + 2:
                break
            body += buf[nl + 2 : nl + 2 + size]
            del buf[: nl + 2 + size + 2]
            while True:
                sep = body.find(b"\n\n")
                if sep < 0:
                    break
                event = bytes(body[:sep])
                del body[: sep + 2]
                if event == b"data: [DONE]":
                    continue
                payload = json.loads(event[6:])
                if s.rid is None:
                    s.rid = payload["id"]
                if payload["choices"]:
                    s.arrivals.append((t_read, t_kernel))


def run_level(base: str, port: int, streams: int, max_tokens: int, prompt: str) -> dict[str, object]:
    body = json.dumps(
        {
            "prompt": prompt,
            "max_tokens": max_tokens,
            "ignore_eos": True,
            "temperature": 0,
            "stream": True,
        }
    ).encode()
    request = (
        b"POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nConnection: close\r\n\r\n%b" % (len(body), body)
    )
    sel = selectors.DefaultSelector()
    all_streams = []
    for _ in range(streams):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)  # kernel receive time of each read
        all_streams.append(Stream(sock))
    for s in all_streams:
        s.sock.sendall(request)
        s.sock.setblocking(False)
        sel.register(s.sock, selectors.EVENT_READ, s)
    open_count = streams
    now = time.monotonic
    offset = _realtime_offset()
    cmsg_size = socket.CMSG_SPACE(16)
    while open_count:
        for key, _ in sel.select(timeout=30):
            s = key.data
            try:
                data, anc, _flags, _addr = s.sock.recvmsg(262144, cmsg_size)
            except BlockingIOError:
                continue
            t_read = now()
            if not data:
                sel.unregister(s.sock)
                s.sock.close()
                open_count -= 1
                continue
            t_kernel = t_read
            for level, kind, raw in anc:
                if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS:
                    sec, nsec = struct.unpack("qq", raw[:16])
                    t_kernel = sec + nsec * 1e-9 - offset
            s.reads.append((t_read, t_kernel, data))
    sel.close()
    for s in all_streams:
        _parse(s)
    truth = _get_json(f"{base}/sim/requests")
    by_id = {r["id"]: r for r in truth["requests"]}  # type: ignore[index]
    # Steady state starts once every stream has its first token: before that the server is also accepting and
    # parsing the burst of simultaneous requests on the same event loop.
    steady_from = max(by_id[s.rid]["chunks"][0]["t"] for s in all_streams)
    rows: list[tuple[float, float, float, float, int]] = []  # (scheduled, written, kernel, read, tokens)
    for s in all_streams:
        chunks = by_id[s.rid]["chunks"]
        if len(chunks) != len(s.arrivals):
            raise SystemExit(f"{s.rid}: {len(s.arrivals)} events received, {len(chunks)} scheduled")
        for c, (t_read, t_kernel) in zip(chunks, s.arrivals, strict=True):
            rows.append((c["t"], c["written"], t_kernel, t_read, c["n"]))
    info = _get_json(f"{base}/sim/info")
    lateness = info["lateness_s"]  # type: ignore[index]
    write_cpu_us = 1e6 * sum(x[2] for x in lateness) / max(1, sum(x[3] for x in lateness))

    def devs(selected: list[tuple[float, float, float, float, int]]) -> dict[str, dict[str, float]]:
        return {
            "arrival": _summary([k - t for t, _, k, _, _ in selected]),
            "read": _summary([r - t for t, _, _, r, _ in selected]),
            "written": _summary([w - t for t, w, _, _, _ in selected]),
        }

    steady = [r for r in rows if r[0] > steady_from]
    return {
        "streams": streams,
        "chunks": len(rows),
        "steady_chunks": len(steady),
        "steps": info["steps"],  # type: ignore[index]
        "tokens_per_chunk_mean": round(statistics.fmean(r[4] for r in rows), 3),
        "write_cpu_us_per_chunk": round(write_cpu_us, 2),
        "deviation_ms": devs(rows),
        "steady_deviation_ms": devs(steady) if steady else None,
    }


def _summary(values: list[float]) -> dict[str, float]:
    v = sorted(values)

    def q(p: float) -> float:
        return round(1000 * v[min(len(v) - 1, int(p * len(v)))], 3)

    return {"p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": round(1000 * v[-1], 3), "min": round(1000 * v[0], 3)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, nargs="+", default=[1, 64, 256])
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--baseline", action="store_true", help="Serve without speculation (one token per chunk).")
    ap.add_argument("--time-scale", type=float, default=1.0)
    ap.add_argument("--prompt", default="counting numbers from 1 " * 8)
    ap.add_argument("--json", type=Path, help="Also write the results here.")
    ap.add_argument(
        "--realtime",
        action="store_true",
        help="Run the simulator under SCHED_FIFO (chrt -f 10; needs privileges): shows its own limit on a busy host.",
    )
    ap.add_argument(
        "--write-workers",
        type=int,
        default=None,
        help="Writer processes of the simulator (default: its own choice, 2 from 192 streams on 2+ CPUs).",
    )
    ap.add_argument(
        "--nice",
        type=int,
        default=0,
        help="Run the simulator at this niceness (negative needs privileges): isolates it from other load.",
    )
    args = ap.parse_args()
    results = []
    for n in args.streams:
        port = _free_port()
        cmd = [sys.executable, "-m", "spectrn", "sim", "serve", "--port", str(port)]
        cmd += ["--max-num-seqs", str(max(n, 4)), "--time-scale", repr(args.time_scale), "--max-model-len", "4096"]
        if not args.baseline:
            cmd += ["--speculative"]
        if args.write_workers is not None:
            cmd += ["--write-workers", str(args.write_workers)]
        if args.nice:
            cmd = ["nice", "-n", str(args.nice), *cmd]
        if args.realtime:
            cmd = ["chrt", "-f", "10", *cmd]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(base, proc)
            res = run_level(base, port, n, args.max_tokens, args.prompt)
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=30)
        res["mode"] = "baseline" if args.baseline else "speculative"
        res["time_scale"] = args.time_scale
        res["nice"] = args.nice
        res["realtime"] = args.realtime
        res["load_average_1m"] = os.getloadavg()[0]
        results.append(res)
        print(
            f"{n:>4} streams (load {res['load_average_1m']:.1f}): {res['chunks']} chunks "
            f"({res['steady_chunks']} steady), "
            f"{res['tokens_per_chunk_mean']:.2f} tokens/chunk, {res['write_cpu_us_per_chunk']:.1f} us CPU per write",
            flush=True,
        )
        for label, key in (("all chunks", "deviation_ms"), ("steady state", "steady_deviation_ms")):
            d = res[key]
            if not d:
                continue
            line = f"      {label:<12}"
            for what in ("arrival", "read", "written"):
                x = d[what]  # type: ignore[index]
                line += f" | {what} p50 {x['p50']:6.3f} p99 {x['p99']:6.3f} max {x['max']:7.3f}"
            print(line + "  (ms)", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
