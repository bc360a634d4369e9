"""Teardown: delete only what spectrn created, nothing else."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from spectrn.deploy.objects import NAMESPACE_LABEL, Clock, Sleep, _managed
from spectrn.errors import DeployError
from spectrn.kube.api import MANAGED_SELECTOR, KubeApi, KubeApiError, Obj, describe, labels_of

if TYPE_CHECKING:
    from spectrn.configuration.config import SpectrnConfig


# What teardown looks for, namespaced kinds first; versions that the cluster does not serve are skipped.
TEARDOWN_KINDS = (
    ("batch/v1", "Job"),
    ("apps/v1", "Deployment"),
    ("v1", "Service"),
    ("v1", "Pod"),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"),
    ("resource.k8s.io/v1beta1", "ResourceClaimTemplate"),
    ("v1", "ConfigMap"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "ServiceAccount"),
)


CLUSTER_KINDS = (("v1", "PersistentVolume"),)


# Objects every namespace has; they do not count as "someone else's" when deciding to delete a namespace.
_NAMESPACE_DEFAULTS = {("ConfigMap", "kube-root-ca.crt"), ("ServiceAccount", "default")}


@dataclass
class TeardownResult:
    deleted: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    # the namespace was deleted (or was already being deleted) and is still Terminating
    terminating: str | None = None


def terminating(ns_obj: Obj | None) -> bool:
    """A namespace whose deletion has started: it stays, in phase Terminating, until its content is gone."""
    return ns_obj is not None and bool((ns_obj.get("metadata") or {}).get("deletionTimestamp"))


def wait_namespace_gone(
    kube: KubeApi,
    namespace: str,
    *,
    timeout_s: float,
    clock: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
    poll_s: float = 5.0,
) -> None:
    """Wait until a deleted namespace is really gone; ``DeployError`` naming what holds it after ``timeout_s``.

    Deleting a namespace only starts it: the API server marks it Terminating and the namespace controller
    deletes its content, then the namespace (kubernetes docs, tasks/administer-cluster/namespaces.md: "This
    delete is asynchronous, so for a time you will see the namespace in the `Terminating` state"). Creating
    anything in it meanwhile is refused with 403. A watch on namespaces wakes the wait when it goes; without
    permission to watch namespaces it polls."""
    start = clock()
    while True:
        ns_obj = kube.get("v1", "Namespace", namespace)
        if ns_obj is None:
            return
        if clock() - start >= timeout_s:
            conditions = [
                f"{c.get('type')}: {c.get('message') or c.get('reason') or ''}".rstrip(": ")
                for c in (ns_obj.get("status") or {}).get("conditions") or []
                if c.get("status") == "True"
            ]
            raise DeployError(
                f"namespace {namespace} is still Terminating after {timeout_s:.0f} s"
                + (f" ({'; '.join(conditions)})" if conditions else ""),
                hint=f"something holds it (finalizers of its objects, an unavailable API service): see `kubectl get "
                f"namespace {namespace} -o yaml`; then re-run",
            )
        rv = str(ns_obj["metadata"]["resourceVersion"])  # the API server sets it on every object
        try:
            for etype, obj in kube.watch("v1", "Namespace", resource_version=rv, timeout_s=poll_s):
                if etype == "DELETED" and (obj.get("metadata") or {}).get("name") == namespace:
                    return
        except KubeApiError as e:
            if e.gone:
                continue  # our resourceVersion expired: get the namespace again
            if e.status in (0, 403, 429) or e.status >= 500:
                sleep(poll_s)  # no permission to watch namespaces, or a hiccup: poll
                continue
            raise


def teardown(
    kube: KubeApi,
    cfg: SpectrnConfig,
    *,
    dry_run: bool = False,
    keep_namespace: bool = False,
    wait_s: float | None = None,
    clock: Clock = time.monotonic,
    sleep: Sleep = time.sleep,
) -> TeardownResult:
    """Delete what spectrn created in ``cfg.namespace`` (by label), never anything else.

    With ``wait_s``, a deleted namespace is waited for until it is gone (``DeployError`` after ``wait_s``), so a
    following ``spectrn deploy`` does not find it Terminating; without, ``result.terminating`` names it."""
    ns = cfg.namespace
    result = TeardownResult()
    versions = kube.api_versions()
    targets: list[Obj] = []
    seen: set[tuple[str, str]] = set()
    for api_version, kind in TEARDOWN_KINDS:
        if api_version not in versions:
            continue
        for obj in kube.list(api_version, kind, ns, MANAGED_SELECTOR):
            key = (kind, obj["metadata"]["name"])
            if _managed(obj) and key not in seen:  # belt and braces: re-check the label the server filtered on
                seen.add(key)
                targets.append(obj)
    for api_version, kind in CLUSTER_KINDS:
        for obj in kube.list(api_version, kind, None, f"{MANAGED_SELECTOR},{NAMESPACE_LABEL}={ns}"):
            if _managed(obj) and labels_of(obj).get(NAMESPACE_LABEL) == ns:
                targets.append(obj)
    # Pods owned by a Deployment/Job go with their owner; only loose pods are deleted by name.
    targets = [t for t in targets if not (t["kind"] == "Pod" and t["metadata"].get("ownerReferences"))]
    for obj in targets:
        if not dry_run:
            meta = obj["metadata"]
            kube.delete(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"), propagation="Foreground")
        result.deleted.append(describe(obj))

    try:
        ns_obj = kube.get("v1", "Namespace", ns)
    except KubeApiError as e:
        if e.status != 403:
            raise
        result.kept.append(f"Namespace {ns} (cannot read namespaces: forbidden)")
        return result
    if ns_obj is None:
        return result
    if terminating(ns_obj):
        result.kept.append(f"Namespace {ns} (already being deleted: Terminating)")
        result.terminating = ns
    elif not _managed(ns_obj):
        result.kept.append(f"Namespace {ns} (not created by spectrn)")
    elif keep_namespace:
        result.kept.append(f"Namespace {ns} (--keep-namespace)")
    else:
        deleted_names = {(t["kind"], t["metadata"]["name"]) for t in targets}
        others = _foreign_objects(kube, ns, deleted_names)
        if others:
            result.kept.append(
                f"Namespace {ns} (also holds {', '.join(others[:5])}{' ...' if len(others) > 5 else ''})"
            )
        else:
            if not dry_run:
                kube.delete("v1", "Namespace", ns, propagation="Foreground")
                result.terminating = ns
            result.deleted.append(f"Namespace {ns}")
    if result.terminating and not dry_run and wait_s is not None:
        wait_namespace_gone(kube, ns, timeout_s=wait_s, clock=clock, sleep=sleep)
        result.terminating = None
    return result


def _foreign_objects(kube: KubeApi, ns: str, deleted: set[tuple[str, str]]) -> list[str]:
    out = []
    for api_version, kind in (
        ("apps/v1", "Deployment"),
        ("apps/v1", "StatefulSet"),
        ("batch/v1", "Job"),
        ("v1", "Pod"),
        ("v1", "Service"),
        ("v1", "ConfigMap"),
        ("v1", "Secret"),
        ("v1", "PersistentVolumeClaim"),
        ("v1", "ServiceAccount"),
    ):
        try:
            items = kube.list(api_version, kind, ns)
        except KubeApiError:
            out.append(f"{kind}s (cannot list)")
            continue
        for obj in items:
            name = obj["metadata"]["name"]
            if (kind, name) in deleted or (kind, name) in _NAMESPACE_DEFAULTS or _managed(obj):
                continue
            if kind == "Pod" and obj["metadata"].get("ownerReferences"):
                continue
            if kind == "Secret" and obj.get("type") == "kubernetes.io/service-account-token":
                continue
            out.append(f"{kind} {name}")
    return out
