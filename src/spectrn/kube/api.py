"""The Kubernetes interface spectrn codes against: ``KubeApi``, object addressing, labels, the error type.

``KubeApi`` is the small interface the rest of spectrn uses (deploy, status, teardown, in-cluster bench, the kind
helper); ``spectrn.kube.client.RealKube`` implements it with the official ``kubernetes`` client and
``doubles.kube_fake.FakeKube`` in memory for tests. Objects are plain dicts (the same shape as the YAML spectrn
renders).

Errors: every failure becomes ``KubeApiError`` (a ``spectrn.errors.KubeError``) that keeps the API server's own
message from its ``Status`` body, the HTTP status and the reason (``NotFound``, ``Forbidden``, ``Conflict``,
``Expired``...), and a hint naming the next step.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from spectrn.errors import KubeError

FIELD_MANAGER = "spectrn"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "spectrn"
MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}"
COMPONENT_LABEL = "spectrn.io/component"

Propagation = Literal["Foreground", "Background", "Orphan"]
Obj = dict[str, Any]
# Aliases: inside classes with a ``list`` method, the builtin's name is shadowed in annotations.
ObjList = list[Obj]
StrList = list[str]
QueryList = list[tuple[str, str]]


class KubeApiError(KubeError):
    """A refused or failed Kubernetes call; ``status`` is the HTTP status (0: no response), ``reason`` the
    Status reason (``Invalid``, ``Conflict``...; the HTTP reason phrase when the server sent none) and
    ``causes`` the Status ``details.causes`` (``{"reason", "message", "field"}`` each)."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 0,
        reason: str = "",
        hint: str | None = None,
        causes: list[dict[str, str]] | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.reason = reason
        self.causes = causes or []

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def gone(self) -> bool:
        return self.status == 410


_HINTS = {
    401: "your credentials were rejected: refresh them (e.g. `aws eks update-kubeconfig --name CLUSTER`) "
    "and check `kubectl auth whoami`",
    403: "ask a cluster admin for the RBAC permissions listed in docs/kubernetes.md "
    "(check with `kubectl auth can-i --list -n NAMESPACE`)",
    404: "the object or its API is missing: check the namespace, the name and that the CRD/API group is installed",
    409: "another writer changed the object at the same time: re-run the command",
    410: "the watch fell too far behind the server: spectrn re-lists and resumes; re-run if it persists",
    422: "the object was rejected as invalid: check the rendered manifest with `spectrn render` and the field named",
    429: "the API server is throttling requests: wait a moment and re-run",
}


# Server-side apply of a field the cluster's schema does not declare (or of a wrong type) fails while typing
# the patch, as a plain error: HTTP 500 without a reason (apimachinery managedfields structuredmerge.go
# ``fmt.Errorf("failed to create typed patch object (%v): %v", ...)``). Retrying cannot help.
TYPED_PATCH_FAILURE = "failed to create typed patch object"
NAMESPACE_TERMINATING = "because it is being terminated"


def api_error(status: int, reason: str, body: str | bytes | None, *, action: str) -> KubeApiError:
    """Build the spectrn error for an HTTP failure, keeping the server's ``Status`` message when present."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else (body or "")
    message = ""
    server_reason = ""
    causes: list[dict[str, str]] = []
    try:
        parsed = json.loads(text)
        if isinstance(parsed, dict):
            message = str(parsed.get("message") or "")
            server_reason = str(parsed.get("reason") or "")
            details = parsed.get("details")
            if isinstance(details, dict) and isinstance(details.get("causes"), list):
                causes = [
                    {k: str(v) for k, v in c.items() if k in ("reason", "message", "field")}
                    for c in details["causes"]
                    if isinstance(c, dict)
                ]
    except ValueError:
        message = text.strip()[:500]
    reason = server_reason or reason or ""
    detail = message or reason or "no message from the server"
    hint = _HINTS.get(status) or (
        "the API server failed: check the cluster's health and re-run" if status >= 500 else None
    )
    if status == 403 and NAMESPACE_TERMINATING in message:
        hint = (
            "the namespace is being deleted (Terminating): wait until `kubectl get namespace` no longer lists it, "
            "then re-run"
        )
    elif status == 500 and TYPED_PATCH_FAILURE in message:
        hint = (
            "the cluster's API does not know a field of this object (an older Kubernetes version, or a field "
            "set in the configuration that this kind does not have): check `spectrn render` against the "
            "cluster version; re-running cannot help"
        )
    # one line, the server's own words otherwise untouched (its messages quote regexes and examples exactly)
    head = f"{action}: HTTP {status} {reason}".rstrip()
    return KubeApiError(
        f"{head}: {' '.join(line.strip() for line in detail.splitlines() if line.strip())}",
        status=status,
        reason=reason,
        hint=hint,
        causes=causes,
    )


def one_line(exc: BaseException) -> str:
    """An exception's text on one line, cut to 300 characters (the client's texts can span lines)."""
    return " ".join(str(exc).split())[:300]


def connection_error(exc: BaseException, *, action: str, host: str = "") -> KubeApiError:
    where = f" at {host}" if host else ""
    return KubeApiError(
        f"{action}: cannot reach the Kubernetes API server{where}: {type(exc).__name__}: {one_line(exc)}",
        status=0,
        reason="ConnectionError",
        hint="check the kube context (`kubectl config current-context`), network access and that the cluster is up",
    )


def translate_api_exception(exc: BaseException, *, action: str) -> KubeApiError:
    """Turn a ``kubernetes.client.ApiException`` (or a transport error) into a ``KubeApiError``."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status > 0:
        return api_error(status, str(getattr(exc, "reason", "") or ""), getattr(exc, "body", None), action=action)
    return connection_error(exc, action=action)


# ---- object addressing ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceInfo:
    plural: str
    namespaced: bool


# The kinds spectrn renders, reads or deletes; anything else is resolved through discovery.
KNOWN_KINDS: dict[str, ResourceInfo] = {
    "Namespace": ResourceInfo("namespaces", False),
    "Node": ResourceInfo("nodes", False),
    "PersistentVolume": ResourceInfo("persistentvolumes", False),
    "CSIDriver": ResourceInfo("csidrivers", False),
    "DeviceClass": ResourceInfo("deviceclasses", False),
    "ResourceSlice": ResourceInfo("resourceslices", False),
    "ClusterRole": ResourceInfo("clusterroles", False),
    "ClusterRoleBinding": ResourceInfo("clusterrolebindings", False),
    "ServiceAccount": ResourceInfo("serviceaccounts", True),
    "ConfigMap": ResourceInfo("configmaps", True),
    "Secret": ResourceInfo("secrets", True),
    "PersistentVolumeClaim": ResourceInfo("persistentvolumeclaims", True),
    "ResourceClaimTemplate": ResourceInfo("resourceclaimtemplates", True),
    "ResourceClaim": ResourceInfo("resourceclaims", True),
    "Deployment": ResourceInfo("deployments", True),
    "ReplicaSet": ResourceInfo("replicasets", True),
    "StatefulSet": ResourceInfo("statefulsets", True),
    "Service": ResourceInfo("services", True),
    "Job": ResourceInfo("jobs", True),
    "Pod": ResourceInfo("pods", True),
    "Event": ResourceInfo("events", True),
    "Role": ResourceInfo("roles", True),
    "RoleBinding": ResourceInfo("rolebindings", True),
    "NetworkPolicy": ResourceInfo("networkpolicies", True),
    "PodDisruptionBudget": ResourceInfo("poddisruptionbudgets", True),
}


def api_prefix(api_version: str) -> str:
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


def describe(obj: Obj) -> str:
    """``Deployment spectrn/qwen-vllm`` (namespace/name) or ``PersistentVolume spectrn-models``."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{obj.get('kind', '?')} {ns + '/' if ns else ''}{meta.get('name', '?')}"


def labels_of(obj: Obj) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("labels") or {})


# ---- the interface -------------------------------------------------------------------------------


class KubeApi(Protocol):
    """What spectrn needs from a cluster. Every method raises ``KubeApiError`` on failure."""

    @property
    def context(self) -> str:
        """Name of the kube context (or ``in-cluster``) the client talks to."""
        ...

    def apply(self, obj: Obj, *, field_manager: str = FIELD_MANAGER, force: bool = True, dry_run: bool = False) -> Obj:
        """Server-side apply ``obj``; returns the live object."""
        ...

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        """The live object, or None when it does not exist."""
        ...

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjList:
        """The objects, each with its ``apiVersion`` and ``kind`` (list items omit them; ``RealKube`` adds them)."""
        ...

    def list_meta(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[ObjList, str]:
        """Like ``list`` plus the list's resourceVersion, to start a watch from."""
        ...

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_s: float = 30,
    ) -> Iterator[tuple[str, Obj]]:
        """Yield ``(type, object)`` events (ADDED, MODIFIED, DELETED) until the server-side timeout.

        A too-old ``resource_version`` raises ``KubeApiError`` with status 410: re-list and watch again.
        """
        ...

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: Propagation = "Background",
    ) -> bool:
        """Delete; False when it was already gone."""
        ...

    def pod_logs(
        self,
        name: str,
        namespace: str,
        *,
        container: str | None = None,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str: ...

    def events_for(self, kind: str, name: str, namespace: str) -> ObjList:
        """Events whose involvedObject is ``kind/name``, oldest first."""
        ...

    def exec(
        self, pod: str, namespace: str, command: StrList, *, container: str | None = None, timeout_s: float = 300
    ) -> bytes:
        """Run ``command`` in the pod; return its stdout; non-zero exit raises ``KubeApiError``."""
        ...

    def api_versions(self) -> set[str]:
        """Served group versions: ``v1``, ``apps/v1``, ``resource.k8s.io/v1``, ..."""
        ...

    def can_i(
        self, verb: str, resource: str, *, group: str = "", namespace: str | None = None, subresource: str = ""
    ) -> bool:
        """SelfSubjectAccessReview: may the current user do ``verb`` on ``resource``?"""
        ...

    def patch_node_status(self, name: str, patch: ObjList) -> Obj:
        """JSON-patch a node's status subresource (used to advertise fake Neuron capacity on kind)."""
        ...


def neuron_quantity(value: Any) -> int:
    """Parse an extended-resource quantity (``"16"``); anything unparsable counts as 0."""
    try:
        return int(str(value))
    except (TypeError, ValueError):
        match = re.fullmatch(r"(\d+)", str(value or "").strip())
        return int(match.group(1)) if match else 0
