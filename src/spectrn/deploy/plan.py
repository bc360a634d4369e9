"""The plan: each rendered object against the live one (create, update, unchanged, keep)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from spectrn.deploy.objects import SPEC_HASH, Action, _managed, order_objects, stamp
from spectrn.kube.client import (
    KubeApi,
    KubeApiError,
    Obj,
    describe,
)

if TYPE_CHECKING:
    pass


@dataclass
class PlanItem:
    obj: Obj
    action: Action
    reason: str = ""
    foreign: bool = False
    terminating: bool = False  # the live object (a namespace) is being deleted

    @property
    def name(self) -> str:
        return describe(self.obj)


@dataclass
class Plan:
    items: list[PlanItem]

    @property
    def changes(self) -> list[PlanItem]:
        return [i for i in self.items if i.action in ("create", "update")]

    def summary(self) -> str:
        counts = {a: sum(1 for i in self.items if i.action == a) for a in ("create", "update", "unchanged", "keep")}
        return ", ".join(f"{n} {a}" for a, n in counts.items() if n) or "nothing to do"


def make_plan(kube: KubeApi, objects: Iterable[Obj]) -> Plan:
    """Compare each rendered object with the live one (by its spec-hash annotation)."""
    items = []
    for raw in order_objects(objects):
        obj = stamp(raw)
        meta = obj["metadata"]
        try:
            live = kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
        except KubeApiError as e:
            if e.status == 403 and obj["kind"] == "Namespace":
                # Users with namespace-scoped RBAC cannot read Namespaces: use it, never adopt or delete it.
                items.append(PlanItem(obj, "keep", "cannot read namespaces (forbidden): assumed to exist, not adopted"))
                continue
            raise
        if live is None:
            items.append(PlanItem(obj, "create"))
            continue
        if (live.get("metadata") or {}).get("deletionTimestamp"):
            items.append(
                PlanItem(obj, "create", "being deleted (Terminating): created again once it is gone", False, True)
            )
            continue
        if not _managed(live):
            if obj["kind"] == "Namespace":
                items.append(PlanItem(obj, "keep", "exists and is not spectrn's: used as is, never deleted"))
            else:
                items.append(PlanItem(obj, "update", "exists and is NOT managed by spectrn", foreign=True))
            continue
        live_hash = ((live.get("metadata") or {}).get("annotations") or {}).get(SPEC_HASH)
        if live_hash == meta["annotations"][SPEC_HASH]:
            items.append(PlanItem(obj, "unchanged"))
        else:
            items.append(
                PlanItem(obj, "update", f"spec hash {live_hash or 'none'} -> {meta['annotations'][SPEC_HASH]}")
            )
    return Plan(items)
