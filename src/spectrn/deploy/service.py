"""The deploy command's flow (render -> plan -> preflight -> apply -> wait) and status."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spectrn.deploy.apply import ApplyResult, apply_plan
from spectrn.deploy.objects import VARIANTS, Clock, Sleep
from spectrn.deploy.plan import Plan, PlanItem, make_plan
from spectrn.deploy.preflight import Finding, preflight
from spectrn.deploy.teardown import terminating, wait_namespace_gone
from spectrn.deploy.wait import ServiceState, observe_service, wait_ready
from spectrn.errors import ConfigError, DeployError
from spectrn.kube.api import COMPONENT_LABEL, KubeApi, KubeApiError, Obj, labels_of

if TYPE_CHECKING:
    from spectrn.configuration.config import SpectrnConfig


@dataclass
class DeployReport:
    plan: Plan
    findings: list[Finding]
    applied: ApplyResult | None = None
    states: list[ServiceState] = field(default_factory=list)
    dry_run: bool = False


def render_for_deploy(cfg: SpectrnConfig, only: str | None = None) -> list[Obj]:
    """The objects ``spectrn deploy`` applies: shared objects plus both services (or ``only`` one)."""
    from spectrn.render import manifests as render

    if only is not None and only not in VARIANTS:
        raise ConfigError(f"--only {only!r} is not a service", hint="use --only baseline or --only speculative")
    components = None if only is None else [*render.SHARED_COMPONENTS, only]
    objects = render.render_objects(cfg, components=components)
    return [o for o in objects if labels_of(o).get(COMPONENT_LABEL) != "loadgen" or o["kind"] != "Job"]


def services_of(objects: Iterable[Obj]) -> list[tuple[str, str]]:
    out = []
    for o in objects:
        if o.get("kind") == "Deployment":
            labels = labels_of(o)
            variant = labels.get("spectrn.io/variant") or labels.get(COMPONENT_LABEL, "?")
            out.append((variant, o["metadata"]["name"]))
    return out


def deploy(
    kube: KubeApi,
    cfg: SpectrnConfig,
    objects: Sequence[Obj],
    *,
    dry_run: bool = False,
    timeout_s: float | None = None,
    on_plan: Callable[[Plan, list[Finding]], None] | None = None,
    on_update: Callable[[list[ServiceState]], None] | None = None,
    on_step: Callable[[PlanItem], None] | None = None,
    clock: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
    poll_s: float = 5.0,
    grace_s: float = 120.0,
    namespace_wait_s: float = 600.0,
    on_note: Callable[[str], None] | None = None,
) -> DeployReport:
    """Plan, pre-flight, apply and wait. ``objects`` are rendered objects (``render_for_deploy``).

    A namespace still being deleted (a teardown, or the roll-back of a failed deploy, a moment ago) refuses new
    content with 403 until it is gone: a real deploy first waits up to ``namespace_wait_s`` for it to go."""
    if not dry_run and _namespace_terminating(kube, cfg.namespace):
        if on_note:
            on_note(f"namespace {cfg.namespace} is being deleted (Terminating): waiting until it is gone")
        wait_namespace_gone(kube, cfg.namespace, timeout_s=namespace_wait_s, clock=clock, sleep=sleep)
    plan = make_plan(kube, objects)
    findings = preflight(kube, cfg, plan)
    if on_plan:
        on_plan(plan, findings)
    report = DeployReport(plan, findings, dry_run=dry_run)
    if dry_run:
        return report
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        raise DeployError(
            "pre-flight failed, nothing was applied: " + "; ".join(f"[{f.check}] {f.message}" for f in errors),
            hint="; ".join(f.hint for f in errors if f.hint) or None,
        )
    report.applied = apply_plan(kube, plan, on_step=on_step, clock=clock, sleep=sleep)
    services = services_of(i.obj for i in plan.items)
    budget = cfg.probes.startup_budget_s
    report.states = wait_ready(
        kube,
        cfg.namespace,
        services,
        timeout_s=timeout_s if timeout_s is not None else budget + 1800,
        startup_budget_s=budget,
        starting_label="Compiling" if cfg.runtime == "neuron" else "Starting",
        on_update=on_update,
        clock=clock,
        sleep=sleep,
        poll_s=poll_s,
        grace_s=grace_s,
    )
    return report


def _namespace_terminating(kube: KubeApi, namespace: str) -> bool:
    try:
        return terminating(kube.get("v1", "Namespace", namespace))
    except KubeApiError as e:
        if e.status == 403:  # namespace-scoped RBAC: cannot read namespaces; the plan handles it
            return False
        raise


def status(kube: KubeApi, cfg: SpectrnConfig) -> list[ServiceState]:
    """One snapshot of both services (``Absent`` when not deployed)."""
    label = "Compiling" if cfg.runtime == "neuron" else "Starting"
    return [
        observe_service(kube, cfg.namespace, "baseline", cfg.baseline_name, starting_label=label),
        observe_service(kube, cfg.namespace, "speculative", cfg.speculative_name, starting_label=label),
    ]
