"""Server-side apply in dependency order, with roll-back of what this call created if it fails part-way."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spectrn.deploy.plan import Plan, PlanItem
from spectrn.errors import DeployError, Interrupted
from spectrn.kube.client import (
    KubeApi,
    KubeApiError,
    Obj,
    describe,
)

if TYPE_CHECKING:
    pass


@dataclass
class ApplyResult:
    created: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)


def apply_plan(kube: KubeApi, plan: Plan, *, on_step: Callable[[PlanItem], None] | None = None) -> ApplyResult:
    """Apply the changes in order; on failure or Ctrl-C delete what this call created, then raise."""
    result = ApplyResult()
    created_objs: list[Obj] = []
    current: PlanItem | None = None
    try:
        for item in plan.items:
            if item.action in ("unchanged", "keep"):
                result.unchanged.append(item.name)
                continue
            current = item
            kube.apply(item.obj)
            if item.action == "create":
                result.created.append(item.name)
                created_objs.append(item.obj)
            else:
                result.updated.append(item.name)
            if on_step:
                on_step(item)
        return result
    except (KubeApiError, KeyboardInterrupt) as e:
        rolled, left = _rollback(kube, created_objs)
        report = [
            f"applied: {', '.join(result.created + result.updated) or 'nothing'}",
            f"rolled back (deleted again): {', '.join(rolled) or 'nothing'}",
        ]
        if left:
            report.append(f"COULD NOT roll back: {', '.join(left)} (run `spectrn teardown`)")
        if result.updated:
            report.append(f"left updated (existed before): {', '.join(result.updated)}")
        if isinstance(e, KeyboardInterrupt):
            raise Interrupted("deploy stopped during apply; " + "; ".join(report)) from None
        failed = current.name if current else "?"
        raise DeployError(
            f"applying {failed} failed: {e.message}. " + "; ".join(report),
            hint=e.hint or "fix the cause and re-run `spectrn deploy` (applied objects are reused)",
        ) from None


def _rollback(kube: KubeApi, created: list[Obj]) -> tuple[list[str], list[str]]:
    rolled, left = [], []
    for obj in reversed(created):
        meta = obj["metadata"]
        try:
            kube.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"), propagation="Foreground")
            rolled.append(describe(obj))
        except KubeApiError:
            left.append(describe(obj))
    return rolled, left
