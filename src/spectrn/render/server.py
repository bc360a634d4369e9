"""The vLLM server of each variant: its Deployment's values (command line, environment, devices, resources).

Baseline and speculative are identical except speculation: the vLLM command line comes from the config's dialect
and speculation mode (``spectrn.dialects``), the simulator's from the local launcher (``spectrn.runtimes``).
Also the names and paths the other objects refer to (Service URL, weights, compiled artifacts) and the DRA
claim template the pods share.
"""

from __future__ import annotations

import math
from typing import Any

from spectrn.configuration.config import SpectrnConfig
from spectrn.dialects.base import flag_json
from spectrn.render.literals import _env, k8s_literals
from spectrn.render.templates import LABEL_COMPONENT, _labels

VARIANTS = ("baseline", "speculative")

NEURON_DEVICE_CLASS = "neuron.aws.com"
NEURON_DRIVER = "neuron.aws.com"
NEURON_RESOURCE = "aws.amazon.com/neuron"
# Topology groups the Neuron DRA driver publishes on trn2 (connected devices); other counts get no constraint.
NEURON_DEVICE_GROUPS = (4, 8, 16)

# A small, fixed pod size for the simulator (real vLLM sizes come from the config).
SIM_RESOURCES = {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "1Gi"}}
NON_ROOT_UID = 65532


def deployment_name(cfg: SpectrnConfig, variant: str) -> str:
    return cfg.baseline_name if variant == "baseline" else cfg.speculative_name


def service_url(cfg: SpectrnConfig, variant: str, *, suffix: str) -> str:
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


# ---- the Deployment and the device claim -----------------------------------------------------------


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
        "fs_group": cfg.s3.fs_group,  # the template sets the simulator's own (non-root uid)
        "scheduler_name": scheduler_name(cfg),
        "resources": resources,
        "dra": cfg.resources_mode != "device-plugin",
        "claim_name": claim_template_name(cfg),
        "startup_failures": max(1, math.ceil(cfg.probes.startup_budget_s / cfg.probes.period_s)),
        "probe_timeout": probe_timeout,
        "non_root_uid": NON_ROOT_UID,
    }
