"""The plan: each rendered object against the live one (create, update, replace, unchanged, keep).

Some fields cannot change once an object exists; the API server refuses such an update with 422 Invalid
(docs/kubernetes.md cites each rule). The plan finds them before anything is applied: a Deployment whose
selector changed (a spectrn upgrade that relabels its pods) is *replaced* (deleted, then created); a
PersistentVolume whose volume source changed (another S3 bucket) or a PersistentVolumeClaim whose spec
changed cannot be replaced under running pods, so pre-flight stops with what to do instead."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spectrn.deploy.objects import SPEC_HASH, Action, _managed, order_objects, stamp
from spectrn.kube.api import KubeApi, KubeApiError, Obj, describe

if TYPE_CHECKING:
    pass


@dataclass
class PlanItem:
    obj: Obj
    action: Action
    reason: str = ""
    foreign: bool = False
    terminating: bool = False  # the live object (a namespace) is being deleted
    immutable: str = ""  # the immutable field this update would change (and cannot be replaced here)

    @property
    def name(self) -> str:
        return describe(self.obj)


@dataclass
class Plan:
    items: list[PlanItem]

    @property
    def changes(self) -> list[PlanItem]:
        return [i for i in self.items if i.action in ("create", "update", "replace")]

    def summary(self) -> str:
        actions = ("create", "update", "replace", "unchanged", "keep")
        counts = {a: sum(1 for i in self.items if i.action == a) for a in actions}
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
            continue
        changed = immutable_change(live, obj)
        if changed and obj["kind"] in REPLACEABLE:
            items.append(PlanItem(obj, "replace", f"{changed} cannot change in place: deleted, then created again"))
        else:
            reason = f"spec hash {live_hash or 'none'} -> {meta['annotations'][SPEC_HASH]}"
            items.append(PlanItem(obj, "update", reason, immutable=changed))
    return Plan(items)


# Kinds whose immutable fields are handled by deleting and re-creating the object (nothing else refers to it).
REPLACEABLE = ("Deployment", "Job")
# PersistentVolume spec fields that may change after creation; every other one is the volume source.
_PV_MUTABLE = frozenset(
    ("capacity", "accessModes", "persistentVolumeReclaimPolicy", "claimRef", "storageClassName", "mountOptions")
) | {"volumeAttributesClassName"}


def _leaves(obj: Any, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    out: dict[tuple[str, ...], Any] = {}
    for k, v in obj.items() if isinstance(obj, dict) else ():
        if isinstance(v, dict):
            out.update(_leaves(v, (*prefix, str(k))))
        else:
            out[(*prefix, str(k))] = v
    return out


def _differs(live: Any, rendered: Any, ignore: Iterable[str] = ()) -> bool:
    """Whether a field spectrn renders has another value live (fields the server added are ignored)."""
    if not isinstance(rendered, dict):  # a scalar or list field (a Job's spec.completionMode): compared whole
        return bool(live != rendered)
    live_leaves = _leaves(live)
    # a field rendered as null is not set: the API server drops nulls, so the live object never holds one
    return any(
        live_leaves.get(path) != value
        for path, value in _leaves(rendered).items()
        if path[0] not in ignore and value is not None
    )


def immutable_change(live: Obj, rendered: Obj) -> str:
    """The immutable field (``spec.selector``...) whose rendered value differs from the live one, or ``""``."""
    kind = rendered.get("kind")
    live_spec, spec = live.get("spec") or {}, rendered.get("spec") or {}
    if kind == "Deployment" and spec.get("selector") != live_spec.get("selector"):
        return "spec.selector"
    if kind == "Job":
        for field in ("selector", "template", "completionMode"):
            if field in spec and _differs(live_spec.get(field), spec[field]):
                return f"spec.{field}"
    if kind == "Service" and spec.get("clusterIP") and spec.get("clusterIP") != live_spec.get("clusterIP"):
        return "spec.clusterIP"
    if kind == "PersistentVolume" and _differs(live_spec, spec, ignore=_PV_MUTABLE):
        return "the volume source (spec.persistentvolumesource)"
    if kind == "PersistentVolumeClaim":
        bound = (live.get("status") or {}).get("phase") == "Bound"
        rendered_spec = {k: v for k, v in spec.items() if not (k == "volumeName" and not live_spec.get(k))}
        if bound:
            rendered_spec["resources"] = {k: v for k, v in (spec.get("resources") or {}).items() if k != "requests"}
        if _differs(live_spec, rendered_spec):
            return "spec"
    return ""
