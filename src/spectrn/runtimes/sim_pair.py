"""Local runtime ``sim``: a baseline and a speculative simulated Neuron vLLM server on loopback.

Each server runs in its own process (``python -m spectrn sim serve``), so the load generator's own CPU
use never delays the servers' schedule and vice versa. Free ports are chosen by the OS; the command lines and
the servers' lifetime (ready on ``/health``, stopped with SIGTERM then SIGKILL whatever happens, dead with
the command that started them) are ``spectrn.runtimes.launch``'s.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from spectrn.configuration.config import SpectrnConfig
from spectrn.errors import SimError
from spectrn.runtimes.launch import LocalServer, free_port, sim_command, start_server, stop_servers, wait_healthy

STOP_GRACE_S = 5.0  # a simulator exits at once on SIGTERM; this only bounds a stuck one


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


def start_sim(
    cfg: SpectrnConfig,
    variant: str,
    log: Path,
    *,
    time_scale: float | None = None,
    preset_file: Path | None = None,
) -> LocalServer:
    """Start one simulator (``variant`` baseline or speculative) for ``cfg`` on a free loopback port."""
    port = free_port()
    cmd = sim_command(cfg, variant == "speculative", port, time_scale=time_scale, preset_file=preset_file)
    return start_server(f"simulator {variant}", cmd, port, log)


def wait_sims(servers: list[LocalServer], timeout_s: float) -> None:
    """Wait until the simulators answer ``/health``; a SimError with the log tail when one cannot start."""
    wait_healthy(
        servers,
        timeout_s,
        error=SimError,
        exited_hint=lambda s: f"the log above says why; all of it is in {s.log}",
        slow_hint="a busy machine starts servers slowly: stop other heavy processes and try again",
    )


def stop_sims(servers: list[LocalServer]) -> None:
    stop_servers(servers, grace_s=STOP_GRACE_S)


class SimPair:
    """``with SimPair(cfg, work_dir) as pair: pair.endpoints -> {"baseline": url, "speculative": url}``."""

    def __init__(
        self,
        cfg: SpectrnConfig,
        work_dir: Path,
        *,
        time_scale: float | None = None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        self.cfg = cfg
        self.work_dir = work_dir
        self.time_scale = time_scale if time_scale is not None else cfg.sim.time_scale
        self.startup_timeout_s = startup_timeout_s
        self.servers: dict[str, LocalServer] = {}
        self.endpoints: dict[str, str] = {}
        self.model = cfg.target_spec.hf_id
        self.profile = sim_profile(cfg)

    def __enter__(self) -> SimPair:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            for variant in ("baseline", "speculative"):
                log = self.work_dir / f"sim-{variant}.log"
                self.servers[variant] = start_sim(self.cfg, variant, log, time_scale=self.time_scale)
                self.endpoints[variant] = self.servers[variant].url
            wait_sims(list(self.servers.values()), self.startup_timeout_s)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every server this pair started (see ``launch.stop_servers``: interruptions included)."""
        servers = list(self.servers.values())
        self.servers.clear()
        stop_sims(servers)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
