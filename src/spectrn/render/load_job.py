"""The load Job of a run: its config ConfigMap, the load pod's arguments and inputs, and the llmperf engine.

The load pod reads the full run spec and the prompt sets (with the user's workload already shaped) from
ConfigMaps, waits for every server's ``/health``, then runs ``spectrn loadgen`` (or the pinned llmperf
script, its values passed as environment) against the variants' in-cluster Services.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from spectrn import names
from spectrn.configuration.config import SpectrnConfig
from spectrn.configuration.sources import check_config_names
from spectrn.dialects.base import flag_json
from spectrn.errors import ConfigError
from spectrn.render.literals import KubeRef, _env, k8s_literals
from spectrn.render.server import NON_ROOT_UID, VARIANTS, service_url
from spectrn.render.templates import _labels, _Renderer

ENGINES = ("spectrn", "llmperf")

PROMPTS_MOUNT = "/etc/spectrn/prompts"
CONFIG_MOUNT = "/etc/spectrn"
CONFIG_FILE = "spectrn.yaml"
RESULTS_MOUNT = "/results"
USER_PROMPTS_KEY = "user-prompts.yaml"
TRACE_KEY = "trace.jsonl"  # bench.trace, in the prompts ConfigMap beside the workload
HOLD_UNTIL_COLLECTED_S = 3600

# ray-project/llmperf is unmaintained; pin the source so every run executes the same benchmark code.
LLMPERF_REPO = "https://github.com/ray-project/llmperf"
LLMPERF_REF = "f1d6bed47e4501b0e371082b41601b59ab55269f"
LLMPERF_IMAGE = "python:3.10-slim"
# The published sample's eight test cases; each replaces llmperf's sonnet text (the marker keeps the sonnet).
LLMPERF_KEEP_SONNET = "__SHAKESPEARE__"
LLMPERF_TEST_CASES = (
    "counting numbers from 1 ",
    LLMPERF_KEEP_SONNET,
    "a",
    "hello world ",
    "the cat sat on the mat. ",
    "Output valid JSON with fixed keys",
    "Write a simple Python function skeleton",
    "List numbers from one to twenty",
)

# Small, fixed pod sizes for the load pods and their wait-for-health init container.
LOADGEN_RESOURCES = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}
LLMPERF_RESOURCES = {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}}
WAIT_RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}


# Init container of the load Job: poll each server's /health until all answer 200 or the budget runs out, so
# the Job can be applied together with the Deployments (Neuron compilation takes hours).
WAIT_FOR_HEALTH = """\
import sys, time, urllib.request
deadline = time.monotonic() + float(sys.argv[1])
for url in sys.argv[2:]:
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    print("ready:", url, flush=True)
                    break
        except OSError as e:
            print("waiting:", url, e, flush=True)
        if time.monotonic() > deadline:
            sys.exit("gave up waiting for " + url)
        time.sleep(10)
"""


check_run_id = names.check_run_id  # one rule for local and in-cluster run ids (spectrn.names)


def job_name(run_id: str, engine: str) -> str:
    return f"spectrn-{'loadgen' if engine == 'spectrn' else 'llmperf'}-{run_id}"


def config_map_name(run_id: str) -> str:
    """The ConfigMap holding the config the load pod of ``run_id`` reads."""
    return f"spectrn-config-{run_id}"


# ---- what the load pod reads ---------------------------------------------------------------------


def _packaged_prompts() -> dict[str, str]:
    from spectrn.paths import data_dir

    try:
        folder = data_dir("prompts")
    except FileNotFoundError:
        return {}
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(folder.glob("*.yaml")) if p.is_file()}


def _user_prompts_path(cfg: SpectrnConfig) -> Path | None:
    from spectrn.loadgen.prompts import BUILTIN_SETS, COMBINED_SETS

    value = cfg.bench.prompts
    if value in BUILTIN_SETS or value in COMBINED_SETS:
        return None
    return Path(value)


def prompts_data(cfg: SpectrnConfig) -> dict[str, str]:
    """ConfigMap data: every packaged prompt set, plus the user's workload when ``bench.prompts`` is a path.

    The workload travels as spectrn's own YAML prompt set, already read, filtered, sampled and prefixed by
    ``bench.workload`` here: the load pod then reads exactly the prompts a local run would send, in any source
    format (JSONL, CSV, ShareGPT, Spec-Bench, a saved Hugging Face dataset), without the file's reader or the
    ``datasets`` library in the image."""
    data = _packaged_prompts()
    user = _user_prompts_path(cfg)
    if user is not None:
        from spectrn.loadgen.workloads import load_workload

        what = f"bench.prompts file ({cfg.source_of('bench.prompts')})"
        shaped, _ = load_workload(str(user), cfg.bench.workload, seed=cfg.bench.seed, what=what)
        dumped = shaped.model_dump(mode="json", by_alias=True, exclude_defaults=True)  # every None is a default
        data[USER_PROMPTS_KEY] = yaml.safe_dump({"name": shaped.name, **dumped}, sort_keys=False, allow_unicode=True)
    if cfg.bench.trace is not None:  # the trace travels too, checked and in one normal form (JSONL)
        from spectrn.loadgen.arrivals import read_trace

        rows = read_trace(Path(cfg.bench.trace), what=f"bench.trace ({cfg.source_of('bench.trace')})")
        data[TRACE_KEY] = "".join(
            json.dumps({k: v for k, v in (("arrival_s", r.offset_s), ("input_tokens", r.input_tokens),
                                          ("output_tokens", r.output_tokens)) if v is not None}) + "\n"
            for r in rows
        )  # fmt: skip
    size = sum(len(v.encode()) for v in data.values())
    if size > 1_000_000:
        raise ConfigError(
            f"bench.prompts: the prompt sets{' and the trace' if TRACE_KEY in data else ''} total {size} bytes, over "
            "the 1 MB ConfigMap limit",
            hint="sample fewer prompts (bench.workload.sample) or filter them (bench.workload.max_chars); shorten "
            "bench.trace",
        )
    return data


def prompts_file_arg(cfg: SpectrnConfig, data: Mapping[str, str]) -> str | None:
    """The prompt file the load pod reads, or None to let the loader resolve the named set itself."""
    if USER_PROMPTS_KEY in data:
        return f"{PROMPTS_MOUNT}/{USER_PROMPTS_KEY}"
    key = f"{cfg.bench.prompts}.yaml"  # a packaged set; "all" and the like: the loader combines the sets itself
    return f"{PROMPTS_MOUNT}/{key}" if key in data else None


def pod_config_yaml(cfg: SpectrnConfig) -> str:
    """The config the load pod reads: the full run spec, with a user prompt path pointed at the mount."""
    data = cfg.model_dump(mode="json")
    if _user_prompts_path(cfg) is not None:
        from spectrn.configuration.bench import WorkloadConfig

        data["bench"]["prompts"] = f"{PROMPTS_MOUNT}/{USER_PROMPTS_KEY}"
        # the mounted set is the workload already shaped (prompts_data): shaping it again would sample twice
        from spectrn.bench.local import ignore_eos_of

        data["bench"]["workload"] = WorkloadConfig(format="yaml").model_dump(mode="json")
        # the mount path is a user's file to the automatic rule: keep the value this workload was given here
        data["bench"]["ignore_eos"] = ignore_eos_of(cfg)
    if cfg.bench.trace is not None:
        data["bench"]["trace"] = f"{PROMPTS_MOUNT}/{TRACE_KEY}"
    return yaml.safe_dump(data, sort_keys=False)


def loadgen_args(
    cfg: SpectrnConfig,
    run_id: str,
    endpoints: Mapping[str, str],
    prompts_file: str | None,
    *,
    hold_s: int = HOLD_UNTIL_COLLECTED_S,
) -> list[str]:
    """Arguments after ``spectrn`` for the load pod (the "Load pod" contract in docs/architecture.md)."""
    args = ["loadgen"]
    for variant, url in endpoints.items():
        args += ["--endpoint", f"{variant}={url}"]
    args += ["--config", f"{CONFIG_MOUNT}/{CONFIG_FILE}"]
    if prompts_file:
        args += ["--prompts-file", prompts_file]
    args += ["--run-id", run_id, "--out", f"{RESULTS_MOUNT}/{run_id}"]
    if cfg.bench.loadgen_pods > 1:
        # Kubernetes expands $(VAR) from the container's env; the Job controller sets JOB_COMPLETION_INDEX.
        args += ["--shard-index", KubeRef("$(JOB_COMPLETION_INDEX)"), "--shards", str(cfg.bench.loadgen_pods)]
    if hold_s > 0:
        args += ["--hold-until-collected", str(hold_s)]
    return [*args, "--quiet"]  # pod logs: plain lines, no progress bars


# ---- llmperf -------------------------------------------------------------------------------------


def _slug(text: str) -> str:
    # only for the fixed LLMPERF_TEST_CASES, each with a letter or digit: never empty
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def llmperf_run_timeout_s(cfg: SpectrnConfig) -> int:
    """llmperf's ``--timeout``: the budget of the whole run, not of one request (ray-project/llmperf
    token_benchmark_ray.py: "The amount of time to run the load test for"). Enough for every wave of
    ``concurrency`` requests to take the per-request timeout ``bench.timeout_s``."""
    bench = cfg.bench
    waves = math.ceil(bench.requests / bench.concurrency[0])
    return math.ceil(bench.timeout_s) * waves


def llmperf_sampling_params(cfg: SpectrnConfig) -> dict[str, Any]:
    """llmperf's ``--additional-sampling-params`` (merged into each request body, next to its ``max_tokens``).
    ``ignore_eos`` goes in only when ``bench.ignore_eos`` is set: llmperf uses its own test cases, never the
    built-in sets, and the published experiment sent none (natural ends), which ``unset`` reproduces."""
    bench = cfg.bench
    params: dict[str, Any] = {"temperature": bench.temperature}
    if bench.ignore_eos:
        params.update(ignore_eos=True, min_tokens=bench.max_tokens)
    elif bench.ignore_eos is False:
        params["ignore_eos"] = False
    return params


def llmperf_env(cfg: SpectrnConfig, run_id: str, endpoints: Mapping[str, str], *, hold_s: int) -> list[dict[str, Any]]:
    """Every value the llmperf script (``manifests/llmperf-run.sh.j2``) uses, as container environment: the
    sample's flags and test cases, both services at once. llmperf runs one closed-loop level: the first of
    ``bench.concurrency``."""
    bench = cfg.bench
    cases = [(_slug(c) if c != LLMPERF_KEEP_SONNET else "sonnet", c) for c in LLMPERF_TEST_CASES]
    values = {
        "SPECTRN_LLMPERF_REPO": LLMPERF_REPO,
        "SPECTRN_LLMPERF_REF": LLMPERF_REF,
        "SPECTRN_OUT": f"{RESULTS_MOUNT}/{run_id}",
        "SPECTRN_HOLD_S": str(hold_s),
        "SPECTRN_MODEL": cfg.target_spec.hf_id,
        "SPECTRN_INPUT_LEN": str(bench.input_tokens or 64),
        "SPECTRN_OUTPUT_LEN": str(bench.max_tokens),
        "SPECTRN_REQUESTS": str(bench.requests),
        "SPECTRN_RUN_TIMEOUT_S": str(llmperf_run_timeout_s(cfg)),
        "SPECTRN_CONCURRENCY": str(bench.concurrency[0]),
        "SPECTRN_SAMPLING_PARAMS": flag_json(llmperf_sampling_params(cfg)),
        "SPECTRN_ENDPOINTS": "".join(f"{variant} {url}\n" for variant, url in endpoints.items()),
        "SPECTRN_CASES": "".join(f"{slug}\t{text}\n" for slug, text in cases),
        "SPECTRN_KEEP_SONNET": LLMPERF_KEEP_SONNET,
    }
    return [_env(name, value) for name, value in values.items()]


def llmperf_script(cfg: SpectrnConfig) -> str:
    """The llmperf pod's shell script: the same text for every configuration (values: ``llmperf_env``)."""
    return _Renderer(cfg).render_text("llmperf-run.sh.j2")


# ---- the Job --------------------------------------------------------------------------------------


def render_load_job(
    cfg: SpectrnConfig,
    run_id: str,
    engine: str = "spectrn",
    endpoints: Mapping[str, str] | None = None,
    *,
    prompts: Mapping[str, str] | None = None,
    variants: Iterable[str] = VARIANTS,
    hold_s: int = HOLD_UNTIL_COLLECTED_S,
    renderer: _Renderer | None = None,
) -> list[dict[str, Any]]:
    """The config ConfigMap and the load Job of run ``run_id`` (``engine``: spectrn or llmperf).

    ``endpoints`` maps variant -> base URL; the default is each variant's in-cluster Service URL (with
    ``/v1`` for llmperf, whose OpenAI client wants the API root)."""
    check_run_id(run_id)
    if engine not in ENGINES:
        raise ConfigError(f"engine {engine!r} is not known", hint=f"choose one of {', '.join(ENGINES)}")
    if hold_s < 0:
        raise ConfigError(f"hold time {hold_s} is negative", hint="give 0 (no hold) or a number of seconds")
    check_config_names(cfg)
    r = renderer or _Renderer(cfg)
    suffix = "/v1" if engine == "llmperf" else ""
    if endpoints is None:
        endpoints = {v: service_url(cfg, v, suffix=suffix) for v in variants}
    if not endpoints:
        raise ConfigError("the load Job has no endpoint to target", hint="render at least one variant")
    for variant, url in endpoints.items():
        if not re.fullmatch(r"[a-z][a-z0-9_-]{0,62}", variant) or not re.fullmatch(r"https?://[!-~]+", url):
            raise ConfigError(f"endpoint {variant}={url} is malformed", hint="use NAME=http://host:port")
    data = dict(prompts) if prompts is not None else prompts_data(cfg)
    labels = _labels(cfg, "loadgen", **{"spectrn.io/run-id": run_id})
    ctx: dict[str, Any] = {
        "labels": labels,
        "engine": engine,
        "config_name": config_map_name(run_id),
        "config_yaml": pod_config_yaml(cfg),
        "job_name": job_name(run_id, engine),
        "wait_command": k8s_literals(
            ["python3", "-c", WAIT_FOR_HEALTH, str(cfg.probes.startup_budget_s)]
            + [u.removesuffix("/v1") + "/health" for u in endpoints.values()]
        ),
        "non_root_uid": NON_ROOT_UID,
        "wait_resources": WAIT_RESOURCES,
    }
    if engine == "spectrn":
        ctx.update(
            image=cfg.spectrn_image,
            command=["spectrn"],
            args=k8s_literals(loadgen_args(cfg, run_id, endpoints, prompts_file_arg(cfg, data), hold_s=hold_s)),
            resources=LOADGEN_RESOURCES,
            pods=cfg.bench.loadgen_pods,
            env=[_env("HOME", "/tmp")],
        )
    else:
        ctx.update(
            image=LLMPERF_IMAGE,
            command=["/bin/bash", "-c"],
            args=[llmperf_script(cfg)],  # the same text for every configuration; values come from env
            resources=LLMPERF_RESOURCES,
            pods=1,
            # A dummy key the OpenAI client insists on; vLLM is started without --api-key. Not a secret.
            env=[_env("OPENAI_API_KEY", "dummy"), _env("HOME", "/work"), _env("HF_HOME", "/work/hf")]
            + llmperf_env(cfg, run_id, endpoints, hold_s=hold_s),
        )
    return r.render("load-job.yaml.j2", **ctx)
