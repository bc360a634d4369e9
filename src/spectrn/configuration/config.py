"""The run specification: ``SpectrnConfig``, one strict pydantic model of the two services and how to bench them.

Every model forbids unknown keys, so a misspelt key fails with its path instead of being ignored.
Cross-field rules (draft vs target, TP vs cores) live in ``SpectrnConfig``'s validator, and what each Neuron
server can run in its dialect's rules; each names the fields, the fact and the fix (docs/neuron.md has the
sources). Loading (file, environment, ``--set``, flags) and the origin of every value are ``spectrn.configuration.sources``;
the cluster settings are ``spectrn.configuration.cluster``, the bench and workload settings ``spectrn.configuration.bench``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from spectrn.configuration.base import (
    DNS_LABEL,
    DNS_SUBDOMAIN,
    IMAGE,
    Strict,
    has_registry,
    json_value,
    one_of,
)
from spectrn.configuration.bench import BenchConfig, load_shape_rules
from spectrn.configuration.catalog import INSTANCES, MODELS, InstanceSpec, ModelSpec
from spectrn.configuration.cloudwatch import CloudWatchConfig
from spectrn.configuration.cluster import CompileConfig, PodResources, Probes, S3Config, SecretRef, ServiceAccounts
from spectrn.configuration.neuron_host import Capabilities, NeuronDriver
from spectrn.configuration.origins import FieldError, Origins, dotted_path
from spectrn.configuration.pricing import BUILTIN_REGION, PRICE_SOURCE_URL, Pricing
from spectrn.configuration.stacks import eagle3_without_recipe, unsupported_stack
from spectrn.dialects import DIALECTS, plugin_releases, profiles, resolve, vllm_dialects
from spectrn.dialects.base import Dialect
from spectrn.dialects.methods import METHODS, SpeculationMethod
from spectrn.errors import ConfigError
from spectrn.labels import id_part, setup_label

# Validation context key: the config being validated was recorded by a run (``run.json``), not given by a person.
RECORDED = "recorded"
# Validation context key: the ``Origins`` of the values (``build_config``), for rules about what a person chose.
ORIGINS = "origins"
WINDOW_TUNING_RANGE = (5, 15)

ResourcesMode = Literal["dra-v1", "dra-v1beta1", "device-plugin"]
Runtime = Literal["neuron", "sim"]
NodeProvisioning = Literal["node-group", "karpenter", "auto-mode"]

DEFAULT_SPECTRN_IMAGE = "spectrn:0.1.0"
NEURON_SCHEDULER = "my-scheduler"  # the Neuron helm chart's scheduler.customScheduler.fullnameOverride


class SimConfig(Strict):
    preset: str = Field(default="qwen3-32b-trn2", description="Simulator calibration preset.")
    profile: str | None = Field(
        json_schema_extra={"enum": [*profiles(), None]},
        default=None,
        description="Server the simulator imitates on the wire and in /metrics. Default: the one vllm_dialect "
        "names (legacy-neuron: the preset's, neuron-fork for the Neuron presets; vllm-neuron plugin_release 0.2: "
        "vllm-neuron; current: vllm-neuron-0.24); upstream: vLLM V1's token_ids and moving spec counters.",
    )

    @field_validator("profile")
    @classmethod
    def _profile(cls, v: str | None) -> str | None:
        return v if v is None else one_of(v, list(profiles()))

    time_scale: float = Field(
        default=1.0, gt=0, le=100, description="Multiply all simulated times (0.1 = ten times faster)."
    )
    image: str = Field(
        default=DEFAULT_SPECTRN_IMAGE,
        description="Image that runs the simulator in the cluster (runtime: sim); needs a registry host unless spectrn_image_preloaded.",
    )


class SpectrnConfig(Strict):
    """Everything that describes the two services and how to benchmark them."""

    namespace: str = Field(default="spectrn", description="Kubernetes namespace for every object spectrn creates.")
    runtime: Runtime = Field(
        default="neuron",
        description="neuron: real vLLM on Neuron; sim: spectrn's simulated Neuron vLLM server (local demo, kind smoke test).",
    )
    target: str = Field(default="qwen3-32b", description="Target model key (catalog or custom_models).")
    draft: str = Field(default="qwen3-1.7b", description="Draft model key (catalog or custom_models).")
    num_speculative_tokens: int = Field(
        default=7,
        description="Speculation window k (1..32). legacy-neuron and vllm-neuron 0.2 (NxDI fused speculation): speculation_length = k, the draft proposes k-1 tokens and one step emits at most k tokens. vllm-neuron current (eagle3): k proposals, up to k+1 tokens per step. See docs/neuron.md.",
    )
    speculation_mode: str = Field(
        json_schema_extra={"enum": list(METHODS)},
        default="fused",
        description="fused: draft + target compiled together (legacy-neuron). eagle: an EAGLE draft (legacy-neuron and vllm-neuron 0.2: EAGLE v1 with a Llama target; vllm-neuron current: eagle3). vanilla (non-fused draft model) and medusa cannot run on either server and are rejected. legacy-neuron (fused, eagle) is out of support since Neuron SDK 2.28. See docs/neuron.md.",
    )
    vllm_dialect: str = Field(
        json_schema_extra={"enum": list(vllm_dialects())},
        default="legacy-neuron",
        description="legacy-neuron: the Neuron fork of vLLM V0 (DLC 0.9.x, --override-neuron-config; out of support since Neuron SDK 2.28: a warning says so); vllm-neuron: vLLM V1 with the vllm-neuron plugin (--additional-config, EAGLE only).",
    )
    plugin_release: str = Field(
        json_schema_extra={"enum": list(plugin_releases())},
        default="current",
        description='vllm-neuron only: current renders --additional-config \'{"neuron_config": {...}}\' and method eagle3 (plugin 0.24.x, SDK 2.32); 0.2 renders the 0.2.x form {"override_neuron_config": {...}} and method eagle (EAGLE v1, vLLM 0.11.0 DLC); 0.5 the same form on the last NxDI line (plugin 0.5.x, vLLM 0.16.0 DLC, SDK 2.31.1).',
    )
    image: str | None = Field(
        default=None,
        description="vLLM Neuron container image; default per dialect: "
        + "; ".join(
            f"{d.vllm_dialect}{''.join(' ' + r for r in d.releases[:1])} {d.image}"
            for d in DIALECTS.values()
            if d.selectable
        )
        + ".",
    )
    neuron_config: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra Neuron config keys rendered on both services inside the dialect's Neuron config (vllm-neuron current: neuron_config, e.g. on_device_sampling_config, quantization, bucket lists; 0.2: override_neuron_config; legacy-neuron: --override-neuron-config). See docs/neuron.md.",
    )
    max_num_batched_tokens: int | None = Field(
        default=None,
        ge=1,
        le=1_048_576,
        description="vLLM --max-num-batched-tokens on both services (default: vLLM's); the SDK's GPT-OSS EAGLE3 recipe pins it to its prefill bucket (512). See docs/neuron.md.",
    )
    dtype: Literal["auto", "bfloat16", "float16", "float32"] | None = Field(
        default=None,
        description="vLLM --dtype on both services (default: vLLM's, auto). See docs/neuron.md.",
    )
    hf_overrides: dict[str, Any] | None = Field(
        default=None,
        description="vLLM --hf-overrides on both services (e.g. {quantization_config: {}} loads gpt-oss in BF16 on Trn2). See docs/neuron.md.",
    )
    neuron_timeout_s: int | None = Field(
        default=None,
        ge=1,
        le=86400,
        description="vllm-neuron current only: VLLM_NEURON_COMPILATION_TIMEOUT and VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS on both services (the SDK's GPT-OSS recipes raise both to 1200 from the 600-second default). See docs/neuron.md.",
    )
    scheduling: Literal["same", "server-default"] = Field(
        default="same",
        description="same: both services run vLLM's synchronous scheduling, pinned with --no-async-scheduling where the server has async scheduling (vllm-neuron current and 0.5: --speculative-config turns it off on the speculative service only); server-default: each service runs its server's default, and the report says why the A/B is then not like for like. See docs/neuron.md.",
    )
    capabilities: Capabilities = Field(default_factory=Capabilities, description="The vLLM container's capabilities.")
    neuron_driver: NeuronDriver = Field(default_factory=NeuronDriver, description="Host Neuron driver (DRA).")
    spectrn_image: str = Field(
        default=DEFAULT_SPECTRN_IMAGE,
        description="spectrn's own image (load Job, simulator). A cluster pulls it, so it must name a registry (`make image`, then push: docs/kubernetes.md).",
    )
    spectrn_image_preloaded: bool = Field(
        default=False,
        description="The nodes already hold spectrn's image (kind load docker-image): allow spectrn_image and sim.image without a registry host.",
    )
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
    scheduler_name: str = Field(
        default=NEURON_SCHEDULER,
        description="schedulerName of the Neuron pods in resources_mode device-plugin (runtime neuron): the Neuron scheduler extension, which never hands one container non-contiguous devices (Neuron helm chart default: my-scheduler). Empty: the default scheduler. Not used with DRA.",
    )
    node_provisioning: NodeProvisioning = Field(
        default="node-group",
        description="How the trn2 nodes are provisioned: node-group (managed or self-managed), karpenter, or auto-mode (EKS Auto Mode). DRA is not supported on Auto Mode, and on Karpenter only from 1.15 (dynamic provisioning behind feature gates): render and deploy warn.",
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
    compile: CompileConfig = Field(default_factory=CompileConfig, description="Compile Jobs (`spectrn compile`).")
    custom_models: dict[str, ModelSpec] = Field(
        default_factory=dict,
        description="User-declared models, keyed like the catalog (keys: letters, digits, '.', '_', '-'); eagle_draft declares an EAGLE draft checkpoint.",
    )
    bench: BenchConfig = Field(default_factory=BenchConfig, description="Load generation.")
    pricing: Pricing = Field(default_factory=Pricing, description="Cost per token inputs.")
    cloudwatch: CloudWatchConfig = Field(default_factory=CloudWatchConfig, description="Publishing.")
    sim: SimConfig = Field(default_factory=SimConfig, description="Simulated runtime.")

    # where each value came from (set by build_config; not part of the configuration itself)
    _origins: Origins | None = PrivateAttr(default=None)

    @field_validator("namespace", "baseline_name", "speculative_name")
    @classmethod
    def _dns_label(cls, v: str) -> str:
        if not DNS_LABEL.fullmatch(v):
            raise ValueError("must be a DNS-1123 label: lowercase letters, digits and '-', at most 63 characters")
        return v

    @field_validator("speculation_mode")
    @classmethod
    def _method(cls, v: str) -> str:
        return one_of(v, list(METHODS))

    @field_validator("vllm_dialect")
    @classmethod
    def _vllm_dialect(cls, v: str) -> str:
        return one_of(v, vllm_dialects())

    @field_validator("plugin_release")
    @classmethod
    def _plugin_release(cls, v: str) -> str:
        return one_of(v, plugin_releases())

    @field_validator("scheduler_name")
    @classmethod
    def _scheduler(cls, v: str) -> str:
        if v and not DNS_SUBDOMAIN.fullmatch(v):
            raise ValueError(f"{v!r} is not a scheduler name: lowercase letters, digits, '-' or '.'")
        return v

    @field_validator("neuron_config", "hf_overrides")
    @classmethod
    def _json_only(cls, v: dict[str, Any] | None) -> dict[str, Any] | None:
        # rendered as JSON on the services' command lines and hashed into artifact keys and sweep fingerprints:
        # a YAML date, binary, non-text key or infinity would crash there (or turn null in a sweep's cells)
        for key, item in (v or {}).items():
            json_value(item, key)
        return v

    @field_validator("image", "spectrn_image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is not None and not IMAGE.fullmatch(v):
            raise ValueError(f"{v!r} is not an image reference (registry/repository:tag or @sha256:...)")
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
    def dialect(self) -> Dialect:
        """The server dialect ``vllm_dialect`` and ``plugin_release`` name (``spectrn.dialects``)."""
        found = resolve(self.vllm_dialect, self.plugin_release)
        if found is None:  # a recorded config read leniently can hold a pair no dialect answers to: the default's
            fields = type(self).model_fields
            found = resolve(fields["vllm_dialect"].default, fields["plugin_release"].default)
            assert found is not None, "the default vllm_dialect and plugin_release name a registered dialect"
        return found

    @property
    def method(self) -> SpeculationMethod:
        """The speculation method ``speculation_mode`` names (``spectrn.dialects.methods``)."""
        return METHODS.get(self.speculation_mode) or METHODS["fused"]

    @property
    def uses_draft_model(self) -> bool:
        return self.method.uses_draft_model

    @property
    def draft_label(self) -> str:
        """The draft as labels and run ids name it: its name, or the method's where the method has no draft model."""
        return self.draft if self.uses_draft_model else self.speculation_mode

    @property
    def server_image(self) -> str:
        """The vLLM image: ``image`` when set, else the dialect's (and plugin release's) default DLC."""
        if self.image:
            return self.image
        return self.dialect.image

    @property
    def sim_profile_choice(self) -> str | None:
        """The simulator profile this config asks for: ``sim.profile``; else the dialect's (vllm-neuron 0.2:
        vllm-neuron, current: vllm-neuron-0.24), so a simulated run plays the server the config would deploy;
        None: the preset's own (neuron-fork for the Neuron presets, the legacy fork's)."""
        if self.sim.profile is not None:
            return self.sim.profile
        return self.dialect.sim_profile

    @property
    def sim_draft(self) -> str | None:
        """The draft the simulator models: the config's when it is a catalog model (the simulator's cost and
        acceptance models know catalog models only); None for a custom draft, whose place the sim preset's own
        draft takes (the profile, window and wire behaviour still follow the config)."""
        return self.draft if self.uses_draft_model and self.draft in MODELS else None

    @property
    def nxdi_speculation(self) -> bool:
        """Speculation runs through NxDI's fused model (window semantics: at most k tokens per step)."""
        return self.dialect.window == "nxdi"

    def source_of(self, *fields: str) -> str:
        """Where the values of ``fields`` came from, for messages: ``from flag --window``, ``the default``."""
        origins = self._origins or Origins()
        return origins.describe_fields(fields)

    def origin_of(self, field: str) -> str:
        """Where ``field``'s value came from, bare (``flag --window``), for ``check_name``'s ``source``."""
        origins = self._origins or Origins()
        return origins.find(dotted_path(field)) or "the default value"

    def artifact_key(self, speculative: bool) -> str:
        """A path-safe key of everything that changes Neuron compilation, so configurations never collide."""
        parts: dict[str, Any] = {
            "target": self.target_spec.hf_id,
            "tp": self.tensor_parallel_size,
            "lnc": self.lnc,
            "seq": self.max_model_len,
            "batch": self.max_num_seqs,
            "image": self.server_image,
            "dialect": self.vllm_dialect,
        }
        # keys that change what Neuron compiles; absent when unset, so existing artifact folders keep their names
        if self.neuron_config:
            parts["neuron_config"] = self.neuron_config
        if self.hf_overrides is not None:
            parts["hf_overrides"] = self.hf_overrides
        for key in ("max_num_batched_tokens", "dtype"):
            if getattr(self, key) is not None:
                parts[key] = getattr(self, key)
        if speculative:
            parts.update(mode=self.speculation_mode, window=self.num_speculative_tokens)
            if self.uses_draft_model:
                parts["draft"] = self.draft_spec.hf_id
        digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]
        name = self.target.replace(".", "p")
        if speculative:
            draft = id_part(self.draft_label)
            label = f"{name}-sd-" + setup_label(draft, self.num_speculative_tokens, sep="-")
        else:
            label = f"{name}-base"
        return f"{label}-tp{self.tensor_parallel_size}-s{self.max_model_len}-b{self.max_num_seqs}-{digest}"

    # ---- cross-field validation ------------------------------------------------------------
    @model_validator(mode="after")
    def _cross_checks(self, info: ValidationInfo) -> SpectrnConfig:
        if info.context and info.context.get(RECORDED):
            return self  # a run's recorded config is history: today's rules do not apply to it
        known = sorted({*MODELS, *self.custom_models})
        for field in ("target", "draft"):
            key = getattr(self, field)
            if key not in self.custom_models and key not in MODELS:
                raise FieldError(
                    f"{field}: unknown model {key!r}; choose one of {', '.join(known)} "
                    f"or declare it under custom_models",
                    fields=(field,),
                    fix=f"set {field} to a catalog key or declare {key!r} under custom_models",
                )
        if self.instance_type not in INSTANCES:
            raise FieldError(
                f"instance_type: unknown instance {self.instance_type!r}; choose one of {', '.join(sorted(INSTANCES))}",
                fields=("instance_type",),
            )
        if self.pricing.instance_hourly_usd is None and self.pricing.region not in (None, BUILTIN_REGION):
            raise FieldError(
                f"pricing.region: no built-in price for {self.instance_type} in {self.pricing.region!r} (the built-in "
                f"prices are on-demand list prices for {BUILTIN_REGION})",
                fields=("pricing.region",),
                fix=f"set pricing.instance_hourly_usd to the hourly price of {self.instance_type} in "
                f"{self.pricing.region} ({PRICE_SOURCE_URL})",
            )
        if not 1 <= self.num_speculative_tokens <= 32:
            raise FieldError(
                f"num_speculative_tokens: {self.num_speculative_tokens} is outside 1..32",
                fields=("num_speculative_tokens",),
                fix=f"use a window between {WINDOW_TUNING_RANGE[0]} and {WINDOW_TUNING_RANGE[1]}",
            )
        target, draft = self.target_spec, self.draft_spec
        if self.uses_draft_model:
            if draft.tokenizer != target.tokenizer or draft.vocab_size != target.vocab_size:
                raise FieldError(
                    f"draft: {self.draft!r} (tokenizer {draft.tokenizer}, vocabulary {draft.vocab_size}) does not "
                    f"share the tokenizer of target {self.target!r} (tokenizer {target.tokenizer}, vocabulary "
                    f"{target.vocab_size}); speculation verifies token ids, so pick a draft of the same family",
                    fields=("draft", "target"),
                    fix="pick a draft of the target's family (same tokenizer and vocabulary)",
                )
            if draft.params_b >= target.params_b:
                raise FieldError(
                    f"draft: {self.draft!r} ({draft.params_b}B) is not smaller than target {self.target!r} "
                    f"({target.params_b}B); pick a smaller draft such as qwen3-1.7b",
                    fields=("draft", "target"),
                    fix="pick a smaller draft such as qwen3-1.7b",
                )
        self._neuron_rules()
        inst = self.instance
        if self.logical_neuron_cores is not None and self.logical_neuron_cores not in inst.lnc_options:
            raise FieldError(
                f"logical_neuron_cores: {self.logical_neuron_cores} is not supported on {self.instance_type} "
                f"(options: {', '.join(map(str, inst.lnc_options))})",
                fields=("logical_neuron_cores", "instance_type"),
            )
        devices = self.resources.neuron_devices
        if devices > inst.chips:
            raise FieldError(
                f"resources.neuron_devices: {devices} exceeds the {inst.chips} chips of {self.instance_type}; "
                f"request at most {inst.chips}",
                fields=("resources.neuron_devices", "instance_type"),
                fix=f"request at most {inst.chips} devices or pick a larger instance_type",
            )
        cores = inst.logical_cores(devices, self.lnc)
        if self.tensor_parallel_size != cores:
            raise FieldError(
                f"tensor_parallel_size: {self.tensor_parallel_size} does not fit the requested cores: "
                f"{devices} devices x {inst.cores_per_chip} cores / LNC {self.lnc} = {cores} logical cores on "
                f"{self.instance_type}; set tensor_parallel_size: {cores} or change resources.neuron_devices",
                fields=("tensor_parallel_size", "resources.neuron_devices", "logical_neuron_cores", "instance_type"),
                fix=f"set tensor_parallel_size: {cores} or change resources.neuron_devices",
            )
        if self.baseline_name == self.speculative_name:
            raise FieldError(
                "speculative_name: must differ from baseline_name",
                fields=("speculative_name", "baseline_name"),
                fix="give the two services different names",
            )
        if self.bench.input_tokens is not None and (
            self.bench.input_tokens + self.bench.max_tokens > self.max_model_len
        ):
            raise FieldError(
                f"bench.max_tokens: input_tokens {self.bench.input_tokens} + max_tokens {self.bench.max_tokens} "
                f"exceeds max_model_len {self.max_model_len}; lower one or raise max_model_len",
                fields=("bench.max_tokens", "bench.input_tokens", "max_model_len"),
            )
        self._s3_prefixes()
        load_shape_rules(self.bench, info.context.get(ORIGINS) if info.context else None)
        return self

    def _neuron_rules(self) -> None:
        """Only configurations the chosen Neuron server can run: the method's own requirements, then the
        dialect's; each rule cites its source (docs/neuron.md)."""
        dialect = resolve(self.vllm_dialect, self.plugin_release)
        if dialect is None:
            releases = [r for d in DIALECTS.values() if d.vllm_dialect == self.vllm_dialect for r in d.releases]
            raise FieldError(
                f"plugin_release: {self.plugin_release!r} is not a release of vllm_dialect {self.vllm_dialect!r} "
                f"(releases: {', '.join(releases)})",
                fields=("plugin_release", "vllm_dialect"),
                fix=f"set plugin_release to one of {', '.join(releases)}",
            )
        self.method.check(self, dialect)
        if self.neuron_driver.selected and self.resources_mode == "device-plugin":
            raise FieldError(
                "neuron_driver: a driver-version selector needs a DRA claim; resources_mode device-plugin has none",
                fields=("neuron_driver", "resources_mode"),
                fix="set resources_mode: dra-v1 (or dra-v1beta1), or remove neuron_driver",
            )
        if self.neuron_timeout_s is not None and not dialect.timeout_env:
            raise FieldError(
                f"neuron_timeout_s: {dialect.label} has no documented compile/execute timeout variables (the SDK "
                "documents VLLM_NEURON_COMPILATION_TIMEOUT and VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS for the current "
                "vllm-neuron plugin [aws-neuron/aws-neuron-sdk vllm-neuron/docs/getting-started/"
                "quickstart-online-serving.md])",
                fields=("neuron_timeout_s", "vllm_dialect", "plugin_release"),
                fix="remove neuron_timeout_s, or use vllm_dialect: vllm-neuron with plugin_release: current",
            )

    def _s3_prefixes(self) -> None:
        """The S3 policy grants write under artifacts_prefix and read under models_prefix: neither may widen."""
        models = self.s3.models_prefix.strip("/")
        artifacts = self.s3.artifacts_prefix.strip("/")
        for field, value in (("s3.models_prefix", models), ("s3.artifacts_prefix", artifacts)):
            if not value:
                raise FieldError(
                    f"{field}: empty: the IAM policy would then cover the whole bucket",
                    fields=(field,),
                    fix=f"give {field} a folder name such as {'models' if 'models' in field else 'compiled'}",
                )
        m, a = models.split("/"), artifacts.split("/")
        if a[: len(m)] == m or m[: len(a)] == a:
            raise FieldError(
                f"s3.artifacts_prefix: {artifacts!r} overlaps s3.models_prefix {models!r}: the pods may write "
                "under artifacts_prefix, which would then include the model weights",
                fields=("s3.artifacts_prefix", "s3.models_prefix"),
                fix="use two separate folders, e.g. models and compiled",
            )

    def warnings(self) -> list[str]:
        """Legal but questionable settings, shown by every command that loads the config."""
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
        stack = unsupported_stack(self.vllm_dialect, self.speculation_mode, self.plugin_release)
        if stack:
            out.append(stack)
        unfair = self.dialect.scheduling_unfair(self)
        if unfair:
            out.append(unfair)
        recipes = self.dialect.eagle_recipe_architectures
        if self.method.eagle and recipes is not None:
            recipe = eagle3_without_recipe(self.target, self.target_spec.architecture, recipes)
            if recipe:
                out.append(recipe)
        return out

    def cluster_warnings(self) -> list[str]:
        """Warnings that matter only when rendering or deploying for a cluster."""
        out = []
        if self.s3.bucket == S3Config().bucket and self.runtime == "neuron":
            out.append("s3.bucket: still the placeholder; set it to your model bucket before deploying")
        if self.resources_mode != "device-plugin" and self.runtime == "neuron":
            if self.node_provisioning == "auto-mode":
                out.append(
                    f"resources_mode: {self.resources_mode} with node_provisioning auto-mode: 'DRA is not currently "
                    "supported with EKS Auto Mode' (EKS User Guide, Manage hardware devices); use resources_mode: "
                    "device-plugin on Auto Mode nodes"
                )
            elif self.node_provisioning == "karpenter":
                out.append(
                    f"resources_mode: {self.resources_mode} with node_provisioning karpenter: Karpenter supports DRA "
                    "from version 1.15, and dynamic provisioning needs its feature gates (EKS User Guide, Manage "
                    "hardware devices); check your Karpenter version or use resources_mode: device-plugin"
                )
        return out

    def unpullable_images(self, *, load_job: bool) -> list[tuple[str, str]]:
        """(field, image) of each spectrn image a cluster would have to pull but cannot: no registry host.
        The simulator's pods use ``sim.image``, the load Job ``spectrn_image``; none when preloaded."""
        if self.spectrn_image_preloaded:
            return []
        used = [("sim.image", self.sim.image)] if self.runtime == "sim" else []
        if load_job:
            used.append(("spectrn_image", self.spectrn_image))
        return [(field, image) for field, image in used if not has_registry(image)]

    def check_cluster_images(self, *, load_job: bool) -> list[str]:
        """On a Trainium cluster (runtime neuron) a registry-less spectrn image is a ``ConfigError``; with the
        simulator (meant for kind, where `kind load docker-image` puts it on the node) it is a warning."""
        out = []
        for field, image in self.unpullable_images(load_job=load_job):
            problem = (
                f"{field}: {image!r} ({self.source_of(field)}) names no registry, so a cluster's nodes cannot pull it"
            )
            fix = (
                "build and push spectrn's image (`make image IMAGE=<account>.dkr.ecr.<region>.amazonaws.com/"
                f"spectrn:<tag>`, then `docker push`; docs/kubernetes.md) and set {field} to it, or set "
                "spectrn_image_preloaded: true when every node already holds it"
            )
            if self.runtime == "neuron":
                raise ConfigError(problem, hint=fix)
            out.append(f"{problem}; fine on kind after `kind load docker-image`, elsewhere {fix}")
        return out
