"""Config -> the Kubernetes objects spectrn deploys, in apply order (pure, no cluster access).

Each object's values come from the module that owns it (``server``: the vLLM Deployments and the device claim,
``load_job``: the load Job and its ConfigMaps); ``templates`` renders and checks them, ``output`` writes them.

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

from collections.abc import Iterable, Mapping
from typing import Any

from spectrn.configuration.config import SpectrnConfig
from spectrn.configuration.sources import check_config_names
from spectrn.errors import ConfigError
from spectrn.render.load_job import prompts_data, render_load_job
from spectrn.render.server import VARIANTS, _claim_ctx, _server_ctx
from spectrn.render.templates import _labels, _Renderer

SHARED_COMPONENTS = ("namespace", "serviceaccounts", "storage", "devices", "prompts")
ALL_COMPONENTS = (*SHARED_COMPONENTS, *VARIANTS, "loadgen")
S3_CSI_DRIVER = "s3.csi.aws.com"


def pv_name(cfg: SpectrnConfig) -> str:
    # PersistentVolumes are cluster-scoped: the namespace keeps two spectrn installs apart.
    return f"spectrn-s3-{cfg.namespace}"


# ---- the object list ------------------------------------------------------------------------------


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
        objs += render_load_job(cfg, run_id, engine, prompts=prompts, variants=targets, renderer=r)
    return objs
