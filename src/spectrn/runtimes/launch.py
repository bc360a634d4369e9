"""The one launcher of spectrn's servers: the simulator's command line from a config, and a local server's lifetime.

Two things used to be written in several places and drifted apart (the in-cluster simulator ignored
``sim.profile``; the sweep's local servers outlived a killed sweep), so each is written once, here:

``sim_serve_args(cfg, speculative, host=..., port=...)``
    the arguments after ``spectrn`` that run the simulator for a config: render puts them in the simulator
    container, ``sim_command`` runs them on loopback (``bench --local``, ``sweep --local``). Only the address
    differs between the two.
``start_server`` / ``wait_healthy`` / ``stop_servers``
    a local server process (the simulator or real vLLM on CPU) in its own session, so its whole process group
    can be signalled; it gets SIGTERM when the process that started it dies, even by SIGKILL
    (``die_with_parent``); it is ready when ``/health`` answers 200; stopping sends SIGTERM to every group, then
    SIGKILL after the grace, and an interruption during the stop still kills every group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from spectrn.configuration.config import SpectrnConfig
from spectrn.errors import SpectrnError

LOOPBACK = "127.0.0.1"
PR_SET_PDEATHSIG = 1  # linux/prctl.h


# ---- the simulator's command line ----------------------------------------------------------------------


def _number(x: float) -> str:
    """A float as the shortest text that reads back as the same value (``1``, ``0.05``, ``0.0123456789``)."""
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


def sim_serve_args(
    cfg: SpectrnConfig,
    speculative: bool,
    *,
    host: str,
    port: int,
    time_scale: float | None = None,
    preset_file: Path | None = None,
) -> list[str]:
    """Arguments after ``spectrn`` that serve ``cfg``'s baseline or speculative service with the simulator.

    ``time_scale`` overrides ``sim.time_scale`` (``--time-scale`` of the local commands); ``preset_file`` serves
    a whole preset from a file (a twin, ``sweep --twin``). The profile is passed only when the config names one
    (``sim.profile``, or the plugin release's for vllm_dialect vllm-neuron): otherwise the preset's own."""
    scale = cfg.sim.time_scale if time_scale is None else time_scale
    args = [
        "sim", "serve",
        "--host", host,
        "--port", str(port),
        "--preset", cfg.sim.preset,
        "--time-scale", _number(scale),
        "--max-num-seqs", str(cfg.max_num_seqs),
        "--max-model-len", str(cfg.max_model_len),
    ]  # fmt: skip
    if preset_file is not None:
        args += ["--preset-file", str(preset_file)]
    if cfg.sim_profile_choice is not None:
        args += ["--profile", cfg.sim_profile_choice]
    if speculative:
        args.append("--speculative")
        if cfg.sim_draft is not None:  # else the sim preset's own draft stands in for a custom one
            args += ["--draft", cfg.sim_draft]
        args += ["--window", str(cfg.num_speculative_tokens)]
    args += ["--served-model-name", cfg.target_spec.hf_id]
    return args


def sim_command(
    cfg: SpectrnConfig,
    speculative: bool,
    port: int,
    *,
    time_scale: float | None = None,
    preset_file: Path | None = None,
) -> list[str]:
    """The whole command line of a local simulator on loopback: this Python running ``sim_serve_args``."""
    if preset_file is not None:
        preset_file = preset_file.absolute()  # the server may run elsewhere; the file must still be found
    args = sim_serve_args(cfg, speculative, host=LOOPBACK, port=port, time_scale=time_scale, preset_file=preset_file)
    return [sys.executable, "-m", "spectrn", *args]


# ---- a local server's lifetime ---------------------------------------------------------------------------


def free_port() -> int:
    """A TCP port on loopback that the OS says is free now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def die_with_parent() -> Callable[[], None] | None:
    """A ``preexec_fn`` for the servers spectrn starts: the child gets SIGTERM when this process dies, even by
    SIGKILL, so no server outlives the command that started it (Linux ``PR_SET_PDEATHSIG``; None elsewhere).

    The signal follows the *thread* that forks, so it is only set from the main thread (which lives as long as
    the process); a child whose parent is already gone when it starts exits at once."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl  # loaded here, in the parent: the child only calls it
    parent = os.getpid()

    def child() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if os.getppid() != parent:  # died between fork and prctl
            os._exit(1)

    return child


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of a process group, from /proc (empty where there is no /proc)."""
    members = []
    try:
        entries = list(Path("/proc").iterdir())
    except OSError:
        return []
    for entry in entries:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid pgrp ..." where comm may contain spaces and parentheses
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def log_tail(log: Path, lines: int = 25) -> str:
    """The last non-empty lines of a server's log, without progress-bar lines (``it/s]``)."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    kept = [ln for ln in text.splitlines() if ln.strip() and "it/s]" not in ln]
    return "\n".join(kept[-lines:])[-4000:]


@dataclass(eq=False)
class LocalServer:
    """One server process spectrn started: the leader of its own process group, its URL and its log."""

    name: str  # "simulator baseline", "vLLM speculative": how messages name it
    url: str
    proc: subprocess.Popen[bytes]
    log: Path
    started_at: float  # time.monotonic() at launch
    healthy: bool = False
    startup_s: float | None = None  # seconds from launch to the first 200 on /health

    @property
    def pgid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        """Whether anything of the server's process group still runs (its leader, or children it left)."""
        self.proc.poll()  # reap the leader as soon as it exits: a zombie is not alive
        if Path("/proc").is_dir():
            return bool(group_members(self.pgid))
        return self.proc.returncode is None


def start_server(
    name: str,
    cmd: Sequence[str],
    port: int,
    log: Path,
    *,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    append: bool = False,
) -> LocalServer:
    """Start ``cmd`` (which must serve on loopback ``port``) in its own session, output to ``log`` (``append``:
    after what a previous run of the same server wrote), dying with this process. Not waited for: see
    ``wait_healthy``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab" if append else "wb") as f:
        proc = subprocess.Popen(
            list(cmd),
            cwd=cwd,
            stdout=f,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=env if env is not None else {**os.environ, "PYTHONUNBUFFERED": "1"},
            preexec_fn=die_with_parent(),  # noqa: PLW1509 (async-signal-safe enough: one prctl call)
        )
    return LocalServer(name, f"http://{LOOPBACK}:{port}", proc, log, time.monotonic())


def _answers_health(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:  # noqa: S310 - a loopback URL we built
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def wait_healthy(
    servers: Sequence[LocalServer],
    timeout_s: float,
    *,
    error: type[SpectrnError],
    exited_hint: Callable[[LocalServer], str],
    slow_hint: str,
    poll_s: float = 0.1,
) -> None:
    """Wait until every server answers 200 on ``/health``; raise ``error`` (with the server's log tail) when one
    exits or ``timeout_s`` passes first. The caller stops the servers (``stop_servers``) on that error."""
    deadline = time.monotonic() + timeout_s
    pending = [s for s in servers if not s.healthy]
    while pending:
        for server in list(pending):
            if server.proc.poll() is not None:
                raise error(
                    f"{server.name} server ({server.url}) exited with code {server.proc.returncode} during "
                    f"start-up; last lines of {server.log}:\n{log_tail(server.log)}",
                    hint=exited_hint(server),
                )
            if _answers_health(server.url):
                server.healthy = True
                server.startup_s = round(time.monotonic() - server.started_at, 1)
                pending.remove(server)
        if pending and time.monotonic() > deadline:
            server = pending[0]
            raise error(
                f"{server.name} server ({server.url}) not healthy after {timeout_s:g}s; last lines of "
                f"{server.log}:\n{log_tail(server.log)}",
                hint=slow_hint,
            )
        if pending:
            time.sleep(poll_s)


def stop_servers(servers: Sequence[LocalServer], *, grace_s: float, starting_grace_s: float | None = None) -> None:
    """Stop every server's whole process group, even when Ctrl-C or SIGTERM interrupts the stop itself.

    All groups get SIGTERM first (they shut down in parallel); a group still running after its grace gets
    SIGKILL (``starting_grace_s``: the shorter grace of a server that never became healthy, for servers that
    ignore SIGTERM while starting up). Returns once every group is gone (or 10 s after the last SIGKILL). An
    interruption while waiting SIGKILLs every group and is re-raised at the end."""
    servers = list(servers)
    now = time.monotonic()
    deadlines: dict[int, float] = {}
    for server in servers:
        _signal_group(server.pgid, signal.SIGTERM)
        grace = grace_s
        if not server.healthy and starting_grace_s is not None:
            grace = min(grace_s, starting_grace_s)
        deadlines[server.pgid] = now + grace
    interrupted: BaseException | None = None
    try:
        pending = list(servers)
        while pending:
            for server in list(pending):
                if not server.alive():
                    pending.remove(server)
                elif time.monotonic() >= deadlines[server.pgid]:
                    _signal_group(server.pgid, signal.SIGKILL)
                    pending.remove(server)
            if pending:
                time.sleep(0.05)
        # After SIGKILL, wait (briefly) until the processes are really gone (their memory given back, their
        # ports free) before returning.
        settle = time.monotonic() + 10
        while any(s.alive() for s in servers) and time.monotonic() < settle:
            time.sleep(0.05)
    except BaseException as e:
        interrupted = e
        for server in servers:
            _signal_group(server.pgid, signal.SIGKILL)
    for server in servers:
        try:
            server.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        except BaseException as e:  # a second interruption: the groups already have SIGKILL
            interrupted = interrupted or e
    if interrupted is not None:
        raise interrupted
