"""Writer processes: a step's chunks leave from several processes at once, each at the step's deadline.

Why. One event loop writes a step's chunks one after another, and each write costs ~10 us of CPU on loopback
(the sender also runs the receiver's TCP processing), so at 256 streams the last chunk of a step left ~3 ms
after the first, and twice that when the writing thread was preempted midway. A process has its own
interpreter and GIL, so a writer process writes its share of the streams in parallel with the engine's own
process.

How. When a stream's headers are sent, the engine may hand it to a writer: it passes a duplicate of the
socket's file descriptor (``SCM_RIGHTS`` over a ``SOCK_SEQPACKET`` socket pair). For every step the engine
sends each writer, *before* sleeping until the deadline, the deadline and the pre-encoded bytes of its
streams; the writer sleeps until the deadline (``time.sleep``, then a short spin of its own, which costs the
engine nothing), writes every chunk with non-blocking ``os.write`` (a slow reader's leftover is kept and
flushed when its socket is writable, in order) and answers with each chunk's write time (the ground truth's
``written``) and whether the peer was gone. The engine finishes a handed-off request only after that answer,
so aiohttp's terminating chunk never overtakes the last data chunk, and then tells the writer to close its
descriptor. Streams with a planned mid-stream disconnect stay in the engine's process.

Messages (pickled tuples, one per datagram): engine -> writer ``("open", sid)`` with the descriptor,
``("step", step, deadline, [(sid, bytes), ...])``, ``("close", sid)``, ``("quit",)``; writer -> engine
``("done", step, [(sid, written_at, ok), ...])``.
"""

from __future__ import annotations

import array
import contextlib
import multiprocessing as mp
import os
import pickle
import selectors
import socket
import time
from collections.abc import Callable
from typing import Any

MAX_MESSAGE = 8 * 1024 * 1024  # one step for one writer: a few hundred chunks of a few hundred bytes
SPIN_S = 0.0001  # the writer sleeps with a 1 us timer slack, so a short spin is enough


def _fine_timer_slack() -> None:
    """Let ``time.sleep`` wake within microseconds instead of the default 50 us (prctl PR_SET_TIMERSLACK)."""
    import ctypes
    import sys

    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(29, 1000, 0, 0, 0)


def request_short_slice(slice_ns: int = 100_000) -> bool:
    """Ask the kernel for short scheduler slices for the calling thread (Linux >= 6.12, EEVDF).

    A thread with a shorter requested slice gets earlier virtual deadlines: it runs soon after it wakes and is
    not preempted by tasks woken by its own writes, which matters when a burst of writes has to leave at once.
    It changes neither the policy (SCHED_OTHER) nor the priority (nice 0) nor the CPU share. Best effort:
    False where the call is unavailable.
    """
    import ctypes
    import struct
    import sys

    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        # struct sched_attr (56 bytes): size, policy, flags, nice, priority, runtime (the slice), deadline, period,
        # util_min, util_max
        attr = ctypes.create_string_buffer(struct.pack("IIQiIQQQII", 56, 0, 0, 0, 0, slice_ns, 0, 0, 0, 0))
        sys_sched_setattr = {"x86_64": 314, "aarch64": 274}.get(os.uname().machine)
        if sys_sched_setattr is None:
            return False
        return bool(libc.syscall(sys_sched_setattr, 0, attr, 0) == 0)
    except (OSError, AttributeError):
        return False


# ---- the writer process ----------------------------------------------------------------------------------


class _Out:
    __slots__ = ("fd", "backlog")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.backlog = bytearray()


def _write(out: _Out, data: bytes) -> bool:
    """Write or queue ``data``; False if the peer is gone."""
    if out.backlog:
        out.backlog += data
        return True
    try:
        n = os.write(out.fd, data)
    except BlockingIOError:
        n = 0
    except OSError:
        return False
    if n < len(data):
        out.backlog += data[n:]
    return True


def _flush(out: _Out) -> bool:
    try:
        n = os.write(out.fd, out.backlog)
    except BlockingIOError:
        return True
    except OSError:
        return False
    del out.backlog[:n]
    return True


def writer_main(ctrl: socket.socket) -> None:
    """Entry point of a writer process: serve the engine's messages until ``quit`` or the engine is gone."""
    # A session of its own: with the kernel's autogroup scheduling a process competes for CPU as its session's
    # group, so writers in the engine's session would share one CPU share between them all.
    with contextlib.suppress(OSError):
        os.setsid()
    request_short_slice()
    _fine_timer_slack()
    ctrl.send(pickle.dumps(("ready",)))
    outs: dict[int, _Out] = {}
    sel = selectors.DefaultSelector()
    sel.register(ctrl, selectors.EVENT_READ, None)
    waiting: set[int] = set()  # sids registered for EVENT_WRITE (non-empty backlog)

    def watch_backlogs() -> None:
        for sid, out in outs.items():
            if out.backlog and sid not in waiting:
                sel.register(out.fd, selectors.EVENT_WRITE, sid)
                waiting.add(sid)

    while True:
        for key, _ in sel.select():
            if key.data is not None:  # a backlog can move
                sid = key.data
                out = outs.get(sid)
                if out is None or not _flush(out) or not out.backlog:
                    sel.unregister(key.fd)
                    waiting.discard(sid)
                continue
            fds = array.array("i")
            try:
                msg, anc, _flags, _addr = ctrl.recvmsg(MAX_MESSAGE, socket.CMSG_SPACE(fds.itemsize))
            except ConnectionError:
                return
            if not msg:
                return  # the engine is gone
            for level, kind, data in anc:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
            cmd: Any = pickle.loads(msg)
            op = cmd[0]
            if op == "step":
                _, step, deadline, chunks = cmd
                delay = deadline - time.monotonic() - SPIN_S
                if delay > 0:
                    time.sleep(delay)
                while time.monotonic() < deadline:
                    pass
                now = time.monotonic
                done = []
                for sid, data in chunks:
                    out = outs.get(sid)
                    ok = out is not None and _write(out, data)
                    done.append((sid, now(), ok))
                ctrl.send(pickle.dumps(("done", step, done), pickle.HIGHEST_PROTOCOL))
                watch_backlogs()
            elif op == "open":
                os.set_blocking(fds[0], False)
                outs[cmd[1]] = _Out(fds[0])
            elif op == "close":
                out = outs.pop(cmd[1], None)
                if out is not None:
                    if cmd[1] in waiting:
                        sel.unregister(out.fd)
                        waiting.discard(cmd[1])
                    os.close(out.fd)
            elif op == "quit":
                return


# ---- the engine's side ------------------------------------------------------------------------------------


class WriterPool:
    """Writer processes and their control sockets, used from the engine's event loop."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._ctrls: list[socket.socket] = []
        self._procs: list[Any] = []
        self._next_sid = 0
        self._load = [0] * (count + 1)  # open streams per writer; the last slot is the engine's own process
        self.opened = [0] * (count + 1)  # streams given to each, ever

    def start(self, on_done: Callable[[int, list[tuple[int, float, bool]]], None]) -> None:
        import asyncio

        ctx = mp.get_context("spawn")  # no fork of a process with an event loop and threads
        loop = asyncio.get_running_loop()
        for i in range(self.count):
            mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            for s in (mine, theirs):
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MAX_MESSAGE)
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, MAX_MESSAGE)
            proc = ctx.Process(target=writer_main, args=(theirs,), name=f"spectrn-sim-writer-{i}", daemon=True)
            proc.start()
            theirs.close()
            self._ctrls.append(mine)
            self._procs.append(proc)
        for mine in self._ctrls:
            # Serve only once every writer runs: a chunk handed to a writer still starting would leave late.
            mine.settimeout(60)
            try:
                ready = mine.recv(64)
            except TimeoutError:
                ready = b""
            if not ready or pickle.loads(ready) != ("ready",):
                from spectrn.errors import SimError

                self.stop()
                raise SimError("a writer process of the simulator did not start", hint="run with --write-workers 0")
            mine.settimeout(None)  # blocking sends (8 MiB buffers); reads only when the loop says it is readable
            loop.add_reader(mine.fileno(), self._on_readable, mine, on_done)

    @staticmethod
    def _on_readable(ctrl: socket.socket, on_done: Callable[[int, list[tuple[int, float, bool]]], None]) -> None:
        try:
            msg = ctrl.recv(MAX_MESSAGE)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            msg = b""
        if not msg:
            return
        _, step, done = pickle.loads(msg)
        on_done(step, done)

    def open(self, fd: int) -> tuple[int, int]:
        """Give a stream to the least loaded of the writers and the engine's own process: (writer index, or -1
        for the engine itself, and a stream id)."""
        w = min(range(self.count + 1), key=self._load.__getitem__)
        self._load[w] += 1
        self.opened[w] += 1
        if w == self.count:
            return -1, 0
        self._next_sid += 1
        sid = self._next_sid
        self._ctrls[w].sendmsg(
            [pickle.dumps(("open", sid))], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", [fd]))]
        )
        return w, sid

    def close(self, writer: int, sid: int) -> None:
        """The stream is over (``writer`` -1: it was the engine's own)."""
        self._load[writer] -= 1
        if writer >= 0:
            with contextlib.suppress(OSError):
                self._ctrls[writer].send(pickle.dumps(("close", sid)))

    def step(self, writer: int, step: int, deadline: float, chunks: list[tuple[int, bytes]]) -> None:
        self._ctrls[writer].send(pickle.dumps(("step", step, deadline, chunks), pickle.HIGHEST_PROTOCOL))

    def stop(self) -> None:
        import asyncio

        with contextlib.suppress(RuntimeError):
            loop = asyncio.get_running_loop()
            for c in self._ctrls:
                loop.remove_reader(c.fileno())
        for c in self._ctrls:
            with contextlib.suppress(OSError):
                c.send(pickle.dumps(("quit",)))
        for p in self._procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
        for c in self._ctrls:
            c.close()
        self._ctrls.clear()
        self._procs.clear()
