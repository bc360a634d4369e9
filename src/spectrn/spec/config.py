"""The run specification: one strict pydantic model, loaded from ``spectrn.yaml``.

Precedence, lowest to highest: field defaults < the YAML file < ``SPECTRN_*`` environment variables <
``--set`` < CLI flags. Environment variables address nested fields with a double underscore:
``SPECTRN_BENCH__CONCURRENCY=8`` sets ``bench.concurrency``; values are parsed as YAML scalars, and a scalar
where a list is expected becomes a one-item list (``8`` -> ``[8]``, ``1,4,16`` -> ``[1, 4, 16]``). Variables
whose first part is not a configuration key (``SPECTRN_CHECKOV``, ``SPECTRN_KIND_CLUSTER``) belong to other
tools and are left alone.

Every model forbids unknown keys, so a misspelt key fails with its path instead of being ignored.
Cross-field rules (draft vs target, TP vs cores, what each Neuron server can run) live in ``SpectrnConfig``'s
validator and name the fields, the fact and the fix (docs/neuron.md has the sources). ``build_config``
turns every problem into one ``ConfigError`` that also names where the bad value came from: the file and
line, the environment variable, the ``--set`` key or the flag (``Origins``).

Checks that pydantic cannot express run around it in ``build_config``: control characters anywhere (before
validation), and every name that becomes a path, a label or a shell word (after validation, through the one
rule in ``spectrn.names``).

Values are taken as a person writes them: YAML reads ``plugin_release: 0.2`` or ``compile.cpu=190`` as a
number, and where the field holds text (a string or a choice of strings) the number becomes the text exactly as
written (``_strings_as_written``), from the file, the environment, ``--set`` or a flag alike.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import stat
import types
import typing
import unicodedata
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from spectrn.errors import ConfigError
from spectrn.labels import id_part, setup_label
from spectrn.names import check_name, name_problem
from spectrn.spec.catalog import INSTANCES, MODELS, InstanceSpec, ModelSpec
from spectrn.spec.pricing import BUILTIN_REGION, PRICE_SOURCE_URL
from spectrn.spec.stacks import LEGACY_CONSEQUENCE, eagle3_without_recipe, unsupported_stack
from spectrn.spec.yaml_keys import UniqueKeyLoader

DEFAULT_CONFIG_FILE = "spectrn.yaml"
# Validation context key: the config being validated was recorded by a run (``run.json``), not given by a person.
RECORDED = "recorded"
# Validation context key: the ``Origins`` of the values (``build_config``), for rules about what a person chose.
ORIGINS = "origins"
MAX_REQUESTS = 1_000_000
ENV_PREFIX = "SPECTRN_"
MAX_CONFIG_BYTES = 1_000_000
WINDOW_TUNING_RANGE = (5, 15)

SpeculationMode = Literal["fused", "vanilla", "eagle", "medusa"]
Dialect = Literal["legacy-neuron", "vllm-neuron"]
PluginRelease = Literal["current", "0.2"]
ResourcesMode = Literal["dra-v1", "dra-v1beta1", "device-plugin"]
Runtime = Literal["neuron", "sim"]
NodeProvisioning = Literal["node-group", "karpenter", "auto-mode"]

# Deep Learning Container images (aws-neuron/deep-learning-containers README; docs/neuron.md):
# the Neuron fork of vLLM (V0) and the vLLM V1 images that ship the vllm-neuron plugin.
DLC = "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx"
LEGACY_NEURON_IMAGE = f"{DLC}:0.9.1-neuronx-py311-sdk2.26.1-ubuntu22.04"
PLUGIN_IMAGES: dict[str, str] = {
    "current": f"{DLC}:0.24.0.1.1.0-neuronx-py313-sdk2.32.0-ubuntu24.04",  # plugin v0.24.0.1.1.0 (SDK 2.32)
    "0.2": f"{DLC}:0.11.0-neuronx-py312-sdk2.27.1-ubuntu24.04",  # vLLM 0.11.0, plugin 0.2.1-lts
}
DEFAULT_SPECTRN_IMAGE = "spectrn:0.1.0"
NEURON_SCHEDULER = "my-scheduler"  # the Neuron helm chart's scheduler.customScheduler.fullnameOverride

# The simulator profile that plays each vllm-neuron plugin release (spectrn.sim.profiles; docs/neuron.md).
PLUGIN_SIM_PROFILES: dict[str, str] = {"0.2": "vllm-neuron", "current": "vllm-neuron-0.24"}

# Modes each vLLM dialect can run at all; SpectrnConfig._neuron_rules adds what each needs. medusa runs on
# neither: the fork's Neuron path has no Medusa handling (docs/neuron.md, Rejected configurations).
DIALECT_MODES: dict[str, tuple[str, ...]] = {
    "legacy-neuron": ("fused", "eagle"),
    "vllm-neuron": ("eagle",),
}
# NxDI model classes with an EAGLE draft layer (``fc``).
NXDI_EAGLE_ARCHITECTURES = ("llama",)
# The current plugin's EAGLE3 draft class is Eagle3LlamaForCausalLM.
PLUGIN_EAGLE3_DRAFT_ARCHITECTURES = ("llama",)

_QUANTITY = re.compile(r"\+?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+|[numkMGTPE]i?|Ki)?")
_AWS_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d{1,2}")
_ROLE_ARN = re.compile(r"arn:aws[a-z-]*:iam::\d{12}:role/[A-Za-z0-9+=,.@_/-]{1,512}")
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,499}")


# ---- where values came from ---------------------------------------------------------------------

PathT = tuple[str | int, ...]


class Origins:
    """Where each configuration value came from: ``("bench", "concurrency") -> "flag --concurrency"``.

    A later layer that sets a path replaces the origin of the path and of everything below it."""

    def __init__(self) -> None:
        self._by_path: dict[PathT, str] = {}
        # the text a number was written as (``0.20`` stays "0.20" where a field holds text)
        self.number_text: dict[PathT, str] = {}

    def record(self, path: PathT, value: Any, source: str, *, text: str | None = None) -> None:
        """``value`` set at ``path`` by ``source``; ``text``: how a scalar value was written, when known."""
        n = len(path)
        for p in [p for p in self._by_path if p[:n] == path]:
            del self._by_path[p]
        for p in [p for p in self.number_text if p[:n] == path]:
            del self.number_text[p]
        self._mark(path, value, source)
        if text is not None and _is_number(value):
            self.number_text[path] = text.strip()

    def _mark(self, path: PathT, value: Any, source: str) -> None:
        self._by_path[path] = source
        if isinstance(value, dict):
            for k, v in value.items():
                self._mark((*path, str(k)), v, source)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                self._mark((*path, i), v, source)

    def record_yaml(self, node: yaml.Node, path: PathT, file: str) -> None:
        """Origins of a composed YAML document: every key and item with its own line."""
        self._by_path[path] = f"{file} line {node.start_mark.line + 1}"
        if isinstance(node, yaml.ScalarNode) and node.tag in _NUMBER_TAGS:
            self.number_text[path] = str(node.value)
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if isinstance(key_node, yaml.ScalarNode):
                    sub = (*path, str(key_node.value))
                    self.record_yaml(value_node, sub, file)
                    self._by_path[sub] = f"{file} line {key_node.start_mark.line + 1}"
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self.record_yaml(item, (*path, i), file)

    def find(self, path: PathT) -> str | None:
        for n in range(len(path), 0, -1):
            found = self._by_path.get(path[:n])
            if found is not None:
                return found
        return None

    def describe(self, path: PathT) -> str:
        found = self.find(path)
        return f"from {found}" if found else "the default"

    def describe_fields(self, fields: tuple[str, ...] | list[str]) -> str:
        """``from flag --window`` for one user-set field; ``draft from ...; target from ...`` for several."""
        found = [(f, self.find(_path(f))) for f in fields]
        user = [(f, src) for f, src in found if src]
        if not user:
            return "the default" if len(fields) == 1 else "all defaults"
        if len(user) == 1 and user[0][0] == fields[0]:
            return f"from {user[0][1]}"
        return "; ".join(f"{f} from {src}" for f, src in user)


_NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _path(dotted: str) -> PathT:
    return tuple(dotted.split("."))


class FieldError(ValueError):
    """A cross-field problem: ``fields`` (dotted, the first one blamed) and the fix.

    pydantic keeps the exception in the error's context, so ``build_config`` can look up where each field's
    value came from and give the rule's own fix instead of a generic one."""

    def __init__(self, message: str, *, fields: tuple[str, ...], fix: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields
        self.fix = fix


def _quantity(v: str) -> str:
    if not _QUANTITY.fullmatch(v):
        raise ValueError(f"{v!r} is not a Kubernetes quantity (e.g. 90, 500m, 600Gi)")
    return v


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, protected_namespaces=())


class S3Config(Strict):
    bucket: str = Field(
        default="REPLACE-WITH-YOUR-BUCKET",
        description="S3 bucket holding model weights and compiled Neuron artifacts (Mountpoint for S3 volume).",
    )
    region: str = Field(default="us-east-2", description="AWS region of the bucket.")
    models_prefix: str = Field(
        default="models",
        description="Key prefix under which weights live, one folder per Hugging Face id; read-only for the pods. Path segments of letters, digits, '.', '_' or '-' (no wildcards, no '..').",
    )
    artifacts_prefix: str = Field(
        default="compiled",
        description="Key prefix for compiled artifacts, one folder per configuration hash; the only place the pods may write, so it must not contain or sit inside models_prefix. Same rule as models_prefix.",
    )
    mount_path: str = Field(default="/var/mdl", description="Where the bucket is mounted in the vLLM pods.")
    capacity: str = Field(
        default="1200Gi", description="Nominal capacity of the static PersistentVolume (S3 has no real limit)."
    )
    fs_group: int = Field(
        default=1000,
        ge=1,
        le=2_147_483_647,
        description="fsGroup of every pod that mounts the bucket: the Mountpoint for S3 CSI driver v2 then mounts with gid=<fs_group>, allow-other, directories 770 and files 660, so the vLLM container (root with every capability dropped) can write compiled artifacts. See docs/neuron.md.",
    )

    @field_validator("bucket")
    @classmethod
    def _bucket_name(cls, v: str) -> str:
        if not re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9.\-]{1,61}[a-zA-Z0-9]", v):
            raise ValueError("must be a valid S3 bucket name (3-63 letters, digits, dots, dashes)")
        return v

    @field_validator("region")
    @classmethod
    def _region(cls, v: str) -> str:
        if not _AWS_REGION.fullmatch(v):
            raise ValueError(f"{v!r} is not an AWS region (e.g. us-east-2)")
        return v

    @field_validator("capacity")
    @classmethod
    def _capacity(cls, v: str) -> str:
        return _quantity(v)

    @field_validator("mount_path")
    @classmethod
    def _mount_path(cls, v: str) -> str:
        if not v.startswith("/") or v == "/":
            raise ValueError(f"{v!r} must be an absolute folder such as /var/mdl")
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

    @field_validator("vllm", "loadgen")
    @classmethod
    def _sa_name(cls, v: str) -> str:
        if not _DNS_SUBDOMAIN.fullmatch(v):
            raise ValueError(f"{v!r} is not a valid Kubernetes name: use lowercase letters, digits, '-' or '.'")
        return v

    @field_validator("vllm_role_arn", "loadgen_role_arn")
    @classmethod
    def _arn(cls, v: str) -> str:
        if v and not _ROLE_ARN.fullmatch(v):
            raise ValueError(f"{v!r} is not an IAM role ARN (arn:aws:iam::<account>:role/<name>)")
        return v


class SecretRef(Strict):
    name: str = Field(description="Kubernetes Secret name.")
    key: str = Field(default="token", description="Key inside the Secret.")

    @field_validator("name")
    @classmethod
    def _secret_name(cls, v: str) -> str:
        if not _DNS_SUBDOMAIN.fullmatch(v):
            raise ValueError(f"{v!r} is not a valid Secret name: use the name of an existing Secret")
        return v

    @field_validator("key")
    @classmethod
    def _secret_key(cls, v: str) -> str:
        if not re.fullmatch(r"[-._a-zA-Z0-9]{1,253}", v):
            raise ValueError(f"{v!r} is not a valid Secret key: use letters, digits, '-', '_' or '.'")
        return v


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

    @field_validator("cpu", "memory", "shm_size")
    @classmethod
    def _quantities(cls, v: str) -> str:
        return _quantity(v)


class CompileConfig(Strict):
    cpu: str = Field(
        default="90",
        description="CPU request and limit of each compile Job (`spectrn compile`). The published sample's manifests ask for 90, so two compiles of 8 devices each fit one trn2.48xlarge; its README suggests 190 (the whole node) for a faster compile.",
    )

    @field_validator("cpu")
    @classmethod
    def _cpu(cls, v: str) -> str:
        return _quantity(v)


class LengthDistribution(Strict):
    """A seeded length distribution (synthetic workloads): draws are rounded and clipped to [min, max]."""

    dist: Literal["fixed", "uniform", "normal", "lognormal"] = Field(
        default="fixed",
        description="fixed: always mean; uniform: mean +- spread; normal: mean, standard deviation spread; lognormal: median mean, sigma of the logarithm spread.",
    )
    mean: float = Field(gt=0, le=1_000_000, description="The mean (lognormal: the median).")
    spread: float = Field(
        default=0.0,
        ge=0,
        le=1_000_000,
        description="uniform: half-width; normal: standard deviation; lognormal: sigma.",
    )
    min: int = Field(default=1, ge=1, le=1_000_000, description="Smallest length drawn.")
    max: int = Field(default=100_000, ge=1, le=1_000_000, description="Largest length drawn.")

    @model_validator(mode="after")
    def _bounds(self) -> LengthDistribution:
        if self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        if self.dist != "fixed" and self.spread == 0:
            raise ValueError(f"dist {self.dist} needs a spread above 0 (or use dist: fixed)")
        return self


class SyntheticWorkload(Strict):
    """``bench.prompts: synthetic``: seeded prompts of drawn lengths (docs/workloads.md, Synthetic workloads)."""

    prompts: int = Field(default=256, ge=1, le=100_000, description="Distinct prompts to make.")
    input_words: LengthDistribution = Field(
        default_factory=lambda: LengthDistribution(mean=256),
        description="Words per prompt (about 1.3 tokens a word in English; for exact token counts add bench.input_tokens, which shapes prompts through the server's /tokenize).",
    )
    output_tokens: LengthDistribution | None = Field(
        default=None,
        description="Output tokens per prompt (each request's max_tokens, capped at bench.max_tokens); unset: bench.max_tokens for all.",
    )
    prompt_class: str = Field(default="synthetic", description="The prompt class of every synthetic prompt.")

    @field_validator("prompt_class")
    @classmethod
    def _class(cls, v: str) -> str:
        problem = name_problem(v)
        if problem:
            raise ValueError(problem)
        return v


class WorkloadConfig(Strict):
    """How a prompt file is read and shaped (docs/workloads.md); the defaults change nothing."""

    format: Literal["auto", "yaml", "jsonl", "sharegpt", "csv", "spec-bench", "hf-disk"] = Field(
        default="auto",
        description="Format of the bench.prompts file: auto picks by extension and content (.yaml/.yml: YAML prompt set; .json: ShareGPT when it is a list, else YAML; .jsonl: Spec-Bench when the first row has question_id and turns, else JSONL; .csv: CSV; a folder: a Hugging Face dataset saved with save_to_disk).",
    )
    sample: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="Keep this many prompts, drawn with bench.seed after the length filters (unset: all).",
    )
    min_chars: int | None = Field(
        default=None, ge=0, description="Drop prompts whose text (first turn, as in the file) has fewer characters."
    )
    max_chars: int | None = Field(
        default=None, ge=1, description="Drop prompts whose text (first turn, as in the file) has more characters."
    )
    class_map: dict[str, str] = Field(
        default_factory=dict,
        description="Category in the file -> prompt class (a safe name); unmapped categories are sanitized (docs/workloads.md).",
    )
    class_weights: dict[str, float] = Field(
        default_factory=dict,
        description="Prompt class -> relative share of the schedule's requests (classes not listed: 1); empty: every prompt equally often.",
    )
    default_class: str = Field(default="default", description="Prompt class of rows without a category.")
    system_prompt: str = Field(
        default="",
        max_length=100_000,
        description="A system message sent before every request (chat API: role system; completions API: the first paragraph of the prompt), identical for every request.",
    )
    prefix: str = Field(
        default="",
        max_length=100_000,
        description="Text put verbatim before every prompt (after the system prompt), identical for every request.",
    )
    prompt_field: str | None = Field(
        default=None,
        description="JSONL/CSV/hf-disk: the column holding the prompt (unset: prompt, then text, then messages).",
    )
    class_field: str | None = Field(
        default=None, description="JSONL/CSV/hf-disk: the column holding the category (unset: class, then category)."
    )
    output_tokens_field: str | None = Field(
        default=None,
        description="JSONL/CSV/hf-disk: the column holding an output length hint (unset: output_tokens, then max_tokens).",
    )
    id_field: str | None = Field(
        default=None,
        description="JSONL/CSV/hf-disk: the column holding the prompt id (unset: id; else the row number).",
    )
    synthetic: SyntheticWorkload = Field(
        default_factory=SyntheticWorkload,
        description="With bench.prompts: synthetic, the prompts made (seeded by bench.seed).",
    )

    @field_validator("default_class")
    @classmethod
    def _default_class(cls, v: str) -> str:
        problem = name_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("class_map")
    @classmethod
    def _class_map(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            problem = name_problem(value)
            if problem:
                raise ValueError(f"class_map[{key!r}]: {problem}")
        return v

    @field_validator("class_weights")
    @classmethod
    def _weights(cls, v: dict[str, float]) -> dict[str, float]:
        for key, weight in v.items():
            if not (0 < weight < 1e9):  # also refuses NaN and infinity
                raise ValueError(f"class_weights[{key!r}]: {weight} is not a positive weight")
        return v

    @model_validator(mode="after")
    def _lengths(self) -> WorkloadConfig:
        if self.min_chars is not None and self.max_chars is not None and self.min_chars > self.max_chars:
            raise ValueError(f"min_chars {self.min_chars} is above max_chars {self.max_chars}")
        return self


class BenchConfig(Strict):
    prompts: str = Field(
        default="structured",
        description="Prompt set name (structured, open, sample, all), synthetic (seeded prompts of drawn lengths: bench.workload.synthetic), or a path to a prompt file or saved dataset (formats: docs/workloads.md).",
    )
    api: Literal["chat", "completions"] = Field(default="chat", description="OpenAI API used for requests.")
    concurrency: list[int] = Field(
        default=[4],
        description="Closed-loop concurrency levels (one run per level); a single number is one level.",
    )
    request_rate: list[float] | None = Field(
        default=None,
        description="Open-loop request rates per endpoint (req/s), one level each (labelled r2 for 2 req/s); a single number is one level. Excludes concurrency and trace (docs/load-shapes.md).",
    )
    arrivals: Literal["poisson", "constant", "gamma"] = Field(
        default="poisson",
        description="Arrival process of open-loop rates: poisson (exponential gaps), constant (equal gaps) or gamma (gaps of shape burstiness). Seeded by seed; both endpoints get the same arrival times.",
    )
    burstiness: float | None = Field(
        default=None,
        gt=0,
        le=1000,
        description="Shape of gamma arrivals (only with arrivals: gamma; unset: 1.0): 1 is Poisson, below 1 burstier, above 1 smoother (as vllm bench serve --burstiness).",
    )
    max_in_flight: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="Open loop (request_rate or trace): at most this many requests in flight per endpoint; an arrival that finds the cap reached waits, and its TTFT counts from its send (record field queued_s: the wait). Unset: 1024.",
    )
    duration_s: float | None = Field(
        default=None,
        gt=0,
        le=7 * 86400,
        description="Run each level for this many seconds: no request starts after it, those in flight finish (or hit timeout_s). requests is then an upper bound (default 1,000,000 when not given).",
    )
    trace: str | None = Field(
        default=None,
        description="Replay a trace: a JSONL or CSV file of arrival offsets in seconds (timestamp or arrival_s), with optional input_tokens and output_tokens per row; one level, labelled trace. Excludes request_rate and concurrency.",
    )
    requests: int = Field(
        default=32,
        ge=1,
        le=MAX_REQUESTS,
        description="Measured requests per endpoint and level; with duration_s or trace an upper bound, 1,000,000 when not given.",
    )
    warmup: int = Field(
        default=2, ge=0, le=10_000, description="Warm-up requests per endpoint, excluded from statistics."
    )
    max_tokens: int = Field(
        default=600,
        ge=1,
        le=131072,
        description="Output tokens per request: the exact length with ignore_eos, else the cap on a natural length.",
    )
    ignore_eos: bool | None = Field(
        default=None,
        description='Ask for max_tokens exactly (ignore_eos with min_tokens = max_tokens) instead of letting each answer end at its end-of-sequence token; unset: on for the built-in sets (structured, open, sample, all), off for a prompt file or dataset, whose natural lengths are part of the workload (docs/benchmarks.md, "Natural output lengths"). The llmperf engine sends it only when set.',
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
    ramp_s: float | None = Field(
        default=None,
        ge=0,
        le=3600,
        description="Spread the start of the closed-loop workers evenly over this many seconds; unset: 10 ms per stream (at most 10 s and half a warm-up request), so TTFT means the same at every load (docs/benchmarks.md); 0: all start at once, as the published experiment.",
    )
    timeout_s: float = Field(
        default=1200.0,
        gt=0,
        le=86400,
        description="Per-request timeout (seconds). The llmperf engine has no per-request setting of its own: its --timeout is the whole run's budget, rendered as this timeout times the number of waves (requests / concurrency).",
    )
    seed: int = Field(default=0, description="Seed for prompt order and Poisson arrivals.")
    max_error_rate: float = Field(
        default=0.05, ge=0, le=1, description="Above this error rate a run is flagged as not clean."
    )
    slo: list[str] = Field(
        default_factory=list,
        description="Latency targets (docs/slo.md): per request (tpot<=50ms: a request meets it when its own value does; these define goodput) or at a percentile (p90:tpot<=50ms), on ttft, tpot, itl or e2e, units ms or s, optionally for one prompt class (structured/p90:tpot<=40ms).",
    )
    slo_ttft_s: float | None = Field(
        default=None, gt=0, description="Per-request SLO on TTFT in seconds: the same as slo: [ttft<=X s]."
    )
    slo_tpot_s: float | None = Field(
        default=None, gt=0, description="Per-request SLO on TPOT in seconds: the same as slo: [tpot<=X s]."
    )
    loadgen_pods: int = Field(
        default=1, ge=1, le=64, description="Pods of the in-cluster load Job (Indexed Job shards)."
    )
    workload: WorkloadConfig = Field(
        default_factory=WorkloadConfig,
        description="How the prompt file is read and shaped: format, sampling, filters, classes (docs/workloads.md).",
    )

    @model_validator(mode="before")
    @classmethod
    def _bound_by_time(cls, data: Any) -> Any:
        """A level bounded by its duration or its trace is not cut at the default 32 requests."""
        if isinstance(data, dict) and data.get("requests") is None:
            if data.get("duration_s") is not None or data.get("trace") is not None:
                data = {**data, "requests": MAX_REQUESTS}
        return data

    @field_validator("slo")
    @classmethod
    def _slo(cls, v: list[str]) -> list[str]:
        """Parsed at load, so a typo fails before any request is sent (the text is kept as written)."""
        from spectrn.analyze.slo import SloSyntaxError, parse_slos

        try:
            parse_slos(v)
        except SloSyntaxError as e:
            raise FieldError(f"bench.slo: {e.message}", fields=("bench.slo",), fix=e.fix) from None
        return v

    @field_validator("request_rate", mode="before")
    @classmethod
    def _rate_list(cls, v: Any) -> Any:
        """``2`` and ``"1,2,4"`` (a flag, an environment variable, a run.json from before lists) are lists too."""
        if isinstance(v, str) and "," in v:
            return [part.strip() for part in v.split(",") if part.strip()]
        if v is not None and not isinstance(v, list):
            return [v]
        return v

    @field_validator("request_rate")
    @classmethod
    def _rates(cls, v: list[float] | None) -> list[float] | None:
        if v is None:
            return v
        if not v:
            raise ValueError("needs at least one rate")
        for rate in v:
            if not 0 < rate <= 1_000_000:  # also refuses NaN and infinity
                raise ValueError(f"rate {rate:g} is outside (0, 1000000] req/s")
        if len({f"{r:g}" for r in v}) < len(v):
            raise ValueError(f"rates {v} repeat a level")
        return v

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
        description="Instance price per hour (USD); default: the built-in on-demand list price for "
        "pricing.region (docs/neuron.md, Price). Set it for any other region, a discount or a reservation.",
    )
    region: str | None = Field(
        default=None,
        description="AWS region whose on-demand price applies; default: the built-in prices' region (us-east-2). "
        "A region without a built-in price needs pricing.instance_hourly_usd.",
    )
    instances_per_service: float = Field(
        default=0.5,
        gt=0,
        description="Share of an instance one service uses (0.5: both services share one trn2.48xlarge).",
    )

    @field_validator("region")
    @classmethod
    def _region(cls, v: str | None) -> str | None:
        if v is not None and not _AWS_REGION.fullmatch(v):
            raise ValueError(f"{v!r} is not an AWS region (e.g. us-east-2)")
        return v


class CloudWatchConfig(Strict):
    namespace: str = Field(default="Spectrn", description="CloudWatch metric namespace.")
    region: str | None = Field(default=None, description="AWS region (default: the standard AWS resolution chain).")
    storage_resolution: Literal[1, 60] = Field(
        default=60, description="1 for high-resolution metrics, 60 for standard."
    )
    dashboard_prefix: str = Field(default="spectrn", description="Dashboards are named <prefix>-<run id>.")

    @field_validator("region")
    @classmethod
    def _region(cls, v: str | None) -> str | None:
        if v is not None and not _AWS_REGION.fullmatch(v):
            raise ValueError(f"{v!r} is not an AWS region (e.g. us-east-2)")
        return v


class SimConfig(Strict):
    preset: str = Field(default="qwen3-32b-trn2", description="Simulator calibration preset.")
    profile: Literal["neuron-fork", "vllm-neuron", "vllm-neuron-0.24", "upstream"] | None = Field(
        default=None,
        description="Server the simulator imitates on the wire and in /metrics. Default: the one vllm_dialect "
        "names (legacy-neuron: the preset's, neuron-fork for the Neuron presets; vllm-neuron plugin_release 0.2: "
        "vllm-neuron; current: vllm-neuron-0.24); upstream: vLLM V1's token_ids and moving spec counters.",
    )
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
    speculation_mode: SpeculationMode = Field(
        default="fused",
        description="fused: draft + target compiled together (legacy-neuron). eagle: an EAGLE draft (legacy-neuron and vllm-neuron 0.2: EAGLE v1 with a Llama target; vllm-neuron current: eagle3). vanilla (non-fused draft model) and medusa cannot run on either server and are rejected. legacy-neuron (fused, eagle) is out of support since Neuron SDK 2.28. See docs/neuron.md.",
    )
    vllm_dialect: Dialect = Field(
        default="legacy-neuron",
        description="legacy-neuron: the Neuron fork of vLLM V0 (DLC 0.9.x, --override-neuron-config; out of support since Neuron SDK 2.28: a warning says so); vllm-neuron: vLLM V1 with the vllm-neuron plugin (--additional-config, EAGLE only).",
    )
    plugin_release: PluginRelease = Field(
        default="current",
        description='vllm-neuron only: current renders --additional-config \'{"neuron_config": {...}}\' and method eagle3 (plugin 0.24.x, SDK 2.32); 0.2 renders the 0.2.x form {"override_neuron_config": {...}} and method eagle (EAGLE v1, vLLM 0.11.0 DLC).',
    )
    image: str | None = Field(
        default=None,
        description=f"vLLM Neuron container image; default per dialect: legacy-neuron {LEGACY_NEURON_IMAGE}; vllm-neuron current {PLUGIN_IMAGES['current']}; vllm-neuron 0.2 {PLUGIN_IMAGES['0.2']}.",
    )
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
        if not _DNS_LABEL.fullmatch(v):
            raise ValueError("must be a DNS-1123 label: lowercase letters, digits and '-', at most 63 characters")
        return v

    @field_validator("scheduler_name")
    @classmethod
    def _scheduler(cls, v: str) -> str:
        if v and not _DNS_SUBDOMAIN.fullmatch(v):
            raise ValueError(f"{v!r} is not a scheduler name: lowercase letters, digits, '-' or '.'")
        return v

    @field_validator("image", "spectrn_image")
    @classmethod
    def _image(cls, v: str | None) -> str | None:
        if v is not None and not _IMAGE.fullmatch(v):
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
    def uses_draft_model(self) -> bool:
        return self.speculation_mode != "medusa"

    @property
    def server_image(self) -> str:
        """The vLLM image: ``image`` when set, else the dialect's (and plugin release's) default DLC."""
        if self.image:
            return self.image
        return LEGACY_NEURON_IMAGE if self.vllm_dialect == "legacy-neuron" else PLUGIN_IMAGES[self.plugin_release]

    @property
    def sim_profile_choice(self) -> str | None:
        """The simulator profile this config asks for: ``sim.profile``; else, for vllm_dialect vllm-neuron, the
        plugin release's (0.2: vllm-neuron, current: vllm-neuron-0.24), so a simulated run plays the server the
        config would deploy; None: the preset's own (neuron-fork for the Neuron presets)."""
        if self.sim.profile is not None:
            return self.sim.profile
        if self.vllm_dialect == "vllm-neuron":
            return PLUGIN_SIM_PROFILES[self.plugin_release]
        return None

    @property
    def nxdi_speculation(self) -> bool:
        """Speculation runs through NxDI's fused model (window semantics: at most k tokens per step)."""
        return self.vllm_dialect == "legacy-neuron" or self.plugin_release == "0.2"

    def source_of(self, *fields: str) -> str:
        """Where the values of ``fields`` came from, for messages: ``from flag --window``, ``the default``."""
        origins = self._origins or Origins()
        return origins.describe_fields(fields)

    def origin_of(self, field: str) -> str:
        """Where ``field``'s value came from, bare (``flag --window``), for ``check_name``'s ``source``."""
        origins = self._origins or Origins()
        return origins.find(_path(field)) or "the default value"

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
        if speculative:
            parts.update(mode=self.speculation_mode, window=self.num_speculative_tokens)
            if self.uses_draft_model:
                parts["draft"] = self.draft_spec.hf_id
        digest = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:12]
        name = self.target.replace(".", "p")
        if speculative:
            draft = id_part(self.draft) if self.uses_draft_model else "medusa"
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
        self._load_shape_rules(info.context.get(ORIGINS) if info.context else None)
        return self

    def _load_shape_rules(self, origins: Origins | None) -> None:
        """One load shape per run: closed-loop concurrency, open-loop rates or a trace, each with only the
        settings that apply to it. ``concurrency`` has a default (and ``spectrn init`` writes it), so it
        conflicts only where a person chose it: a flag, ``--set``, the environment, or a file value other than
        the default; without ``origins`` (a config rebuilt from a dump) that rule is not applied."""
        b = self.bench

        def chosen(key: str) -> bool:
            found = origins.find(_path(key)) if origins else None
            if found is None:
                return False
            if found.startswith(("flag ", "--set ", "environment variable ")):
                return True
            name = key.split(".")[1]
            return bool(getattr(b, name) != BenchConfig.model_fields[name].default)

        def given(key: str) -> str:
            flag = _flag_of(origins, _path(key))
            value = getattr(b, key.split(".")[1])
            text = (
                ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in value)
                if isinstance(value, list)
                else (f"{value:g}" if isinstance(value, float) else str(value))
            )
            return f"{flag or key} {text}"

        def conflict(a: str, c: str, why: str, fix: str) -> FieldError:
            return FieldError(f"{given(a)} and {given(c)} both given: {why}", fields=(a, c), fix=fix)

        open_loop = "bench.trace" if b.trace is not None else "bench.request_rate"
        if b.request_rate is not None and b.trace is not None:
            raise conflict(
                "bench.trace", "bench.request_rate", "a trace brings its own arrival times",
                "give one of them: --trace replays the file's times, --rate generates arrivals",
            )  # fmt: skip
        if (b.request_rate is not None or b.trace is not None) and chosen("bench.concurrency"):
            raise conflict(
                open_loop, "bench.concurrency",
                "open-loop arrivals and closed-loop streams are two load shapes; one run has one",
                "keep one of them (remove the other from where it came from); cap open-loop requests in "
                "flight with --max-in-flight",
            )  # fmt: skip
        if b.burstiness is not None and b.arrivals != "gamma":
            raise conflict(
                "bench.burstiness", "bench.arrivals", "burstiness is the shape of gamma arrivals only",
                "set --arrivals gamma, or drop --burstiness",
            )  # fmt: skip
        if b.arrivals != "poisson" and b.trace is not None:
            raise conflict(
                "bench.arrivals", "bench.trace", "a trace brings its own arrival times",
                "drop --arrivals when replaying a trace",
            )  # fmt: skip
        if b.arrivals != "poisson" and b.request_rate is None:
            raise FieldError(
                f"{given('bench.arrivals')} needs an open-loop rate: arrival processes apply to bench.request_rate",
                fields=("bench.arrivals",),
                fix="add --rate REQ/S (e.g. --rate 2), or drop --arrivals for closed loop",
            )
        if b.max_in_flight is not None and b.request_rate is None and b.trace is None:
            raise FieldError(
                f"{given('bench.max_in_flight')} applies to open loop only: a closed-loop level has exactly "
                "concurrency requests in flight",
                fields=("bench.max_in_flight", "bench.concurrency"),
                fix="add --rate REQ/S or --trace FILE, or drop --max-in-flight and set --concurrency",
            )

    def _server_label(self) -> str:
        if self.vllm_dialect == "legacy-neuron":
            return "vllm_dialect 'legacy-neuron'"
        return f"vllm_dialect 'vllm-neuron' (plugin_release {self.plugin_release})"

    def _neuron_rules(self) -> None:
        """Only configurations the chosen Neuron server can run; each rule cites its source (docs/neuron.md)."""
        mode, dialect = self.speculation_mode, self.vllm_dialect
        fields = ("speculation_mode", "vllm_dialect")
        if mode == "vanilla" and dialect == "legacy-neuron":
            raise FieldError(
                "speculation_mode: 'vanilla' is not supported by vllm_dialect 'legacy-neuron': any speculative "
                "config selects the fork's multi-step runner, whose forward reads only fused outputs "
                "(output.fused_outputs), so non-fused draft speculation cannot run [aws-neuron/upstreaming-to-vllm "
                "vllm/worker/neuron_worker.py, vllm/model_executor/model_loader/neuronx_distributed.py]",
                fields=fields,
                fix="use speculation_mode: fused (the same draft, compiled together with the target)",
            )
        if mode == "medusa":
            raise FieldError(
                f"speculation_mode: 'medusa' runs on no vLLM Neuron server ({self._server_label()}): the "
                "vllm-neuron plugin runs EAGLE only, and the legacy fork's Neuron path has no Medusa handling: "
                "without a draft model it serves through its plain runner, one token per step, while NxDI, given "
                "medusa_speculation_length, builds its Medusa model instead of the token-generation model that "
                "step calls [aws-neuron/upstreaming-to-vllm vllm/worker/neuron_worker.py, vllm/model_executor/"
                "model_loader/neuronx_distributed.py; aws-neuron/neuronx-distributed-inference src/"
                "neuronx_distributed_inference/models/model_base.py]",
                fields=fields,
                fix="use speculation_mode: eagle with an EAGLE3 draft on vllm_dialect: vllm-neuron (supported), "
                f"or speculation_mode: fused with a draft model on vllm_dialect: legacy-neuron{LEGACY_CONSEQUENCE}",
            )
        allowed = DIALECT_MODES[dialect]
        if mode not in allowed:
            raise FieldError(
                f"speculation_mode: {mode!r} is not supported by vllm_dialect {dialect!r} (supports: "
                f"{', '.join(allowed)}): the vllm-neuron plugin runs only EAGLE speculation (0.2.x: EAGLE v1; "
                "current: eagle3), no draft-model or Medusa speculation [vllm-project/vllm-neuron README.md 0.2.0; "
                "aws-neuron/aws-neuron-sdk vllm-neuron/docs/getting-started/migration-nxdi-to-vllm-neuron.md]",
                fields=fields,
                fix="use speculation_mode: eagle with an EAGLE draft (supported), or vllm_dialect: legacy-neuron "
                f"for draft-model speculation{LEGACY_CONSEQUENCE}",
            )
        target, draft = self.target_spec, self.draft_spec
        if mode == "eagle":
            if not draft.eagle_draft:
                raise FieldError(
                    f"speculation_mode: 'eagle' needs an EAGLE draft: draft {self.draft!r} is a plain model "
                    "('you must use a draft model that is specifically fine-tuned for EAGLE speculation' "
                    "[aws-neuron/aws-neuron-sdk libraries/nxd-inference/developer_guides/feature-guide.rst])",
                    fields=("speculation_mode", "draft"),
                    fix="declare the EAGLE checkpoint under custom_models with eagle_draft: true and use it as "
                    f"draft, or use speculation_mode: fused with a plain draft{LEGACY_CONSEQUENCE}",
                )
            if self.nxdi_speculation:
                for role, key, spec in (("target", self.target, target), ("draft", self.draft, draft)):
                    if spec.architecture not in NXDI_EAGLE_ARCHITECTURES:
                        raise FieldError(
                            f"{role}: speculation_mode 'eagle' on {self._server_label()} runs NxDI EAGLE v1, whose "
                            f"draft layer (fc) exists only in NxDI's Llama model class; {role} {key!r} is "
                            f"architecture {spec.architecture or 'undeclared'!r} (Qwen3 cannot be an EAGLE draft) "
                            "[aws-neuron/neuronx-distributed-inference src/neuronx_distributed_inference/models/"
                            "llama/modeling_llama.py, models/qwen3/modeling_qwen3.py]",
                            fields=(role, "speculation_mode", "vllm_dialect"),
                            fix="use a Llama target with a Llama EAGLE draft (custom_models, architecture: llama), "
                            f"or speculation_mode: fused on vllm_dialect: legacy-neuron{LEGACY_CONSEQUENCE}",
                        )
            elif draft.architecture not in PLUGIN_EAGLE3_DRAFT_ARCHITECTURES:
                raise FieldError(
                    f"draft: speculation_mode 'eagle' on {self._server_label()} runs eagle3, whose draft class is "
                    f"Eagle3LlamaForCausalLM; draft {self.draft!r} is architecture "
                    f"{draft.architecture or 'undeclared'!r} [aws-neuron/aws-neuron-sdk vllm-neuron/docs/design/"
                    "speculation/speculative_decoding_design.md]",
                    fields=("draft", "speculation_mode", "plugin_release"),
                    fix="use an EAGLE3 draft with a Llama-style config (custom_models: architecture: llama, "
                    "eagle_draft: true)",
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
        stack = unsupported_stack(self.vllm_dialect, self.speculation_mode)
        if stack:
            out.append(stack)
        if self.speculation_mode == "eagle" and not self.nxdi_speculation:
            recipe = eagle3_without_recipe(self.target, self.target_spec.architecture)
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


def has_registry(image: str) -> bool:
    """Docker's rule: the first path component is a registry host when it has a '.' or ':' or is localhost."""
    first, sep, _ = image.partition("/")
    return bool(sep) and ("." in first or ":" in first or first == "localhost")


# ---- loading ------------------------------------------------------------------------------------


class _SafeLoader(UniqueKeyLoader):  # duplicate keys refused (spec/yaml_keys.py)
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
    except yaml.constructor.ConstructorError as e:
        if "aliases" in str(e):
            raise ConfigError(f"{what}: YAML aliases are not allowed", hint="write the value out in full") from None
        return raw
    except yaml.YAMLError:
        return raw
    except RecursionError:
        raise ConfigError(f"{what} is nested too deeply", hint="give a flat value") from None


def _read_yaml_text(path: Path, what: str, max_bytes: int) -> str:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist", hint="check the path") from None
    except OSError as e:
        raise ConfigError(f"{what} {path} cannot be read: {e.strerror}", hint="check the path") from None
    if not stat.S_ISREG(info.st_mode):  # a folder, or a device such as /dev/zero that never ends
        raise ConfigError(f"{what} {path} is not a regular file", hint="give the path of a YAML file")
    size = info.st_size
    if size > max_bytes:
        raise ConfigError(
            f"{what} {path} is {size} bytes, over the {max_bytes}-byte limit", hint="split or trim the file"
        )
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what} {path} is not UTF-8 (byte {e.start})", hint="save it as UTF-8") from None
    except OSError as e:  # a folder, a device, no permission
        raise ConfigError(f"{what} {path} cannot be read: {e.strerror}", hint="give the path of a YAML file") from None


def _yaml_problem(e: yaml.YAMLError, what: str, path: Path) -> ConfigError:
    mark = getattr(e, "problem_mark", None)
    where = f" line {mark.line + 1} column {mark.column + 1}" if mark else ""
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    return ConfigError(f"{what} {path}{where}: malformed YAML: {problem}", hint="fix the YAML syntax")


def load_yaml(path: Path, *, what: str = "file", max_bytes: int = MAX_CONFIG_BYTES) -> Any:
    """Read a YAML file safely: size-capped, UTF-8, no aliases; errors name the file and the line."""
    text = _read_yaml_text(path, what, max_bytes)
    try:
        return yaml.load(text, Loader=_SafeLoader)  # noqa: S506 - _SafeLoader is a SafeLoader
    except RecursionError:  # a hostile document: thousands of nested [ or {
        raise ConfigError(f"{what} {path} is nested too deeply", hint="flatten the document") from None
    except yaml.YAMLError as e:
        raise _yaml_problem(e, what, path) from None


def load_yaml_with_origins(path: Path, *, what: str = "file") -> tuple[Any, Origins]:
    """``load_yaml`` plus the line of every key, for error messages."""
    data = load_yaml(path, what=what)
    origins = Origins()
    text = _read_yaml_text(path, what, MAX_CONFIG_BYTES)
    try:
        node = yaml.compose(text, Loader=_SafeLoader)  # noqa: S506 - _SafeLoader is a SafeLoader
    except (yaml.YAMLError, RecursionError):  # already reported by load_yaml
        node = None
    if node is not None:
        origins.record_yaml(node, (), str(path))
        origins._by_path.pop((), None)  # the document itself is not a value
    return data, origins


def _loc_text(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc)


def _flag_of(origins: Origins | None, path: PathT) -> str | None:
    """The command-line flag a value came from (``--mode``), or None when it came from elsewhere."""
    found = origins.find(path) if origins else None
    return found.removeprefix("flag ") if found and found.startswith("flag ") else None


def format_validation_error(err: ValidationError, origins: Origins | None = None) -> str:
    """One line per problem, each naming the field path (and, with ``origins``, where its value came from).

    A value given by a command-line flag is named by that flag first (``--mode: ...``), the config key after."""
    lines = []
    for e in err.errors():
        loc = _loc_text(e["loc"])
        cause = (e.get("ctx") or {}).get("error")
        if isinstance(cause, FieldError):
            text = cause.message
            where = origins.describe_fields(cause.fields) if origins else ""
            blamed = cause.fields[0]
        else:
            msg = e["msg"].removeprefix("Value error, ")
            if e["type"] == "extra_forbidden":
                msg = "unknown key (misspelt?); see `spectrn init` for the valid keys"
            text = f"{loc}: {msg}" if loc else msg
            where = origins.describe(tuple(e["loc"])) if origins else ""
            blamed = loc
        flag = _flag_of(origins, _path(blamed)) if blamed else None
        if flag and text.startswith(f"{blamed}: "):
            text = f"{flag}: {text.removeprefix(f'{blamed}: ')} (config key {blamed})"
            where = "" if where == f"from flag {flag}" else where
        lines.append(f"{text} ({where})" if where else text)
    return "; ".join(lines)


def validation_hint(err: ValidationError, origins: Origins | None = None) -> str:
    """The fix for the first problem: the rule's own fix, a spelling check for unknown keys, else the values
    (named by the flag when a flag gave the value)."""
    first = err.errors()[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, FieldError):
        if cause.fix:
            return cause.fix
        flag = _flag_of(origins, _path(cause.fields[0]))
        if flag:
            return f"change {flag}; `spectrn config-reference` lists the valid values of {cause.fields[0]}"
        return f"change {cause.fields[0]}; `spectrn config-reference` lists its valid values"
    loc = _loc_text(first["loc"]) or "the configuration"
    if first["type"] == "extra_forbidden":
        return "check the key's spelling; `spectrn config-reference` lists every valid key"
    flag = _flag_of(origins, tuple(first["loc"])) if first["loc"] else None
    if flag:
        expected = (first.get("ctx") or {}).get("expected")
        if first["type"] == "literal_error" and expected:
            return f"give {flag} one of {expected}"
        return f"change {flag}; `spectrn config-reference` lists the valid values of {loc}"
    return f"change {loc}; `spectrn config-reference` lists its valid values"


def set_dotted(data: dict[str, Any], dotted: str, value: Any) -> None:
    """Set ``a.b.c`` in a nested dict, creating levels as needed."""
    set_path(data, _path(dotted), value)


def set_path(data: dict[str, Any], path: PathT, value: Any) -> None:
    node = data
    for part in path[:-1]:
        child = node.get(str(part))
        if not isinstance(child, dict):
            child = {}
            node[str(part)] = child
        node = child
    node[str(path[-1])] = value


def _env_items(environ: Mapping[str, str]) -> Iterator[tuple[PathT, str, str]]:
    """(path, raw value, variable name) of each ``SPECTRN_*`` variable that addresses a configuration key."""
    skip = {"SPECTRN_CONFIG", "SPECTRN_HOME"}
    for name, raw in sorted(environ.items()):
        if not name.startswith(ENV_PREFIX) or name in skip:
            continue
        path = tuple(name[len(ENV_PREFIX) :].lower().split("__"))
        if path[0] not in SpectrnConfig.model_fields:  # another tool's setting (SPECTRN_CHECKOV, ...)
            continue
        yield path, raw, name


def env_overrides(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """``SPECTRN_BENCH__CONCURRENCY=8`` -> ``{"bench": {"concurrency": [8]}}``; values parsed as YAML scalars."""
    environ = dict(os.environ) if environ is None else environ
    out: dict[str, Any] = {}
    for path, raw, name in _env_items(environ):
        set_path(out, path, as_list_if_needed(path, yaml_value(raw, what=name)))
    return out


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _list_paths(model: type[BaseModel], prefix: PathT = ()) -> set[PathT]:
    import typing

    out: set[PathT] = set()
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out |= _list_paths(ann, (*prefix, name))
        elif typing.get_origin(ann) is list:
            out.add((*prefix, name))
    return out


def as_list_if_needed(path: PathT, value: Any) -> Any:
    """A scalar where the configuration expects a list becomes a list: ``8`` -> ``[8]``, ``"1,4"`` -> ``[1, 4]``;
    a mapping is walked so ``--set bench={concurrency: 8}`` works too."""
    if isinstance(value, dict):
        return {k: as_list_if_needed((*path, str(k)), v) for k, v in value.items()}
    if path not in _LIST_PATHS or isinstance(value, list) or value is None:
        return value
    if isinstance(value, str) and re.fullmatch(r"[^\[\]{}&*,]+(,[^\[\]{}&*,]+)+", value):
        return [yaml_value(part.strip()) for part in value.split(",")]
    return [value]


_LIST_PATHS: set[PathT] = _list_paths(SpectrnConfig)


def _unwrap(ann: Any) -> Any:
    while typing.get_origin(ann) is typing.Annotated:
        ann = typing.get_args(ann)[0]
    return ann


def _options(ann: Any) -> list[Any]:
    """The members of a union (``str | None`` -> [str]), without None."""
    ann = _unwrap(ann)
    if typing.get_origin(ann) in (typing.Union, types.UnionType):
        return [_unwrap(a) for a in typing.get_args(ann) if a is not type(None)]
    return [ann]


def _holds_text_only(ann: Any) -> bool:
    """A field that holds text and nothing else: ``str``, a ``Literal`` of strings, or either with None."""
    options = _options(ann)
    return bool(options) and all(
        a is str or (typing.get_origin(a) is Literal and all(isinstance(x, str) for x in typing.get_args(a)))
        for a in options
    )


def _strings_as_written(ann: Any, value: Any, path: PathT, texts: Mapping[PathT, str]) -> Any:
    """``value`` with every number that stands where ``ann`` holds text replaced by the text it was written as
    (from ``texts``, or the number's shortest form: ``0.2`` -> "0.2", ``190`` -> "190"). Walks models, lists and
    mappings; nothing else changes, so every other problem is still pydantic's to name."""
    if _is_number(value):
        return texts.get(path, repr(value)) if _holds_text_only(ann) else value
    for option in _options(ann):
        if isinstance(value, dict) and isinstance(option, type) and issubclass(option, BaseModel):
            fields = option.model_fields
            return {
                k: _strings_as_written(fields[k].annotation, v, (*path, str(k)), texts) if k in fields else v
                for k, v in value.items()
            }
        origin, args = typing.get_origin(option), typing.get_args(option)
        if isinstance(value, list) and origin is list and args:
            return [_strings_as_written(args[0], v, (*path, i), texts) for i, v in enumerate(value)]
        if isinstance(value, dict) and origin is dict and len(args) == 2:
            return {k: _strings_as_written(args[1], v, (*path, str(k)), texts) for k, v in value.items()}
    return value


def _control_chars(data: Any, path: PathT, origins: Origins) -> None:
    """Refuse control characters (and Unicode line separators) in every key and string, naming the field."""

    def bad(text: str) -> str | None:
        for ch in text:
            if unicodedata.category(ch) in ("Cc", "Zl", "Zp"):
                return f"U+{ord(ch):04X}"
        return None

    if isinstance(data, dict):
        for k, v in data.items():
            sub = (*path, str(k))
            found = bad(str(k))
            if found:
                raise ConfigError(
                    f"{_loc_text(path) or 'the configuration'}: a key contains the control character {found} "
                    f"({origins.describe(sub)})",
                    hint="remove line breaks, tabs and other control characters from keys",
                )
            _control_chars(v, sub, origins)
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _control_chars(v, (*path, i), origins)
    elif isinstance(data, str):
        found = bad(data)
        if found:
            raise ConfigError(
                f"{_loc_text(path)}: the value contains the control character {found} ({origins.describe(path)})",
                hint=f"remove line breaks, tabs and other control characters from {_loc_text(path)}",
            )


def check_config_names(cfg: SpectrnConfig) -> None:
    """Every configured name that becomes a path, a label or a shell word passes ``spectrn.names.check_name``:
    model keys (labels, artifact folders), Hugging Face id parts (paths under the model mount) and the S3
    prefixes and mount path (folders, and the IAM policy's resources)."""

    def name(value: str, field: str, example: str) -> None:
        check_name(value, what=field, source=cfg.origin_of(field), example=example)

    for key in cfg.custom_models:
        name(key, f"custom_models.{key}", "llama-3-8b")
    for field in ("target", "draft"):
        name(getattr(cfg, field), field, "qwen3-1.7b")
    for key in {cfg.target, cfg.draft, *cfg.custom_models}:
        hf_id = cfg.model(key).hf_id
        field = f"custom_models.{key}.hf_id" if key in cfg.custom_models else f"model {key} hf_id"
        parts = hf_id.split("/")
        if len(parts) > 2:
            raise ConfigError(
                f"{field} {hf_id!r} (from {cfg.origin_of(field)}) is not a Hugging Face id",
                hint="write it as organisation/name, e.g. Qwen/Qwen3-32B",
            )
        for part in parts:
            name(part, field, "Qwen3-32B")
    for field in ("s3.models_prefix", "s3.artifacts_prefix", "s3.mount_path"):
        value = getattr(cfg.s3, field.split(".")[1])
        parts = value.strip("/").split("/")
        for part in parts:
            name(part, field, "compiled")


def build_config(
    data: dict[str, Any] | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    *,
    origins: Origins | None = None,
    sources: Mapping[str, str] | None = None,
    texts: Mapping[str, str] | None = None,
) -> SpectrnConfig:
    """Validate file data + environment + overrides (``{"bench.concurrency": [8]}``, applied in order).

    ``origins`` holds where the file's values came from (``load_yaml_with_origins``); ``sources`` names the
    origin of each override (``{"num_speculative_tokens": "flag --window"}``; default ``--set KEY``); ``texts``
    how an override was written (``{"plugin_release": "0.2"}``), for numbers that stand where text belongs.
    Every error names the origin of the value it is about."""
    origins = origins or Origins()
    merged: dict[str, Any] = copy.deepcopy(data or {})
    for path, raw, name in _env_items(dict(os.environ) if environ is None else environ):
        value = as_list_if_needed(path, yaml_value(raw, what=name))
        set_path(merged, path, value)
        origins.record(path, value, f"environment variable {name}", text=raw)
    for dotted, value in (overrides or {}).items():
        if value is None:
            continue
        path = _path(dotted)
        value = as_list_if_needed(path, value)
        set_path(merged, path, value)
        origins.record(path, value, (sources or {}).get(dotted, f"--set {dotted}"), text=(texts or {}).get(dotted))
    merged = _strings_as_written(SpectrnConfig, merged, (), origins.number_text)
    _control_chars(merged, (), origins)
    try:
        cfg = SpectrnConfig.model_validate(merged, context={ORIGINS: origins})
    except ValidationError as e:
        raise ConfigError(format_validation_error(e, origins), hint=validation_hint(e, origins)) from None
    cfg._origins = origins
    check_config_names(cfg)
    return cfg


def load_config(
    path: Path | None = None,
    overrides: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
    *,
    sources: Mapping[str, str] | None = None,
    texts: Mapping[str, str] | None = None,
) -> SpectrnConfig:
    """Load ``path`` (or ``$SPECTRN_CONFIG`` or ./spectrn.yaml when present), then apply env and flags."""
    env = dict(os.environ) if environ is None else environ
    explicit = path is not None or "SPECTRN_CONFIG" in env
    if path is None:
        path = Path(env.get("SPECTRN_CONFIG", DEFAULT_CONFIG_FILE))
    data: dict[str, Any] = {}
    origins = Origins()
    if path.exists() or explicit:
        loaded, origins = load_yaml_with_origins(path, what="config file")
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise ConfigError(
                f"config file {path}: top level must be a mapping of keys, got {type(loaded).__name__}",
                hint="see `spectrn init` for the layout",
            )
        data = loaded
    return build_config(data, overrides, env, origins=origins, sources=sources, texts=texts)


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
        if field.is_required():
            rows.append((dotted, _type_name(ann), "required", field.description or ""))
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
    lines += ["", "Keys of each `custom_models` entry:", "", "| key | type | default | description |"]
    lines.append("| --- | --- | --- | --- |")
    for dotted, type_name, default, desc in _walk_fields(ModelSpec):
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
