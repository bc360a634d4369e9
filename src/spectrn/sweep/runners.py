"""Where a cell runs: local simulator pairs, local vLLM on CPU, or the cluster (deploy + in-cluster bench)."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol

from spectrn.configuration.config import SpectrnConfig
from spectrn.events import Emitter, OnEvent
from spectrn.labels import id_part, setup_label
from spectrn.sweep.grid import Cell

if TYPE_CHECKING:
    from spectrn.runtimes.launch import LocalServer


class CellRunner(Protocol):
    """Runs one cell's A/B bench and returns its run folder (with run.json and requests.jsonl)."""

    where: str

    def __enter__(self) -> CellRunner: ...

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None: ...

    def run_id(self, cell: Cell) -> str:
        """The cell's run id: its folder name under ``cells/<draft>-k<window>/`` and its RunId when published."""
        ...

    def run(self, cfg: SpectrnConfig, cell: Cell, out_root: Path, on_event: OnEvent | None, quiet: bool) -> Path: ...

    def probe_tpot(self, cfg: SpectrnConfig) -> float | None:
        """Seconds per output token of the baseline at batch 1 (for the time estimate), or None."""
        ...


class LocalSimRunner:
    """One shared baseline simulator plus one speculative simulator per (draft, window), on loopback; with
    ``preset_file`` (``sweep --twin``) every server serves that preset (a twin from ``spectrn twin calibrate``)."""

    where = "local simulator"

    def __init__(
        self,
        cfg: SpectrnConfig,
        work_dir: Path,
        *,
        sweep_id: str = "sweep",
        time_scale: float | None = None,
        startup_timeout_s: float = 60.0,
        preset_file: Path | None = None,
    ) -> None:
        self.preset_file = preset_file
        if preset_file is not None:
            self.where = f"local twin simulator ({preset_file.name})"
        self.cfg = cfg
        self.sweep_id = sweep_id
        self.work_dir = work_dir
        self.time_scale = time_scale if time_scale is not None else cfg.sim.time_scale
        self.startup_timeout_s = startup_timeout_s
        self.baseline: LocalServer | None = None
        self.spec: tuple[LocalServer, tuple[str, int]] | None = None
        self.model = cfg.target_spec.hf_id

    def run_id(self, cell: Cell) -> str:
        return f"{self.sweep_id}-{cell.config_dir}-{cell.level}"

    def _start(self, cfg: SpectrnConfig, variant: str, log_name: str) -> LocalServer:
        """One server with the same command line and lifetime as ``spectrn bench --local``'s, ready on return."""
        from spectrn.runtimes.sim_pair import start_sim, stop_sims, wait_sims

        server = start_sim(
            cfg, variant, self.work_dir / log_name, time_scale=self.time_scale, preset_file=self.preset_file
        )
        try:
            wait_sims([server], self.startup_timeout_s)
        except BaseException:
            stop_sims([server])
            raise
        return server

    def __enter__(self) -> LocalSimRunner:
        self.baseline = self._start(self.cfg, "baseline", "sim-baseline.log")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        from spectrn.runtimes.sim_pair import stop_sims

        servers = [s for s in (self.spec[0] if self.spec else None, self.baseline) if s is not None]
        self.spec = self.baseline = None
        stop_sims(servers)

    def _speculative(self, cfg: SpectrnConfig) -> str:
        from spectrn.runtimes.sim_pair import stop_sims

        want = (cfg.draft, cfg.num_speculative_tokens)
        if self.spec is not None and self.spec[1] == want and self.spec[0].proc.poll() is None:
            return self.spec[0].url
        if self.spec is not None:
            old, self.spec = self.spec[0], None
            stop_sims([old])
        server = self._start(
            cfg, "speculative", f"sim-{setup_label(cfg.draft, cfg.num_speculative_tokens, sep='-')}.log"
        )
        self.spec = (server, want)
        return server.url

    def run(self, cfg: SpectrnConfig, cell: Cell, out_root: Path, on_event: OnEvent | None, quiet: bool) -> Path:
        from spectrn.bench.local import endpoint_provenance, execute, plan_from_config
        from spectrn.runtimes.sim_pair import sim_profile

        assert self.baseline is not None, "LocalSimRunner used outside its with-block"
        endpoints = {"baseline": self.baseline.url, "speculative": self._speculative(cfg)}
        prov = endpoint_provenance(
            cfg, endpoints, runtime="sim", started=True, profile=sim_profile(cfg), time_scale=self.time_scale
        )
        plan = plan_from_config(
            cfg, endpoints, run_id=self.run_id(cell), out_root=out_root, model=self.model, provenance=prov
        )
        return execute(plan, cfg, on_event, quiet=quiet).run_dir

    def probe_tpot(self, cfg: SpectrnConfig) -> float | None:
        if self.baseline is None:
            return None
        return probe_tpot(self.baseline.url, self.model)


def probe_tpot(base_url: str, model: str, tokens: int = 32, timeout_s: float = 60.0) -> float | None:
    """Time one short greedy completion; seconds per token (an upper bound: it includes the prefill)."""
    body = json.dumps(
        {"model": model, "prompt": "1, 2, 3,", "max_tokens": tokens, "temperature": 0.0, "ignore_eos": True}
    ).encode()
    req = urllib.request.Request(
        f"{base_url.rstrip('/')}/v1/completions", data=body, headers={"Content-Type": "application/json"}
    )
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 - loopback or cluster URL
            resp.read()
    except (OSError, ValueError):
        return None
    return (time.monotonic() - t0) / tokens


class ClusterRunner:
    """The cluster path: the shared baseline deployed once; per (draft, window) the speculative service is
    re-deployed (Recreate: the new configuration gets the devices), then the in-cluster load Job runs."""

    where = "cluster"

    def __init__(
        self,
        kube: Any,
        cfg: SpectrnConfig,
        sweep_id: str,
        on_event: OnEvent | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        poll_s: float = 5.0,
    ) -> None:
        self.kube = kube
        self.cfg = cfg
        self.sweep_slug = re.sub(r"[^a-z0-9]+", "-", sweep_id.lower()).strip("-")[:12] or "sweep"
        self.emit = Emitter(on_event)
        self.current: tuple[str, int] | None = None
        self.timing: dict[str, Any] = {"clock": clock, "sleep": sleep, "poll_s": poll_s}

    def __enter__(self) -> ClusterRunner:
        from spectrn.deploy.service import deploy, render_for_deploy

        self.emit("info", "deploying the shared baseline (reused when already up to date)")
        deploy(
            self.kube, self.cfg, render_for_deploy(self.cfg, only="baseline"),
            on_update=self._readiness(self.cfg, "baseline", self.emit), **self.timing,
        )  # fmt: skip
        return self

    def _readiness(self, cfg: SpectrnConfig, what: str, emit: Emitter) -> Callable[[list[Any]], None]:
        """Deploy progress as a bar: services ready, with the time left of the startup budget."""
        clock = self.timing["clock"]
        start = clock()
        budget = cfg.probes.startup_budget_s

        def update(states: list[Any]) -> None:
            emit.progress(
                f"deploy:{what}", f"deploy {what}", completed=sum(1 for s in states if s.done), total=len(states),
                unit="services", group=f"deploy:{what}", eta_s=max(0.0, budget - (clock() - start)),
            )  # fmt: skip

        return update

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def run_id(self, cell: Cell) -> str:
        level = cell.level.replace(".", "p")
        return f"{self.sweep_slug}-{setup_label(id_part(cell.draft), cell.window, sep='-')}-{level}"[:40].strip("-")

    def run(self, cfg: SpectrnConfig, cell: Cell, out_root: Path, on_event: OnEvent | None, quiet: bool) -> Path:
        from spectrn.bench.incluster import run_incluster_bench
        from spectrn.deploy.service import deploy, render_for_deploy

        want = (cfg.draft, cfg.num_speculative_tokens)
        if self.current != want:
            emit = Emitter(on_event)
            emit("info", f"deploying speculative service: {cfg.draft} window {cfg.num_speculative_tokens}")
            deploy(
                self.kube, cfg, render_for_deploy(cfg, only="speculative"),
                on_update=self._readiness(cfg, "speculative", emit), **self.timing,
            )  # fmt: skip
            self.current = want
        return run_incluster_bench(
            cfg, self.run_id(cell), "spectrn", on_event, self.kube, out_root=out_root, **self.timing
        )

    def probe_tpot(self, cfg: SpectrnConfig) -> float | None:
        return None  # no route to the Service from outside the cluster; the estimate says so


class _LazyRunner:
    """Enters the runtime (starts servers, deploys the baseline) on first use only: a resumed sweep with nothing
    left to run touches nothing."""

    def __init__(self, factory: Callable[[], AbstractContextManager[CellRunner]], stack: ExitStack) -> None:
        self.factory = factory
        self.stack = stack
        self.runner: CellRunner | None = None

    def get(self) -> CellRunner:
        if self.runner is None:
            self.runner = self.stack.enter_context(self.factory())
        return self.runner


class LocalVllmCpuRunner:
    """Real vLLM on CPU (``make vllm-cpu``): one baseline server, the speculative one restarted per window.

    The tier has a single tiny draft model, so only windows vary; the draft key of a cell is a label."""

    where = "local vLLM on CPU"

    def __init__(self, cfg: SpectrnConfig, work_dir: Path, *, sweep_id: str = "sweep") -> None:
        from spectrn.runtimes.vllm_cpu import VllmCpuPair

        self.cfg = cfg
        self.sweep_id = sweep_id
        self.pair = VllmCpuPair(work_dir, num_speculative_tokens=cfg.num_speculative_tokens)
        self.model = self.pair.model

    def run_id(self, cell: Cell) -> str:
        return f"{self.sweep_id}-{cell.config_dir}-{cell.level}"

    def __enter__(self) -> LocalVllmCpuRunner:
        self.pair.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.pair.__exit__(exc_type, exc, tb)

    def run(self, cfg: SpectrnConfig, cell: Cell, out_root: Path, on_event: OnEvent | None, quiet: bool) -> Path:
        from spectrn.bench.local import execute, plan_from_config

        spec = self.pair.set_window(cell.window)
        endpoints = {"baseline": self.pair.endpoints["baseline"], "speculative": spec}
        plan = plan_from_config(cfg, endpoints, run_id=self.run_id(cell), out_root=out_root, model=self.model)
        return execute(plan, cfg, on_event, quiet=quiet).run_dir

    def probe_tpot(self, cfg: SpectrnConfig) -> float | None:
        return probe_tpot(self.pair.endpoints["baseline"], self.model)


def local_runner(
    cfg: SpectrnConfig, sweep_dir: Path, time_scale: float | None, runtime: str = "sim", twin: Path | None = None
) -> LocalSimRunner | LocalVllmCpuRunner:
    if runtime == "vllm-cpu":
        return LocalVllmCpuRunner(cfg, sweep_dir / "servers", sweep_id=sweep_dir.name)
    return LocalSimRunner(cfg, sweep_dir / "servers", sweep_id=sweep_dir.name, time_scale=time_scale, preset_file=twin)
