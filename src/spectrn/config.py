"""The run specification: one strict pydantic model, loaded from ``spectrn.yaml``.

Precedence, lowest to highest: field defaults < the YAML file < ``SPECTRN_*`` environment variables <
CLI flags. Environment variables address nested fields with a double underscore:
``SPECTRN_BENCH__CONCURRENCY=8`` sets ``bench.concurrency``; values are parsed as YAML scalars.

Every model forbids unknown keys, so a misspelt key fails with its path instead of being ignored.
Cross-field rules (draft vs target, TP vs cores, mode vs dialect) live in ``SpectrnConfig``'s validator
and name both fields and the fix. ``load_config`` turns pydantic's errors into one ``ConfigError``.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from spectrn.catalog import INSTANCES, MODELS, InstanceSpec, ModelSpec
from spectrn.errors import ConfigError

DEFAULT_CONFIG_FILE = "spectrn.yaml"
ENV_PREFIX = "SPECTRN_"
MAX_CONFIG_BYTES = 1_000_000
WINDOW_TUNING_RANGE = (5, 15)

SpeculationMode = Literal["fused", "vanilla", "eagle", "medusa"]
Dialect = Literal["legacy-neuron", "vllm-neuron"]
ResourcesMode = Literal["dra-v1", "dra-v1beta1", "device-plugin"]
Runtime = Literal["neuron", "sim"]

# Modes each vLLM dialect can run (REFERENCE section 2): draft-model speculation lives only in the legacy
# Neuron fork; the vllm-neuron plugin supports EAGLE only.
DIALECT_MODES: dict[str, tuple[str, ...]] = {
    "legacy-neuron": ("fused", "vanilla", "eagle", "medusa"),
    "vllm-neuron": ("eagle",),
}


class ConfigWarning(UserWarning):
    """A legal but questionable setting (shown, never fatal)."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class S3Config(Strict):
    bucket: str = Field(
        default="REPLACE-WITH-YOUR-BUCKET",
        description="S3 bucket holding model weights and compiled Neuron artifacts (Mountpoint for S3 volume).",
    )
    region: str = Field(default="us-east-2", description="AWS region of the bucket.")
    models_prefix: str = Field(
        default="models", description="Key prefix under which weights live, one folder per Hugging Face id."
    )
    artifacts_prefix: str = Field(
        default="compiled", description="Key prefix for compiled artifacts, one folder per configuration hash."
    )
    mount_path: str = Field(default="/var/mdl", description="Where the bucket is mounted in the vLLM pods.")
    capacity: str = Field(
        default="1200Gi", description="Nominal capacity of the static PersistentVolume (S3 has no real limit)."
    )

    @field_validator("bucket")
    @classmethod
    def _bucket_name(cls, v: str) -> str:
        import re

        if not re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9.\-]{1,61}[a-zA-Z0-9]", v):
            raise ValueError("must be a valid S3 bucket name (3-63 letters, digits, dots, dashes)")
        return v


class ServiceAccounts(Strict):
    vllm: str = Field(
        default="spectrn-vllm",
        description="ServiceAccount of the vLLM pods (needs S3 read/write for the model volume).",
    )
    loadgen: str = Field(
        default="spectrn-loadgen",
        description="ServiceAccount of the load Job (needs cloudwatch:PutMetricData only when publishing from the pod).",
    )
    vllm_role_arn: str = Field(
        default="",
        description="IAM role for the vLLM pods (IRSA annotation); empty renders a placeholder comment only.",
    )
    loadgen_role_arn: str = Field(
        default="", description="IAM role for the load Job (IRSA annotation); empty renders no annotation."
    )


class SecretRef(Strict):
    name: str = Field(description="Kubernetes Secret name.")
    key: str = Field(default="token", description="Key inside the Secret.")


class Probes(Strict):
    startup_budget_s: int = Field(
        default=17100,
        ge=60,
        le=86400,
        description="How long the startup probe allows before Kubernetes restarts the pod (Neuron compilation is slow; the sample allows ~4.75 h).",
    )
    period_s: int = Field(default=30, ge=1, le=600, description="Probe period (seconds).")


class PodResources(Strict):
    cpu: str = Field(default="90", description="CPU request and limit of each vLLM pod.")
    memory: str = Field(default="600Gi", description="Memory request and limit of each vLLM pod.")
    shm_size: str = Field(default="128Gi", description="Size of the /dev/shm memory volume.")
    neuron_devices: int = Field(default=8, ge=1, le=64, description="Neuron devices (chips) per vLLM pod.")


class BenchConfig(Strict):
    prompts: str = Field(
        default="structured",
        description="Prompt set name (structured, open, sample, all) or a path to a YAML prompt file.",
    )
    api: Literal["chat", "completions"] = Field(default="chat", description="OpenAI API used for requests.")
    concurrency: list[int] = Field(default=[4], description="Closed-loop concurrency levels (one run per level).")
    request_rate: float | None = Field(
        default=None,
        gt=0,
        description="Open-loop Poisson request rate per endpoint (req/s); overrides concurrency when set.",
    )
    requests: int = Field(default=32, ge=1, le=1_000_000, description="Measured requests per endpoint and level.")
    warmup: int = Field(
        default=2, ge=0, le=10_000, description="Warm-up requests per endpoint, excluded from statistics."
    )
    max_tokens: int = Field(
        default=600,
        ge=1,
        le=131072,
        description="Output length per request (max_tokens with ignore_eos and min_tokens).",
    )
    input_tokens: int | None = Field(
        default=None,
        ge=1,
        le=131072,
        description="Target input length; prompts are extended to this many tokens using the server's /tokenize.",
    )
    temperature: float = Field(
        default=0.0, ge=0.0, le=2.0, description="Sampling temperature, always sent (0 = greedy)."
    )
    schedule: Literal["simultaneous", "interleaved"] = Field(
        default="simultaneous",
        description="Run both endpoints at once (as the published experiment) or alternate A/B/A/B.",
    )
    nonce: bool = Field(default=False, description="Prefix each prompt with a unique nonce to defeat prefix caching.")
    ramp_s: float = Field(
        default=0.0,
        ge=0,
        le=3600,
        description="Spread the start of the closed-loop workers evenly over this many seconds (0: all start at once, as the published experiment); later requests follow each worker's own pace, so waves do not stay locked together.",
    )
    timeout_s: float = Field(default=1200.0, gt=0, le=86400, description="Per-request timeout (seconds).")
    seed: int = Field(default=0, description="Seed for prompt order and Poisson arrivals.")
    max_error_rate: float = Field(
        default=0.05, ge=0, le=1, description="Above this error rate a run is flagged as not clean."
    )
    slo_ttft_s: float | None = Field(default=None, gt=0, description="Goodput SLO on TTFT (seconds).")
    slo_tpot_s: float | None = Field(default=None, gt=0, description="Goodput SLO on TPOT (seconds).")
    loadgen_pods: int = Field(
        default=1, ge=1, le=64, description="Pods of the in-cluster load Job (Indexed Job shards)."
    )

    @field_validator("concurrency")
    @classmethod
    def _levels(cls, v: list[int]) -> list[int]:
        if not v:
            raise ValueError("needs at least one level")
        for level in v:
            if level < 1 or level > 4096:
                raise ValueError(f"level {level} outside 1..4096")
        return v


class Pricing(Strict):
    instance_hourly_usd: float | None = Field(
        default=None,
        gt=0,
        description="Instance price per hour; default: the instance catalog's approximate on-demand price.",
    )
    instances_per_service: float = Field(
        default=0.5,
        gt=0,
        description="Share of an instance one service uses (0.5: both services share one trn2.48xlarge).",
    )


class CloudWatchConfig(Strict):
    namespace: str = Field(default="Spectrn", description="CloudWatch metric namespace.")
    region: str | None = Field(default=None, description="AWS region (default: the standard AWS resolution chain).")
    storage_resolution: Literal[1, 60] = Field(
        default=60, description="1 for high-resolution metrics, 60 for standard."
    )
    dashboard_prefix: str = Field(default="spectrn", description="Dashboards are named <prefix>-<run id>.")


class SimConfig(Strict):
    preset: str = Field(default="qwen3-32b-trn2", description="Simulator calibration preset.")
    profile: Literal["neuron-fork", "vllm-neuron", "upstream"] | None = Field(
        default=None,
        description="Server the simulator imitates on the wire and in /metrics (default: the preset's; "
        "neuron-fork for the Neuron presets, upstream for vLLM V1's token_ids and moving spec counters).",
    )
    time_scale: float = Field(
        default=1.0, gt=0, le=100, description="Multiply all simulated times (0.1 = ten times faster)."
    )
    image: str = Field(
        default="spectrn:0.1.0", description="Image that runs the simulator in the cluster (runtime: sim)."
    )


class SpectrnConfig(Strict):
    """Everything that describes the two services and how to benchmark them."""

    namespace: str = Field(default="spectrn", description="Kubernetes namespace for every object spectrn creates.")
    runtime: Runtime = Field(
        default="neuron",
        description="neuron: real vLLM on Neuron; sim: spectrn's simulated Neuron vLLM server (local demo, kind smoke test).",
    )
    target: str = Field(default="qwen3-32b", description="Target model key (catalog or custom_models).")
    draft: str = Field(
        default="qwen3-1.7b", description="Draft model key (catalog or custom_models); ignored for medusa."
    )
    num_speculative_tokens: int = Field(
        default=7, description="Speculation window: tokens the draft proposes per step (1..32)."
    )
    speculation_mode: SpeculationMode = Field(
        default="fused",
        description="NxDI speculation mode: fused (draft+target compiled together), vanilla, eagle or medusa.",
    )
    vllm_dialect: Dialect = Field(
        default="legacy-neuron",
        description="legacy-neuron: the Neuron fork of vLLM (DLC 0.9.x, --override-neuron-config); vllm-neuron: the vLLM v1 plugin (--additional-config).",
    )
    image: str = Field(
        default="public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.9.1-neuronx-py311-sdk2.26.1-ubuntu22.04",
        description="vLLM Neuron container image.",
    )
    spectrn_image: str = Field(default="spectrn:0.1.0", description="spectrn's own image (load Job, simulator).")
    instance_type: str = Field(default="trn2.48xlarge", description="Neuron instance type (instance catalog).")
    tensor_parallel_size: int = Field(
        default=32,
        ge=1,
        le=256,
        description="Tensor parallel degree; must equal the logical cores of the requested devices.",
    )
    logical_neuron_cores: int | None = Field(
        default=None, description="Logical NeuronCore setting (LNC); default: the instance's default (2 on trn2)."
    )
    max_num_seqs: int = Field(
        default=4, ge=1, le=1024, description="vLLM --max-num-seqs (batch limit), identical on both services."
    )
    max_model_len: int = Field(
        default=1024, ge=64, le=131072, description="vLLM --max-model-len, identical on both services."
    )
    resources_mode: ResourcesMode = Field(
        default="dra-v1",
        description="dra-v1 (resource.k8s.io/v1, Kubernetes 1.34+), dra-v1beta1, or device-plugin (aws.amazon.com/neuron extended resources).",
    )
    model_source: Literal["s3", "hub"] = Field(
        default="s3",
        description="s3: load weights from the mounted bucket; hub: let vLLM download from Hugging Face (needs hf_token_secret for gated models).",
    )
    baseline_name: str = Field(default="qwen-vllm", description="Name of the baseline Deployment and Service.")
    speculative_name: str = Field(default="qwen-sd-vllm", description="Name of the speculative Deployment and Service.")
    port: int = Field(default=8000, ge=1, le=65535, description="Service and container port.")
    s3: S3Config = Field(default_factory=S3Config, description="Model and artifact bucket.")
    service_accounts: ServiceAccounts = Field(
        default_factory=ServiceAccounts, description="ServiceAccounts and their IAM roles."
    )
    hf_token_secret: SecretRef | None = Field(
        default=None, description="Optional Secret holding a Hugging Face token (never inline)."
    )
    probes: Probes = Field(default_factory=Probes, description="Startup/readiness/liveness probes on /health.")
    resources: PodResources = Field(
        default_factory=PodResources, description="Pod resources (identical on both services)."
    )
    custom_models: dict[str, ModelSpec] = Field(
        default_factory=dict, description="User-declared models, keyed like the catalog."
    )
    bench: BenchConfig = Field(default_factory=BenchConfig, description="Load generation.")
    pricing: Pricing = Field(default_factory=Pricing, description="Cost per token inputs.")
    cloudwatch: CloudWatchConfig = Field(default_factory=CloudWatchConfig, description="Publishing.")
    sim: SimConfig = Field(default_factory=SimConfig, description="Simulated runtime.")

    @field_validator("namespace", "baseline_name", "speculative_name")
    @classmethod
    def _dns_label(cls, v: str) -> str:
        import re

        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", v):
            raise ValueError("must be a DNS-1123 label: lowercase letters, digits and '-', at most 63 characters")
        return v

    # ---- catalog look-ups -------------------------------------------------------------------
    def model(self, key: str) -> ModelSpec:
        spec = self.custom_models.get(key) or MODELS.get(key)
        if spec is None:
            raise KeyError(key)
        return spec

    @property
    def target_spec(self) -> ModelSpec:
        return self.model(self.target)

    @property
    def draft_spec(self) -> ModelSpec:
        return self.model(self.draft)

    @property
    def instance(self) -> InstanceSpec:
        return INSTANCES[self.instance_type]

    @property
    def lnc(self) -> int:
        return self.logical_neuron_cores or self.instance.default_lnc

    @property
    def hourly_usd(self) -> float:
        return self.pricing.instance_hourly_usd or self.instance.hourly_usd

    @property
    def uses_draft_model(self) -> bool:
        return self.speculation_mode != "medusa"

    def artifact_key(self, speculative: bool) -> str:
        """A path-safe key of everything that changes Neuron compilation, so configurations never collide."""
        parts: dict[str, Any] = {
            "target": self.target_spec.hf_id,
            "tp": self.tensor_parallel_size,
            "lnc": self.lnc,
            "seq": self.max_model_len,
            "batch": self.max_num_seqs,
            "image": self.image,
            "dialect": self.vllm_dialect,
        }
        if speculative:
            parts.update(mode=self.speculation_mode, window=self.num_speculative_tokens)
            if self.uses_draft_model:
                parts["draft"] = self.draft_spec.hf_id
        digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]
        name = self.target.replace(".", "p")
        if speculative:
            draft = self.draft.replace(".", "p") if self.uses_draft_model else "medusa"
            label = f"{name}-sd-{draft}-k{self.num_speculative_tokens}"
        else:
            label = f"{name}-base"
        return f"{label}-tp{self.tensor_parallel_size}-s{self.max_model_len}-b{self.max_num_seqs}-{digest}"

    # ---- cross-field validation ------------------------------------------------------------
    @model_validator(mode="after")
    def _cross_checks(self) -> SpectrnConfig:
        known = sorted({*MODELS, *self.custom_models})
        for field in ("target", "draft"):
            key = getattr(self, field)
            if key not in self.custom_models and key not in MODELS:
                raise ValueError(
                    f"{field}: unknown model {key!r}; choose one of {', '.join(known)} "
                    f"or declare it under custom_models"
                )
        if self.instance_type not in INSTANCES:
            raise ValueError(
                f"instance_type: unknown instance {self.instance_type!r}; choose one of {', '.join(sorted(INSTANCES))}"
            )
        if not 1 <= self.num_speculative_tokens <= 32:
            raise ValueError(
                f"num_speculative_tokens: {self.num_speculative_tokens} is outside 1..32; "
                f"use a window between {WINDOW_TUNING_RANGE[0]} and {WINDOW_TUNING_RANGE[1]}"
            )
        target, draft = self.target_spec, self.draft_spec
        if self.uses_draft_model:
            if draft.tokenizer != target.tokenizer or draft.vocab_size != target.vocab_size:
                raise ValueError(
                    f"draft: {self.draft!r} (tokenizer {draft.tokenizer}, vocabulary {draft.vocab_size}) does not "
                    f"share the tokenizer of target {self.target!r} (tokenizer {target.tokenizer}, vocabulary "
                    f"{target.vocab_size}); speculation verifies token ids, so pick a draft of the same family"
                )
            if draft.params_b >= target.params_b:
                raise ValueError(
                    f"draft: {self.draft!r} ({draft.params_b}B) is not smaller than target {self.target!r} "
                    f"({target.params_b}B); pick a smaller draft such as qwen3-1.7b"
                )
        allowed = DIALECT_MODES[self.vllm_dialect]
        if self.speculation_mode not in allowed:
            raise ValueError(
                f"speculation_mode: {self.speculation_mode!r} is not supported by vllm_dialect "
                f"{self.vllm_dialect!r} (supports: {', '.join(allowed)}); use vllm_dialect: legacy-neuron "
                f"for draft-model speculation, or speculation_mode: eagle"
            )
        inst = self.instance
        if self.logical_neuron_cores is not None and self.logical_neuron_cores not in inst.lnc_options:
            raise ValueError(
                f"logical_neuron_cores: {self.logical_neuron_cores} is not supported on {self.instance_type} "
                f"(options: {', '.join(map(str, inst.lnc_options))})"
            )
        devices = self.resources.neuron_devices
        if devices > inst.chips:
            raise ValueError(
                f"resources.neuron_devices: {devices} exceeds the {inst.chips} chips of {self.instance_type}; "
                f"request at most {inst.chips}"
            )
        cores = inst.logical_cores(devices, self.lnc)
        if self.tensor_parallel_size != cores:
            raise ValueError(
                f"tensor_parallel_size: {self.tensor_parallel_size} does not fit the requested cores: "
                f"{devices} devices x {inst.cores_per_chip} cores / LNC {self.lnc} = {cores} logical cores on "
                f"{self.instance_type}; set tensor_parallel_size: {cores} or change resources.neuron_devices"
            )
        if self.baseline_name == self.speculative_name:
            raise ValueError("speculative_name: must differ from baseline_name")
        if (
            self.max_model_len <= self.bench.max_tokens
            and self.bench.input_tokens is not None
            and (self.bench.input_tokens + self.bench.max_tokens > self.max_model_len)
        ):
            raise ValueError(
                f"bench.max_tokens: input_tokens {self.bench.input_tokens} + max_tokens {self.bench.max_tokens} "
                f"exceeds max_model_len {self.max_model_len}; lower one or raise max_model_len"
            )
        return self

    def warnings(self) -> list[str]:
        """Legal but questionable settings, shown to the user."""
        out = []
        lo, hi = WINDOW_TUNING_RANGE
        if not lo <= self.num_speculative_tokens <= hi:
            out.append(
                f"num_speculative_tokens: {self.num_speculative_tokens} is outside the tuned range {lo}..{hi} "
                f"of the published experiment; sweep windows to confirm it pays"
            )
        if 2 * self.resources.neuron_devices > self.instance.chips:
            out.append(
                f"resources.neuron_devices: two services of {self.resources.neuron_devices} devices do not fit one "
                f"{self.instance_type}; they will need two nodes"
            )
        if self.s3.bucket == S3Config().bucket and self.runtime == "neuron":
            out.append("s3.bucket: still the placeholder; set it to your model bucket before deploying")
        return out


# ---- loading ------------------------------------------------------------------------------------


class _SafeLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases, so a 'billion laughs' file cannot expand in memory."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()  # type: ignore[no-untyped-call]
            raise yaml.constructor.ConstructorError(
                None, None, "YAML aliases are not allowed in spectrn files", event.start_mark
            )
        return super().compose_node(parent, index)


def yaml_value(raw: str, *, what: str = "value") -> Any:
    """A ``--set`` or ``SPECTRN_*`` value parsed as YAML with the file rules (no aliases); text that is not
    valid YAML stays text, so the config's own validation names the field."""
    if raw == "":
        return ""
    try:
        return yaml.load(raw, Loader=_SafeLoader)  # noqa: S506 - _SafeLoader is a SafeLoader
    except yaml.YAMLError:
        return raw
    except RecursionError:
        raise ConfigError(f"{what} is nested too deeply", hint="give a flat value") from None


def load_yaml(path: Path, *, what: str = "file", max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """Read a YAML file safely: size-capped, UTF-8, no aliases; errors name the file and the line."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist", hint="check the path") from None
    except OSError as e:
        raise ConfigError(f"{what} {path} cannot be read: {e.strerror}") from None
    if size > max_bytes:
        raise ConfigError(
            f"{what} {path} is {size} bytes, over the {max_bytes}-byte limit", hint="split or trim the file"
        )
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what} {path} is not UTF-8 (byte {e.start})", hint="save it as UTF-8") from None
    try:
        return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 - _SafeLoader is a SafeLoader
    except RecursionError:  # a hostile document: thousands of nested [ or {
        raise ConfigError(f"{what} {path} is nested too deeply", hint="flatten the document") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1} column {mark.column + 1}" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{what} {path}{where}: malformed YAML: {problem}", hint="fix the YAML syntax") from None


def format_validation_error(err: ValidationError) -> str:
    """One line per problem, each naming the field path."""
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown key (misspelt?); see `spectrn init` for the valid keys"
        lines.append(f"{loc}: {msg}" if loc else msg)
    return "; ".join(lines)


def validation_hint(err: ValidationError) -> str:
    """The fix for the first problem: a spelling check for unknown keys, the valid values otherwise."""
    first = err.errors()[0]
    loc = ".".join(str(p) for p in first["loc"]) or "the configuration"
    if first["type"] == "extra_forbidden":
        return "check the key's spelling; `spectrn config-reference` lists every valid key"
    return f"change {loc}; `spectrn config-reference` lists its valid values"


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in a nested dict, creating levels as needed."""
    parts = dotted.split(".")
    node = data
    for part in parts[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[parts[-1]] = value


def env_overrides(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """``SPECTRN_BENCH__CONCURRENCY=8`` -> ``{"bench": {"concurrency": 8}}``; values parsed as YAML scalars."""
    environ = dict(os.environ) if environ is None else environ
    out: dict[str, Any] = {}
    skip = {"SPECTRN_CONFIG", "SPECTRN_HOME"}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or name in skip:
            continue
        dotted = name[len(ENV_PREFIX) :].lower().replace("__", ".")
        set_dotted(out, dotted, yaml_value(raw, what=name))
    return out


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def build_config(
    data: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> SpectrnConfig:
    """Validate file data + environment + flag overrides (``{"bench.concurrency": [8]}``)."""
    merged = deep_merge(data or {}, env_overrides(environ))
    for dotted, value in (overrides or {}).items():
        if value is not None:
            set_dotted(merged, dotted, value)
    try:
        return SpectrnConfig.model_validate(merged)
    except ValidationError as e:
        raise ConfigError(format_validation_error(e), hint=validation_hint(e)) from None


def load_config(
    path: Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> SpectrnConfig:
    """Load ``path`` (or ``$SPECTRN_CONFIG`` or ./spectrn.yaml when present), then apply env and flags."""
    env = dict(os.environ) if environ is None else environ
    explicit = path is not None or "SPECTRN_CONFIG" in env
    if path is None:
        path = Path(env.get("SPECTRN_CONFIG", DEFAULT_CONFIG_FILE))
    data: dict[str, Any] = {}
    if path.exists() or explicit:
        loaded = load_yaml(path, what="config file")
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(
                f"config file {path}: top level must be a mapping of keys, got {type(loaded).__name__}",
                hint="see `spectrn init` for the layout",
            )
        data = loaded
    try:
        return build_config(data, overrides, env)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e.message}" if data else e.message, hint=e.hint) from None


def emit_warnings(cfg: SpectrnConfig) -> list[str]:
    msgs = cfg.warnings()
    for m in msgs:
        warnings.warn(m, ConfigWarning, stacklevel=2)
    return msgs


# ---- documentation ------------------------------------------------------------------------------


def _type_name(ann: Any) -> str:
    """``Literal['a', 'b']`` -> ``a \\| b``; ``int | None`` -> ``int \\| None``."""
    import types
    import typing

    origin = typing.get_origin(ann)
    if origin is Literal:
        return " \\| ".join(str(a) for a in typing.get_args(ann))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in typing.get_args(ann))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(ann))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if ann is type(None):
        return "None"
    return getattr(ann, "__name__", None) or str(ann).replace("typing.", "")


def _walk_fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str, str]]:
    rows = []
    for name, field in model.model_fields.items():
        ann = field.annotation
        dotted = f"{prefix}{name}"
        if isinstance(ann, type) and issubclass(ann, BaseModel) and ann is not ModelSpec:
            rows.extend(_walk_fields(ann, f"{dotted}."))
            continue
        default = field.get_default(call_default_factory=True)
        if isinstance(default, BaseModel):
            default = default.model_dump()
        rows.append((dotted, _type_name(ann), json.dumps(default), field.description or ""))
    return rows


def config_reference_markdown() -> str:
    """The configuration reference table, generated from the model's field descriptions."""
    lines = [
        "| key | type | default | description |",
        "| --- | --- | --- | --- |",
    ]
    for dotted, type_name, default, desc in _walk_fields(SpectrnConfig):
        desc = desc.replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
        lines.append(f"| `{dotted}` | {type_name} | `{default}` | {desc} |")
    return "\n".join(lines)


def commented_default_yaml() -> str:
    """The file `spectrn init` writes: every key with its default, each preceded by its description."""

    def emit(model: type[BaseModel], indent: int) -> list[str]:
        out: list[str] = []
        pad = "  " * indent
        for name, field in model.model_fields.items():
            ann = field.annotation
            if field.description:
                out.append(f"{pad}# {field.description}")
            if isinstance(ann, type) and issubclass(ann, BaseModel) and ann is not ModelSpec:
                out.append(f"{pad}{name}:")
                out.extend(emit(ann, indent + 1))
                continue
            default = field.get_default(call_default_factory=True)
            dumped = yaml.safe_dump({name: default}, default_flow_style=True, width=1000).strip()
            dumped = dumped.removeprefix("{").removesuffix("}")
            out.append(f"{pad}{dumped}")
        return out

    header = [
        "# spectrn configuration. Every key is optional; shown values are the defaults.",
        "# Override any key with SPECTRN_<KEY> (nested: SPECTRN_BENCH__CONCURRENCY=8) or a CLI flag.",
    ]
    return "\n".join(header + emit(SpectrnConfig, 0)) + "\n"
