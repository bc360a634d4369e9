"""Draft x window x load sweeps: run every cell against the shared baseline, resumably; analyse; report.

Layout of ``results/<sweep-id>/``::

    sweep.json                      manifest: settings, finished cells (written atomically after each cell)
    cells/<draft>-k<window>/<run>/  one ordinary run folder per cell (run.json, requests.jsonl, summary.json)
    servers/                        local simulator logs (--local)
    analysis.json                   matrix, recommendations, crossovers, explanations, equivalence, prediction
    sweep.md, report/index.html     Markdown summary and the self-contained HTML report

A cell is one (draft, window, load level). Each cell is a same-run A/B: the cell's speculative service and the
ONE baseline service shared by the whole sweep get identical traffic at the same time, so every cell has its own
paired speedups with bootstrap CIs. Only cells recorded in ``sweep.json`` count as finished: a re-run with
``--resume`` skips them and re-runs anything else from scratch (a half-written cell folder is removed first).

Runtimes are passed in (``CellRunner``): ``LocalSimRunner`` starts simulator processes on loopback (one
baseline, one speculative server per (draft, window)); ``ClusterRunner`` deploys the speculative service per
configuration through ``spectrn.deploy.service`` and runs the in-cluster load Job through ``spectrn.collect.incluster``.

``--predict`` measures only the largest window per draft, predicts every shorter window
(``spectrn.sweep.predict``), then measures only the predicted optimum to confirm it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

from pydantic import ValidationError
from rich.console import Console

from spectrn.errors import AnalysisError, ConfigError, Interrupted, SpectrnError
from spectrn.paths import atomic_write_text, safe_output_dir
from spectrn.spec.config import SpectrnConfig, format_validation_error
from spectrn.sweep.recommend import ALL, MIX, CellInput

MANIFEST = "sweep.json"
MANIFEST_VERSION = 1
SWEEP_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


# ---- the grid ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    draft: str
    window: int
    level: str  # c4 (closed loop, concurrency 4) or r2 (Poisson, 2 req/s)

    @property
    def key(self) -> str:
        return f"{self.draft}-k{self.window}@{self.level}"

    @property
    def config_dir(self) -> str:
        return f"{self.draft}-k{self.window}"

    @property
    def load(self) -> tuple[str, float]:
        return ("rate", float(self.level[1:])) if self.level.startswith("r") else ("concurrency", int(self.level[1:]))


def level_label(kind: str, value: float) -> str:
    return f"r{value:g}" if kind == "rate" else f"c{int(value)}"


def levels_of(cfg: SpectrnConfig) -> list[str]:
    if cfg.bench.request_rate is not None:
        return [level_label("rate", cfg.bench.request_rate)]
    return [level_label("concurrency", c) for c in cfg.bench.concurrency]


def grid(drafts: Sequence[str], windows: Sequence[int], levels: Sequence[str]) -> list[Cell]:
    """Cells in run order: per (draft, window) all levels, so one speculative service serves them in a row."""
    return [Cell(d, w, lv) for d in drafts for w in windows for lv in levels]


def cell_config(base: SpectrnConfig, cell: Cell) -> SpectrnConfig:
    """The run spec of one cell: the sweep's spec with this draft, window and load level."""
    data = base.model_dump(mode="json")
    data["draft"] = cell.draft
    data["num_speculative_tokens"] = cell.window
    kind, value = cell.load
    if kind == "rate":
        data["bench"]["request_rate"] = value
    else:
        data["bench"]["request_rate"] = None
        data["bench"]["concurrency"] = [int(value)]
    try:
        return SpectrnConfig.model_validate(data)
    except ValidationError as e:
        msg = format_validation_error(e)
        raise ConfigError(f"sweep cell {cell.key}: {msg}", hint="fix --drafts/--windows or the config") from None


def fingerprint(cfg: SpectrnConfig) -> str:
    """Hash of everything a resumed sweep must keep identical (all but the grid's own axes)."""
    data = cfg.model_dump(mode="json")
    for k in ("draft", "num_speculative_tokens"):
        data.pop(k, None)
    data["bench"].pop("concurrency", None)
    data["bench"].pop("request_rate", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def parse_list(text: str | None, what: str, conv: Callable[[str], Any]) -> list[Any] | None:
    if text is None:
        return None
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            out.append(conv(part))
        except ValueError:
            raise ConfigError(f"{what} {text!r}: {part!r} is not valid", hint=f"e.g. {what} 5,7,10") from None
    if not out:
        raise ConfigError(f"{what} is empty", hint=f"give a comma-separated list, e.g. {what} 5,7")
    if len(set(out)) != len(out):
        raise ConfigError(f"{what} {text!r} lists a value twice", hint="list each value once")
    return out


def check_sweep_id(sweep_id: str) -> str:
    if not SWEEP_ID_RE.fullmatch(sweep_id) or ".." in sweep_id:
        raise ConfigError(
            f"--sweep-id {sweep_id!r} is not a safe folder name",
            hint="use letters, digits, '.', '_' and '-' only (at most 64 characters)",
        )
    return sweep_id


def new_sweep_id() -> str:
    return "sweep-" + time.strftime("%Y%m%d-%H%M%S", time.gmtime())


# ---- the manifest ----------------------------------------------------------------------------------------


@dataclass
class Manifest:
    path: Path
    data: dict[str, Any]

    @classmethod
    def open(cls, sweep_dir: Path, sweep_id: str, settings: dict[str, Any], fp: str, *, resume: bool) -> Manifest:
        path = sweep_dir / MANIFEST
        if path.exists():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except ValueError as e:
                raise AnalysisError(f"{path} is corrupt: {e}", hint="move it away to start the sweep afresh") from None
            if not resume:
                raise ConfigError(
                    f"sweep {sweep_id} already exists ({len(data.get('cells', {}))} finished cell(s))",
                    hint="pass --resume to continue it, or choose another --sweep-id",
                )
            if data.get("fingerprint") != fp:
                raise ConfigError(
                    f"sweep {sweep_id} was run with different settings (config fingerprint "
                    f"{data.get('fingerprint')} vs now {fp}); its cells would not be comparable",
                    hint="resume with the same config and flags (only --drafts/--windows/--concurrency may change), "
                    "or start a new --sweep-id",
                )
            data["settings"] = settings
            return cls(path, data)
        data = {
            "version": MANIFEST_VERSION,
            "sweep_id": sweep_id,
            "created_at": time.time(),
            "fingerprint": fp,
            "settings": settings,
            "cells": {},
        }
        m = cls(path, data)
        m.save()
        return m

    def save(self) -> None:
        from spectrn.analyze.summary import finite

        atomic_write_text(self.path, json.dumps(finite(self.data), indent=2, allow_nan=False))

    def done(self, cell: Cell) -> bool:
        return cell.key in self.data["cells"]

    def record(self, cell: Cell, entry: dict[str, Any]) -> None:
        self.data["cells"][cell.key] = entry
        self.save()

    def finished_cells(self) -> list[tuple[Cell, dict[str, Any]]]:
        out = []
        for entry in self.data["cells"].values():
            out.append((Cell(entry["draft"], int(entry["window"]), entry["level"]), entry))
        return out


# ---- runtimes ---------------------------------------------------------------------------------------------


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

    def run(self, cfg: SpectrnConfig, cell: Cell, out_root: Path, console: Console, quiet: bool) -> Path: ...

    def probe_tpot(self, cfg: SpectrnConfig) -> float | None:
        """Seconds per output token of the baseline at batch 1 (for the time estimate), or None."""
        ...


def _stop(proc: subprocess.Popen[bytes]) -> None:
    from spectrn.runtimes.sim_pair import terminate

    terminate(proc)


class LocalSimRunner:
    """One shared baseline simulator plus one speculative simulator per (draft, window), on loopback."""

    where = "local simulator"

    def __init__(
        self,
        cfg: SpectrnConfig,
        work_dir: Path,
        *,
        sweep_id: str = "sweep",
        time_scale: float | None = None,
        startup_timeout_s: float = 60.0,
    ) -> None:
        self.cfg = cfg
        self.sweep_id = sweep_id
        self.work_dir = work_dir
        self.time_scale = time_scale if time_scale is not None else cfg.sim.time_scale
        self.startup_timeout_s = startup_timeout_s
        self.baseline: tuple[subprocess.Popen[bytes], str] | None = None
        self.spec: tuple[subprocess.Popen[bytes], str, tuple[str, int]] | None = None
        self.model = cfg.target_spec.hf_id

    def run_id(self, cell: Cell) -> str:
        return f"{self.sweep_id}-{cell.draft}-k{cell.window}-{cell.level}"

    def _start(self, cfg: SpectrnConfig, variant: str, log_name: str) -> tuple[subprocess.Popen[bytes], str]:
        from spectrn.runtimes.sim_pair import SimPair, free_port, wait_healthy

        port = free_port()
        # The same command line as `spectrn bench --local` uses, one server at a time.
        cmd = SimPair(cfg, self.work_dir, time_scale=self.time_scale)._command(variant, port)
        log = self.work_dir / log_name
        self.work_dir.mkdir(parents=True, exist_ok=True)
        with log.open("wb") as f:
            proc = subprocess.Popen(
                cmd,
                stdout=f,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        url = f"http://127.0.0.1:{port}"
        try:
            wait_healthy(url, proc, log, self.startup_timeout_s)
        except BaseException:
            _stop(proc)
            raise
        return proc, url

    def __enter__(self) -> LocalSimRunner:
        self.baseline = self._start(self.cfg, "baseline", "sim-baseline.log")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.spec is not None:
            _stop(self.spec[0])
            self.spec = None
        if self.baseline is not None:
            _stop(self.baseline[0])
            self.baseline = None

    def _speculative(self, cfg: SpectrnConfig) -> str:
        want = (cfg.draft, cfg.num_speculative_tokens)
        if self.spec is not None and self.spec[2] == want and self.spec[0].poll() is None:
            return self.spec[1]
        if self.spec is not None:
            _stop(self.spec[0])
            self.spec = None
        proc, url = self._start(cfg, "speculative", f"sim-{cfg.draft}-k{cfg.num_speculative_tokens}.log")
        self.spec = (proc, url, want)
        return url

    def run(self, cfg: SpectrnConfig, cell: Cell, out_root: Path, console: Console, quiet: bool) -> Path:
        from spectrn.loadgen.bench import execute, plan_from_config

        assert self.baseline is not None, "LocalSimRunner used outside its with-block"
        endpoints = {"baseline": self.baseline[1], "speculative": self._speculative(cfg)}
        plan = plan_from_config(cfg, endpoints, run_id=self.run_id(cell), out_root=out_root, model=self.model)
        return execute(plan, cfg, console, quiet=quiet).run_dir

    def probe_tpot(self, cfg: SpectrnConfig) -> float | None:
        if self.baseline is None:
            return None
        return probe_tpot(self.baseline[1], self.model)


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
        console: Console,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        poll_s: float = 5.0,
    ) -> None:
        self.kube = kube
        self.cfg = cfg
        self.sweep_slug = re.sub(r"[^a-z0-9]+", "-", sweep_id.lower()).strip("-")[:12] or "sweep"
        self.console = console
        self.current: tuple[str, int] | None = None
        self.timing: dict[str, Any] = {"clock": clock, "sleep": sleep, "poll_s": poll_s}

    def __enter__(self) -> ClusterRunner:
        from spectrn.deploy.service import deploy, render_for_deploy

        self.console.print("deploying the shared baseline (reused when already up to date)")
        deploy(self.kube, self.cfg, render_for_deploy(self.cfg, only="baseline"), **self.timing)
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None

    def run_id(self, cell: Cell) -> str:
        draft = cell.draft.replace(".", "p")
        level = cell.level.replace(".", "p")
        return f"{self.sweep_slug}-{draft}-k{cell.window}-{level}"[:40].strip("-")

    def run(self, cfg: SpectrnConfig, cell: Cell, out_root: Path, console: Console, quiet: bool) -> Path:
        from spectrn.collect.incluster import run_incluster_bench
        from spectrn.deploy.service import deploy, render_for_deploy

        want = (cfg.draft, cfg.num_speculative_tokens)
        if self.current != want:
            console.print(f"deploying speculative service: {cfg.draft} window {cfg.num_speculative_tokens}")
            deploy(self.kube, cfg, render_for_deploy(cfg, only="speculative"), **self.timing)
            self.current = want
        return run_incluster_bench(
            cfg, self.run_id(cell), "spectrn", console, self.kube, out_root=out_root, **self.timing
        )

    def probe_tpot(self, cfg: SpectrnConfig) -> float | None:
        return None  # no route to the Service from outside the cluster; the estimate says so


# ---- per-cell facts -----------------------------------------------------------------------------------------


def cell_acceptance(run_dir: Path, window: int) -> dict[str, dict[str, Any]]:
    """Per prompt class (and ``all``): per-position acceptance from the speculative variant's chunk sizes."""
    from spectrn.run.records import iter_records
    from spectrn.sweep.predict import per_position_from_chunks

    by_cls: dict[str, list[list[int]]] = {}
    for r in iter_records(run_dir / "requests.jsonl"):
        if r.variant != "speculative" or r.warmup or not r.ok or r.token_source != "token_ids":
            continue
        by_cls.setdefault(r.prompt_class, []).append(list(r.chunk_tokens))
    out: dict[str, dict[str, Any]] = {}
    everything = [t for ts in by_cls.values() for t in ts]
    for cls, chunks in [*sorted(by_cls.items()), (ALL, everything)]:
        ca = per_position_from_chunks(chunks, window)
        out[cls] = {"per_position": ca.per_position, "steps": ca.steps, "mean_length": ca.mean_length,
                    "source": "client chunk sizes"}  # fmt: skip
    return out


def _level_view(summary: dict[str, Any], level: str) -> dict[str, Any]:
    if "levels" in summary and level in summary["levels"]:
        return dict(summary["levels"][level])
    return summary


def cell_inputs(sweep_dir: Path, manifest: Manifest) -> list[CellInput]:
    out = []
    for cell, entry in manifest.finished_cells():
        path = sweep_dir / entry["run_dir"] / "summary.json"
        try:
            summary = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise AnalysisError(
                f"cell {cell.key}: {path} is unreadable ({e})",
                hint=f"remove the cell from {manifest.path} and resume the sweep to re-run it",
            ) from None
        out.append(CellInput(cell.draft, cell.window, cell.level, summary, entry.get("acceptance_by_class") or {}))
    return out


def aggregate_equivalence(cells: Sequence[CellInput]) -> dict[str, Any]:
    """Greedy output equivalence over every cell: match rate, and each divergence with its first token."""
    compared = matched = 0
    divergent: list[dict[str, Any]] = []
    for c in cells:
        eq = _level_view(c.summary, c.level).get("equivalence") or {}
        compared += int(eq.get("compared") or 0)
        matched += int(eq.get("matched") or 0)
        for d in eq.get("divergences") or []:
            divergent.append({"draft": c.draft, "window": c.window, "level": c.level, **d})
    return {
        "compared": compared,
        "matched": matched,
        "match_rate": matched / compared if compared else None,
        "divergences": divergent,
    }


# ---- time estimate ----------------------------------------------------------------------------------------


CELL_OVERHEAD_S = 4.0  # analysis, metrics scrapes and warm-up per cell, measured on the local simulator


def estimate_cell_s(cfg: SpectrnConfig, cell: Cell, tpot_s: float) -> float:
    """requests x max_tokens x TPOT, divided by how many requests the service decodes at once, plus the
    per-cell overhead (analysis, scrapes)."""
    b = cfg.bench
    n = b.requests + b.warmup
    kind, value = cell.load
    parallel = min(int(value), cfg.max_num_seqs) if kind == "concurrency" else max(1, cfg.max_num_seqs)
    decode = math.ceil(n / max(parallel, 1)) * b.max_tokens * tpot_s
    if kind == "rate":
        decode = max(decode, n / value + b.max_tokens * tpot_s)
    return decode + CELL_OVERHEAD_S


def fmt_duration(s: float) -> str:
    s = max(0.0, s)
    if s < 90:
        return f"{s:.0f}s"
    if s < 5400:
        return f"{s / 60:.1f} min"
    return f"{s / 3600:.1f} h"


# ---- orchestration ------------------------------------------------------------------------------------


def _sweep_lock(sweep_dir: Path, sweep_id: str) -> AbstractContextManager[None]:
    """One process per sweep folder: a second one would delete the first one's unfinished cell as stale."""
    from spectrn.paths import folder_lock

    return folder_lock(
        sweep_dir,
        lambda: ConfigError(
            f"sweep {sweep_id} is being run by another process right now",
            hint="wait for it to finish (or stop it), then resume; or choose another --sweep-id",
        ),
    )


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


@dataclass
class SweepOptions:
    drafts: list[str]
    windows: list[int]
    predict: bool = False
    weights: dict[str, float] | None = None
    quiet: bool = False
    min_gain: float = 0.05


@dataclass
class SweepResult:
    sweep_dir: Path
    ran: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    analysis: dict[str, Any] = field(default_factory=dict)


class Sweep:
    """Runs the cells of one sweep with a runner, records them, and analyses whatever is finished."""

    def __init__(
        self,
        cfg: SpectrnConfig,
        sweep_id: str,
        out_root: Path,
        opts: SweepOptions,
        console: Console,
        *,
        resume: bool = False,
    ) -> None:
        self.cfg = cfg
        self.sweep_id = check_sweep_id(sweep_id)
        self.sweep_dir = safe_output_dir(out_root, what="--out-dir") / self.sweep_id
        self.opts = opts
        self.console = console
        self.levels = levels_of(cfg)
        settings = {
            "drafts": opts.drafts,
            "windows": opts.windows,
            "levels": self.levels,
            "prompts": cfg.bench.prompts,
            "requests": cfg.bench.requests,
            "max_tokens": cfg.bench.max_tokens,
            "predict": opts.predict,
            "target": cfg.target,
            "runtime": cfg.runtime,
        }
        for d in opts.drafts:  # fail before anything runs on an invalid draft or window
            for w in opts.windows:
                cell_config(cfg, Cell(d, w, self.levels[0]))
        self.sweep_dir.mkdir(parents=True, exist_ok=True)
        self.manifest = Manifest.open(self.sweep_dir, self.sweep_id, settings, fingerprint(cfg), resume=resume)

    # ---- running ----
    def _cell_dir(self, cell: Cell) -> Path:
        return self.sweep_dir / "cells" / cell.config_dir

    def run_cells(self, cells: Sequence[Cell], lazy: _LazyRunner, result: SweepResult, *, phase: str = "") -> None:
        todo = [c for c in cells if not self.manifest.done(c)]
        for c in cells:
            if self.manifest.done(c) and c.key not in result.skipped:
                result.skipped.append(c.key)
        if result.skipped and todo:
            self.console.print(f"resuming: {len(result.skipped)} cell(s) already finished, {len(todo)} to run")
        if not todo:
            return
        runner = lazy.get()
        tpot = runner.probe_tpot(self.cfg)
        assumed = tpot is None
        tpot = tpot if tpot is not None else 0.05 * (self.cfg.sim.time_scale if self.cfg.runtime == "sim" else 1.0)
        estimates = {c.key: estimate_cell_s(self.cfg, c, tpot) for c in todo}
        total = sum(estimates.values())
        how = "assumed 50 ms/token (no probe possible)" if assumed else f"probed baseline {tpot * 1e3:.1f} ms/token"
        extra = (
            "; plus deploy (and compile, where artifacts are missing) per configuration"
            if runner.where == "cluster"
            else ""
        )
        self.console.print(
            f"[bold]{phase or 'sweep'}[/]: {len(todo)} cell(s) on the {runner.where}, estimated "
            f"{fmt_duration(total)} ({how}){extra}"
        )
        started = time.monotonic()
        spent_est = 0.0
        for n, cell in enumerate(todo, 1):
            elapsed = time.monotonic() - started
            ratio = elapsed / spent_est if spent_est > 0 else 1.0
            remaining = ratio * sum(estimates[c.key] for c in todo[n - 1 :])
            self.console.print(
                f"[cyan][{n}/{len(todo)}][/] {cell.draft} window {cell.window} at {cell.level} "
                f"(elapsed {fmt_duration(elapsed)}, about {fmt_duration(remaining)} left)",
                highlight=False,
            )
            resume = f"`spectrn sweep --resume --sweep-id {self.sweep_id}` with the same flags runs only the rest"
            try:
                self.run_one(cell, runner)
            except (KeyboardInterrupt, Interrupted):
                done = len(self.manifest.data["cells"])
                raise Interrupted(
                    f"sweep {self.sweep_id} stopped during {cell.key}; {done} finished cell(s) are kept",
                    hint=resume,
                ) from None
            except SpectrnError as e:
                e.hint = (e.hint + "; " if e.hint else "") + f"finished cells are kept: {resume}"
                raise
            result.ran.append(cell.key)
            spent_est += estimates[cell.key]

    def run_one(self, cell: Cell, runner: CellRunner) -> None:
        from spectrn.analyze.summary import analyze_run

        cfg = cell_config(self.cfg, cell)
        out_root = self._cell_dir(cell)
        # A folder without a manifest entry is a cell that did not finish: start it afresh, never append to it.
        for stale in _stale_runs(out_root, cell, runner):
            shutil.rmtree(stale)
        t0 = time.time()
        run_dir = runner.run(cfg, cell, out_root, self.console, self.opts.quiet)
        summary = analyze_run(run_dir)
        try:
            from spectrn.publish.emf import write_emf

            write_emf(run_dir)
        except SpectrnError as e:  # the cell's numbers stand; EMF can be rewritten by `spectrn analyze`
            self.console.print(f"[yellow]warning:[/] EMF lines for {cell.key} not written: {e}")
        acc = cell_acceptance(run_dir, cell.window) if (run_dir / "requests.jsonl").exists() else {}
        eq = _level_view(summary, cell.level).get("equivalence") or {}
        self.manifest.record(
            cell,
            {
                "draft": cell.draft,
                "window": cell.window,
                "level": cell.level,
                "run_dir": str(run_dir.relative_to(self.sweep_dir)),
                "started_at": t0,
                "finished_at": time.time(),
                "duration_s": time.time() - t0,
                "clean": summary.get("clean"),
                "acceptance_by_class": acc,
                "equivalence": {k: eq.get(k) for k in ("compared", "matched", "match_rate")},
            },
        )
        sp = (_level_view(summary, cell.level).get("speedup") or {}).get("tpot_p50") or {}
        if sp.get("value") is not None:
            ci = sp.get("ci95")
            cis = f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else ""
            self.console.print(f"    TPOT p50 speedup {sp['value']:.2f}x{cis}", highlight=False)
        if eq.get("compared") and eq.get("matched") != eq.get("compared"):
            self.console.print(
                f"[bold red]    OUTPUT DIVERGENCE in {cell.key}: {eq['compared'] - eq['matched']} of "
                f"{eq['compared']} greedy outputs differ[/]"
            )

    # ---- the two modes ----
    def run(self, runner_factory: Callable[[], AbstractContextManager[CellRunner]]) -> SweepResult:
        """Run every unfinished cell (or the predict flow), then analyse everything finished. The runtime is
        started only when a cell actually needs to run, and always stopped."""
        result = SweepResult(self.sweep_dir)
        cells = grid(self.opts.drafts, self.opts.windows, self.levels)
        with ExitStack() as stack:
            stack.enter_context(_sweep_lock(self.sweep_dir, self.sweep_id))
            runner = _LazyRunner(runner_factory, stack)
            if self.opts.predict:
                self._predict_flow(runner, result)
            else:
                self.run_cells(cells, runner, result)
        result.analysis = self.analyse()
        return result

    def _predict_flow(self, runner: _LazyRunner, result: SweepResult) -> None:
        k_max = max(self.opts.windows)
        level = self.levels[0]
        if len(self.levels) > 1:
            self.console.print(f"[yellow]note:[/] --predict works at one load level; using {level}")
        first = [Cell(d, k_max, level) for d in self.opts.drafts]
        self.console.print(
            f"predict: window {k_max} for {len(first)} draft(s), then one confirmation run of the predicted optimum "
            f"(instead of {len(self.opts.drafts) * len(self.opts.windows)} grid cells)"
        )
        self.run_cells(first, runner, result, phase=f"predict: measuring window {k_max}")
        pred = self.prediction()
        choice = pred.get("choice")
        if choice is None:
            raise AnalysisError(
                "no prediction could be made from the large-window run(s)",
                hint="check that the runs completed and that the server streams token ids",
            )
        self.console.print(
            f"predicted optimum: {choice['draft']} window {choice['window']} "
            f"(predicted TPOT {choice['tpot_s'] * 1e3:.2f} ms on the mix); confirming"
        )
        self.run_cells([Cell(choice["draft"], int(choice["window"]), level)], runner, result, phase="predict: confirm")

    # ---- analysis ----
    def prediction(self) -> dict[str, Any]:
        """Predictions from the largest measured window per draft; compared with every measured window."""
        from spectrn.sweep.predict import StepPoint, compare_prediction, fit_costs, mix_prediction, predict_tpot
        from spectrn.sweep.recommend import build_matrix, default_mix

        level = self.levels[0]
        cells = [c for c in cell_inputs(self.sweep_dir, self.manifest) if c.level == level]
        if not cells:
            return {}
        rows = build_matrix(cells)
        weights = self.opts.weights or default_mix(rows)
        out: dict[str, Any] = {"level": level, "weights": weights, "drafts": {}, "choice": None, "comparison": []}
        candidates = sorted(self.opts.windows)
        best: tuple[float, int, str] | None = None
        for draft in sorted({c.draft for c in cells}):
            mine = [c for c in cells if c.draft == draft]
            big = max(mine, key=lambda c: c.window)
            k = big.window
            view = _level_view(big.summary, level)
            per_cls: dict[str, Any] = {}
            base_tpot: dict[str, float] = {}
            notes: list[str] = []
            for cls, acc in sorted(big.acceptance_by_class.items()):
                if cls == ALL:
                    continue
                byc = (view.get("by_prompt_class") or {}).get(cls) or {}
                tb = ((byc.get("baseline") or {}).get("tpot_s") or {}).get("p50")
                ts = ((byc.get("speculative") or {}).get("tpot_s") or {}).get("p50")
                length = acc.get("mean_length")
                if not (tb and ts and length and acc.get("steps")):
                    notes.append(f"{cls}: not enough data in the window-{k} run")
                    continue
                try:
                    fit = fit_costs([StepPoint(0, tb, 1.0, "baseline"), StepPoint(k, ts, length, f"k{k}")])
                    p = predict_tpot(acc["per_position"], fit, windows=range(1, k + 1), baseline_tpot_s=tb)
                except AnalysisError as e:
                    notes.append(f"{cls}: {e.message}")
                    continue
                per_cls[cls] = p
                base_tpot[cls] = tb
            if not per_cls:
                out["drafts"][draft] = {"measured_window": k, "notes": notes}
                continue
            usable = {c: x for c, x in weights.items() if c in per_cls}
            if not usable:
                notes.append("none of the mix's classes could be predicted")
                out["drafts"][draft] = {"measured_window": k, "notes": notes}
                continue
            mix = mix_prediction(per_cls, usable, base_tpot)
            cand = [w for w in candidates if w <= k] or list(range(1, k + 1))
            k_best = min(cand, key=lambda w: (round(mix["tpot_s"][w], 12), w))
            out["drafts"][draft] = {
                "measured_window": k,
                "by_class": {c: p.to_dict() for c, p in per_cls.items()},
                "mix": {
                    **mix,
                    "tpot_s": {str(w): v for w, v in mix["tpot_s"].items()},
                    "speedup": {str(w): v for w, v in mix["speedup"].items()},
                },  # fmt: skip
                "best_window": k_best,
                "notes": notes,
            }
            refined = self._refined(mine, level, per_cls, base_tpot, usable, cand)
            if refined:
                out["drafts"][draft]["refined"] = refined
            key = (mix["tpot_s"][k_best], k_best, draft)
            if best is None or key < best:
                best = key
            # prediction vs measurement for every window of this draft measured at this level
            for cls, p in per_cls.items():
                measured = {}
                for c in mine:
                    v = ((_level_view(c.summary, level).get("by_prompt_class") or {}).get(cls) or {}).get("speculative")
                    m = ((v or {}).get("tpot_s") or {}).get("p50")
                    if m:
                        measured[c.window] = m
                for row in compare_prediction(p.tpot_s, measured):
                    out["comparison"].append({"draft": draft, "prompt_class": cls, **row,
                                              "from_window": k, "fitted": row["window"] == k})  # fmt: skip
        if best is not None:
            out["choice"] = {"draft": best[2], "window": best[1], "tpot_s": best[0]}
        return out

    @staticmethod
    def _refined(
        mine: Sequence[CellInput],
        level: str,
        predictions: dict[str, Any],
        base_tpot: dict[str, float],
        weights: dict[str, float],
        candidates: Sequence[int],
    ) -> dict[str, Any] | None:
        """Once a second window is measured (the confirmation), refit the cost line through every measured
        step of this draft (baseline + each window) and predict again from the same per-position acceptance."""
        from spectrn.sweep.predict import StepPoint, fit_costs, mix_prediction, predict_tpot

        if len({c.window for c in mine}) < 2:
            return None
        refined: dict[str, Any] = {}
        for cls, p in predictions.items():
            pts = []
            for c in mine:
                byc = ((_level_view(c.summary, level).get("by_prompt_class") or {}).get(cls)) or {}
                tb = ((byc.get("baseline") or {}).get("tpot_s") or {}).get("p50")
                ts = ((byc.get("speculative") or {}).get("tpot_s") or {}).get("p50")
                length = (c.acceptance_by_class.get(cls) or {}).get("mean_length")
                if tb:
                    pts.append(StepPoint(0, tb, 1.0, "baseline"))
                if ts and length:
                    pts.append(StepPoint(c.window, ts, length, f"k{c.window}"))
            try:
                fit = fit_costs(pts)
                refined[cls] = predict_tpot(p.per_position, fit, baseline_tpot_s=base_tpot.get(cls))
            except AnalysisError:
                continue
        usable = {c: w for c, w in weights.items() if c in refined}
        if not usable:
            return None
        mix = mix_prediction(refined, usable, base_tpot)
        k_best = min(candidates, key=lambda w: (round(mix["tpot_s"][w], 12), w))
        return {
            "windows_in_fit": sorted({c.window for c in mine}),
            "best_window": k_best,
            "mix_tpot_s": {str(w): v for w, v in mix["tpot_s"].items()},
            "cost": {c: p.cost.to_dict() for c, p in refined.items()},
        }

    def analyse(self) -> dict[str, Any]:
        from spectrn.analyze.summary import finite
        from spectrn.sweep.recommend import analyse_sweep

        cells = cell_inputs(self.sweep_dir, self.manifest)
        if not cells:
            raise AnalysisError(f"sweep {self.sweep_id} has no finished cell", hint="run `spectrn sweep` first")
        analysis = analyse_sweep(cells, weights=self.opts.weights, min_gain=self.opts.min_gain)
        analysis["sweep_id"] = self.sweep_id
        analysis["settings"] = self.manifest.data.get("settings")
        analysis["equivalence"] = aggregate_equivalence(cells)
        analysis["cells"] = [
            {"key": c.key, "run_dir": e["run_dir"], "duration_s": e.get("duration_s"), "clean": e.get("clean")}
            for c, e in self.manifest.finished_cells()
        ]
        # Also for a full grid: predicting every window from the largest one, next to what was measured, shows
        # how far --predict can be trusted on this workload before the next sweep relies on it.
        analysis["prediction"] = self.prediction()
        atomic_write_text(self.sweep_dir / "analysis.json", json.dumps(finite(analysis), indent=2, allow_nan=False))
        return analysis


def _stale_runs(out_root: Path, cell: Cell, runner: CellRunner) -> Iterator[Path]:
    """Unfinished run folders of ``cell`` (the caller only asks for cells the manifest lacks)."""
    if not out_root.is_dir():
        return
    for child in out_root.iterdir():
        if not child.is_dir():
            continue
        if child.name == runner.run_id(cell):
            yield child


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
        return f"{self.sweep_id}-{cell.draft}-k{cell.window}-{cell.level}"

    def __enter__(self) -> LocalVllmCpuRunner:
        self.pair.__enter__()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.pair.__exit__(exc_type, exc, tb)

    def run(self, cfg: SpectrnConfig, cell: Cell, out_root: Path, console: Console, quiet: bool) -> Path:
        from spectrn.loadgen.bench import execute, plan_from_config

        spec = self.pair.set_window(cell.window)
        endpoints = {"baseline": self.pair.endpoints["baseline"], "speculative": spec}
        plan = plan_from_config(cfg, endpoints, run_id=self.run_id(cell), out_root=out_root, model=self.model)
        return execute(plan, cfg, console, quiet=quiet).run_dir

    def probe_tpot(self, cfg: SpectrnConfig) -> float | None:
        return probe_tpot(self.pair.endpoints["baseline"], self.model)


def local_runner(
    cfg: SpectrnConfig, sweep_dir: Path, time_scale: float | None, runtime: str = "sim"
) -> LocalSimRunner | LocalVllmCpuRunner:
    if runtime == "vllm-cpu":
        return LocalVllmCpuRunner(cfg, sweep_dir / "servers", sweep_id=sweep_dir.name)
    return LocalSimRunner(cfg, sweep_dir / "servers", sweep_id=sweep_dir.name, time_scale=time_scale)


# ---- output: terminal, Markdown, HTML ----------------------------------------------------------------------


def _fx(v: Any, ci: Any = None) -> str:
    if not isinstance(v, int | float):
        return "n/a"
    text = f"{v:.2f}x"
    if isinstance(ci, list | tuple) and len(ci) == 2 and None not in ci:
        text += f" [{ci[0]:.2f}, {ci[1]:.2f}]"
    return text


def _ms(v: Any) -> str:
    return f"{v * 1e3:.2f}" if isinstance(v, int | float) else "n/a"


def shown_scopes(analysis: dict[str, Any]) -> list[str]:
    """Prompt classes and the mix; ``all`` only when there is a single class (pooling classes of different
    acceptance gives a median that describes no real workload)."""
    classes = list(analysis.get("classes", []))
    has_mix = any(r["prompt_class"] == MIX for r in analysis["rows"])
    if len(classes) > 1:
        return [*classes, *([MIX] if has_mix else [])]
    return classes or [ALL]


def matrix_table(analysis: dict[str, Any], level: str) -> tuple[list[str], list[list[str]]]:
    """Header and rows: one row per (draft, window), one column per prompt class (TPOT p50 speedup + CI)."""
    from spectrn.sweep.recommend import draft_size

    scopes = shown_scopes(analysis)
    cells: dict[tuple[str, int], dict[str, str]] = {}
    for r in analysis["rows"]:
        if r["level"] == level:
            cells.setdefault((r["draft"], r["window"]), {})[r["prompt_class"]] = _fx(r["speedup"], r["ci95"])
    header = ["draft", "window", *scopes]
    rows = [
        [d, str(w), *(cells[(d, w)].get(s, "-") for s in scopes)]
        for d, w in sorted(cells, key=lambda dw: (draft_size(dw[0]), dw[1]))
    ]
    return header, rows


def prediction_rows(pred: dict[str, Any]) -> list[list[str]]:
    rows = []
    for r in pred.get("comparison", []):
        err = r.get("error")
        rows.append(
            [r["draft"], r["prompt_class"], str(r["window"]), _ms(r["predicted_s"]), _ms(r["measured_s"]),
             f"{err:+.1%}" if isinstance(err, int | float) else "n/a",
             "fitted point" if r.get("fitted") else f"predicted from k{r['from_window']}"]
        )  # fmt: skip
    return rows


def refined_lines(pred: dict[str, Any]) -> list[str]:
    out = []
    for draft, d in sorted((pred.get("drafts") or {}).items()):
        r = d.get("refined")
        if r:
            out.append(
                f"{draft}: with windows {', '.join(map(str, r['windows_in_fit']))} and the baseline in the cost model, "
                f"the predicted optimum is window {r['best_window']} (from the large-window run alone: "
                f"{d.get('best_window')})"
            )
    return out


PRED_HEADER = ["draft", "class", "window", "predicted TPOT ms", "measured TPOT p50 ms", "error", "basis"]


def print_analysis(analysis: dict[str, Any], console: Console, artifacts: dict[str, str] | None = None) -> None:
    from rich.table import Table

    for level in analysis.get("levels", []):
        header, rows = matrix_table(analysis, level)
        t = Table(title=f"TPOT p50 speedup (baseline / speculative) at {level}, 95% CI", title_justify="left")
        for h in header:
            t.add_column(h, justify="left" if h in ("draft",) else "right")
        for row in rows:
            t.add_row(*row)
        console.print(t)
    console.print("[bold]recommendations[/]")
    for r in analysis.get("recommendations", []):
        style = "green" if r["meaningful"] else "yellow"
        console.print(f"  [{style}]{r['text']}[/]", highlight=False)
        if r.get("weights"):
            w = ", ".join(f"{c}={x:.2f}" for c, x in r["weights"].items())
            console.print(f"    (mix weights {w})", highlight=False)
    if analysis.get("crossovers"):
        console.print("[bold]load crossover[/]")
        for c in analysis["crossovers"]:
            console.print(f"  {c['text']}", highlight=False)
    expl = analysis.get("explanations", {})
    for f in expl.get("cost_fits", []):
        if "draft_s" in f:
            ratio = f.get("draft_to_target")
            console.print(
                f"  cost model {f['draft']} @ {f['level']}: step(k) = {_ms(f['intercept_s'])} ms + k x "
                f"{_ms(f['draft_s'])} ms" + (f" (one window token = {ratio:.3f} target steps)" if ratio else ""),
                highlight=False,
            )
    flagged = [e for e in expl.get("cells", []) if e["disagreements"]]
    if flagged:
        console.print("[bold]where the textbook expectation and the measurement disagree[/]")
        for e in flagged[:12]:
            console.print(f"  {e['text']}", highlight=False)
        if len(flagged) > 12:
            console.print(f"  ... {len(flagged) - 12} more in analysis.json")
    pred = analysis.get("prediction")
    if pred and pred.get("comparison"):
        t = Table(title="prediction vs measurement (TPOT)", title_justify="left")
        for h in PRED_HEADER:
            t.add_column(h)
        for row in prediction_rows(pred):
            t.add_row(*row)
        console.print(t)
        if pred.get("choice"):
            ch = pred["choice"]
            console.print(f"  predicted optimum: {ch['draft']} window {ch['window']}", highlight=False)
        for line in refined_lines(pred):
            console.print(f"  {line}", highlight=False)
    eq = analysis.get("equivalence", {})
    if eq.get("compared"):
        if eq["matched"] == eq["compared"]:
            console.print(
                f"[green]output equivalence: {eq['matched']}/{eq['compared']} greedy outputs identical "
                f"(100%) across all cells[/]"
            )
        else:
            console.print(
                f"[bold red]OUTPUT DIVERGENCE: {eq['compared'] - eq['matched']} of {eq['compared']} greedy outputs "
                f"differ between baseline and speculative ({eq['match_rate']:.1%} match)[/]"
            )
            for d in eq["divergences"][:10]:
                console.print(
                    f"[red]  {d['draft']} k{d['window']} @ {d['level']}: prompt {d.get('prompt_id')} (index "
                    f"{d.get('index')}) first differs at token {d.get('first_divergence')}[/]",
                    highlight=False,
                )
    if artifacts:
        console.print("[bold]compiled artifacts[/]")
        for k, v in artifacts.items():
            console.print(f"  {k}: {v}", highlight=False)


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    out += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out)


def sweep_markdown(analysis: dict[str, Any], artifacts: dict[str, str] | None = None) -> str:
    s = analysis.get("settings") or {}
    lines = [
        f"# spectrn sweep {analysis.get('sweep_id')}",
        "",
        f"Target {s.get('target')}; drafts {', '.join(s.get('drafts', []))}; windows "
        f"{', '.join(map(str, s.get('windows', [])))}; load {', '.join(s.get('levels', []))}; prompts "
        f"{s.get('prompts')}; {s.get('requests')} requests x {s.get('max_tokens')} tokens per endpoint and cell.",
        "",
    ]
    eq = analysis.get("equivalence", {})
    if eq.get("compared"):
        if eq["matched"] == eq["compared"]:
            lines += [f"**Output equivalence: {eq['matched']}/{eq['compared']} greedy outputs identical (100%).**", ""]
        else:
            lines += [
                f"**OUTPUT DIVERGENCE: {eq['compared'] - eq['matched']} of {eq['compared']} greedy outputs differ "
                f"({eq['match_rate']:.1%} match).**",
                "",
                _md_table(
                    ["draft", "window", "level", "prompt", "first divergent token"],
                    [
                        [
                            d["draft"],
                            str(d["window"]),
                            d["level"],
                            str(d.get("prompt_id")),
                            str(d.get("first_divergence")),
                        ]
                        for d in eq["divergences"][:50]
                    ],
                ),  # fmt: skip
                "",
            ]
    for level in analysis.get("levels", []):
        header, rows = matrix_table(analysis, level)
        lines += [f"## TPOT p50 speedup at {level} (95% CI)", "", _md_table(header, rows), ""]
    lines += ["## Recommendations", ""]
    lines += [f"- {r['text']}" for r in analysis.get("recommendations", [])]
    w = analysis.get("mix_weights")
    if w:
        lines += ["", "Mix weights: " + ", ".join(f"{c}={x:.2f}" for c, x in w.items())]
    lines += [
        "",
        "Ties: configurations whose CI overlaps the best's; the cheapest (smallest window, then smallest draft) "
        f"is recommended. A gain is meaningful when its CI is above 1 and it is at least "
        f"{1 + analysis.get('min_gain', 0.05):.2f}x.",
        "",
    ]
    if analysis.get("crossovers"):
        lines += ["## Load crossover", ""] + [f"- {c['text']}" for c in analysis["crossovers"]] + [""]
    expl = analysis.get("explanations", {})
    lines += ["## Why: acceptance and step costs", ""]
    for f in expl.get("cost_fits", []):
        if "draft_s" in f:
            ratio = f.get("draft_to_target")
            lines.append(
                f"- cost model {f['draft']} @ {f['level']}: step(k) = {_ms(f['intercept_s'])} ms + k x "
                f"{_ms(f['draft_s'])} ms"
                + (f"; one window token (draft pass + verify growth) = {ratio:.3f} target steps" if ratio else "")
            )
    rows = [
        [e["draft"], str(e["window"]), e["level"], e["prompt_class"],
         f"{e['observed_length']:.2f}" if e["observed_length"] is not None else "n/a",
         f"{e['first_position']:.2f}" if e["first_position"] is not None else "n/a",
         f"{e['expected_length_first_position']:.2f}" if e["expected_length_first_position"] is not None else "n/a",
         f"{e['acceptance_rate']:.2f}" if e["acceptance_rate"] is not None else "n/a",
         "; ".join(e["disagreements"]) or "agrees"]
        for e in expl.get("cells", [])
    ]  # fmt: skip
    lines += [
        "",
        _md_table(
            [
                "draft",
                "k",
                "level",
                "class",
                "observed L",
                "a (pos. 0)",
                "(1-a^(k+1))/(1-a)",
                "accepted/drafted",
                "disagreement",
            ],
            rows,
        ),  # fmt: skip
        "",
    ]
    pred = analysis.get("prediction")
    if pred and pred.get("comparison"):
        lines += ["## Prediction vs measurement", "", _md_table(PRED_HEADER, prediction_rows(pred)), ""]
        if pred.get("choice"):
            ch = pred["choice"]
            lines += [f"Predicted optimum: {ch['draft']} window {ch['window']}.", ""]
        lines += [*refined_lines(pred), ""]
    if artifacts:
        lines += ["## Compiled artifacts", ""] + [f"- {k}: {v}" for k, v in artifacts.items()] + [""]
    return "\n".join(lines)


def plot_crossover(analysis: dict[str, Any], path: Path) -> Path | None:
    """Speedup vs load level, one panel per prompt class (and the mix), one line per (draft, window) with its
    95% CI band; None with a single load level."""
    from matplotlib.figure import Figure

    levels = analysis.get("levels", [])
    series = analysis.get("crossovers", [])
    scopes = list(dict.fromkeys(c["scope"] for c in series))
    if len(levels) < 2 or not scopes:
        return None
    fig = Figure(figsize=(5.0 * len(scopes), 4.5), dpi=100, layout="constrained")
    axes = fig.subplots(1, len(scopes), squeeze=False)[0]
    xs = {lv: i for i, lv in enumerate(levels)}
    for ax, scope in zip(axes, scopes, strict=True):
        for c in (c for c in series if c["scope"] == scope):
            pts = [(xs[p["level"]], p["speedup"], p["ci95"]) for p in c["levels"] if p["speedup"] is not None]
            if not pts:
                continue
            x = [p[0] for p in pts]
            y = [p[1] for p in pts]
            line = ax.plot(x, y, marker="o", label=f"{c['draft']} k{c['window']}")[0]
            lo = [p[2][0] if p[2] else p[1] for p in pts]
            hi = [p[2][1] if p[2] else p[1] for p in pts]
            ax.fill_between(x, lo, hi, color=line.get_color(), alpha=0.12)
            if c["crossover"] and c.get("pays_at_lowest"):
                ax.axvline(xs[c["crossover"]], color=line.get_color(), ls=":", lw=1)
        ax.axhline(1.0, color="black", lw=1, ls="--")
        ax.set_xticks(range(len(levels)), levels)
        ax.set_xlabel("load level")
        ax.set_title(scope)
        ax.legend(fontsize=7)
    axes[0].set_ylabel("TPOT p50 speedup (>1: speculation faster)")
    fig.suptitle("speculation vs load (band: 95% CI; dotted: where a configuration stops paying)")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100, metadata={"Software": "spectrn"})
    return path


def write_report(sweep_dir: Path, analysis: dict[str, Any], artifacts: dict[str, str] | None = None) -> Path:
    """``report/index.html`` (self-contained: PNGs inlined as base64) and ``sweep.md``."""
    import base64
    import html

    report_dir = sweep_dir / "report"
    report_dir.mkdir(parents=True, exist_ok=True)
    md = sweep_markdown(analysis, artifacts)
    atomic_write_text(sweep_dir / "sweep.md", md)
    images: list[tuple[str, Path]] = []
    try:
        from spectrn.report.run_report import sweep_heatmap
    except ImportError:  # the report module is optional for sweeps; the tables carry the same numbers
        sweep_heatmap = None  # type: ignore[assignment]
    scopes = shown_scopes(analysis)
    for level in analysis.get("levels", []):
        cells = [
            {"draft": r["draft"], "window": r["window"], "prompt_class": r["prompt_class"], "speedup": r["speedup"],
             "ci95": r["ci95"]}
            for r in analysis["rows"]
            if r["level"] == level and r["speedup"] is not None and r["prompt_class"] in scopes
        ]  # fmt: skip
        if cells and sweep_heatmap is not None:
            p = sweep_heatmap(
                cells, report_dir / f"heatmap-{level}.png", title=f"TPOT p50 speedup by draft and window at {level}"
            )
            images.append((f"Speedup heatmap at {level}", p))
    cross = plot_crossover(analysis, report_dir / "crossover.png")
    if cross is not None:
        images.append(("Speedup vs load", cross))
    figs = "".join(
        f'<figure><img alt="{html.escape(t)}" src="data:image/png;base64,'
        f'{base64.b64encode(p.read_bytes()).decode()}"><figcaption>{html.escape(t)}</figcaption></figure>'
        for t, p in images
    )
    eq = analysis.get("equivalence", {})
    banner = ""
    if eq.get("compared") and eq["matched"] != eq["compared"]:
        banner = (
            f'<div class="bad">OUTPUT DIVERGENCE: {eq["compared"] - eq["matched"]} of {eq["compared"]} greedy '
            "outputs differ between baseline and speculative. See the table below.</div>"
        )
    elif eq.get("compared"):
        banner = f'<div class="ok">Output equivalence: {eq["matched"]}/{eq["compared"]} greedy outputs identical.</div>'
    body = _markdown_to_html(md)
    page = (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>spectrn sweep {html.escape(str(analysis.get('sweep_id')))}</title><style>{_CSS}</style></head><body>"
        f"{banner}{figs}{body}</body></html>"
    )
    out = report_dir / "index.html"
    atomic_write_text(out, page)
    return out


_CSS = (
    "body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1150px;color:#222;"
    "padding:0 1em}table{border-collapse:collapse;margin:.6em 0;font-size:.9em}th,td{border:1px solid #ccc;"
    "padding:.25em .6em;text-align:left}th{background:#f3f3f3}.ok{color:#17803d;font-weight:bold;padding:.5em 0}"
    ".bad{background:#fde8e8;border-left:6px solid #b00020;color:#b00020;font-weight:bold;padding:.8em 1em;"
    "font-size:1.2em}figure img{max-width:100%;border:1px solid #eee}figcaption{color:#555;font-size:.9em}"
)


def _markdown_to_html(md: str) -> str:
    """The small Markdown subset ``sweep_markdown`` writes: headings, bullets, tables, bold paragraphs."""
    import html

    out: list[str] = []
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("|"):
            block = []
            while i < len(lines) and lines[i].startswith("|"):
                block.append(lines[i])
                i += 1
            cells = [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", b)[1:-1]] for b in block]
            head, body = cells[0], cells[2:]
            out.append("<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in head) + "</tr>")
            out += ["<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body]
            out.append("</table>")
            continue
        if line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{html.escape(line[level:].strip())}</h{level}>")
        elif line.startswith("- "):
            out.append(f"<ul><li>{html.escape(line[2:])}</li></ul>")
        elif line.strip():
            text = html.escape(line)
            text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
            out.append(f"<p>{text}</p>")
        i += 1
    return "\n".join(out)
