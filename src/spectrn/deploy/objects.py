"""Rendered objects as spectrn applies them: labels, apply order, the spec-hash stamp."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Literal

from spectrn.kube.api import MANAGED_BY_LABEL, MANAGED_BY_VALUE, Obj, labels_of

if TYPE_CHECKING:
    pass


SPEC_HASH = "spectrn.io/spec-hash"


NAMESPACE_LABEL = "spectrn.io/namespace"


NEURON_RESOURCE = "aws.amazon.com/neuron"


NEURONCORE_RESOURCE = "aws.amazon.com/neuroncore"


NEURON_DRIVER = "neuron.aws.com"


VARIANTS = ("baseline", "speculative")


# Dependency order: what a later object refers to is applied first (and deleted last).
KIND_ORDER = (
    "Namespace",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "Secret",
    "ConfigMap",
    "PersistentVolume",
    "PersistentVolumeClaim",
    "ResourceClaimTemplate",
    "Deployment",
    "Service",
    "Job",
)


def _kind_rank(obj: Obj) -> int:
    kind = obj.get("kind", "")
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)


def order_objects(objects: Iterable[Obj]) -> list[Obj]:
    """Dependency order (stable: objects of one kind keep the renderer's order)."""
    return sorted(objects, key=_kind_rank)


def spec_hash(obj: Obj) -> str:
    """Hash of the rendered object minus the hash annotation itself (stable key order)."""
    clean = copy.deepcopy(obj)
    annotations = (clean.get("metadata") or {}).get("annotations") or {}
    annotations.pop(SPEC_HASH, None)
    return hashlib.sha256(json.dumps(clean, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def stamp(obj: Obj) -> Obj:
    """A copy of ``obj`` carrying its spec hash annotation."""
    out = copy.deepcopy(obj)
    digest = spec_hash(out)
    out.setdefault("metadata", {}).setdefault("annotations", {})[SPEC_HASH] = digest
    return out


def _managed(obj: Obj | None) -> bool:
    return obj is not None and labels_of(obj).get(MANAGED_BY_LABEL) == MANAGED_BY_VALUE


# what the plan does with one object
Action = Literal["create", "update", "replace", "unchanged", "keep"]
# a pre-flight finding's weight
Severity = Literal["ok", "warn", "error"]
# injected time, so waits are testable without sleeping
Clock = Callable[[], float]
Sleep = Callable[[float], None]
