"""An in-memory ``KubeApi`` for tests and demos: a tiny cluster with scriptable pods that refuses what a real
API server refuses.

``FakeKube`` stores objects by (group, kind, namespace, name), records every call in ``calls`` (so tests
can check apply order and that teardown touched nothing else), and plays the controllers spectrn relies on:

* Deployments: applying one with a new pod template creates its pods, whose status then follows a
  *scenario* (``ready``, ``unschedulable-neuron``, ``image-pull``, ``crashloop``, ``oom``, ...) one step per
  tick, with the events and log lines a real kubelet/scheduler would produce. With ``strategy: Recreate``
  the old pods go before the new ones are created (with ``recreate_grace_ticks`` N > 0 they stay Terminating,
  still Ready, for N ticks first, while the Deployment already reports the new generation observed);
  otherwise they go once the new ones are ready.
* Jobs: applying one creates its pods (indexed when ``completionMode: Indexed``); each pod runs and its
  result files come from ``job_files(pod_name, index)`` and appear after ``job_run_ticks`` ticks.
  ``exec`` understands ``cat``, ``test -e``,
  ``touch`` and ``tar cf - -C DIR .``; touching ``<out>/.collected`` lets the pod finish.
* Namespaces: deleting one moves it to ``Terminating``; the namespace controller deletes its contents on the
  next tick, and the namespace itself goes on a later tick, once nothing is left in it.
* Services get a cluster IP, PersistentVolumeClaims bind to the PersistentVolume they name.

The API rules (``doubles.kube_rules`` quotes the source of each): ``apply`` is server-side apply as
``RealKube`` sends it (``application/apply-patch+yaml``, a field manager, ``force``) and merges by field
ownership: a field another manager owns and that the apply would change is a 409 Conflict unless ``force``,
which takes it over; fields the manager applied before and no longer sends are removed. Unknown or mistyped
fields (checked against the Kubernetes 1.34 OpenAPI schema) are a 500 "failed to create typed patch object";
invalid names, label values, empty ``containers`` and a Deployment selector that misses its template are
422 Invalid; changing an immutable field (Deployment and Job selector, Job template, Service cluster IP,
PersistentVolume source, PersistentVolumeClaim spec) is 422; creating in a Terminating namespace is 403; a
body carrying a stale ``resourceVersion`` is 409. ``update`` is another writer's PUT (``kubectl replace`` or
``edit``): stale resourceVersion 409, ``fieldValidation=Strict`` 400 for unknown fields. ``watch`` serves
events from a bounded history: a resourceVersion older than the history is an ``ERROR`` event with 410
Expired, as the watch cache sends it. Lists are treated as atomic in the ownership model (a real server
tracks list items by key); that only makes conflicts coarser.

Time is fake: ``clock()`` returns it, ``sleep(s)`` and each ``watch`` call advance it by a tick, so waits
that take hours in a real cluster take milliseconds here. Failures are injected with ``fail_next``.
"""

from __future__ import annotations

import copy
import hashlib
import io
import json
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from doubles import kube_rules as rules
from spectrn.kube.api import (
    KNOWN_KINDS,
    KubeApiError,
    Obj,
    ObjList,
    Propagation,
    StrList,
    api_error,
    connection_error,
    describe,
)
from spectrn.kube.client import RealKube

SCENARIOS = (
    "ready",
    "slow-compile",
    "unschedulable-neuron",
    "unschedulable-claim",
    "image-pull",
    "crashloop",
    "oom",
    "startup-timeout",
    "startup-killed",
)

DEFAULT_VERSIONS = {
    "v1",
    "apps/v1",
    "batch/v1",
    "storage.k8s.io/v1",
    "authorization.k8s.io/v1",
    "resource.k8s.io/v1",
    "resource.k8s.io/v1beta1",
}


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def _selector_matches(selector: str | None, labels: dict[str, str]) -> bool:
    """Equality-based label selectors (``a=b,c!=d,e``), which is what spectrn sends."""
    if not selector:
        return True
    for term in selector.split(","):
        term = term.strip()
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k.strip()) == v.strip():
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k.strip().rstrip("=")) != v.strip().lstrip("="):
                return False
        elif labels.get(term) is None:
            return False
    return True


@dataclass
class _Failure:
    op: str
    kind: str | None
    name: str | None
    status: int
    message: str
    reason: str
    times: int


@dataclass
class _PodRun:
    scenario: str
    step: int = 0
    owner_kind: str = "Deployment"
    owner: str = ""
    template_hash: str = ""
    index: int = 0
    files: dict[str, bytes] = field(default_factory=dict)
    pending: dict[str, bytes] = field(default_factory=dict)
    collected: bool = False


class FakeKube:
    """In-memory ``KubeApi``; see the module docstring."""

    def __init__(
        self,
        *,
        nodes: int = 1,
        neuron_per_node: int = 16,
        api_versions: set[str] | None = None,
        csi_drivers: tuple[str, ...] = ("s3.csi.aws.com",),
        device_classes: tuple[str, ...] = ("neuron.aws.com",),
        tick_s: float = 5.0,
        context: str = "fake",
    ) -> None:
        self._context = context
        self.objects: dict[tuple[str, str, str, str], Obj] = {}
        self.calls: list[tuple[str, str]] = []
        self.now = 1_000.0
        self.tick_s = tick_s
        self.versions = set(DEFAULT_VERSIONS if api_versions is None else api_versions)
        self.scenarios: dict[str, str] = {}
        self.denied: set[tuple[str, str]] = set()
        self.logs: dict[str, str] = {}
        self.previous_logs: dict[str, str] = {}
        self.events: ObjList = []
        self.runs: dict[str, _PodRun] = {}
        self.job_files: Callable[[str, int], dict[str, bytes]] = lambda pod, index: {}
        self.job_finishes_without_collect = False
        self.job_run_ticks = 2
        self.job_done_line: str | None = None  # logged by a job pod when its results appear
        # A Recreate rollout that takes time: with N > 0, a new template marks the old pods Terminating (still
        # Ready until their containers stop, as a pod in its grace period is) for N ticks, and the new pods are
        # created only once they are gone, as the deployment controller's Recreate strategy waits for "old pods
        # not running" (pkg/controller/deployment/recreate.go rolloutRecreate, oldPodsRunning)
        self.recreate_grace_ticks = 0
        self._terminating: dict[tuple[str, str], int] = {}  # (namespace, pod) -> ticks left
        self._recreating: set[tuple[str, str]] = set()  # (namespace, Deployment) waiting for its old pods
        self._failures: list[_Failure] = []
        self._rv = 100
        self._uid = 0
        self._ips = 0
        # field ownership per object: manager -> (operation, owned leaf paths)
        self.owners: dict[tuple[str, str, str, str], dict[str, tuple[str, set[Path]]]] = {}
        # watch history: (resourceVersion, type, key, object); older entries are compacted away
        self.history: list[tuple[int, str, tuple[str, str, str, str], Obj]] = []
        self.history_limit = 5000
        self._compacted_rv = self._rv
        self.warnings: list[str] = []  # Warning headers of fieldValidation=Warn updates
        self.expired_watches = 0  # watches answered with 410 Expired
        for i in range(nodes):
            capacity = {"cpu": "192", "memory": "2Ti", "pods": "110"}
            if neuron_per_node:
                capacity["aws.amazon.com/neuron"] = str(neuron_per_node)
                capacity["aws.amazon.com/neuroncore"] = str(neuron_per_node * 8)
            self._put(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": f"node-{i}", "labels": {"node.kubernetes.io/instance-type": "trn2.48xlarge"}},
                    "status": {"capacity": dict(capacity), "allocatable": dict(capacity)},
                }
            )
        for driver in csi_drivers:
            self._put({"apiVersion": "storage.k8s.io/v1", "kind": "CSIDriver", "metadata": {"name": driver}})
        for dc in device_classes:
            self._put({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": dc}})

    # ---- test controls ---------------------------------------------------------------------------
    @property
    def context(self) -> str:
        return self._context

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.0)
        self.tick()

    def behave(self, deployment: str, scenario: str) -> None:
        """Pods created from now on for ``deployment`` follow ``scenario``."""
        if scenario not in SCENARIOS:
            raise ValueError(f"unknown scenario {scenario!r}; choose one of {SCENARIOS}")
        self.scenarios[deployment] = scenario

    def fail_next(
        self,
        op: str,
        *,
        kind: str | None = None,
        name: str | None = None,
        status: int = 500,
        message: str = "internal error",
        reason: str = "InternalError",
        times: int = 1,
    ) -> None:
        """The next ``times`` calls of ``op`` (apply, get, list, watch, delete, logs, exec, ...) on the matching
        object fail with HTTP ``status`` (0: connection reset) and the server message ``message``."""
        self._failures.append(_Failure(op, kind, name, status, message, reason, times))

    def deny(self, verb: str, resource: str) -> None:
        self.denied.add((verb, resource))

    def find(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        for (_, k, ns, n), obj in self.objects.items():
            if k == kind and n == name and (namespace is None or ns == (namespace or "")):
                return obj
        return None

    def kinds(self, kind: str) -> ObjList:
        return [o for (_, k, _, _), o in self.objects.items() if k == kind]

    def put(self, obj: Obj) -> Obj:
        """Create an object directly (as if someone else made it), bypassing apply and the call log."""
        return self._put(copy.deepcopy(obj))

    # ---- internals -------------------------------------------------------------------------------
    def _check_fail(self, op: str, kind: str | None = None, name: str | None = None) -> None:
        for f in self._failures:
            if f.op == op and f.times > 0 and (f.kind in (None, kind)) and (f.name in (None, name)):
                f.times -= 1
                action = f"{op} {kind or ''} {name or ''}".strip()
                if f.status == 0:
                    raise connection_error(ConnectionResetError(104, "Connection reset by peer"), action=action)
                body = json.dumps(
                    {"kind": "Status", "status": "Failure", "message": f.message, "reason": f.reason, "code": f.status}
                )
                raise api_error(f.status, f.reason, body, action=action)

    def _key(self, api_version: str, kind: str, namespace: str | None, name: str) -> tuple[str, str, str, str]:
        info = KNOWN_KINDS.get(kind)
        ns = (namespace or "") if (info is None or info.namespaced) else ""
        return (_group(api_version), kind, ns, name)

    def _put(self, obj: Obj) -> Obj:
        meta = obj.setdefault("metadata", {})
        key = self._key(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        created = key not in self.objects
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        if "uid" not in meta:
            self._uid += 1
            meta["uid"] = f"uid-{self._uid}"
            meta["creationTimestamp"] = "2026-01-01T00:00:00Z"
            meta["generation"] = 1
        if created:
            self._defaults_on_create(obj)
        self.objects[key] = obj
        self._record("ADDED" if created else "MODIFIED", key, obj)
        return obj

    def _defaults_on_create(self, obj: Obj) -> None:
        kind, spec = obj["kind"], obj.get("spec")
        if kind == "Namespace":
            # pkg/registry/core/namespace/strategy.go PrepareForCreate: "on create, we require the kubernetes
            # value" (spec.finalizers); a new namespace is Active.
            obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
            obj.setdefault("status", {}).setdefault("phase", "Active")
        elif kind == "Service" and isinstance(spec, dict) and spec.get("type") != "ExternalName":
            if not spec.get("clusterIP"):  # the allocator picks one; "None" (headless) stays
                self._ips += 1
                spec["clusterIP"] = f"10.96.{self._ips // 250}.{self._ips % 250 + 1}"
            spec.setdefault("clusterIPs", [spec["clusterIP"]])
        elif kind == "PersistentVolumeClaim":
            obj.setdefault("status", {}).setdefault("phase", "Pending")

    def _record(self, etype: str, key: tuple[str, str, str, str], obj: Obj) -> None:
        self.history.append((int(obj["metadata"]["resourceVersion"]), etype, key, copy.deepcopy(obj)))
        if len(self.history) > self.history_limit:
            drop = len(self.history) - self.history_limit
            self._compacted_rv = self.history[drop - 1][0]
            del self.history[:drop]

    def compact(self) -> None:
        """Forget the watch history (as etcd compaction does): any older resourceVersion now gets 410."""
        if self.history:
            self._compacted_rv = self.history[-1][0]
        self.history.clear()

    def _remove(self, key: tuple[str, str, str, str]) -> Obj | None:
        obj = self.objects.pop(key, None)
        if obj is not None:
            self._rv += 1
            obj["metadata"]["resourceVersion"] = str(self._rv)
            self.owners.pop(key, None)
            self._record("DELETED", key, obj)
        return obj

    def _event(self, pod: Obj, reason: str, message: str, etype: str = "Normal") -> None:
        meta = pod["metadata"]
        for ev in self.events:  # the kubelet aggregates repeats into one event with a count
            same = ev["involvedObject"]["name"] == meta["name"] and ev["involvedObject"].get("namespace") == meta.get(
                "namespace"
            )
            if same and ev["reason"] == reason and ev["message"] == message:
                ev["count"] += 1
                return
        self.events.append(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{meta['name']}.{len(self.events)}", "namespace": meta.get("namespace")},
                "involvedObject": {"kind": "Pod", "name": meta["name"], "namespace": meta.get("namespace")},
                "reason": reason,
                "message": message,
                "type": etype,
                "lastTimestamp": f"2026-01-01T00:{len(self.events) // 60:02d}:{len(self.events) % 60:02d}Z",
                "count": 1,
            }
        )

    # ---- KubeApi -----------------------------------------------------------------------------------
    def apply(self, obj: Obj, *, field_manager: str = "spectrn", force: bool = True, dry_run: bool = False) -> Obj:
        """Server-side apply (``PATCH`` ``application/apply-patch+yaml?fieldManager=...&force=...``)."""
        meta = obj.get("metadata") or {}
        self._check_fail("apply", obj.get("kind"), meta.get("name"))
        action = f"apply {describe(obj)}"
        if not field_manager:
            # apimachinery apis/meta/v1/validation ValidatePatchOptions: "fieldManager: Required value: is
            # required for apply patch" (422 on PatchOptions.meta.k8s.io)
            raise rules.invalid(
                "meta.k8s.io/v1",
                "PatchOptions",
                "",
                [rules.FieldError("Required value", "fieldManager", detail="is required for apply patch")],
                action=action,
            )
        if len(field_manager) > 128:
            raise rules.invalid(
                "meta.k8s.io/v1",
                "PatchOptions",
                "",
                [rules.FieldError("Too long", "fieldManager", detail="may not be more than 128 characters")],
                action=action,
            )
        if not obj.get("apiVersion") or not obj.get("kind") or not meta.get("name"):
            raise rules.status_error(
                400, "BadRequest", "apiVersion, kind and metadata.name are required", action=action
            )
        if meta.get("managedFields") is not None:
            # apiserver handlers/patch.go (apply): "metadata.managedFields must be nil"
            raise rules.status_error(400, "BadRequest", "metadata.managedFields must be nil", action=action)
        self._check_served(obj["apiVersion"], action)
        findings = rules.schema_findings(obj)
        problems = findings.typed_patch_problems(obj)
        if problems:
            raise rules.typed_patch_error(obj, problems, action=action)
        key = self._key(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        live = self.objects.get(key)
        self._check_namespace(obj, creating=live is None, action=action)
        self._check_resource_version(obj, live, action=action)
        merged, owners = self._ssa_merge(key, live, obj, field_manager, force=force, action=action)
        self._validate(merged, live, findings.required, action=action)
        if dry_run:
            return copy.deepcopy(merged)
        self.calls.append(("apply", describe(obj)))
        stored = self._store(key, live, merged, owners)
        if obj["kind"] == "Deployment":
            self._reconcile_deployment(stored)
        elif obj["kind"] == "Job" and live is None:
            self._start_job(stored)
        return copy.deepcopy(stored)

    def update(self, obj: Obj, *, field_manager: str = "kubectl-edit", field_validation: str = "Warn") -> Obj:
        """Another writer's PUT (``kubectl edit`` / ``replace``), not part of ``KubeApi``: replaces the object.

        A ``metadata.resourceVersion`` that is not the live one is 409 Conflict; without one the update is
        unconditional (Deployments and most kinds allow it). Unknown fields: ``Strict`` is 400 BadRequest;
        ``Warn``, the server's default (apiserver handlers/rest.go: ``if directive == "" { return
        metav1.FieldValidationWarn }``), drops them and adds a warning."""
        meta = obj.get("metadata") or {}
        self._check_fail("update", obj.get("kind"), meta.get("name"))
        action = f"update {describe(obj)}"
        self._check_served(obj["apiVersion"], action)
        key = self._key(obj["apiVersion"], obj["kind"], meta.get("namespace"), meta["name"])
        live = self.objects.get(key)
        if live is None:
            raise rules.status_error(
                404,
                "NotFound",
                f'{rules.qualified_resource(obj["apiVersion"], obj["kind"])} "{meta["name"]}" not found',
                action=action,
            )
        self._check_resource_version(obj, live, action=action)
        findings = rules.schema_findings(obj)
        new = copy.deepcopy(obj)
        if findings.unknown:
            if field_validation == "Strict":
                raise rules.strict_decoding_error(obj, findings.unknown, action=action)
            for path in findings.unknown:
                _drop(new, path)
                self.warnings.append(f'unknown field "{".".join(str(p) for p in path)}"')
        if findings.typing:
            raise rules.status_error(400, "BadRequest", "; ".join(findings.typing), action=action)
        new.setdefault("metadata", {}).pop("managedFields", None)
        self._validate(new, live, findings.required, action=action)
        owners = {m: (op, set(paths)) for m, (op, paths) in self.owners.get(key, {}).items()}
        before, after = _leaves(_owned_part(live)), _leaves(_owned_part(new))
        changed = {p for p in set(before) | set(after) if before.get(p, _MISSING) != after.get(p, _MISSING)}
        for m, (op, paths) in owners.items():  # an update never conflicts: it takes what it changed
            owners[m] = (op, paths - changed)
        op, mine = owners.get(field_manager, ("Update", set()))
        owners[field_manager] = ("Update", (mine | changed) & set(after))
        self.calls.append(("update", describe(obj)))
        stored = self._store(key, live, new, owners)
        if obj["kind"] == "Deployment":
            self._reconcile_deployment(stored)
        return copy.deepcopy(stored)

    # ---- the API server's checks -------------------------------------------------------------------------
    def _check_served(self, api_version: str, action: str) -> None:
        if rules.group_of(api_version) and api_version not in self.versions:
            raise rules.status_error(
                404, "NotFound", f"the server could not find the requested resource ({api_version})", action=action
            )

    def _check_namespace(self, obj: Obj, *, creating: bool, action: str) -> None:
        meta = obj["metadata"]
        ns = meta.get("namespace")
        info = KNOWN_KINDS.get(obj["kind"])
        if not ns or (info is not None and not info.namespaced):
            return
        ns_obj = self.find("Namespace", ns)
        if ns_obj is None:
            raise rules.status_error(404, "NotFound", f'namespaces "{ns}" not found', action=action)
        if creating and ns_obj["metadata"].get("deletionTimestamp"):
            # apiserver admission/plugin/namespace/lifecycle/admission.go (only under Operation == Create):
            # admission.NewForbidden(a, fmt.Errorf("unable to create new content in namespace %s because it is
            # being terminated", ...)), cause NamespaceTerminating on metadata.namespace; NewForbidden's message is
            # `%s %q is forbidden: %v` with the resource (plural.group), and details.kind holds the resource.
            resource = rules.qualified_resource(obj["apiVersion"], obj["kind"])
            raise rules.status_error(
                403,
                "Forbidden",
                f'{resource} "{meta["name"]}" is forbidden: unable to create new content in namespace {ns} '
                "because it is being terminated",
                action=action,
                details={
                    "name": meta["name"],
                    "group": rules.group_of(obj["apiVersion"]),
                    "kind": rules.plural_of(obj["kind"]),
                    "causes": [
                        {
                            "reason": "NamespaceTerminating",
                            "message": f"namespace {ns} is being terminated",
                            "field": "metadata.namespace",
                        }
                    ],
                },
            )

    def _check_resource_version(self, obj: Obj, live: Obj | None, *, action: str) -> None:
        """apiserver registry/generic/registry/store.go: ``if newResourceVersion != existingResourceVersion {
        return ..., apierrors.NewConflict(qualifiedResource, name, fmt.Errorf(OptimisticLockErrorMsg))}``;
        NewConflict: ``Operation cannot be fulfilled on %s %q: %v``."""
        sent = (obj.get("metadata") or {}).get("resourceVersion")
        if not sent:
            return
        name = obj["metadata"]["name"]
        resource = rules.qualified_resource(obj["apiVersion"], obj["kind"])
        if live is None or str(sent) != live["metadata"]["resourceVersion"]:
            raise rules.status_error(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {resource} "{name}": the object has been modified; please apply '
                "your changes to the latest version and try again",
                action=action,
                details={
                    "name": name,
                    "group": rules.group_of(obj["apiVersion"]),
                    "kind": rules.plural_of(obj["kind"]),
                },
            )

    def _ssa_merge(
        self,
        key: tuple[str, str, str, str],
        live: Obj | None,
        obj: Obj,
        manager: str,
        *,
        force: bool,
        action: str,
    ) -> tuple[Obj, dict[str, tuple[str, set[Path]]]]:
        """The applied configuration merged into the live object by field ownership (see the module docstring)."""
        applied = _leaves(_owned_part(obj))
        owners = {m: (op, set(paths)) for m, (op, paths) in self.owners.get(key, {}).items()}
        base = _owned_part(live) if live is not None else {}
        current = _leaves(base)
        conflicts: list[tuple[str, str, Path]] = []
        for m, (op, paths) in sorted(owners.items()):
            if m == manager:
                continue
            for p in sorted(paths & set(applied)):
                if current.get(p, _MISSING) != applied[p]:  # the same value is shared ownership, not a conflict
                    conflicts.append((m, op, p))
        if conflicts and not force:
            raise _apply_conflict(conflicts, obj["apiVersion"], action=action)
        merged = copy.deepcopy(base)
        _, before = owners.get(manager, ("Apply", set()))
        still_owned = set().union(*(paths for m, (_, paths) in owners.items() if m != manager))
        for p in sorted(before - set(applied) - still_owned, key=len, reverse=True):
            _drop(merged, list(p))  # applied earlier, no longer sent, nobody else's: removed
        for p, v in applied.items():
            _set(merged, p, copy.deepcopy(v))
        for m, _op, p in conflicts:  # force: the field changes hands
            owners[m] = (owners[m][0], owners[m][1] - {p})
        owners[manager] = ("Apply", set(applied))
        merged["apiVersion"], merged["kind"] = obj["apiVersion"], obj["kind"]
        merged.setdefault("metadata", {})["name"] = obj["metadata"]["name"]
        if obj["metadata"].get("namespace"):
            merged["metadata"]["namespace"] = obj["metadata"]["namespace"]
        return merged, {m: v for m, v in owners.items() if v[1]}

    def _validate(self, new: Obj, live: Obj | None, required: list[rules.FieldError], *, action: str) -> None:
        errors = rules.object_errors(new, required)
        if live is not None:
            errors += rules.immutable_errors(live, new)
        if errors:
            raise rules.invalid(new["apiVersion"], new["kind"], new["metadata"]["name"], errors, action=action)

    def _store(
        self, key: tuple[str, str, str, str], live: Obj | None, new: Obj, owners: dict[str, tuple[str, set[Path]]]
    ) -> Obj:
        new = copy.deepcopy(new)
        new_meta = new["metadata"]
        for k in ("resourceVersion", "managedFields"):
            new_meta.pop(k, None)
        if live is not None:
            for k in ("uid", "creationTimestamp", "generation", "deletionTimestamp"):
                if k in live["metadata"]:
                    new_meta[k] = live["metadata"][k]
            if json.dumps(live.get("spec"), sort_keys=True) != json.dumps(new.get("spec"), sort_keys=True):
                new_meta["generation"] = live["metadata"]["generation"] + 1
            if "status" in live:
                new["status"] = live["status"]
            for server_set in ("clusterIP", "clusterIPs"):  # allocated by the server, owned by nobody
                if new["kind"] == "Service" and server_set in (live.get("spec") or {}):
                    new.setdefault("spec", {}).setdefault(server_set, live["spec"][server_set])
        else:
            new.pop("status", None)
        new_meta["managedFields"] = _managed_fields(owners, new["apiVersion"])
        self.owners[key] = owners
        return self._put(new)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        self._check_fail("get", kind, name)
        self.calls.append(("get", f"{kind} {namespace + '/' if namespace else ''}{name}"))
        obj = self.objects.get(self._key(api_version, kind, namespace, name))
        # An unserved API answers 404 like a missing object; RealKube.get returns None for both.
        return copy.deepcopy(obj) if obj is not None else None

    def list_meta(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> tuple[ObjList, str]:
        self._check_fail("list", kind)
        self.calls.append(("list", f"{kind} {namespace or '*'} {label_selector or ''}".strip()))
        if _group(api_version) and api_version not in self.versions:
            raise api_error(
                404,
                "NotFound",
                json.dumps({"message": "the server could not find the requested resource"}),
                action=f"list {kind}",
            )
        out = []
        for (_, k, ns, _), obj in sorted(self.objects.items()):
            if k != kind or (namespace is not None and ns != namespace):
                continue
            if _selector_matches(label_selector, dict(obj["metadata"].get("labels") or {})):
                out.append(copy.deepcopy(obj))
        return out, str(self._rv)

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, label_selector: str | None = None
    ) -> ObjList:
        return self.list_meta(api_version, kind, namespace, label_selector)[0]

    def watch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        resource_version: str | None = None,
        timeout_s: float = 30,
    ) -> Iterator[tuple[str, Obj]]:
        """Advance time by a tick, then serve the events after ``resource_version`` (from the history).

        Without a resourceVersion a real server first sends every existing object as ADDED. A resourceVersion
        older than the history gets one ERROR event with a 410 Expired Status and the stream ends (apiserver
        storage/cacher/watch_cache_history.go: ``errors.NewResourceExpired(fmt.Sprintf("too old resource
        version: %d (%d)", resourceVersion, oldest-1))``, sent through ``newErrWatcher`` as ``watch.Error``);
        it goes through ``RealKube``'s own event parser, so spectrn sees exactly what a real stream gives."""
        self._check_fail("watch", kind)
        action = f"watch {kind} in {namespace or 'the cluster'}"
        self.now += min(timeout_s, self.tick_s)
        self.tick()

        def matches(key: tuple[str, str, str, str], obj: Obj) -> bool:
            return (
                key[1] == kind
                and (namespace is None or key[2] == namespace)
                and _selector_matches(label_selector, dict(obj["metadata"].get("labels") or {}))
            )

        if not resource_version or resource_version == "0":
            for key, obj in sorted(self.objects.items()):
                if matches(key, obj):
                    yield "ADDED", copy.deepcopy(obj)
            return
        since = int(resource_version)
        if since < self._compacted_rv:
            status = rules.status_body(410, "Expired", f"too old resource version: {since} ({self._compacted_rv})")
            event = json.dumps({"type": "ERROR", "object": status}).encode()
            self.expired_watches += 1
            yield RealKube._watch_event(event, action)  # raises the KubeApiError a real stream would
            return
        for rv, etype, key, obj in list(self.history):
            if rv > since and matches(key, obj):
                yield etype, copy.deepcopy(obj)

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: Propagation = "Background",
    ) -> bool:
        self._check_fail("delete", kind, name)
        key = self._key(api_version, kind, namespace, name)
        self.calls.append(("delete", f"{kind} {key[2] + '/' if key[2] else ''}{name}"))
        obj = self.objects.get(key)
        if obj is None:
            return False
        if kind == "Namespace":
            # pkg/registry/core/namespace/storage/storage.go REST.Delete: "upon first request to delete, we switch
            # the phase to start namespace termination"; the object stays while spec.finalizers is non-empty, and a
            # repeated delete answers 200 with the namespace.
            if not obj["metadata"].get("deletionTimestamp"):
                obj["metadata"]["deletionTimestamp"] = _iso(self.now)
                obj.setdefault("status", {})["phase"] = "Terminating"
                self._put(obj)
            return True
        self._remove(key)
        if propagation != "Orphan" and kind in ("Deployment", "Job"):
            for pod_key, pod in list(self.objects.items()):
                run = self.runs.get(pod["metadata"]["name"]) if pod_key[1] == "Pod" else None
                if run is not None and run.owner == name and pod_key[2] == key[2]:
                    self._remove(pod_key)
        return True

    def pod_logs(
        self,
        name: str,
        namespace: str,
        *,
        container: str | None = None,
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        self._check_fail("logs", "Pod", name)
        if self.find("Pod", name, namespace) is None:
            raise api_error(
                404, "NotFound", json.dumps({"message": f'pods "{name}" not found'}), action=f"logs of pod {name}"
            )
        text = (self.previous_logs if previous else self.logs).get(name, "")
        if tail_lines is not None:
            lines = text.splitlines()
            text = "\n".join(lines[-tail_lines:]) + ("\n" if lines else "")
        return text

    def events_for(self, kind: str, name: str, namespace: str) -> ObjList:
        self._check_fail("events", kind, name)
        return [
            copy.deepcopy(e)
            for e in self.events
            if e["involvedObject"]["kind"] == kind
            and e["involvedObject"]["name"] == name
            and e["involvedObject"].get("namespace") == namespace
        ]

    def exec(
        self, pod: str, namespace: str, command: StrList, *, container: str | None = None, timeout_s: float = 300
    ) -> bytes:
        self._check_fail("exec", "Pod", pod)
        self.calls.append(("exec", f"{pod}: {' '.join(command)}"))
        obj = self.find("Pod", pod, namespace)
        run = self.runs.get(pod)
        if obj is None or run is None:
            raise api_error(
                404, "NotFound", json.dumps({"message": f'pods "{pod}" not found'}), action=f"exec in {pod}"
            )
        if obj["status"].get("phase") != "Running":
            raise api_error(
                400,
                "BadRequest",
                json.dumps(
                    {
                        "message": "cannot exec into a container in a completed pod; "
                        f"current phase is {obj['status'].get('phase')}"
                    }
                ),
                action=f"exec in {pod}",
            )
        files = run.files

        def fail(msg: str) -> KubeApiError:
            return KubeApiError(
                f"exec {command[0]} in pod {namespace}/{pod}: exit status 1: {msg}", reason="ExecFailed"
            )

        match command:
            case ["cat", path]:
                if path not in files:
                    raise fail(f"cat: {path}: No such file or directory")
                return files[path]
            case ["test", "-e", path]:
                if path not in files and not any(p.startswith(path.rstrip("/") + "/") for p in files):
                    raise fail("")
                return b""
            case ["touch", path]:
                files.setdefault(path, b"")
                if path.endswith("/.collected"):
                    run.collected = True
                return b""
            case ["tar", "cf", "-", "-C", folder, "."]:
                prefix = folder.rstrip("/") + "/"
                buf = io.BytesIO()
                with tarfile.open(fileobj=buf, mode="w") as tar:
                    for path, data in sorted(files.items()):
                        if path.startswith(prefix):
                            info = tarfile.TarInfo("./" + path[len(prefix) :])
                            info.size = len(data)
                            tar.addfile(info, io.BytesIO(data))
                return buf.getvalue()
        raise fail(f"{command[0]}: command not understood by the fake cluster")

    def api_versions(self) -> set[str]:
        self._check_fail("discovery")
        return set(self.versions)

    def can_i(
        self, verb: str, resource: str, *, group: str = "", namespace: str | None = None, subresource: str = ""
    ) -> bool:
        self._check_fail("can_i", resource)
        full = f"{resource}/{subresource}" if subresource else resource
        return (verb, full) not in self.denied and ("*", full) not in self.denied

    def patch_node_status(self, name: str, patch: ObjList) -> Obj:
        self._check_fail("patch_node_status", "Node", name)
        node = self.find("Node", name)
        if node is None:
            raise api_error(
                404, "NotFound", json.dumps({"message": f'nodes "{name}" not found'}), action=f"patch node {name}"
            )
        self.calls.append(("patch_node_status", name))
        for op in patch:
            parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].strip("/").split("/")]
            target = node
            for p in parts[:-1]:
                target = target.setdefault(p, {})
            if op["op"] in ("add", "replace"):
                target[parts[-1]] = op["value"]
            elif op["op"] == "remove":
                target.pop(parts[-1], None)
        self._put(node)
        return copy.deepcopy(node)

    # ---- controllers -------------------------------------------------------------------------------
    def _pods_of(self, owner: str, namespace: str) -> ObjList:
        return [
            o
            for (_, k, ns, n), o in self.objects.items()
            if k == "Pod" and ns == namespace and n in self.runs and self.runs[n].owner == owner
        ]

    def _reconcile_deployment(self, dep: Obj) -> None:
        meta = dep["metadata"]
        template = dep["spec"]["template"]
        thash = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:8]
        ns = meta.get("namespace", "")
        existing = self._pods_of(meta["name"], ns)
        current = sorted(
            p["metadata"]["name"] for p in existing if self.runs[p["metadata"]["name"]].template_hash == thash
        )
        replicas = int(dep["spec"].get("replicas", 1))
        if current:  # same template: scale to the replica count
            for name in current[replicas:]:
                self._remove(self._key("v1", "Pod", ns, name))
            wanted = [i for i in range(replicas) if f"{meta['name']}-{thash}-{i}" not in current]
        else:
            if (dep["spec"].get("strategy") or {}).get("type") == "Recreate":
                if existing and self.recreate_grace_ticks > 0:
                    for p in existing:
                        if (ns, p["metadata"]["name"]) not in self._terminating:
                            p["metadata"]["deletionTimestamp"] = _iso(self.now)
                            self._terminating[(ns, p["metadata"]["name"])] = self.recreate_grace_ticks
                            self._put(p)
                    self._recreating.add((ns, meta["name"]))
                    self._update_deployment_status(dep)
                    return
                for p in existing:  # Recreate: old pods go first (they hold the devices the new pod needs)
                    self._remove(self._key("v1", "Pod", ns, p["metadata"]["name"]))
            wanted = list(range(replicas))
        scenario = self.scenarios.get(meta["name"], "ready")
        for i in wanted:
            name = f"{meta['name']}-{thash}-{i}"
            labels = dict((template.get("metadata") or {}).get("labels") or {})
            labels["pod-template-hash"] = thash
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": ns,
                    "labels": labels,
                    "ownerReferences": [{"kind": "ReplicaSet", "name": f"{meta['name']}-{thash}"}],
                },
                "spec": copy.deepcopy(template.get("spec") or {}),
                "status": {"phase": "Pending", "conditions": []},
            }
            self.runs[name] = _PodRun(scenario, owner=meta["name"], template_hash=thash)
            self._put(pod)
            self._advance(pod)
        self._update_deployment_status(dep)

    def _start_job(self, job: Obj) -> None:
        meta = job["metadata"]
        spec = job["spec"]
        count = int(spec.get("completions") or spec.get("parallelism") or 1)
        indexed = spec.get("completionMode") == "Indexed"
        template = spec["template"]
        for i in range(count):
            name = f"{meta['name']}-{i}-fk{i:03d}" if indexed else f"{meta['name']}-fk{i:03d}"
            labels = dict((template.get("metadata") or {}).get("labels") or {})
            labels["job-name"] = meta["name"]
            annotations = {"batch.kubernetes.io/job-completion-index": str(i)} if indexed else {}
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": name,
                    "namespace": meta.get("namespace", ""),
                    "labels": labels,
                    "annotations": annotations,
                    "ownerReferences": [{"kind": "Job", "name": meta["name"]}],
                },
                "spec": copy.deepcopy(template.get("spec") or {}),
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
            }
            run = _PodRun("job", owner_kind="Job", owner=meta["name"], index=i)
            run.pending = dict(self.job_files(name, i))
            self.runs[name] = run
            self.logs[name] = f"shard {i}: starting\n"
            self._put(pod)
        job["status"] = {"active": count}

    def tick(self) -> None:
        """Advance every pod one step of its scenario, update owners' status, bind claims, finish namespaces."""
        self._namespace_controller()
        for key, pvc in list(self.objects.items()):
            if key[1] == "PersistentVolumeClaim" and (pvc.get("status") or {}).get("phase") != "Bound":
                volume = (pvc.get("spec") or {}).get("volumeName")
                if volume and self.find("PersistentVolume", volume) is not None:
                    pvc.setdefault("status", {})["phase"] = "Bound"
                    self._put(pvc)
        for key, pod in list(self.objects.items()):
            if key[1] == "Pod" and key in self.objects:
                before = json.dumps(pod["status"], sort_keys=True)
                self._advance(pod)
                if json.dumps(pod["status"], sort_keys=True) != before:
                    self._put(pod)
        for (ns, name), left in list(self._terminating.items()):
            if left > 1:
                self._terminating[(ns, name)] = left - 1
            else:
                del self._terminating[(ns, name)]
                self._remove(self._key("v1", "Pod", ns, name))
        for key, dep in list(self.objects.items()):
            if key[1] == "Deployment" and (key[2], key[3]) in self._recreating:
                if not any(
                    ns == key[2] and self.runs[n].owner == key[3] for ns, n in self._terminating if n in self.runs
                ):
                    self._recreating.discard((key[2], key[3]))
                    self._reconcile_deployment(dep)  # the old pods are gone: create the new ones
        for key, dep in list(self.objects.items()):
            if key[1] == "Deployment":
                self._retire_old_pods(dep)
                self._update_deployment_status(dep)
            elif key[1] == "Job":
                self._update_job_status(dep)

    def _namespace_controller(self) -> None:
        """The namespace controller: a Terminating namespace whose content is gone loses its ``kubernetes``
        finalizer and goes (``ShouldDeleteNamespaceDuringUpdate``: ``len(ns.Spec.Finalizers) == 0``); one that
        still holds objects has them deleted now, so it goes on a later tick."""
        for key, ns in list(self.objects.items()):
            if key[1] != "Namespace" or not ns["metadata"].get("deletionTimestamp"):
                continue
            name = key[3]
            content = [k for k in self.objects if k[2] == name]
            if not content:
                self._remove(key)
                continue
            for k in content:
                self._remove(k)
            conditions = [{"type": "NamespaceContentRemaining", "status": "True", "reason": "SomeResourcesRemain"}]
            ns.setdefault("status", {})["conditions"] = conditions
            self._put(ns)

    def _advance(self, pod: Obj) -> None:
        name = pod["metadata"]["name"]
        run = self.runs[name]
        if run.owner_kind == "Job":
            self._advance_job_pod(pod, run)
            return
        step = run.step
        run.step += 1
        container = ((pod["spec"].get("containers") or [{}])[0]).get("name", "server")
        image = ((pod["spec"].get("containers") or [{}])[0]).get("image", "image")
        status = pod["status"]
        sc = run.scenario

        def scheduled() -> None:
            status["conditions"] = [{"type": "PodScheduled", "status": "True"}]

        def waiting(reason: str, message: str = "", restarts: int = 0, last: Obj | None = None) -> None:
            cs: Obj = {
                "name": container,
                "ready": False,
                "started": False,
                "restartCount": restarts,
                "image": image,
                "state": {"waiting": {"reason": reason, "message": message}},
            }
            if last:
                cs["lastState"] = {"terminated": last}
            status["containerStatuses"] = [cs]

        def running(ready: bool, started: bool, restarts: int = 0) -> None:
            status["phase"] = "Running"
            status["containerStatuses"] = [
                {
                    "name": container,
                    "ready": ready,
                    "started": started,
                    "restartCount": restarts,
                    "image": image,
                    "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}},
                }
            ]
            status["conditions"] = [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "True" if ready else "False"},
            ]

        if sc.startswith("unschedulable"):
            msg = (
                "0/2 nodes are available: 2 Insufficient aws.amazon.com/neuron. preemption: 0/2 nodes are available: "
                "2 No preemption victims found for incoming pod."
                if sc == "unschedulable-neuron"
                else "0/1 nodes are available: 1 cannot allocate all claims. still not schedulable, "
                "preemption: 0/1 nodes "
                "are available: 1 Preemption is not helpful for scheduling."
            )
            status["conditions"] = [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": msg}
            ]
            if step == 0:
                self._event(pod, "FailedScheduling", msg, "Warning")
            return
        if step == 0:
            return  # just created: Pending, not yet looked at by the scheduler
        if step == 1:
            scheduled()
            waiting("ContainerCreating")
            self._event(pod, "Scheduled", f"Successfully assigned {pod['metadata']['namespace']}/{name} to node-0")
            self._event(pod, "Pulling", f'Pulling image "{image}"')
            return
        if sc == "image-pull":
            if step == 2:
                msg = f'failed to pull and unpack image "{image}": failed to resolve reference "{image}": not found'
                waiting("ErrImagePull", msg)
                self._event(pod, "Failed", f'Failed to pull image "{image}": {msg}', "Warning")
            else:
                waiting("ImagePullBackOff", f'Back-off pulling image "{image}"')
                self._event(pod, "BackOff", f'Back-off pulling image "{image}"', "Warning")
            return
        if step == 2:
            self._event(pod, "Pulled", f'Successfully pulled image "{image}" in 2m3.1s')
            self._event(pod, "Started", f"Started container {container}")
            self.logs[name] = "INFO Starting vLLM API server\nINFO Neuron compilation started (this can take hours)\n"
            running(False, False)
            return
        if sc == "crashloop":
            last = {"exitCode": 1, "reason": "Error"}
            self.previous_logs[name] = (
                "INFO Starting vLLM API server\nTraceback (most recent call last):\n"
                "ValueError: speculative_config: num_speculative_tokens must be positive\n"
            )
            waiting("CrashLoopBackOff", f"back-off 40s restarting failed container={container}", step - 2, last)
            self._event(pod, "BackOff", f"Back-off restarting failed container {container}", "Warning")
            return
        if sc == "oom":
            last = {"exitCode": 137, "reason": "OOMKilled"}
            self.previous_logs[name] = "INFO Loading weights\nINFO Building Neuron model\n"
            waiting("CrashLoopBackOff", f"back-off 40s restarting failed container={container}", step - 2, last)
            return
        if sc in ("startup-timeout", "startup-killed"):
            self.logs[name] = self.logs.get(name, "") + f"INFO compiling graph {step}/1000\n"
            self._event(
                pod,
                "Unhealthy",
                'Startup probe failed: Get "http://10.0.0.5:8000/health": '
                "dial tcp 10.0.0.5:8000: connect: connection refused",
                "Warning",
            )
            if sc == "startup-killed" and step >= 4:
                self._event(pod, "Killing", f"Container {container} failed startup probe, will be restarted")
                running(False, False, restarts=1)
            else:
                running(False, False)
            return
        compile_steps = 6 if sc == "slow-compile" else 1
        if step < 3 + compile_steps - 1:
            self.logs[name] = self.logs.get(name, "") + f"INFO compiling: {step - 1}/{compile_steps}\n"
            running(False, True)
            return
        self.logs[name] = self.logs.get(name, "") + "INFO Application startup complete.\n"
        running(True, True)

    def _advance_job_pod(self, pod: Obj, run: _PodRun) -> None:
        name = pod["metadata"]["name"]
        status = pod["status"]
        if status.get("phase") != "Running":
            return
        if run.collected or self.job_finishes_without_collect:
            status["phase"] = "Succeeded"
            status["conditions"] = [{"type": "Ready", "status": "False"}]
            self._put(pod)
            return
        run.step += 1
        self.logs[name] = self.logs.get(name, "") + f"progress: {run.step} requests done\n"
        if run.step >= self.job_run_ticks and run.pending:
            run.files.update(run.pending)  # the load generator wrote its results
            run.pending = {}
            if self.job_done_line:
                self.logs[name] += self.job_done_line + "\n"
        self._put(pod)

    def _retire_old_pods(self, dep: Obj) -> None:
        meta = dep["metadata"]
        ns = meta.get("namespace", "")
        pods = self._pods_of(meta["name"], ns)
        thash = hashlib.sha256(json.dumps(dep["spec"]["template"], sort_keys=True).encode()).hexdigest()[:8]
        new_ready = [p for p in pods if self.runs[p["metadata"]["name"]].template_hash == thash and _ready(p)]
        if len(new_ready) >= int(dep["spec"].get("replicas", 1)):
            for p in pods:
                if self.runs[p["metadata"]["name"]].template_hash != thash:
                    self._remove(self._key("v1", "Pod", ns, p["metadata"]["name"]))

    def _update_deployment_status(self, dep: Obj) -> None:
        meta = dep["metadata"]
        pods = self._pods_of(meta["name"], meta.get("namespace", ""))
        thash = hashlib.sha256(json.dumps(dep["spec"]["template"], sort_keys=True).encode()).hexdigest()[:8]
        updated = [p for p in pods if self.runs[p["metadata"]["name"]].template_hash == thash]
        ready = [p for p in pods if _ready(p)]
        new_status = {
            "observedGeneration": meta["generation"],
            "replicas": len(pods),
            "updatedReplicas": len(updated),
            "readyReplicas": len(ready),
            "availableReplicas": len(ready),
            "unavailableReplicas": max(0, len(pods) - len(ready)),
        }
        if dep.get("status") != new_status:
            dep["status"] = new_status
            self._put(dep)

    def _update_job_status(self, job: Obj) -> None:
        meta = job["metadata"]
        pods = self._pods_of(meta["name"], meta.get("namespace", ""))
        succeeded = sum(1 for p in pods if p["status"].get("phase") == "Succeeded")
        active = sum(1 for p in pods if p["status"].get("phase") == "Running")
        new_status: Obj = {"active": active, "succeeded": succeeded}
        total = int(job["spec"].get("completions") or job["spec"].get("parallelism") or 1)
        if succeeded >= total:
            new_status["conditions"] = [{"type": "Complete", "status": "True"}]
        if job.get("status") != new_status:
            job["status"] = new_status
            self._put(job)


def _ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in pod["status"].get("conditions") or [])


# ---- server-side apply helpers -------------------------------------------------------------------------------

Path = tuple[str, ...]
_MISSING = object()
# metadata the server sets: never part of an applied configuration's field set
_SERVER_META = ("resourceVersion", "uid", "creationTimestamp", "generation", "managedFields", "deletionTimestamp")


def _owned_part(obj: Obj | None) -> Obj:
    """The object as field ownership sees it: no status, no server-set metadata, no identity."""
    out = {k: copy.deepcopy(v) for k, v in (obj or {}).items() if k not in ("status", "apiVersion", "kind")}
    meta = out.get("metadata")
    if isinstance(meta, dict):
        for k in (*_SERVER_META, "name", "namespace"):
            meta.pop(k, None)
    return out


def _leaves(obj: Any, prefix: Path = ()) -> dict[Path, Any]:
    """Leaf fields of nested maps; lists are atomic leaves; an empty map sets nothing."""
    out: dict[Path, Any] = {}
    for k, v in obj.items():
        path = (*prefix, str(k))
        if isinstance(v, dict):
            out.update(_leaves(v, path))
        else:
            out[path] = v
    return out


def _set(obj: Obj, path: Path, value: Any) -> None:
    for p in path[:-1]:
        nxt = obj.get(p)
        if not isinstance(nxt, dict):
            nxt = obj[p] = {}
        obj = nxt
    obj[path[-1]] = value


def _drop(obj: Any, path: list[Any]) -> None:
    """Remove a field and the maps it leaves empty."""
    if not path or not isinstance(obj, dict | list):
        return
    head, rest = path[0], path[1:]
    if isinstance(obj, list):
        if isinstance(head, int) and head < len(obj):
            _drop(obj[head], rest)
        return
    if head not in obj:
        return
    if not rest:
        del obj[head]
        return
    _drop(obj[head], rest)
    if isinstance(obj[head], dict) and not obj[head]:
        del obj[head]


def _managed_fields(owners: dict[str, tuple[str, set[Path]]], api_version: str) -> ObjList:
    """``metadata.managedFields`` in the FieldsV1 shape (``{"f:spec": {"f:replicas": {}}}``)."""
    out = []
    for manager, (operation, paths) in sorted(owners.items()):
        tree: Obj = {}
        for path in sorted(paths):
            node = tree
            for p in path:
                node = node.setdefault(f"f:{p}", {})
        entry = {"manager": manager, "operation": operation, "apiVersion": api_version, "fieldsType": "FieldsV1"}
        out.append({**entry, "fieldsV1": tree})
    return out


def _print_manager(manager: str, operation: str, api_version: str) -> str:
    # apimachinery util/managedfields/internal/conflict.go printManager: an Apply manager prints quoted; an
    # Update manager as `"name" using apps/v1`.
    return f'"{manager}"' if operation == "Apply" else f'"{manager}" using {api_version}'


def _apply_conflict(conflicts: list[tuple[str, str, Path]], api_version: str, *, action: str) -> KubeApiError:
    """409 Conflict (conflict.go NewConflictError / getConflictMessage): one conflict ``Apply failed with 1
    conflict: conflict with "mgr": .spec.replicas``; several ``Apply failed with N conflicts: conflicts with
    "mgr":\n- <path>\n- <path>`` per manager, sorted; details carry only causes of type FieldManagerConflict."""
    by_manager: dict[str, list[str]] = {}
    printed: dict[str, str] = {}
    causes = []
    for manager, operation, path in conflicts:
        field_path = "." + ".".join(path)
        printed[manager] = _print_manager(manager, operation, api_version)
        by_manager.setdefault(manager, []).append(field_path)
        causes.append(
            {"reason": "FieldManagerConflict", "message": f"conflict with {printed[manager]}", "field": field_path}
        )
    if len(conflicts) == 1:
        manager, _, _ = conflicts[0]
        message = f"Apply failed with 1 conflict: conflict with {printed[manager]}: {by_manager[manager][0]}"
    else:
        parts = [f"conflicts with {printed[m]}:\n- " + "\n- ".join(by_manager[m]) for m in sorted(by_manager)]
        message = f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(parts)
    return rules.status_error(409, "Conflict", message, action=action, details={"causes": causes})


def _iso(ts: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class RecordingKube(FakeKube):
    """The fake, remembering each delete's propagation policy (the fake itself ignores it); a Deployment named in
    ``linger`` stays readable for that many more gets after its delete (a finalizer at work; None: forever)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.propagations: list[tuple[str, str, Propagation]] = []
        self.linger: dict[str, int | None] = {}

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        propagation: Propagation = "Background",
    ) -> bool:
        self.propagations.append((kind, name, propagation))
        if kind == "Deployment" and name in self.linger:
            return True  # deletion started; get() removes it once the linger is over
        return super().delete(api_version, kind, name, namespace, propagation)

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        if kind == "Deployment" and name in self.linger:
            left = self.linger[name]
            if left is not None and left <= 0:
                del self.linger[name]
                super().delete(api_version, kind, name, namespace, "Foreground")
            elif left is not None:
                self.linger[name] = left - 1
        return super().get(api_version, kind, name, namespace)
