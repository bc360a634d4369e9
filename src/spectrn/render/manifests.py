"""Config -> Kubernetes objects: the manifests spectrn deploys, as plain dicts (pure, no cluster access).

The shape of every object lives in ``manifests/*.yaml.j2``; this module computes the values that need
logic (the vLLM command line for each dialect and speculation mode, environment, names, artifact paths)
and hands them to the templates. Templates render with ``StrictUndefined``; the output is parsed back and
checked (kind, apiVersion, name, spectrn's labels) before anyone uses it, so a template mistake is a
``RenderError`` here rather than a confusing apply failure later.

Objects, in apply order:

    Namespace
    ServiceAccount x2          vLLM pods, load Job (IRSA annotation when a role is configured)
    PersistentVolume + Claim   static Mountpoint-for-S3 volume (neuron runtime only)
    ResourceClaimTemplate      DRA modes only; one template, each pod gets its own claim
    ConfigMap                  prompt sets
    Deployment + Service x2    baseline and speculative, identical except speculation
    ConfigMap + Job            the load Job (spectrn loadgen or llmperf) and the config it reads
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from spectrn import names
from spectrn.dialects.base import flag_json
from spectrn.errors import ConfigError, RenderError
from spectrn.spec.config import SpectrnConfig
from spectrn.spec.sources import check_config_names

if TYPE_CHECKING:
    import jinja2

VARIANTS = ("baseline", "speculative")
SHARED_COMPONENTS = ("namespace", "serviceaccounts", "storage", "devices", "prompts")
ALL_COMPONENTS = (*SHARED_COMPONENTS, *VARIANTS, "loadgen")
ENGINES = ("spectrn", "llmperf")

LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_COMPONENT = "spectrn.io/component"

NEURON_DEVICE_CLASS = "neuron.aws.com"
NEURON_DRIVER = "neuron.aws.com"
NEURON_RESOURCE = "aws.amazon.com/neuron"
# Topology groups the Neuron DRA driver publishes on trn2 (connected devices); other counts get no constraint.
NEURON_DEVICE_GROUPS = (4, 8, 16)
S3_CSI_DRIVER = "s3.csi.aws.com"

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

# Small, fixed pod sizes for the simulator and the load pods (real vLLM sizes come from the config).
SIM_RESOURCES = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
LOADGEN_RESOURCES = {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}}
LLMPERF_RESOURCES = {"requests": {"cpu": "2", "memory": "4Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}}
WAIT_RESOURCES = {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"cpu": "200m", "memory": "128Mi"}}
NON_ROOT_UID = 65532

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


# ---- values in container specs -------------------------------------------------------------------


class KubeRef(str):
    """A deliberate Kubernetes variable reference such as ``$(JOB_COMPLETION_INDEX)``: left unescaped."""


def k8s_literal(value: str) -> str:
    """``value`` as it must be written in a container's command, args or env value so that Kubernetes passes
    it on unchanged: Kubernetes expands ``$(NAME)`` there and reduces ``$$`` to ``$``, so every ``$`` is
    doubled (kubernetes/kubernetes third_party/forked/golang/expansion/expand.go). A model id containing
    ``$(HF_TOKEN)`` then reaches vLLM as that text, never as the token."""
    if isinstance(value, KubeRef):
        return str(value)
    return value.replace("$", "$$")


def k8s_literals(values: Iterable[str]) -> list[str]:
    return [k8s_literal(v) for v in values]


# ---- names and paths ---------------------------------------------------------------------------


check_run_id = names.check_run_id  # one rule for local and in-cluster run ids (spectrn.names)


def deployment_name(cfg: SpectrnConfig, variant: str) -> str:
    return cfg.baseline_name if variant == "baseline" else cfg.speculative_name


def service_url(cfg: SpectrnConfig, variant: str, *, suffix: str = "") -> str:
    """In-cluster URL of a variant's Service (``suffix`` such as ``/v1`` for OpenAI clients)."""
    return f"http://{deployment_name(cfg, variant)}.{cfg.namespace}.svc.cluster.local:{cfg.port}{suffix}"


def model_path(cfg: SpectrnConfig, hf_id: str) -> str:
    """Where vLLM loads weights from: the mounted bucket (``s3``) or the Hugging Face id (``hub``)."""
    if cfg.model_source == "hub":
        return hf_id
    return f"{cfg.s3.mount_path.rstrip('/')}/{cfg.s3.models_prefix.strip('/')}/{hf_id}"


def artifacts_path(cfg: SpectrnConfig, speculative: bool) -> str:
    """Per-configuration compiled-artifact folder, so configurations never overwrite each other."""
    return f"{cfg.s3.mount_path.rstrip('/')}/{cfg.s3.artifacts_prefix.strip('/')}/{cfg.artifact_key(speculative)}"


def job_name(run_id: str, engine: str = "spectrn") -> str:
    return f"spectrn-{'loadgen' if engine == 'spectrn' else 'llmperf'}-{run_id}"


def config_map_name(run_id: str) -> str:
    """The ConfigMap holding the config the load pod of ``run_id`` reads."""
    return f"spectrn-config-{run_id}"


def pv_name(cfg: SpectrnConfig) -> str:
    # PersistentVolumes are cluster-scoped: the namespace keeps two spectrn installs apart.
    return f"spectrn-s3-{cfg.namespace}"


# ---- the vLLM command line ---------------------------------------------------------------------


def speculation_method(cfg: SpectrnConfig) -> str | None:
    """The ``method`` of ``--speculative-config``: the dialect's for EAGLE (eagle3 on the current plugin, eagle
    for EAGLE v1 on NxDI), none for draft-model speculation."""
    return cfg.method.method_flag(cfg.dialect)


def speculative_config(cfg: SpectrnConfig) -> dict[str, Any] | None:
    """vLLM ``--speculative-config`` for the speculative service, in the dialect's shape (None for a method
    without a draft model)."""
    if not cfg.uses_draft_model:
        return None
    return cfg.dialect.speculative_config(cfg, model_path(cfg, cfg.draft_spec.hf_id), speculation_method(cfg))


def vllm_args(cfg: SpectrnConfig, speculative: bool) -> list[str]:
    """Arguments after ``vllm serve``; everything but the speculation flags is identical for both services.
    The Neuron config flags are the dialect's (``spectrn.dialects``). Plain values: ``k8s_literal`` escapes them
    for the container spec."""
    target = cfg.target_spec.hf_id
    args = [
        model_path(cfg, target),
        "--served-model-name", target,
        "--host", "0.0.0.0",
        "--port", str(cfg.port),
        "--tensor-parallel-size", str(cfg.tensor_parallel_size),
        "--max-num-seqs", str(cfg.max_num_seqs),
        "--max-model-len", str(cfg.max_model_len),
    ]  # fmt: skip
    if cfg.max_num_batched_tokens is not None:
        args += ["--max-num-batched-tokens", str(cfg.max_num_batched_tokens)]
    if cfg.dtype is not None:
        args += ["--dtype", cfg.dtype]
    args += cfg.dialect.config_flags(cfg, speculative)
    if cfg.hf_overrides is not None:
        args += ["--hf-overrides", flag_json(cfg.hf_overrides)]
    spec = speculative_config(cfg) if speculative else None
    if spec is not None:
        args += ["--speculative-config", flag_json(spec)]
    return args


def sim_args(cfg: SpectrnConfig, speculative: bool) -> list[str]:
    """Arguments after ``spectrn`` for the simulated server (runtime: sim): the local servers' own command line
    (one function builds both, so they cannot drift), listening on every address at ``port``. Plain values:
    ``k8s_literal`` escapes them for the container spec."""
    from spectrn.runtimes.launch import sim_serve_args

    return sim_serve_args(cfg, speculative, host="0.0.0.0", port=cfg.port)  # noqa: S104 - a pod's own address


def _env(name: str, value: str) -> dict[str, Any]:
    """One container env entry; the value escaped so Kubernetes passes it on as written (``k8s_literal``)."""
    return {"name": name, "value": k8s_literal(value)}


def server_env(cfg: SpectrnConfig, speculative: bool) -> list[dict[str, Any]]:
    """Container environment; the speculative service adds only the draft id and its own artifact path."""
    env = [_env("MODEL_ID", cfg.target_spec.hf_id)]
    if speculative and cfg.uses_draft_model:
        env.append(_env("DRAFT_MODEL_ID", cfg.draft_spec.hf_id))
    if cfg.runtime == "neuron":
        env += [_env(name, value) for name, value in cfg.dialect.env()]
        if cfg.neuron_timeout_s is not None:
            env += [_env(name, str(cfg.neuron_timeout_s)) for name in cfg.dialect.timeout_env]
        env += [
            _env("NEURON_COMPILED_ARTIFACTS", artifacts_path(cfg, speculative)),
            _env("NEURON_LOGICAL_NC_CONFIG", str(cfg.lnc)),
        ]
        if cfg.model_source == "hub" and cfg.hf_token_secret is not None:
            ref = {"name": cfg.hf_token_secret.name, "key": cfg.hf_token_secret.key}
            env.append({"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": ref}})
    return env


# ---- load Job -----------------------------------------------------------------------------------


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
        dumped = shaped.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_defaults=True)
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
    for key in ("prompts.yaml", f"{cfg.bench.prompts}.yaml"):
        if key in data:
            return f"{PROMPTS_MOUNT}/{key}"
    return None


def pod_config_yaml(cfg: SpectrnConfig) -> str:
    """The config the load pod reads: the full run spec, with a user prompt path pointed at the mount."""
    data = cfg.model_dump(mode="json")
    if _user_prompts_path(cfg) is not None:
        from spectrn.spec.bench import WorkloadConfig

        data["bench"]["prompts"] = f"{PROMPTS_MOUNT}/{USER_PROMPTS_KEY}"
        # the mounted set is the workload already shaped (prompts_data): shaping it again would sample twice
        from spectrn.loadgen.bench import ignore_eos_of

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


def _slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug or "case"


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


# ---- templates ----------------------------------------------------------------------------------


def _template_env(folder: Path) -> jinja2.Environment:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(folder)),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    # JSON is valid YAML flow syntax: every value computed in Python enters a template through this filter,
    # so quoting can never go wrong.
    env.filters["j"] = lambda v: json.dumps(v, ensure_ascii=False)
    return env


def _labels(cfg: SpectrnConfig, component: str, **extra: str) -> dict[str, str]:
    labels = {
        LABEL_MANAGED_BY: "spectrn",
        "app.kubernetes.io/part-of": "spectrn",
        LABEL_COMPONENT: component,
        "spectrn.io/namespace": cfg.namespace,
    }
    labels.update(extra)
    return labels


def _check(objects: list[Any], source: str) -> list[dict[str, Any]]:
    out = []
    for i, obj in enumerate(objects):
        if obj is None:
            continue
        where = f"{source} document {i + 1}"
        if not isinstance(obj, dict):
            raise RenderError(f"{where} is a {type(obj).__name__}, not a Kubernetes object")
        for key in ("apiVersion", "kind"):
            if not isinstance(obj.get(key), str) or not obj[key]:
                raise RenderError(f"{where} has no {key}")
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise RenderError(f"{where} ({obj['kind']}) has no metadata.name")
        labels = meta.get("labels") or {}
        if labels.get(LABEL_MANAGED_BY) != "spectrn" or LABEL_COMPONENT not in labels:
            raise RenderError(f"{where} ({obj['kind']} {meta['name']}) lacks spectrn's labels")
        out.append(obj)
    return out


class _Renderer:
    def __init__(self, cfg: SpectrnConfig) -> None:
        from spectrn.paths import data_dir

        try:
            folder = data_dir("manifests")
        except FileNotFoundError as e:
            raise RenderError(str(e), hint="reinstall spectrn; the wheel ships spectrn/manifests") from None
        self.cfg = cfg
        self.env = _template_env(folder)

    def render_text(self, template: str, **ctx: Any) -> str:
        import jinja2

        try:
            return self.env.get_template(template).render(cfg=self.cfg, **ctx)
        except jinja2.UndefinedError as e:
            raise RenderError(f"template {template}: {e.message}", hint="this is a bug in spectrn's manifests") from e
        except jinja2.TemplateError as e:
            raise RenderError(f"template {template}: {e}", hint="this is a bug in spectrn's manifests") from e

    def render(self, template: str, **ctx: Any) -> list[dict[str, Any]]:
        text = self.render_text(template, **ctx)
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as e:
            raise RenderError(f"template {template} produced invalid YAML: {e}") from None
        return _check(docs, template)


# ---- public API ---------------------------------------------------------------------------------


def _components(cfg: SpectrnConfig, components: Iterable[str] | None, run_id: str | None) -> set[str]:
    if components is None:
        chosen = set(SHARED_COMPONENTS) | set(VARIANTS)
        if run_id is not None:
            chosen.add("loadgen")
    else:
        chosen = set(components)
        unknown = chosen - set(ALL_COMPONENTS)
        if unknown:
            raise ConfigError(
                f"unknown component(s) {', '.join(sorted(unknown))}", hint=f"choose from {', '.join(ALL_COMPONENTS)}"
            )
    if cfg.runtime == "sim":
        chosen.discard("storage")  # the simulator loads no weights and compiles nothing
    if cfg.resources_mode == "device-plugin":
        chosen.discard("devices")
    return chosen


def render_objects(
    cfg: SpectrnConfig,
    *,
    components: Iterable[str] | None = None,
    run_id: str | None = None,
    engine: str = "spectrn",
    hold_s: int = HOLD_UNTIL_COLLECTED_S,
    prompts: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Every object for ``cfg`` in apply order. The load Job is included when ``run_id`` is given
    (or ``"loadgen"`` is among ``components``); it targets the variants that are rendered.
    ``prompts`` replaces the prompt ConfigMap's data (default: ``prompts_data(cfg)``)."""
    check_config_names(cfg)
    chosen = _components(cfg, components, run_id)
    r = _Renderer(cfg)
    objs: list[dict[str, Any]] = []
    if "namespace" in chosen:
        objs += r.render("namespace.yaml.j2", labels=_labels(cfg, "namespace"))
    if "serviceaccounts" in chosen:
        objs += r.render(
            "serviceaccounts.yaml.j2",
            vllm_labels=_labels(cfg, "serving"),
            loadgen_labels=_labels(cfg, "loadgen"),
        )
    if "storage" in chosen:
        objs += r.render("s3-storage.yaml.j2", labels=_labels(cfg, "storage"), pv_name=pv_name(cfg))
    if "devices" in chosen:
        objs += r.render("neuron-claim.yaml.j2", labels=_labels(cfg, "devices"), **_claim_ctx(cfg))
    if prompts is None and chosen & {"prompts", "loadgen"}:
        prompts = prompts_data(cfg)
    prompts = dict(prompts or {})
    if "prompts" in chosen:
        objs += r.render("prompts-configmap.yaml.j2", labels=_labels(cfg, "prompts"), data=prompts)
    variants = [v for v in VARIANTS if v in chosen]
    for variant in variants:
        objs += r.render("server.yaml.j2", **_server_ctx(cfg, variant))
    if "loadgen" in chosen:
        if run_id is None:
            raise ConfigError("the load Job needs a run id", hint="pass run_id (spectrn render --run-id ID)")
        targets = variants or list(VARIANTS)
        objs += render_load_job(cfg, run_id, engine, prompts=prompts, variants=targets, hold_s=hold_s, renderer=r)
    return objs


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
        "run_id": run_id,
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


def _claim_ctx(cfg: SpectrnConfig) -> dict[str, Any]:
    devices = cfg.resources.neuron_devices
    return {
        "claim_name": claim_template_name(cfg),
        "api_version": "resource.k8s.io/v1" if cfg.resources_mode == "dra-v1" else "resource.k8s.io/v1beta1",
        "v1": cfg.resources_mode == "dra-v1",
        "count": devices,
        "device_class": NEURON_DEVICE_CLASS,
        "driver": NEURON_DRIVER,
        # neuron.aws.com/v1 is the current driver's parameters API; the sample's v1beta1 cluster used v1alphav1.
        "params_api": "neuron.aws.com/v1" if cfg.resources_mode == "dra-v1" else "neuron.aws.com/v1alphav1",
        "selector": f"device.attributes['neuron.aws.com'].instanceType == '{cfg.instance_type}'",
        "group_attr": f"resource.aws.com/devicegroup{devices}_id" if devices in NEURON_DEVICE_GROUPS else None,
        "lnc": cfg.lnc,
    }


def scheduler_name(cfg: SpectrnConfig) -> str | None:
    """The Neuron scheduler extension in device-plugin mode on the neuron runtime: it places a pod that asks for
    several Neuron devices on contiguous ones. DRA allocates devices itself (topology constraint in the claim),
    and the simulator needs no real devices."""
    if cfg.runtime == "neuron" and cfg.resources_mode == "device-plugin" and cfg.scheduler_name:
        return cfg.scheduler_name
    return None


def claim_template_name(cfg: SpectrnConfig) -> str:
    return f"spectrn-neuron-{cfg.resources.neuron_devices}"


def _server_ctx(cfg: SpectrnConfig, variant: str) -> dict[str, Any]:
    speculative = variant == "speculative"
    name = deployment_name(cfg, variant)
    sim = cfg.runtime == "sim"
    selector = {"app.kubernetes.io/name": name, LABEL_COMPONENT: variant}
    labels = _labels(cfg, variant, **{"app.kubernetes.io/name": name, "spectrn.io/variant": variant})
    if sim:
        resources: dict[str, Any] = {k: dict(v) for k, v in SIM_RESOURCES.items()}
    else:
        cpu, mem = cfg.resources.cpu, cfg.resources.memory
        resources = {"requests": {"cpu": cpu, "memory": mem}, "limits": {"cpu": cpu, "memory": mem}}
    if cfg.resources_mode == "device-plugin":
        for part in ("requests", "limits"):
            resources[part][NEURON_RESOURCE] = str(cfg.resources.neuron_devices)
    else:
        resources["claims"] = [{"name": "neuron"}]
    probe_timeout = min(10, cfg.probes.period_s)
    return {
        "name": name,
        "labels": labels,
        "selector": selector,
        "sim": sim,
        "image": cfg.sim.image if sim else cfg.server_image,
        "command": ["spectrn"] if sim else ["vllm", "serve"],
        "args": k8s_literals(sim_args(cfg, speculative) if sim else vllm_args(cfg, speculative)),
        "env": server_env(cfg, speculative),
        # Mountpoint for S3 CSI v2 mounts with gid=fsGroup, allow-other, dirs 770, files 660: the only way the
        # container (root, every capability dropped) may write the bucket (docs/neuron.md).
        "fs_group": None if sim else cfg.s3.fs_group,
        "scheduler_name": scheduler_name(cfg),
        "resources": resources,
        "dra": cfg.resources_mode != "device-plugin",
        "claim_name": claim_template_name(cfg),
        "startup_failures": max(1, math.ceil(cfg.probes.startup_budget_s / cfg.probes.period_s)),
        "probe_timeout": probe_timeout,
        "non_root_uid": NON_ROOT_UID,
    }


class _Dumper(yaml.SafeDumper):
    """Block literals for multi-line strings (scripts, config and prompt files stay readable)."""


def _str_representer(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str_representer)


def _notes(obj: Mapping[str, Any]) -> list[str]:
    """Comments for a reader of the YAML: what each pod's security level is, what to fill in."""
    kind, meta = obj["kind"], obj["metadata"]
    if kind == "ServiceAccount" and "eks.amazonaws.com/role-arn" not in meta.get("annotations", {}):
        return [
            "AWS identity: set service_accounts.*_role_arn to render the IRSA annotation",
            "eks.amazonaws.com/role-arn, or create an EKS Pod Identity association for this ServiceAccount.",
        ]
    if kind in ("Deployment", "Job"):
        ctx = obj["spec"]["template"]["spec"].get("securityContext", {})
        level = "restricted" if ctx.get("runAsNonRoot") else "baseline (root in the Neuron DLC, /dev/shm, S3 volume)"
        from spectrn.spec.neuron_host import beyond_baseline  # capabilities.add may take the pod past baseline

        caps = [a for c in obj["spec"]["template"]["spec"]["containers"]
                for a in (c.get("securityContext") or {}).get("capabilities", {}).get("add", [])]  # fmt: skip
        if beyond_baseline(caps):
            level = f"privileged (capabilities.add: {', '.join(beyond_baseline(caps))})"
        return [f"Pod Security Standards level: {level}."]
    if kind == "PersistentVolume" and "REPLACE" in str(obj["spec"].get("csi", {}).get("volumeAttributes", {})):
        return ["Placeholder bucket: set s3.bucket to the bucket holding your weights and compiled artifacts."]
    return []


def to_yaml(objects: Iterable[Mapping[str, Any]]) -> str:
    """Multi-document YAML, pipeable to ``kubectl apply -f -``, with a comment where a reader must act."""
    docs = []
    for o in objects:
        notes = "".join(f"# {line}\n" for line in _notes(o))
        docs.append(notes + yaml.dump(dict(o), Dumper=_Dumper, sort_keys=False, width=10_000, allow_unicode=True))
    return "---\n" + "---\n".join(docs) if docs else ""


def object_filename(index: int, obj: Mapping[str, Any]) -> str:
    """``NN-kind-name.yaml``: the number keeps ``kubectl apply -f DIR`` in dependency order."""
    kind = re.sub(r"[^a-z0-9]+", "-", str(obj["kind"]).lower()).strip("-")
    name = re.sub(r"[^a-z0-9.-]+", "-", str(obj["metadata"]["name"]).lower()).strip("-.")
    return f"{index:02d}-{kind}-{name or 'object'}.yaml"


def output_folder(path: Path) -> Path:
    """The folder ``render -o`` writes into, created if needed. It is the user's chosen path, so ``..`` is
    fine; what is refused is a path that exists and is not a folder."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"render output folder {path} exists and is not a folder", hint="choose another path")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(
            f"render output folder {path} cannot be created: {e.strerror}", hint="check permissions"
        ) from None
    return path


def write_objects(objects: Iterable[Mapping[str, Any]], out_dir: Path) -> list[Path]:
    """One file per object directly inside ``out_dir`` (atomic writes); returns the paths written. File names
    come from ``object_filename`` (no separators), and each is checked to land in the folder itself."""
    from spectrn.paths import atomic_write_text

    folder = output_folder(out_dir)
    real = folder.resolve()
    written = []
    for i, obj in enumerate(objects, start=1):
        path = folder / object_filename(i, obj)
        if path.resolve().parent != real:  # a symlink planted under the file's name would lead elsewhere
            raise ConfigError(f"{path} does not lead into {folder}", hint="remove it, or choose an empty folder")
        atomic_write_text(path, to_yaml([obj]))
        written.append(path)
    return written


def s3_iam_policy(cfg: SpectrnConfig) -> dict[str, Any]:
    """Least-privilege IAM policy for the model bucket volume, for the role that mounts it (the Mountpoint
    for S3 CSI driver's role): list the bucket, read weights under ``models_prefix``, and read/write/delete
    compiled artifacts under ``artifacts_prefix`` (the Neuron compiler saves them there; the volume is mounted
    with allow-delete/allow-overwrite for that). Nothing else in the bucket is readable or writable."""
    bucket = f"arn:aws:s3:::{cfg.s3.bucket}"
    models = cfg.s3.models_prefix.strip("/")
    artifacts = cfg.s3.artifacts_prefix.strip("/")
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "SpectrnListModelBucket", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": bucket},
            {
                "Sid": "SpectrnReadModels",
                "Effect": "Allow",
                "Action": "s3:GetObject",
                "Resource": f"{bucket}/{models}/*",
            },
            {
                "Sid": "SpectrnCompiledArtifacts",
                "Effect": "Allow",
                "Action": ["s3:GetObject", "s3:PutObject", "s3:AbortMultipartUpload", "s3:DeleteObject"],
                "Resource": f"{bucket}/{artifacts}/*",
            },
        ],
    }


def iam_policy(cfg: SpectrnConfig) -> dict[str, Any]:
    """Least-privilege IAM policy for the load pod: PutMetricData into ``cloudwatch.namespace`` only and
    spectrn's own dashboards. One definition, shared with ``spectrn publish`` (``spectrn.publish.cloudwatch``)."""
    from spectrn.publish.iam import publish_iam_policy

    return publish_iam_policy(
        cfg.cloudwatch.namespace, cfg.cloudwatch.dashboard_prefix, region=cfg.cloudwatch.region or "*"
    )
