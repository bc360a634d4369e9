"""Server-side apply in dependency order, with roll-back of what this call created if it fails part-way."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spectrn.deploy.objects import Clock, Sleep
from spectrn.deploy.plan import Plan, PlanItem
from spectrn.errors import DeployError, Interrupted
from spectrn.kube.api import KubeApi, KubeApiError, Obj, describe

if TYPE_CHECKING:
    pass


@dataclass
class ApplyResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)


def apply_plan(
    kube: KubeApi,
    plan: Plan,
    *,
    on_step: Callable[[PlanItem], None] | None = None,
    clock: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
    replace_timeout_s: float = 300.0,
) -> ApplyResult:
    """Apply the changes in order; on failure or Ctrl-C delete what this call created, then raise.

    A ``replace`` item (an immutable field changed) is deleted, waited for until it is gone, and created again."""
    result = ApplyResult()
    created_objs: list[Obj] = []
    current: PlanItem  # bound before the first Kube call, so whenever a KubeApiError is caught
    pending_replace: str | None = None
    try:
        for item in plan.items:
            if item.action in ("unchanged", "keep"):
                result.unchanged.append(item.name)
                continue
            current = item
            if item.action == "replace":
                _delete(kube, item.obj)
                pending_replace = item.name  # gone (or going) from here until it is created again
                _wait_gone(kube, item.obj, clock=clock, sleep=sleep, timeout_s=replace_timeout_s)
            kube.apply(item.obj)
            pending_replace = None
            if item.action == "create":
                result.created.append(item.name)
                created_objs.append(item.obj)
            elif item.action == "replace":
                result.replaced.append(item.name)
            else:
                result.updated.append(item.name)
            if on_step:
                on_step(item)
        return result
    except (KubeApiError, KeyboardInterrupt) as e:
        rolled, left = _rollback(kube, created_objs)
        report = [
            f"applied: {', '.join(result.created + result.updated + result.replaced) or 'nothing'}",
            f"rolled back (deleted again): {', '.join(rolled) or 'nothing'}",
        ]
        if left:
            report.append(f"COULD NOT roll back: {', '.join(left)} (run `spectrn teardown`)")
        if result.updated or result.replaced:
            report.append(f"left updated (existed before): {', '.join(result.updated + result.replaced)}")
        if pending_replace:
            report.append(f"deleted to be replaced, not created again: {pending_replace} (re-run `spectrn deploy`)")
        if isinstance(e, KeyboardInterrupt):
            raise Interrupted("deploy stopped during apply; " + "; ".join(report)) from None
        raise DeployError(
            f"applying {current.name} failed: {e.message}. " + "; ".join(report),
            hint=e.hint or "fix the cause and re-run `spectrn deploy` (applied objects are reused)",
        ) from None


def _delete(kube: KubeApi, obj: Obj) -> None:
    """Delete ``obj`` with its dependents (a Deployment's pods) before it."""
    meta = obj["metadata"]
    kube.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"), propagation="Foreground")


def _wait_gone(kube: KubeApi, obj: Obj, *, clock: Clock, sleep: Sleep, timeout_s: float) -> None:
    """Wait until the API server no longer has the deleted ``obj``: applying while it is still being deleted would
    update the dying object instead of creating a new one."""
    meta = obj["metadata"]
    start = clock()
    while kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace")) is not None:
        if clock() - start > timeout_s:
            raise KubeApiError(
                f"replace {describe(obj)}: still being deleted after {timeout_s:.0f} s",
                hint=f"see `kubectl get {obj['kind'].lower()} {meta['name']} -o yaml` (finalizers); then re-run",
            )
        sleep(2.0)


def _rollback(kube: KubeApi, created: list[Obj]) -> tuple[list[str], list[str]]:
    rolled, left = [], []
    for obj in reversed(created):
        try:
            _delete(kube, obj)
            rolled.append(describe(obj))
        except KubeApiError:
            left.append(describe(obj))
    return rolled, left
