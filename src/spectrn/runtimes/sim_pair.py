"""Local runtime ``sim``: a baseline and a speculative simulated Neuron vLLM server on loopback.

Each server runs in its own process (``python -m spectrn sim serve``), so the load generator's own CPU
use never delays the servers' schedule and vice versa. Free ports are chosen by the OS; the context
manager waits for ``/health`` and stops both servers (SIGTERM, then SIGKILL) whatever happens.
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
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from spectrn.errors import SimError
from spectrn.spec.config import SpectrnConfig


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


PR_SET_PDEATHSIG = 1  # linux/prctl.h


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


def terminate(proc: subprocess.Popen[bytes], grace_s: float = 5.0) -> None:
    """SIGTERM the process group, then SIGKILL it after ``grace_s``; a no-op for a finished process."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=grace_s)


def wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(encoding="utf-8", errors="replace")[-2000:] if log.exists() else ""
            raise SimError(f"server for {url} exited with code {proc.returncode} during start-up:\n{tail}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise SimError(f"server {url} not healthy after {timeout_s:g}s", hint=f"see its log {log}")


def sim_profile(cfg: SpectrnConfig) -> str:
    """The server profile the simulator runs for ``cfg`` (what it does on the wire, its window semantics):
    ``sim.profile``; else, for vllm_dialect vllm-neuron, the plugin release's; else the preset's own
    (neuron-fork for the Neuron presets)."""
    if cfg.sim_profile_choice is not None:
        return cfg.sim_profile_choice
    from spectrn.errors import SpectrnError
    from spectrn.sim.model import get_preset

    try:
        return get_preset(cfg.sim.preset).profile
    except SpectrnError:  # an unknown preset: the server itself says so when it starts
        return "unknown"


class SimPair:
    """``with SimPair(cfg, work_dir) as pair: pair.endpoints -> {"baseline": url, "speculative": url}``."""

    def __init__(
        self,
        cfg: SpectrnConfig,
        work_dir: Path,
        *,
        time_scale: float | None = None,
        extra_args: list[str] | None = None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        self.cfg = cfg
        self.work_dir = work_dir
        self.time_scale = time_scale if time_scale is not None else cfg.sim.time_scale
        self.extra_args = extra_args or []
        self.startup_timeout_s = startup_timeout_s
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.endpoints: dict[str, str] = {}
        self.model = cfg.target_spec.hf_id
        self.profile = sim_profile(cfg)

    def _command(self, variant: str, port: int) -> list[str]:
        cfg = self.cfg
        cmd = [
            sys.executable,
            "-m",
            "spectrn",
            "sim",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--preset",
            cfg.sim.preset,
            "--time-scale",
            repr(self.time_scale),
            "--max-num-seqs",
            str(cfg.max_num_seqs),
            "--served-model-name",
            self.model,
        ]
        if cfg.sim_profile_choice is not None:  # else the preset's own (neuron-fork for the Neuron presets)
            cmd += ["--profile", cfg.sim_profile_choice]
        if variant == "speculative":
            cmd.append("--speculative")
            if cfg.sim_draft is not None:  # else the sim preset's own draft stands in for a custom one
                cmd += ["--draft", cfg.sim_draft]
            cmd += ["--window", str(cfg.num_speculative_tokens)]
        return cmd + self.extra_args

    def __enter__(self) -> SimPair:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            for variant in ("baseline", "speculative"):
                port = free_port()
                log = self.work_dir / f"sim-{variant}.log"
                with log.open("wb") as f:
                    self.procs[variant] = subprocess.Popen(
                        self._command(variant, port),
                        stdout=f,
                        stderr=subprocess.STDOUT,
                        stdin=subprocess.DEVNULL,
                        start_new_session=True,
                        env={**os.environ, "PYTHONUNBUFFERED": "1"},
                        preexec_fn=die_with_parent(),  # noqa: PLW1509 (async-signal-safe enough: one prctl call)
                    )
                self.endpoints[variant] = f"http://127.0.0.1:{port}"
            for variant, url in self.endpoints.items():
                wait_healthy(url, self.procs[variant], self.work_dir / f"sim-{variant}.log", self.startup_timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every server this pair started, even when Ctrl-C or SIGTERM interrupts the clean-up itself:
        all get SIGTERM first (they shut down in parallel), then each is waited for or killed; an
        interruption while waiting for one still kills the others, and is re-raised at the end."""
        procs = list(self.procs.values())
        self.procs.clear()
        for proc in procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGTERM)
        pending: BaseException | None = None
        for proc in procs:
            try:
                terminate(proc)
            except BaseException as e:
                pending = pending or e
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
        if pending is not None:
            raise pending

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
